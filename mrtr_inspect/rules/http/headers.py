"""RULES.md §4.6, the request-metadata headers of a modern POST: one pass, `HEADERS`, since the
server's reaction needs all of them. Its `_update` makes each POST's `_Post` (the checks report the
headers that fail the server's validation into it) and keeps a request's until its exchange ends,
when the server's reaction is judged."""

from __future__ import annotations

from ...core.era import MODERN
from ...core.events import header
from ...core.exchanges import HttpExchange
from ...core.messages import ERROR as ERROR_KIND, REQUEST, RESULT, Message
from ...core.observations import Decoded, ExchangeDone
from .. import spec
from ..common import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    UNSUPPORTED_VERSION,
    at,
    integer_code,
    quoted,
)
from ..registry import ERROR, INFO, WARNING, Pass
from .posts import _first, _response_to, _where, post_era
from .values import (
    OWS,
    _Annotations,
    _at,
    _header_map,
    _looks_like_sentinel,
    _matches,
    _plain,
    _shown,
    decode_header_value,
)


# spec-defined rejections that may take precedence over -32020 (RULES.md §7.12)
OTHER_REJECTIONS = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CAPABILITY, UNSUPPORTED_VERSION})
# the body field Mcp-Name mirrors, per method (tasks/*: SEP-2663 "Streamable HTTP: Routing Headers")
NAME_SOURCE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


# --- request metadata headers: one pass, since the server's reaction needs all of them ----------------


class _Headers:
    """What the header pass remembers: the failed validations of each modern request POST until its
    exchange ends (the server's reaction is judged then), and the parsed x-mcp-header annotations of
    each tool definition."""

    __slots__ = ("ctx", "verdicts", "tools")

    def __init__(self, ctx) -> None:
        self.ctx = ctx  # for the knowledge of the capture (the tool definitions)
        self.verdicts: dict = {}  # exchange -> the `_Post` of its modern request, until the exchange ends
        self.tools: dict = {}  # ("tool", session, name) -> (definition, inputSchema, _Annotations)


def _annotations(st: _Headers, session: str, name: str, tool: dict) -> _Annotations:
    """The parsed annotations of a tool, cached per tool definition."""
    key = ("tool", session, name)
    cached = st.tools.get(key)
    if cached is None or cached[0] is not tool:
        schema = tool.get("inputSchema")
        same = cached is not None and cached[1] == schema  # tools/list repeats the same definitions
        cached = st.tools[key] = (tool, schema, cached[2] if same else _Annotations(schema))
    return cached[2]


class _Post:
    """The first message of a modern POST, its request headers by name, and what its checks found."""

    __slots__ = ("msg", "x", "st", "h", "params", "is_request", "ann", "complete", "failed")

    def __init__(self, msg: Message, x: HttpExchange, st: _Headers) -> None:
        self.msg, self.x, self.st = msg, x, st
        self.h, self.params = _header_map(x.headers)
        self.is_request = msg.kind == REQUEST
        self.ann: _Annotations | None = None  # a tools/call's tool annotations (None: the tool is unknown)
        self.complete = True  # False: the tool is unknown, so missing Mcp-Param-* headers cannot be judged
        if self.is_request and msg.method == "tools/call":
            p = msg.params if type(msg.params) is dict else {}
            name = p.get("name")
            tool = st.ctx.knowledge.tool(msg.session, name)
            self.ann = _annotations(st, msg.session, name, tool) if tool is not None else None
            self.complete = tool is not None
        self.failed: list[str] = []  # the rules whose validation failed

    def reject(self, ctx, text: str, severity: str | None = None) -> None:
        """A header that fails the server's validation: reported, and kept for the server's reaction."""
        ctx.emit(text, messages=[self.msg.index], severity=severity)
        self.failed.append(ctx.rule.id)


def _report_rank() -> dict[str, int]:
    """Each rule of the header pass -> where its first check is in the report order (`HEADERS.order`)."""
    if not _RANK:
        for c in HEADERS.ordered():
            _RANK.setdefault(c.rule_id, len(_RANK))
    return _RANK


_RANK: dict[str, int] = {}


