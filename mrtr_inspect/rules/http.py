"""RULES.md §4.6: Streamable HTTP. Headers, statuses, content types and SSE streams of each exchange.

Unless a rule says otherwise it judges modern exchanges only (RULES.md §2): a POST whose request
declares no `_meta` protocolVersion is a legacy candidate (a server MAY treat it as 2025-03-26).
The request-metadata headers of a POST are the checks of one pass, `HEADERS`, which keeps what their
validation found until the exchange ends, when the server's reaction is judged. The last two rules,
`server-initiated-request` and `client-sent-response`, hold on both transports.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string

from ..core.era import LEGACY, MODERN, UNKNOWN
from ..core.events import header
from ..core.exchanges import HttpExchange
from ..core.findings import plural
from ..core.framing import media_type
from ..core.messages import (
    ERROR as ERROR_KIND,
    LEGACY_VERSIONS,
    NOTIFICATION,
    REQUEST,
    RESULT,
    Message,
    format_id,
    id_key,
)
from ..core.observations import Answered, Decoded, ExchangeDone, SseSeen
from . import spec
from .common import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    UNSUPPORTED_VERSION,
    at,
    integer_code,
    legacy_session,
    on_stream_of,
)
from .registry import ERROR, INFO, WARNING, Pass, declare, rule

JSON, SSE = "application/json", "text/event-stream"
OWS = " \t"
SENTINEL_HEAD, SENTINEL_TAIL = "=?base64?", "?="
MCP_PARAM = "mcp-param-"
# spec-defined rejections that may take precedence over -32020 (RULES.md §7.12)
OTHER_REJECTIONS = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CAPABILITY, UNSUPPORTED_VERSION})
# the body field Mcp-Name mirrors, per method (tasks/*: SEP-2663 "Streamable HTTP: Routing Headers")
NAME_SOURCE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
LISTEN_ONLY = frozenset({
    "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed",
    "notifications/resources/updated", "notifications/subscriptions/acknowledged", "notifications/tasks",
})
TCHAR = frozenset("!#$%&'*+-.^_`|~" + string.digits + string.ascii_letters)
PRIMITIVE = frozenset({"string", "integer", "boolean"})
DATA_KEYWORDS = frozenset({"x-mcp-header", "default", "examples", "const", "enum"})  # values, not schemas
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")


# --- helpers ------------------------------------------------------------------------------------------


def post_era(x: HttpExchange) -> str:
    """The era of a POST: its request's (RULES.md §2); for a notification, a batch or an undecodable
    body, the MCP-Protocol-Version header if any, else the era of the endpoint."""
    first = x.request_messages[0] if x.request_messages else None
    if first is None:
        return UNKNOWN
    if first.kind == REQUEST:
        return first.era
    hv = header(x.headers, "mcp-protocol-version")
    if hv is not None:
        return LEGACY if hv.strip(OWS) in LEGACY_VERSIONS else MODERN
    return first.era


def _first(obs: Decoded) -> HttpExchange | None:
    """The exchange, when `obs` is the message its POST body carried (not a batch member)."""
    x = obs.exchange
    if x is None or not x.request_messages or x.request_messages[0] is not obs.msg:
        return None
    return x


def _response_to(x: HttpExchange) -> tuple[Message | None, Message | None]:
    """The POSTed request and the response on the exchange that carries its id."""
    req = x.request
    if req is not None:
        for r in x.responses:
            if r.idk == req.idk:
                return req, r
    return req, None


def _result_type(msg: Message):
    return msg.result.get("resultType") if type(msg.result) is dict else None


def _where(msg: Message) -> str:
    return f"POST {at(msg)}"


def decode_header_value(raw: str) -> tuple[str | None, str | None]:
    """The value an `Mcp-Name` / `Mcp-Param-*` header carries (the Base64 sentinel decoded), or None
    and what is wrong with it (RULES.md §4.6 http-header-value-encoding)."""
    if not raw.isascii() or not raw.replace("\t", " ").isprintable():
        return None, "contains characters outside visible ASCII, space and tab (such values must be Base64-encoded)"
    if raw != raw.strip(OWS):
        return None, "has leading or trailing whitespace (such values must be Base64-encoded)"
    if raw[:len(SENTINEL_HEAD)].lower() != SENTINEL_HEAD:
        return raw, None
    if not raw.startswith(SENTINEL_HEAD):
        return None, "writes the =?base64? marker in upper case (the markers must appear exactly, in lower case)"
    if len(raw) < len(SENTINEL_HEAD) + len(SENTINEL_TAIL) or not raw.endswith(SENTINEL_TAIL):
        return None, "opens the Base64 sentinel =?base64? without closing it with ?="
    try:
        data = base64.b64decode(raw[len(SENTINEL_HEAD):-len(SENTINEL_TAIL)], validate=True)
    except (binascii.Error, ValueError):
        return None, "carries invalid Base64 inside the sentinel"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "carries Base64 that does not decode to UTF-8 text"


def _plain(raw: str) -> bool:
    """Safe to send as is: visible ASCII and inner spaces, not sentinel-like."""
    return raw.isascii() and raw.isprintable() and not raw.startswith(("=?", " ")) and not raw.endswith(" ")


def _looks_like_sentinel(value: str) -> bool:
    return value.startswith(SENTINEL_HEAD) and value.endswith(SENTINEL_TAIL)


def _matches(decoded: str, value) -> bool:
    """Header text against the body value: integers numerically (42.0 is 42), booleans as lowercase
    true/false, strings exactly."""
    t = type(value)
    if t is bool:
        return decoded == ("true" if value else "false")
    if t is int and decoded.lstrip("-").isdigit():
        return int(decoded) == value  # exact, also beyond 2**53
    if t is int or t is float:
        return NUMBER.fullmatch(decoded) is not None and float(decoded) == value
    return t is str and decoded == value


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Annotations:
    """The `x-mcp-header` annotations of one tool definition: (path, header name) pairs, or why the
    definition is invalid (streamable-http.mdx "Schema Extension")."""

    __slots__ = ("headers", "problem", "keys")

    def __init__(self, schema) -> None:
        self.headers: list[tuple[tuple[str, ...], str, str, str]] = []  # path, name, header key, source
        self.problem: str | None = None
        self._walk(schema, (), True)
        self.keys = frozenset(key for _, _, key, _ in self.headers)
        seen: dict[str, str] = {}
        for _, name, _, _ in self.headers:
            if name.lower() in seen and self.problem is None:
                self.problem = f"x-mcp-header {name!r} is not case-insensitively unique (also {seen[name.lower()]!r})"
            seen.setdefault(name.lower(), name)

    def _fail(self, why: str) -> None:
        if self.problem is None:
            self.problem = why

    def _walk(self, node, path: tuple[str, ...], reachable: bool) -> None:
        if type(node) is list:
            for item in node:
                self._walk(item, path, False)
            return
        if type(node) is not dict:
            return
        if "x-mcp-header" in node:
            self._annotation(node, path, reachable)
        for k, v in node.items():
            if k == "properties" and type(v) is dict:
                for name, sub in v.items():
                    self._walk(sub, path + (name,), reachable)
            elif k not in DATA_KEYWORDS:
                self._walk(v, path, False)

    def _annotation(self, node: dict, path: tuple[str, ...], reachable: bool) -> None:
        name = node["x-mcp-header"]
        at = ".".join(path) or "the schema root"
        if not reachable or not path:
            return self._fail(f"x-mcp-header on {at} is not statically reachable through properties keys alone")
        if type(name) is not str or not name:
            return self._fail(f"x-mcp-header of {at} is {'empty' if name == '' else 'not a string'}")
        if not set(name) <= TCHAR:
            return self._fail(f"x-mcp-header {name!r} of {at} is not an HTTP field-name token")
        types = node.get("type")
        types = [t for t in types if t != "null"] if type(types) is list else [types]
        if len(types) != 1 or type(types[0]) is not str or types[0] not in PRIMITIVE:
            declared = f"of type {_shown(node['type'])}" if "type" in node else "with no type"
            return self._fail(f"x-mcp-header {name!r} annotates {at} {declared}, not integer, string or boolean")
        self.headers.append((path, name, MCP_PARAM + name.lower(), "arguments." + ".".join(path)))


# The request headers last mapped: the rules of one POST run in a row, so the first maps them and the
# others look names up. (One tuple, replaced whole: inspectors in other threads never mix them up.)
_last_map: tuple = (None, None)


def _header_map(headers) -> tuple[dict[str, str], list[str]]:
    """The request headers by lower-case name (the first of each), and the Mcp-Param-* names among them."""
    global _last_map
    last = _last_map
    if last[0] is headers:
        return last[1]
    h = dict(headers)
    names = "\n".join(h)
    if len(h) != len(headers) or names.lower() != names:  # the fast path needs lower-case names, each once
        h = {}
        for k, v in headers:
            h.setdefault(k.lower(), v)
        names = "\n".join(h)
    mapped = h, [k for k in h if k.startswith(MCP_PARAM)] if MCP_PARAM in names else []
    _last_map = (headers, mapped)
    return mapped


def _at(args, path: tuple[str, ...]) -> tuple[bool, object]:
    for step in path:
        if type(args) is not dict or step not in args:
            return False, None
        args = args[step]
    return True, args


# --- the request: Accept, body, notifications ---------------------------------------------------------


@rule(
    "http-accept-header", ERROR, on=Decoded, directions=["c2s"], transports=["http"], section="4.6", spec=spec.HTTP_SENDING,
    quote="The client MUST include an Accept header listing both application/json and text/event-stream as "
          "supported content types.",
    summary="A POST whose Accept header does not list both application/json and text/event-stream.",
    why="The server chooses per request between a JSON body and an SSE stream; a client that refuses one of "
        "them fails on the first response of the other kind.",
    example="POST tools/call with Accept: application/json",
)
def http_accept_header(obs: Decoded, ctx) -> None:
    """A POST to the MCP endpoint whose `Accept` header is missing or does not list both
    `application/json` and `text/event-stream` (`*/*` does not count). Applies to both eras (the
    2025-11-25 transport has the same MUST); a POST of unknown era, which may be the deprecated
    HTTP+SSE transport, is skipped."""
    x = _first(obs)
    if x is None or x.method != "POST" or post_era(x) == UNKNOWN:
        return
    accept = _header_map(x.headers)[0].get("accept")
    missing = ctx.mem.get(accept)  # clients send the same Accept on every POST
    if missing is None:
        if len(ctx.mem) > 64:
            ctx.mem.clear()
        listed = {media_type(part) for part in accept.split(",")} if accept else set()
        missing = ctx.mem[accept] = [t for t in (JSON, SSE) if t not in listed]
    if missing:
        ctx.emit(f"{_where(obs.msg)}: the Accept header {'is missing' if accept is None else repr(accept)}; "
                 f"it must list {' and '.join(missing)}", messages=[obs.msg.index])


@rule(
    "http-body-not-single-message", ERROR, on=Decoded, kinds=["batch", "invalid"], directions=["c2s"],
    transports=["http"], section="4.6", spec=spec.HTTP_SENDING,
    quote="The body of the HTTP POST MUST be a single JSON-RPC request or notification.",
    summary="A modern POST body that is a batch, empty, or not one JSON-RPC message.",
    why="Batching was removed in 2025-06-18; a server that takes one message per POST drops or rejects the rest.",
    example='POST body [{"jsonrpc":"2.0","id":1,"method":"tools/list",…},{…}]',
)
def http_body_not_single_message(obs: Decoded, ctx) -> None:
    """The body of a modern POST is a JSON array (batch), empty, or not a JSON-RPC message at all
    (not JSON, or a JSON value that is not a request, notification or response); a body the client
    cut short (it left before its end) says so. A JSON-RPC response in the body is
    `client-sent-response`."""
    x = _first(obs)
    if x is None or post_era(x) != MODERN:
        return
    msg = obs.msg
    if msg.kind == "batch":
        what = f"a JSON array (batch) of {len(msg.value)} messages" if msg.value else "an empty JSON array"
    elif not msg.raw.strip():
        what = "empty"
    else:
        what = f"not one JSON-RPC message: {msg.problem}"
    if not x.complete:
        what += f" (cut short after {len(msg.raw)} bytes: the client stopped sending before its end)"
    ctx.emit(f"the body of POST {x.path} (exchange {x.number}, message #{msg.index}) is {what}; it must be a single "
             "JSON-RPC request or notification", messages=[msg.index])


@rule(
    "http-client-notification", INFO, on=Decoded, kinds=["notification"], directions=["c2s"], transports=["http"], section="4.6",
    spec=spec.HTTP_SENDING,
    quote="This revision of the core protocol defines no client-to-server notifications over Streamable HTTP.",
    summary="A client notification POSTed on a modern exchange.",
    why="Over HTTP closing the response stream is the cancellation signal; a notifications/cancelled POST has no "
        "effect a server must honour, so the client may believe it cancelled when it did not.",
    example="POST notifications/cancelled {requestId: 3} on a 2026-07-28 endpoint",
)
def http_client_notification(obs: Decoded, ctx) -> None:
    """Any client notification POSTed on a modern exchange (for example `notifications/cancelled`)."""
    x = _first(obs)
    if x is not None and post_era(x) == MODERN:
        ctx.emit(f"{_where(obs.msg)}: this revision defines no client notifications "
                 "over Streamable HTTP; closing the response stream is how a request is cancelled",
                 messages=[obs.msg.index])


@rule(
    "http-notification-status", ERROR, on=ExchangeDone, section="4.6", spec=spec.HTTP_SENDING,
    quote="If the server accepts it, the server MUST return HTTP status code 202 Accepted with no body.",
    summary="A notification POST answered with a status other than 202, or with a body, or refused with a "
            "non-error status.",
    why="Clients wait for exactly 202 with no body; anything else looks like a failed or a misrouted POST.",
    example="POST notifications/cancelled → 200 OK {}",
)
def http_notification_status(obs: ExchangeDone, ctx) -> None:
    """A modern notification POST that is accepted with a status other than 202, or answered with a
    body, or refused with a status below 400. An error status (4xx, 5xx) is a refusal and may carry
    an id-less JSON-RPC error."""
    x = obs.exchange
    rm = x.request_messages
    if not rm or rm[0].kind != NOTIFICATION or x.status is None or x.status >= 400 or post_era(x) != MODERN:
        return
    body = bool(x.body_messages) or x.events > 0
    if x.status == 202 and not body:
        return
    what = f"status {x.status}" + (" with a body" if body else "")
    ctx.emit(f"{_where(rm[0])} was answered with {what}; an accepted notification "
             "gets 202 Accepted with no body, a refused one an HTTP error status",
             messages=[rm[0].index, *(m.index for m in x.body_messages)])


@rule(
    "http-response-content-type", ERROR, on=ExchangeDone, section="4.6", spec=spec.HTTP_SENDING,
    quote="If the body is a JSON-RPC request, the server MUST return either Content-Type: application/json "
          "(a single JSON object) or Content-Type: text/event-stream (an SSE response stream).",
    summary="A request POST answered with a Content-Type other than application/json or text/event-stream, or "
            "with no body.",
    why="Clients parse the response by its Content-Type; anything else, or no body (a 202 for a request), leaves "
        "the request without an answer.",
    example="POST tools/call → 200 Content-Type: text/plain",
)
def http_response_content_type(obs: ExchangeDone, ctx) -> None:
    """A successful (2xx) response to a modern request POST whose `Content-Type` is neither
    `application/json` nor `text/event-stream`, or that carries no body at all (for example 202
    Accepted for a request). Error statuses are left alone: intermediaries may answer them without
    a JSON-RPC body."""
    x = obs.exchange
    if x.event_stream or x.status is None or not 200 <= x.status < 300 or x.era != MODERN:
        return
    ct = header(x.response_headers, "content-type")
    if x.body_messages:
        if ct == JSON or media_type(ct) == JSON:
            return
        what = f"Content-Type {ct!r}" if ct is not None else "no Content-Type"
    elif x.error is not None:
        return  # cut short: the body may never have been seen
    else:
        what = f"status {x.status}" + (f", Content-Type {ct!r}" if ct is not None else "") + " and no body"
    req = x.request
    ctx.emit(f"{_where(req)} was answered with {what}; a request gets application/json (one JSON object) or "
             "text/event-stream", messages=[req.index])


# --- request metadata headers: one pass, since the server's reaction needs all of them ----------------


class _Headers:
    """What the header pass remembers: the failed validations of each modern request POST until its
    exchange ends (the server's reaction is judged then), and the parsed x-mcp-header annotations of
    each tool definition."""

    __slots__ = ("ctx", "verdicts", "tools")

    def __init__(self, ctx) -> None:
        self.ctx = ctx  # for the knowledge of the capture (the tool definitions)
        self.verdicts: dict = {}  # exchange -> (the rule ids of the failed validations, whether all could be judged)
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
        self.failed: list[str] = []  # the rules whose validation failed, in the order they were reported

    def reject(self, ctx, text: str, severity: str | None = None) -> None:
        """A header that fails the server's validation: reported, and kept for the server's reaction."""
        ctx.emit(text, messages=[self.msg.index], severity=severity)
        self.failed.append(ctx.rule.id)


class _Reaction:
    """A modern request's exchange is over: its response and what its headers' validation found."""

    __slots__ = ("x", "req", "resp", "code", "failed", "complete", "what", "ids")

    def __init__(self, x: HttpExchange, req: Message, resp: Message, failed, complete: bool) -> None:
        self.x, self.req, self.resp = x, req, resp
        self.code = integer_code(resp) if resp.kind == ERROR_KIND else None
        self.failed, self.complete = failed, complete
        self.what = at(req)
        self.ids = [req.index, resp.index]


def _headers_of(obs, st: _Headers):
    """What the header checks get: for a modern POST's message, its `_Post`; at the end of a modern
    request's exchange that either failed validation or got an error, its `_Reaction` (else None)."""
    if type(obs) is ExchangeDone:
        x = obs.exchange
        if x.era != MODERN:
            return None
        entry = st.verdicts.pop(x, None) if st.verdicts else None
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
    if x is None or (msg.era != MODERN if msg.kind == REQUEST else post_era(x) != MODERN):
        return None
    return _Post(msg, x, st)


HEADERS = Pass("http-headers", state=_Headers, per_session=False, prepare=_headers_of)
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
            return ("encoding", f"{where}: header {self.name} {raw!r} {problem}") if problem is not None else (None, None)
        if raw == value and _plain(raw):
            return None, None  # the common case: a header-safe value sent as is
        if type(value) is str and raw == value and _looks_like_sentinel(value):
            return "encoding", (f"{where}: {self.name} carries {self.source} {_shown(value)} as is, but a value that "
                                "looks like the Base64 sentinel must itself be Base64-encoded")
        decoded, problem = decode_header_value(raw)
        if problem is not None:
            return "encoding", f"{where}: {self.name} {raw!r} {problem}"
        if not _matches(decoded, value):
            shown = f"{raw!r}" + (f" (decoded {decoded!r})" if decoded != raw else "")
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
        post.reject(ctx, f"{_where(msg)}: MCP-Protocol-Version {hv!r} does not match the body's _meta protocolVersion "
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
        post.reject(ctx, f"{_where(msg)}: Mcp-Method {hm!r} does not match the body's method {_shown(msg.method)}")


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
        ctx.emit(f"{_where(header.post.msg)} sends {header.name} {header.raw!r} although {header.source} is "
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
        ctx.emit(f"{_where(post.msg)} carries Mcp-Session-Id {post.h['mcp-session-id']!r}; this revision has no "
                 "sessions", messages=[post.msg.index])


@HEADERS.step(kinds=["request"], directions=["c2s"], transports=["http"])
def keep_verdicts(obs: Decoded, ctx, post: _Post) -> None:
    """What the validation of a request's headers found, for the server's reaction at the end of its exchange."""
    if post.failed or not post.complete:
        post.st.verdicts[post.x] = (post.failed, post.complete)


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
                 f"headers failed validation ({', '.join(dict.fromkeys(r.failed))}); it must reject it with 400 and "
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
        ctx.emit(f"the server rejected {r.what}, whose headers failed validation ({', '.join(dict.fromkeys(r.failed))}), "
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
    keep_verdicts,
    http_header_mismatch_wrong_status_or_code, http_header_mismatch_spurious, http_server_accepted_header_mismatch,
)


# --- error statuses and sessions ----------------------------------------------------------------------


@rule(
    "http-method-not-found-status", ERROR, on=Answered, kinds=["error"], transports=["http"], section="4.6",
    spec=spec.HTTP_VERSION_HEADER, conformance="sep-2575-http-server-method-not-found-404",
    quote="If the server does not implement the requested RPC method, it MUST respond with 404 Not Found and a "
          "JSON-RPC error with code -32601 (Method not found).",
    summary="-32601 with an HTTP status other than 404 on a modern exchange.",
    why="Clients tell a modern server without the method from a legacy server without the endpoint by the "
        "404 plus its JSON-RPC body.",
    example="POST tasks/result → 200 {error: {code: -32601}}",
)
def http_method_not_found_status(obs: Answered, ctx) -> None:
    """A `-32601` error answering a modern (or modern-malformed) request POST with an HTTP status other
    than 404 (an SSE stream's 200 included)."""
    x, req = obs.exchange, obs.request
    if x is None or req is None or req.era not in (MODERN, "malformed") or integer_code(obs.response) != METHOD_NOT_FOUND:
        return
    if x.status != 404:
        ctx.emit(f"{at(req)} got -32601 (message #{obs.response.index}) with HTTP status "
                 f"{x.status}; method not found is answered with 404", messages=[req.index, obs.response.index])


@rule(
    "http-unsupported-version-status", ERROR, on=Answered, kinds=["error"], transports=["http"], section="4.6",
    spec=spec.HTTP_VERSION_HEADER, conformance="sep-2575-http-server-unsupported-version-400",
    quote="it MUST respond with 400 Bad Request and an UnsupportedProtocolVersionError listing its supported "
          "versions.",
    summary="-32022 (UnsupportedProtocolVersion) with an HTTP status other than 400.",
    why="Clients probing versions read the 400 body to pick a supported version instead of falling back.",
    example="POST with _meta 2027-01-01 → 200 {error: {code: -32022}}",
)
def http_unsupported_version_status(obs: Answered, ctx) -> None:
    """A `-32022` error on HTTP with a status other than 400 (any era but legacy: the code exists only
    in modern MCP)."""
    x, req = obs.exchange, obs.request
    if x is None or req is None or req.era == LEGACY or integer_code(obs.response) != UNSUPPORTED_VERSION:
        return
    if x.status != 400:
        ctx.emit(f"{at(req)} got -32022 (message #{obs.response.index}) with HTTP status "
                 f"{x.status}; an unsupported version is answered with 400", messages=[req.index, obs.response.index])


@rule(
    "http-session-id-minted", WARNING, on=ExchangeDone, section="4.6", spec=spec.HTTP_EARLIER_REVISIONS,
    quote="An Mcp-Session-Id header on a request: ignore it, and do not mint or echo session IDs.",
    summary="A response to a modern request carries an Mcp-Session-Id header.",
    why="Clients of this revision do not echo it; a server that relies on it breaks them, and a gateway that "
        "mints it leaks legacy behaviour onto a modern hop.",
    example="POST tools/call (2026-07-28) → 200 with Mcp-Session-Id: 1868a90c…",
)
def http_session_id_minted(obs: ExchangeDone, ctx) -> None:
    """The response to a modern request carries `Mcp-Session-Id`."""
    x = obs.exchange
    if x.era != MODERN:
        return
    sid = header(x.response_headers, "mcp-session-id")
    if sid is not None:
        req = x.request
        ctx.emit(f"the response to {_where(req) if req else 'exchange ' + str(x.number)} carries Mcp-Session-Id "
                 f"{sid!r}; this revision has no sessions", messages=[req.index] if req else [])


def _legacy_served(x: HttpExchange, ctx) -> bool:
    """A GET or DELETE that the server's own answers show to be legacy traffic it serves: its
    Mcp-Session-Id was minted by the server's answer to initialize, or it names a legacy version in
    MCP-Protocol-Version on an endpoint whose server answered initialize (a server minting no session)."""
    if legacy_session(ctx, header(x.headers, "mcp-session-id")):
        return True
    hv = header(x.headers, "mcp-protocol-version")
    return hv is not None and hv.strip(OWS) in LEGACY_VERSIONS and ("initialize", x.session, x.path) in ctx.mem


@rule(
    "http-get-delete-modern", WARNING, on=(Answered, ExchangeDone), kinds=["result"],
    methods=["server/discover", "initialize"],
    transports=["http"], section="4.6", spec=spec.HTTP_EARLIER_REVISIONS,
    quote="HTTP GET or DELETE to the MCP endpoint: respond with 405 Method Not Allowed.",
    summary="A modern-only server answers GET or DELETE on the MCP endpoint with something other than 405.",
    why="A legacy client probing for the GET stream or ending its session needs an unambiguous answer.",
    example="discover supportedVersions [\"2026-07-28\"]; GET /mcp → 200 text/event-stream",
)
def http_get_delete_modern(obs, ctx) -> None:
    """A GET or DELETE answered with a status other than 405 on an HTTP path whose latest
    `server/discover` result lists only modern versions (heuristic: the discover result speaks for
    the endpoint it was served on). Each GET or DELETE is judged by its own era (RULES.md §2): one
    that carries an `Mcp-Session-Id` the server minted answering `initialize`, or a legacy
    `MCP-Protocol-Version` header on an endpoint whose server answered `initialize` successfully, is
    legacy traffic of a server that serves the legacy era too (dual-era), which may answer it. A
    legacy header alone is the client's claim, not the server's: a legacy client probing a
    modern-only server is what this rule is for."""
    x = obs.exchange
    if x is None:
        return
    if type(obs) is Answered:  # remember what the endpoint said it supports, and that it answered initialize
        if obs.request is not None and obs.request.method == "initialize":
            if len(ctx.mem) < 1000:
                ctx.mem[("initialize", x.session, x.path)] = True
            return
        r = obs.response.result
        versions = r.get("supportedVersions") if type(r) is dict else None
        if type(versions) is list and versions and len(ctx.mem) < 1000:
            modern_only = all(type(v) is str and v not in LEGACY_VERSIONS for v in versions)
            ctx.mem[(x.session, x.path)] = versions if modern_only else None
        return
    if (x.method != "GET" and x.method != "DELETE") or x.status is None or x.status == 405:
        return
    versions = ctx.mem.get((x.session, x.path))
    if versions and not _legacy_served(x, ctx):
        ctx.emit(f"{x.method} {x.path} (exchange {x.number}) was answered with {x.status}; this endpoint supports "
                 f"only {', '.join(versions)} (server/discover) and should answer 405 Method Not Allowed")


@rule(
    "http-last-event-id", INFO, on=(Decoded, SseSeen, ExchangeDone), kinds=["request", "notification"],
    directions=["c2s"], transports=["http"], section="4.6", spec=spec.HTTP_RECEIVING,
    quote="Resumable SSE streams via Last-Event-ID are not supported.",
    summary="A Last-Event-ID request header, or SSE id: fields, on a modern exchange.",
    why="Nothing will be redelivered: a client that counts on resumption loses the in-flight request when a "
        "stream breaks, and must re-issue it with a new id.",
    example="POST tools/call with Last-Event-ID: 7; or events with id: 12 on a 2026-07-28 stream",
)
def http_last_event_id(obs, ctx) -> None:
    """A modern POST with a `Last-Event-ID` header, or a modern response stream whose events carry
    `id:` fields (reported once per stream)."""
    t = type(obs)
    if t is ExchangeDone:
        if ctx.mem:
            ctx.mem.pop(obs.exchange, None)
        return
    if t is SseSeen:
        x = obs.exchange
        if obs.fields.id is None or x.era != MODERN or x in ctx.mem:
            return
        ctx.mem[x] = True
        req = x.request
        ctx.emit(f"the SSE stream answering {_where(req) if req else 'exchange ' + str(x.number)} carries event ids "
                 f"(id: {obs.fields.id!r}); streams of this revision are not resumable",
                 messages=[obs.msg.index] if obs.msg is not None else [])
        return
    x = _first(obs)
    if x is None or post_era(x) != MODERN:
        return
    last = _header_map(x.headers)[0].get("last-event-id")
    if last is not None:
        ctx.emit(f"{_where(obs.msg)} carries Last-Event-ID {last!r}; streams of this revision are not resumable",
                 messages=[obs.msg.index])


declare(
    "http-origin-403", ERROR, section="4.6", spec=spec.HTTP_SECURITY, observable=False,
    quote="If the Origin header is present and invalid, servers MUST respond with HTTP 403 Forbidden.",
    summary="A request with an invalid Origin must get 403 Forbidden.",
    doc="Not observable passively: which origins are valid is the server's own allowlist, which the traffic "
        "does not show. It could be checked only if mrtr-inspect were told that allowlist.",
    why="Without Origin validation a web page can reach a local MCP server through DNS rebinding.",
)


# --- SSE response streams -----------------------------------------------------------------------------


def _token(msg: Message):
    p = msg.params if type(msg.params) is dict else {}
    return p.get("progressToken")


@rule(
    "sse-notification-unrelated", ERROR, on=Decoded, kinds=["notification"], directions=["s2c"], transports=["http"], section="4.6",
    spec=spec.HTTP_RECEIVING, conformance=None,
    quote="These notifications MUST relate to the originating client request.",
    summary="A notification on a request's SSE stream that does not relate to that request.",
    why="A request stream is scoped to its request; notifications meant for another request or for a listen "
        "stream are lost or misattributed by the client.",
    example="tools/call with progressToken 5; its stream carries notifications/progress {progressToken: 9}",
)
def sse_notification_unrelated(obs: Decoded, ctx) -> None:
    """On the SSE stream of a modern request other than `subscriptions/listen`: a
    `notifications/progress` whose token is not the request's `_meta.progressToken` (or the request
    set none), or a change notification that belongs on a listen stream (list_changed,
    resources/updated, subscriptions/acknowledged, notifications/tasks). A `notifications/message`
    without a requested `logLevel` is `log-without-loglevel` (§4.5), not repeated here."""
    x = obs.exchange
    if x is None or not x.event_stream or x.era != MODERN:
        return
    msg = obs.msg
    method = msg.method
    if method != "notifications/progress" and method not in LISTEN_ONLY:
        return
    req = x.request
    if req is None or req.method == "subscriptions/listen":
        return
    where = f"{at(msg)} on the SSE stream of {_where(req)}"
    if method in LISTEN_ONLY:
        ctx.emit(f"{where}: this notification belongs on a subscriptions/listen stream, not on a request's stream",
                 messages=[req.index, msg.index])
        return
    own = (req.meta or {}).get("progressToken")
    token = _token(msg)
    if own is None:
        ctx.emit(f"{where} reports progress for token {format_id(token)}, but the request set no progressToken",
                 messages=[req.index, msg.index])
    elif id_key(token) != id_key(own):
        ctx.emit(f"{where} reports progress for token {format_id(token)}, not the request's token {format_id(own)}",
                 messages=[req.index, msg.index])


@rule(
    "sse-events-after-response", WARNING, on=SseSeen, section="4.6", spec=spec.HTTP_RECEIVING,
    quote="The final JSON-RPC response SHOULD terminate the stream.",
    summary="SSE events after the final JSON-RPC response on a request stream (also after an input_required).",
    why="The client may stop reading at the response; anything after it is lost, and a stream left open ties up "
        "a connection. SEP-2322 said MUST NOT after an input_required result.",
    example="event: message data: {result…}  then  event: message data: {notifications/progress…}",
)
def sse_events_after_response(obs: SseSeen, ctx) -> None:
    """The first SSE event (data, or a keep-alive comment) that follows the first JSON-RPC response on a
    modern request's stream; reported once per stream."""
    x = obs.exchange
    if x.after_response_events != 1 or x.era != MODERN:
        return
    req, first = x.request, x.responses[0]
    irr = " (an input_required result)" if _result_type(first) == "input_required" else ""
    ctx.emit(f"the SSE stream of {_where(req) if req else 'exchange ' + str(x.number)} goes on after its response "
             f"(message #{first.index}){irr}; the final response should end the stream",
             messages=[first.index] + ([obs.msg.index] if obs.msg is not None else []))


@rule(
    "sse-multiple-or-foreign-response", ERROR, on=Decoded, kinds=["result", "error"], directions=["s2c"],
    transports=["http"], section="4.6", spec=spec.HTTP,
    quote="The server answers each request with either a single JSON object or a Server-Sent Events (SSE) stream "
          "scoped to that request, carrying request-related notifications followed by the final response.",
    summary="More than one JSON-RPC response on a request's SSE stream, or one whose id is not the request's.",
    why="The stream is scoped to one request: a second or foreign response is dropped or, worse, paired with the "
        "wrong request.",
    example="POST tools/call id 2 → SSE: result id 2, then result id 7",
)
def sse_multiple_or_foreign_response(obs: Decoded, ctx) -> None:
    """On the SSE stream of a modern request POST: a response whose id is not the POSTed request's
    id, or a second response."""
    x = obs.exchange
    if x is None or not x.event_stream or x.era != MODERN:
        return
    req, msg = x.request, obs.msg
    if req is None:
        return
    if msg.idk != req.idk:
        ctx.emit(f"the SSE stream of {_where(req)} carries a response for id {format_id(msg.id)} (message #{msg.index}); "
                 "the stream is scoped to its request", messages=[req.index, msg.index])
    elif len(x.responses) > 1:
        ctx.emit(f"the SSE stream of {_where(req)} carries another response (message #{msg.index}) after message "
                 f"#{x.responses[0].index}; a request stream ends with one final response",
                 messages=[req.index, x.responses[0].index, msg.index])


@rule(
    "sse-no-response", INFO, on=ExchangeDone, section="4.6", spec=spec.CHANGELOG,
    quote="A broken response stream loses the in-flight request; clients MUST re-issue it as a new request with a "
          "new request ID",
    summary="The server closed a request's SSE stream without a JSON-RPC response.",
    why="The request is lost; the client must re-issue it with a new id (no resumption in this revision).",
    example="POST tools/call → SSE: notifications/progress, then the stream ends",
)
def sse_no_response(obs: ExchangeDone, ctx) -> None:
    """A modern request's SSE stream ended (normally, or by an upstream failure; not by the client
    going away, not at the end of the capture) without a response carrying the request's id."""
    x = obs.exchange
    if not x.event_stream or x.era != MODERN or (x.error is not None and not x.error.startswith("upstream")):
        return
    req, resp = _response_to(x)
    if req is not None and resp is None:
        ctx.emit(f"the SSE stream of {_where(req)} ended after {plural(x.events, 'event')} without a response"
                 + (f" ({x.error})" if x.error else "") + "; the client must re-issue the request with a new id",
                 messages=[req.index])


@rule(
    "sse-x-accel-buffering", WARNING, on=(SseSeen, ExchangeDone), section="4.6", spec=spec.HTTP_RECEIVING,
    quote="When initiating an SSE stream, servers SHOULD include the X-Accel-Buffering: no header in the HTTP "
          "response.",
    summary="An SSE response without X-Accel-Buffering: no.",
    why="Reverse proxies such as nginx buffer the stream otherwise: progress arrives late, all at once.",
    example="200 Content-Type: text/event-stream with no X-Accel-Buffering header",
)
def sse_x_accel_buffering(obs, ctx) -> None:
    """A modern SSE response whose headers lack `X-Accel-Buffering: no`; judged at the first event (so
    a long-lived stream is reported while it is open), or at the end of a stream that had none."""
    x = obs.exchange
    if type(obs) is SseSeen:
        if x.events != 1:
            return
    elif not x.event_stream or x.events:
        return
    if x.era != MODERN:
        return
    value = header(x.response_headers, "x-accel-buffering")
    if value is None or value.strip(OWS).lower() != "no":
        req = x.request
        shown = "no X-Accel-Buffering header" if value is None else f"X-Accel-Buffering: {value}"
        ctx.emit(f"the SSE response to {_where(req) if req else 'exchange ' + str(x.number)} has {shown}; proxies may "
                 "buffer the stream", messages=[req.index] if req else [])


@rule(
    "http-irr-on-sse", INFO, on=ExchangeDone, section="4.6", spec=spec.HTTP_RECEIVING,
    summary="An input_required result delivered on an SSE stream.",
    why="Permitted (SEP-2322); worth seeing because clients that treat a stream as final-result-only may miss "
        "the input request.",
    example="POST tools/call → SSE: notifications/progress, then {resultType: input_required}",
)
def http_irr_on_sse(obs: ExchangeDone, ctx) -> None:
    """A modern request's SSE stream carries its response as an `input_required` result; the finding
    says whether it was the last event of the stream."""
    x = obs.exchange
    if not x.event_stream or not x.responses or x.era != MODERN:
        return
    req, resp = _response_to(x)
    if resp is not None and _result_type(resp) == "input_required":
        tail = "as the last event" if not x.after_response_events else f"followed by {plural(x.after_response_events, 'event')}"
        ctx.emit(f"the input_required result (message #{resp.index}) for {_where(req)} came on an SSE stream, {tail}",
                 messages=[req.index, resp.index])


# --- legacy artifacts on a modern hop, on both transports ---------------------------------------------


@rule(
    "server-initiated-request", ERROR, on=Decoded, kinds=["request"], directions=["s2c"], section="4.6",
    spec=spec.STDIO_RECEIVING, conformance="sep-2575-http-server-no-independent-requests-on-stream",
    quote="The server MUST NOT write JSON-RPC requests to stdout.",
    summary="On a modern exchange, the server sent a JSON-RPC request (a legacy server request).",
    why="2026-07-28 has no server requests: input goes in an input_required result. A modern client does not "
        "answer, and the server (or the gateway in front of a legacy one) waits forever.",
    example='modern stdio: server → {"jsonrpc":"2.0","id":0,"method":"elicitation/create",…}',
)
def server_initiated_request(obs: Decoded, ctx) -> None:
    """On a modern stdio process (a line on stdout) or on the response stream of a modern HTTP POST,
    a server message with `method` and `id`: elicitation/create, sampling/createMessage, roots/list,
    ping or any other. Messages whose method starts with notifications/ are `notification-with-id`.
    Legacy processes and sessions may send server requests and are not reported."""
    msg = obs.msg
    if msg.era != MODERN or (msg.method or "").startswith("notifications/"):
        return
    req = on_stream_of(obs.exchange)
    where = f"on the response stream of {at(req)}" if req is not None else "on stdout" if obs.exchange is None \
        else f"on HTTP exchange {obs.exchange.number}"
    ctx.emit(f"the server sent the request {at(msg)} {where}; servers MUST NOT initiate JSON-RPC requests in "
             "2026-07-28: they return an input_required result instead",
             messages=[i.index for i in (req, msg) if i is not None])


@rule(
    "client-sent-response", ERROR, on=Decoded, kinds=["result", "error"], directions=["c2s"], section="4.6",
    spec=spec.STDIO_SENDING,
    quote="The client MUST NOT write JSON-RPC responses.",
    summary="On a modern exchange, the client sent a JSON-RPC response (legacy answering of a server request).",
    why="Modern servers never asked: the answer is dropped. Inputs go in inputResponses on a retry.",
    example='modern stdio: client → {"jsonrpc":"2.0","id":0,"result":{"action":"accept",…}}',
)
def client_sent_response(obs: Decoded, ctx) -> None:
    """On a modern stdio process (a line on stdin) or endpoint (an HTTP POST body), a client message
    with `result` or `error`: the legacy way of answering a server request."""
    msg = obs.msg
    if msg.era != MODERN:
        return
    req = obs.request
    what = f", answering {at(req)}" if req is not None else ""
    ctx.emit(f"the client sent the response {at(msg)}{what}; clients MUST NOT send JSON-RPC responses in 2026-07-28: "
             "answers go in inputResponses on a retry", messages=[i.index for i in (req, msg) if i is not None])