class _Reaction:
    """A modern request's exchange is over: its response and what its headers' validation found."""

    __slots__ = ("x", "req", "resp", "code", "failed", "complete", "what", "ids")

    def __init__(self, x: HttpExchange, req: Message, resp: Message, failed, complete: bool) -> None:
        self.x, self.req, self.resp = x, req, resp
        self.code = integer_code(resp) if resp.kind == ERROR_KIND else None
        # the rules whose validation failed, once each, in the order of their findings in the report
        self.failed, self.complete = sorted(set(failed), key=_report_rank().__getitem__), complete
        self.what = at(req)
        self.ids = [req.index, resp.index]


def _update(obs, st: _Headers):
    """The pass's one step (registry.py), and what the header checks get: for a modern POST's message,
    its `_Post` (a request's is kept until its exchange ends, its checks fill in what failed); at the
    end of a modern request's exchange that either failed validation or got an error, its
    `_Reaction` (else None)."""
    if type(obs) is ExchangeDone:
        x = obs.exchange
        if x.era is not MODERN:
            return None
        post = st.verdicts.pop(x, None) if st.verdicts else None
        entry = (post.failed, post.complete) if post is not None and (post.failed or not post.complete) else None
        if entry is None:
            for r in x.responses:
                if r.kind == ERROR_KIND:
                    break
            else:
                return None  # valid headers, no error: nothing to judge
        failed, complete = entry or ((), True)
        req, resp = _response_to(x)
        if resp is None:
            return None  # no JSON-RPC answer: an HTTP error status alone is allowed (intermediaries)
        return _Reaction(x, req, resp, failed, complete)
    msg = obs.msg
    x = _first(obs)
    if x is None or (msg.era is not MODERN if msg.kind == REQUEST else post_era(x) != MODERN):
        return None
    post = _Post(msg, x, st)
    if post.is_request:
        st.verdicts[x] = post
    return post


HEADERS = Pass("http-headers", state=_Headers, per_session=False, update=_update, update_on=(Decoded, ExchangeDone),
               kinds=["request", "notification"], directions=["c2s"], transports=["http"])
_POST = dict(directions=["c2s"], transports=["http"], section="4.6")


class _Mirrored:
    """One header that mirrors a body value: Mcp-Name, an annotated Mcp-Param-{Name}, or (`value`
    unknown) any other Mcp-Param-* header, whose encoding alone is judged."""

    __slots__ = ("post", "name", "raw", "present", "value", "source", "annotated", "_verdict")

    def __init__(self, post: _Post, name: str, raw: str | None, present: bool, value, source: str | None,
                 annotated: bool) -> None:
        self.post, self.name, self.raw, self.present, self.value = post, name, raw, present, value
        self.source, self.annotated = source, annotated
        self._verdict: tuple | None = None

    @property
    def set(self) -> bool:
        """Whether the body sets the value (present and not null), so that the header is required."""
        return self.present and self.value is not None

    def verdict(self) -> tuple[str | None, str | None]:
        """("encoding" or "mismatch", the text), or (None, None): the header sent against the body value."""
        if self._verdict is None:
            self._verdict = self._judge()
        return self._verdict

    def _judge(self) -> tuple[str | None, str | None]:
        raw, value, where = self.raw, self.value, _where(self.post.msg)
        if self.source is None:  # an Mcp-Param-* header no valid annotation names: its encoding still counts
            _, problem = decode_header_value(raw)
            return ("encoding", f"{where}: header {self.name} {quoted(raw)} {problem}") if problem is not None else (None, None)
        if raw == value and _plain(raw):
            return None, None  # the common case: a header-safe value sent as is
        if type(value) is str and raw == value and _looks_like_sentinel(value):
            return "encoding", (f"{where}: {self.name} carries {self.source} {_shown(value)} as is, but a value that "
                                "looks like the Base64 sentinel must itself be Base64-encoded")
        decoded, problem = decode_header_value(raw)
        if problem is not None:
            return "encoding", f"{where}: {self.name} {quoted(raw)} {problem}"
        if not _matches(decoded, value):
            shown = quoted(raw) + (f" (decoded {quoted(decoded)})" if decoded != raw else "")
            return "mismatch", f"{where}: {self.name} {shown} does not match {self.source} {_shown(value)}"
        return None, None


def _name_header(obs, post: _Post) -> list[_Mirrored]:
    """The Mcp-Name header, when the body names its target (params.name, params.uri, params.taskId)."""
    msg = post.msg
    field = NAME_SOURCE.get(msg.method)
    source = msg.params.get(field) if field and type(msg.params) is dict else None
    if type(source) is not str:
        return []
    return [_Mirrored(post, "Mcp-Name", post.h.get("mcp-name"), True, source, "params." + field, False)]


def _param_headers(obs, post: _Post) -> list[_Mirrored]:
    """A tools/call's annotated Mcp-Param-{Name} headers (those the tool's x-mcp-header annotations
    name, sent or not), then every other Mcp-Param-* header it sends."""
    out = []
    ann = post.ann
    if ann is not None and ann.problem is None:
        p = post.msg.params if type(post.msg.params) is dict else {}
        args = p.get("arguments")
        for path, hname, key, source in ann.headers:
            present, value = _at(args, path)
            out.append(_Mirrored(post, "Mcp-Param-" + hname, post.h.get(key), present, value, source, True))
    h = post.h
    for key in post.params:
        if ann is None or ann.problem is not None or key not in ann.keys:
            out.append(_Mirrored(post, key, h[key], True, None, None, False))
    return out


@HEADERS.check(
    "http-protocol-version-header-missing", ERROR, kinds=["request", "notification"], **_POST,
    spec=spec.HTTP_VERSION_HEADER, conformance="sep-2575-http-client-sends-version-header",
    quote="Every POST request to the MCP endpoint MUST include an MCP-Protocol-Version header.",
    summary="A modern request POST without an MCP-Protocol-Version header (a warning for notification POSTs).",
    why="Intermediaries route and validate on the header; a server that does not support pre-2025-06-18 clients "
        "must reject the request.",
    example="POST tools/call whose _meta says 2026-07-28, with no MCP-Protocol-Version header",
)
def http_protocol_version_header_missing(obs: Decoded, ctx, post: _Post) -> None:
    """A modern request POST (its `_meta` declares a protocolVersion) without `MCP-Protocol-Version`;
    a notification POST on a modern endpoint without it is a warning only (the transport leaves
    headers of notification POSTs undefined, RULES.md §7.9)."""
    if post.h.get("mcp-protocol-version") is None:
        text = f"{_where(post.msg)} has no MCP-Protocol-Version header"
        if post.is_request:
            post.reject(ctx, text)
        else:
            ctx.emit(text, messages=[post.msg.index], severity=WARNING)


@HEADERS.check(
    "http-protocol-version-header-mismatch", ERROR, kinds=["request"], **_POST, spec=spec.HTTP_VERSION_HEADER,
    conformance="sep-2575-http-version-header-matches-meta",
    quote="The header value MUST match the io.modelcontextprotocol/protocolVersion field carried in the request "
          "body's _meta.",
    summary="MCP-Protocol-Version differs from the body's _meta protocolVersion.",
    why="A gateway routes on the header while the server executes on the body: a mismatch makes them disagree.",
    example="MCP-Protocol-Version: 2025-11-25 on a body declaring 2026-07-28",
)
def http_protocol_version_header_mismatch(obs: Decoded, ctx, post: _Post) -> None:
    """The `MCP-Protocol-Version` header of a modern request POST differs from the body's
    `_meta["io.modelcontextprotocol/protocolVersion"]` (compared case-sensitively, surrounding blanks
    ignored)."""
    hv, msg = post.h.get("mcp-protocol-version"), post.msg
    if hv is not None and hv.strip(OWS) != msg.version:
        post.reject(ctx, f"{_where(msg)}: MCP-Protocol-Version {quoted(hv)} does not match the body's _meta protocolVersion "
                         f"{_shown(msg.version)}")


@HEADERS.check(
    "http-mcp-method-missing", ERROR, kinds=["request"], **_POST, spec=spec.HTTP_STANDARD_HEADERS,
    conformance="sep-2243-client-includes-standard-headers",
    quote="These headers are REQUIRED for compliance.",
    summary="A modern request POST without an Mcp-Method header.",
    why="Load balancers and gateways route on Mcp-Method without parsing the body.",
    example="POST tools/list with MCP-Protocol-Version but no Mcp-Method",
)
def http_mcp_method_missing(obs: Decoded, ctx, post: _Post) -> None:
    """A modern request POST carries no `Mcp-Method` header (header names are matched
    case-insensitively)."""
    if post.h.get("mcp-method") is None:
        post.reject(ctx, f"{_where(post.msg)} has no Mcp-Method header")


@HEADERS.check(
    "http-mcp-method-mismatch", ERROR, kinds=["request", "notification"], **_POST, spec=spec.HTTP_SERVER_VALIDATION,
    conformance="tasks-headers-reject-mismatched-method",
    quote="Servers that process the request body MUST reject requests where the values specified in the headers "
          "do not match the corresponding values in the request body.",
    summary="Mcp-Method differs from the body's method.",
    why="An intermediary that authorises on the header can be bypassed by a body that says something else.",
    example="Mcp-Method: tools/list on a tools/call body",
)
def http_mcp_method_mismatch(obs: Decoded, ctx, post: _Post) -> None:
    """The `Mcp-Method` header of a modern POST differs from the body's `method` (values are
    case-sensitive)."""
    hm, msg = post.h.get("mcp-method"), post.msg
    if hm is not None and hm.strip(OWS) != msg.method:
        post.reject(ctx, f"{_where(msg)}: Mcp-Method {quoted(hm)} does not match the body's method {_shown(msg.method)}")


@HEADERS.check(
    "http-mcp-name-missing", ERROR, kinds=["request"], **_POST, over=_name_header, spec=spec.HTTP_STANDARD_HEADERS,
    conformance="sep-2243-client-includes-standard-headers",
    quote="These headers are REQUIRED for compliance.",
    summary="A tools/call, resources/read, prompts/get or tasks/* request POST without an Mcp-Name header.",
    why="Intermediaries route tool calls and task polls to the instance holding their state by this header.",
    example="POST tools/call {name: deploy} with Mcp-Method but no Mcp-Name",
)
def http_mcp_name_missing(obs: Decoded, ctx, name: _Mirrored) -> None:
    """A modern `tools/call`, `prompts/get` or `resources/read` POST (every MRTR retry included), or
    a `tasks/get`, `tasks/update` or `tasks/cancel` POST (SEP-2663, conformance
    `sep-2663-client-emits-mcp-name-on-tasks-methods`), has no `Mcp-Name` header while the body
    names its target (`params.name`, `params.uri`, `params.taskId`)."""
    if name.raw is None:
        name.post.reject(ctx, f"{_where(name.post.msg)} has no Mcp-Name header (it must carry {name.source} "
                              f"{_shown(name.value)})")


@HEADERS.check(
    "http-mcp-name-mismatch", ERROR, kinds=["request"], **_POST, over=_name_header, spec=spec.HTTP_VALUE_ENCODING,
    conformance="sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get",
    quote="servers MUST decode an encoded Mcp-Name or Mcp-Param-{Name} value before comparing it to the "
          "corresponding request body value",
    summary="The (decoded) Mcp-Name differs from params.name, params.uri or params.taskId.",
    why="A gateway that authorises tools by header would let a body call another tool.",
    example="Mcp-Name: get_weather on tools/call {name: delete_everything}",
)
def http_mcp_name_mismatch(obs: Decoded, ctx, name: _Mirrored) -> None:
    """The `Mcp-Name` header, after Base64-sentinel decoding, differs from the body's `params.name`
    (tools/call, prompts/get), `params.uri` (resources/read) or `params.taskId` (tasks/*)."""
    if name.raw is not None:
        found, text = name.verdict()
        if found == "mismatch":
            name.post.reject(ctx, text)


@HEADERS.check(
    "http-header-value-encoding", ERROR, kinds=["request"], **_POST, over=_name_header, spec=spec.HTTP_VALUE_ENCODING,
    conformance="sep-2243-client-base64-unsafe",
    quote="clients MUST use Base64 encoding of the UTF-8 representation with the following format",
    summary="An Mcp-Name or Mcp-Param-* value that is not safely encoded.",
    why="Unsafe header bytes enable header injection and make intermediaries and servers decode different values.",
    example="Mcp-Param-Greeting: Hello, 世界   (should be =?base64?SGVsbG8sIOS4lueVjA==?=)",
)
def http_header_value_encoding(obs: Decoded, ctx, header: _Mirrored) -> None:
    """An `Mcp-Name` or `Mcp-Param-*` value of a modern POST with characters outside 0x20–0x7E and
    tab, leading or trailing whitespace, a Base64 sentinel that is malformed or not in lower case,
    invalid Base64 (or not UTF-8) inside the sentinel, or a value that itself looks like the
    sentinel sent as is."""
    if header.raw is not None and (header.set or not header.annotated):
        found, text = header.verdict()
        if found == "encoding":
            header.post.reject(ctx, text)


# each Mcp-Param-* header (after the tool's annotations are judged as a whole), as Mcp-Name is
HEADERS.also("http-header-value-encoding", kinds=["request"], directions=["c2s"], transports=["http"],
             over=_param_headers)(http_header_value_encoding)


@HEADERS.check(
    "http-mcp-param-missing", ERROR, kinds=["request"], methods=["tools/call"], **_POST, over=_param_headers,
    spec=spec.HTTP_CUSTOM_HEADERS, conformance="sep-2243-client-mirrors-designated-params",
    quote="When a server's tool definition includes x-mcp-header annotations, conforming clients MUST mirror the "
          "designated parameter values into HTTP headers.",
    summary="A tools/call without the Mcp-Param-{Name} header its tool's x-mcp-header annotation asks for.",
    why="Intermediaries route or rate-limit on these headers; the server must reject the call.",
    example='tool region x-mcp-header "Region"; tools/call {region: "us-west1"} without Mcp-Param-Region',
)
def http_mcp_param_missing(obs: Decoded, ctx, header: _Mirrored) -> None:
    """The tool's `inputSchema`, as last seen in this capture's `tools/list`, marks a property with
    `x-mcp-header`; the call sets a non-null value at that exact path and the POST has no
    `Mcp-Param-{Name}` header. Heuristic when the calling client may not have fetched that
    `tools/list`."""
    if header.annotated and header.set and header.raw is None:
        post = header.post
        p = post.msg.params if type(post.msg.params) is dict else {}
        header.post.reject(ctx, f"{_where(post.msg)} has no {header.name} header although tool {p.get('name')!r} "
                                f"marks {header.source} with x-mcp-header and the call sets it")


@HEADERS.check(
    "http-mcp-param-mismatch", ERROR, kinds=["request"], methods=["tools/call"], **_POST, over=_param_headers,
    spec=spec.HTTP_CUSTOM_HEADERS_SERVER, conformance="sep-2243-server-validate-param-match",
    quote="Any server that processes the message body MUST validate that encoded header values, after decoding "
          "if Base64-encoded, match the corresponding values in the request body.",
    summary="A decoded Mcp-Param-{Name} value differs from the body value it mirrors.",
    why="A header that says one thing while the body says another defeats routing and policy on the header.",
    example="Mcp-Param-Region: us-east1 on arguments {region: \"us-west1\"}",
)
def http_mcp_param_mismatch(obs: Decoded, ctx, header: _Mirrored) -> None:
    """The decoded `Mcp-Param-{Name}` header differs from the argument it mirrors: integers are
    compared numerically (`42.0` is `42`), booleans must be lowercase `true`/`false`, strings
    exactly."""
    if header.annotated and header.set and header.raw is not None:
        found, text = header.verdict()
        if found == "mismatch":
            header.post.reject(ctx, text)


@HEADERS.check(
    "http-mcp-param-null-present", ERROR, kinds=["request"], methods=["tools/call"], **_POST, over=_param_headers,
    spec=spec.HTTP_CUSTOM_HEADERS_SERVER, conformance="sep-2243-client-omit-null",
    quote="Parameter value is null | Client MUST omit the header",
    summary="An Mcp-Param-{Name} header for an argument that is null or absent.",
    why="The header then asserts a value the body does not have.",
    example="Mcp-Param-Verbose: false on arguments {verbose: null}",
)
def http_mcp_param_null_present(obs: Decoded, ctx, header: _Mirrored) -> None:
    """A `tools/call` POST carries `Mcp-Param-{Name}` although the annotated argument is null or
    absent."""
    if header.annotated and not header.set and header.raw is not None:
        ctx.emit(f"{_where(header.post.msg)} sends {header.name} {quoted(header.raw)} although {header.source} is "
                 f"{'null' if header.present else 'absent'}; the header must be omitted", messages=[header.post.msg.index])


@HEADERS.check(
    "http-invalid-x-mcp-header-tool-called", WARNING, kinds=["request"], methods=["tools/call"], **_POST,
    spec=spec.HTTP_SCHEMA_EXTENSION, conformance="sep-2243-client-reject-invalid-tool",
    quote="Clients using the Streamable HTTP transport MUST reject tool definitions where any x-mcp-header value "
          "violates these constraints.",
    summary="The client calls a tool whose x-mcp-header annotations are invalid (it must exclude that tool).",
    why="The client should have dropped the tool from its list; calling it shows the validation is missing.",
    example='tool with properties.data {type: "object", "x-mcp-header": "Data"} called anyway',
)
def http_invalid_x_mcp_header_tool_called(obs: Decoded, ctx, post: _Post) -> None:
    """A `tools/call` over HTTP for a tool whose definition (last `tools/list`) has an invalid
    `x-mcp-header`: empty, not a field-name token, not case-insensitively unique, on a non-primitive
    or `number` property, or not reachable through `properties` keys alone. Heuristic: the client
    may call it for other reasons."""
    if post.ann is not None and post.ann.problem is not None:
        p = post.msg.params if type(post.msg.params) is dict else {}
        ctx.emit(f"{_where(post.msg)} calls tool {p.get('name')!r}, whose definition in tools/list is invalid: "
                 f"{post.ann.problem}; HTTP clients must exclude such a tool", messages=[post.msg.index])


@HEADERS.check(
    "http-session-id-sent", INFO, kinds=["request"], **_POST, spec=spec.HTTP_EARLIER_REVISIONS,
    quote="An Mcp-Session-Id header on a request: ignore it, and do not mint or echo session IDs.",
    summary="A modern request carries an Mcp-Session-Id header (a legacy leftover).",
    why="A client that still relies on a session will misbehave against servers that ignore it.",
    example="POST tools/call with _meta 2026-07-28 and Mcp-Session-Id: abc",
)
def http_session_id_sent(obs: Decoded, ctx, post: _Post) -> None:
    """A modern request POST carries `Mcp-Session-Id`; 2026-07-28 has no protocol-level sessions."""
    if "mcp-session-id" in post.h:
        ctx.emit(f"{_where(post.msg)} carries Mcp-Session-Id {quoted(post.h['mcp-session-id'])}; this revision has no "
                 "sessions", messages=[post.msg.index])


# --- the server's reaction, when the exchange is over ------------------------------------------------


@HEADERS.check(
    "http-server-accepted-header-mismatch", ERROR, on=ExchangeDone, section="4.6",
    spec=spec.HTTP_CUSTOM_HEADERS_SERVER, conformance="sep-2575-http-server-header-mismatch-400",
    quote="Servers MUST reject requests with a 400 Bad Request HTTP status and JSON-RPC error code -32020 "
          "(HeaderMismatch) if any validation fails.",
    summary="The server answered a request whose headers failed validation with a result.",
    why="Accepting such requests is what makes header/body confusion exploitable behind gateways.",
    example="Mcp-Name: get_weather on tools/call {name: delete_everything} → 200 result",
)
def http_server_accepted_header_mismatch(obs: ExchangeDone, ctx, r: _Reaction) -> None:
    """A modern request had a missing or mismatched standard header or `Mcp-Param-*`, or a header
    value with invalid characters, and the server answered it with a result (complete,
    input_required or task) instead of rejecting it."""
    if r.code != HEADER_MISMATCH and r.failed and r.resp.kind == RESULT:
        ctx.emit(f"the server accepted {r.what} (result message #{r.resp.index}, status {r.x.status}) although its "
                 f"headers failed validation ({', '.join(r.failed)}); it must reject it with 400 and "
                 "-32020", messages=r.ids)


@HEADERS.check(
    "http-header-mismatch-wrong-status-or-code", ERROR, on=ExchangeDone, section="4.6",
    spec=spec.HTTP_SERVER_VALIDATION, conformance="sep-2243-server-reject-error-code",
    quote="When rejecting a request due to header validation failure, servers MUST return HTTP status 400 Bad "
          "Request and MUST include a JSON-RPC error response using the following error code",
    summary="A header-validation rejection with an HTTP status other than 400, or a JSON-RPC code other than "
            "-32020.",
    why="Clients tell header problems from other failures by the code, and fall back to legacy on a bare 400.",
    example="Mcp-Method mismatch → 200 with error -32600",
)
def http_header_mismatch_wrong_status_or_code(obs: ExchangeDone, ctx, r: _Reaction) -> None:
    """A -32020 error with an HTTP status other than 400; or a request whose headers failed
    validation rejected with a JSON-RPC error whose code is not -32020. Codes that may take
    precedence (-32602, -32601, -32021, -32022; RULES.md §7.12) and rejections with no JSON-RPC
    body (intermediaries) are left alone."""
    code, x = r.code, r.x
    if code == HEADER_MISMATCH:
        if x.status != 400:
            ctx.emit(f"the server rejected {r.what} with -32020 (HeaderMismatch) but HTTP status {x.status}; a header "
                     "validation failure gets 400 Bad Request", messages=r.ids)
    elif r.failed and r.resp.kind != RESULT and code not in OTHER_REJECTIONS:
        ctx.emit(f"the server rejected {r.what}, whose headers failed validation ({', '.join(r.failed)}), "
                 f"with {'error code ' + str(code) if code is not None else 'an error without an integer code'} "
                 f"(message #{r.resp.index}, status {x.status}) instead of -32020 (HeaderMismatch)", messages=r.ids)


@HEADERS.check(
    "http-header-mismatch-spurious", ERROR, on=ExchangeDone, section="4.6", spec=spec.BASE_ERROR_CODES,
    conformance="sep-2663-routing-headers-accepted-on-tasks-get",
    quote="Implementations MUST NOT emit any code from this sub-range that is not defined by this specification and "
          "MUST use defined codes only with their specified meanings.",
    summary="-32020 (HeaderMismatch) returned although every header matches the body.",
    why="A client told its headers are wrong will rebuild them and retry in vain.",
    example="Mcp-Name: =?base64?ZGVwbG95?= on tools/call {name: deploy} → -32020",
)
def http_header_mismatch_spurious(obs: ExchangeDone, ctx, r: _Reaction) -> None:
    """The server answers -32020 to a modern request whose headers all match the body after decoding
    (not reported when the tool's x-mcp-header annotations are unknown: no tools/list seen)."""
    if r.code == HEADER_MISMATCH and not r.failed and r.complete:
        ctx.emit(f"the server answered {r.what} with -32020 (HeaderMismatch, message #{r.resp.index}) although every "
                 "request header matches the body", messages=r.ids)


# The order the checks of one POST run in (the order of its findings): the version and method headers,
# the session header, Mcp-Name, the tool's annotations as a whole, then each Mcp-Param-* header; at the
# end of the exchange, the server's reaction.
HEADERS.order(
    http_protocol_version_header_missing, http_protocol_version_header_mismatch, http_mcp_method_missing,
    http_mcp_method_mismatch, http_session_id_sent,
    http_mcp_name_missing, http_mcp_name_mismatch, http_header_value_encoding,
    http_invalid_x_mcp_header_tool_called,
    http_mcp_param_missing, http_mcp_param_mismatch, http_header_value_encoding, http_mcp_param_null_present,
    http_header_mismatch_wrong_status_or_code, http_header_mismatch_spurious, http_server_accepted_header_mismatch,
)
