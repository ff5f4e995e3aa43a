"""RULES.md §4.8: the legacy era (2025-11-25 and earlier) and era mixing.

Each hop is judged by its own era (RULES.md §2): legacy traffic (initialize, sessions,
server-initiated elicitation/create answered by the client) is shown as what it is and judged by the
legacy rules below only; legacy artifacts on a modern hop (an elicitationId,
notifications/elicitation/complete, -32042) are flagged as leakage. A server request or a client
response on a modern hop is §4.6 (`server-initiated-request`, `client-sent-response`, in http/streams.py).

The checks that need what a session showed before (the ids its senders used, the eras of its
requests, the legacy sessions its initialize minted) are the checks of one pass, `LEGACY`, which
keeps that per capture session; the rest are rules of their own.
"""

from __future__ import annotations

from ..core.era import LEGACY, MALFORMED, MODERN
from ..core.events import C2S, header
from ..core.findings import plural
from ..core.messages import LEGACY_VERSIONS, REQUEST, Message
from ..core.observations import Decoded, LegacyAsked
from . import spec
from .common import (
    URL_ELICITATION_REQUIRED,
    at,
    bounded,
    chain_of,
    error_code,
    on_stream_of,
    once,
    params,
    quoted,
)
from .registry import ERROR, INFO, WARNING, Pass, rule

IDS_REMEMBERED = 4096  # request ids remembered per session and sender
VERSION_HEADER_SINCE = "2025-06-18"  # the first revision whose clients send MCP-Protocol-Version
DISCOVER = "server/discover"


class _State:
    """What the legacy pass remembers about one capture session (dropped at SessionOver)."""

    __slots__ = ("eras", "ids", "by_client", "by_sid", "once")

    def __init__(self, ctx) -> None:
        self.eras: dict = {}  # stdio "" or HTTP path -> [first modern request, first legacy request]
        self.ids: dict = {}  # (sender, legacy session) -> {id key: message index}
        self.by_client: dict = {}  # HTTP (path, client) -> (session id or None, negotiated version, initialize result)
        self.by_sid: dict = {}  # HTTP Mcp-Session-Id -> (session id, negotiated version, initialize result)
        self.once: set = set()


def _update(obs: Decoded, st: _State) -> _State:
    """The pass's one step (registry.py): the session (or none) a legacy initialize assigned to its
    client, and the version it negotiated: the client's later POSTs must carry them."""
    if _initialize_result(obs):
        msg, x = obs.msg, obs.exchange
        sid = header(x.response_headers, "mcp-session-id")
        session = (sid, msg.result.get("protocolVersion"), msg)
        bounded(st.by_client, (x.path, x.client), session)
        if sid is not None:
            bounded(st.by_sid, sid, session)
    return st


LEGACY_PASS = Pass("legacy", state=_State, update=_update, kinds=["result"], directions=["s2c"], transports=["http"],
                   gates_read_state=True)


def _legacy_or_first(obs: Decoded, st: _State) -> bool:
    """What the pass's checks of a request can find something in (one gate, tested once per request):
    a request of the legacy era, or one declaring a legacy version (the two checks that judge only
    those), or a modern request but a server/discover probe that is the first its stdio process or
    HTTP endpoint carries (era-mixed-connection's first-time bookkeeping). A modern session's later
    requests are none of these: the gate spares them every legacy check (each check still tests its
    own condition)."""
    msg = obs.msg
    era = msg.era
    if era is LEGACY or msg.version in LEGACY_VERSIONS:
        return True
    if era is not MODERN or msg.method == DISCOVER:
        return False
    x = obs.exchange
    first = st.eras.get(x.path if x is not None else "")
    return first is None or first[0] is None


@LEGACY_PASS.check(
    "legacy-request-id-reused-in-session", ERROR, kinds=["request"], eras=[LEGACY], section="4.8", spec=spec.LEGACY_REQUESTS,
    quote="The request ID MUST NOT have been previously used by the requestor within the same session.",
    summary="A legacy-era request reuses an id its sender already used in the session.",
    why="In 2025-11-25 ids are unique per session, not only while in flight; peers may keep them to match late "
        "responses or cancellations.",
    example="legacy stdio: tools/list id 2 answered, later tools/call id 2", gate=_legacy_or_first,
)
def legacy_request_id_reused_in_session(obs: Decoded, ctx, st: _State) -> None:
    """A legacy-era request whose id (type and value) its sender (client or server) already used in
    the same session: the stdio process, or the HTTP Mcp-Session-Id (HTTP requests without a session
    id are not judged). The last 4,096 ids per sender and session are remembered."""
    msg, x = obs.msg, obs.exchange
    if msg.era is not LEGACY or msg.idk is None:
        return
    if x is None:
        session = msg.session
    else:
        session = header(x.headers, "mcp-session-id") or header(x.response_headers, "mcp-session-id")
        if session is None:
            return
    seen = st.ids.get((msg.direction, session))
    if seen is None:
        seen = {}
        bounded(st.ids, (msg.direction, session), seen)
    prior = seen.get(msg.idk)
    if prior is not None:
        who = "client" if msg.direction == C2S else "server"
        ctx.emit(f"{at(msg)} from the {who} reuses the id of message #{prior} in the same legacy session; in "
                 "2025-11-25 a request ID MUST NOT have been used before by its sender in the session",
                 messages=[prior, msg.index])
    seen[msg.idk] = msg.index
    if len(seen) > IDS_REMEMBERED:
        del seen[next(iter(seen))]


# --- eras ----------------------------------------------------------------------------------------------------------


@LEGACY_PASS.check(
    "era-mixed-connection", INFO, kinds=["request"], directions=["c2s"], section="4.8", spec=spec.VERSIONING_MATRIX,
    quote="A dual-era server MAY serve both eras concurrently on the same endpoint or process.",
    summary="Modern and legacy requests on the same stdio process or HTTP endpoint.",
    why="Allowed for dual-era servers; worth knowing when a client or gateway mixes eras by accident.",
    example="stdio: tools/list with modern _meta, then initialize", gate=_legacy_or_first,
)
def era_mixed_connection(obs: Decoded, ctx, st: _State) -> None:
    """The first time one stdio process or HTTP endpoint carries both a modern request and a legacy
    one (initialize, or a request of an initialized process or legacy session). A server/discover
    probe does not count as modern (a failed probe is `stdio-era-probe`)."""
    msg, x = obs.msg, obs.exchange
    era = msg.era
    if era is MODERN:
        if msg.method == DISCOVER:
            return
        slot = 0
    elif era is LEGACY:
        slot = 1
    else:
        return
    where = x.path if x is not None else ""
    first = st.eras.get(where)
    if first is None:
        first = [None, None, False]
        bounded(st.eras, where, first)
    if first[slot] is None:
        first[slot] = msg
        other = first[1 - slot]
        if other is not None and not first[2]:
            first[2] = True
            place = f"HTTP endpoint {where}" if x is not None else "this stdio process"
            ctx.emit(f"{at(other)} ({other.era}) and {at(msg)} ({msg.era}) on {place}: both eras on one connection, "
                     "which only a dual-era server serves", messages=[other.index, msg.index])


@LEGACY_PASS.check(
    "era-modern-meta-legacy-version", INFO, kinds=["request"], directions=["c2s"], section="4.8",
    spec=spec.VERSIONING,
    summary="A request with modern _meta declares a legacy protocol version.",
    why="The server may answer it either way; the client probably copied a version from -32022's supported list.",
    example='_meta {"io.modelcontextprotocol/protocolVersion": "2025-11-25", …}', gate=_legacy_or_first,
)
def era_modern_meta_legacy_version(obs: Decoded, ctx, st: _State) -> None:
    """A request whose `_meta["io.modelcontextprotocol/protocolVersion"]` is 2024-11-05, 2025-03-26,
    2025-06-18 or 2025-11-25: the modern shape with a legacy version, which the specification does
    not define (RULES.md §7.18). Reported once per version and stdio process or HTTP endpoint."""
    msg, x = obs.msg, obs.exchange
    if msg.era is MODERN and msg.version in LEGACY_VERSIONS and once(st, ("version", msg.version, x.path if x else "")):
        ctx.emit(f"{at(msg)} carries modern _meta but declares the legacy version {msg.version!r}; the "
                 "specification does not define this case", messages=[msg.index])


# --- legacy HTTP sessions --------------------------------------------------------------------------------------------


def _initialize_result(obs: Decoded) -> bool:
    """A legacy server's result to initialize over HTTP: it may mint a session."""
    msg = obs.msg
    req = obs.request
    return (msg.era is LEGACY and type(msg.result) is dict and obs.exchange is not None and req is not None
            and req.method == "initialize")


@LEGACY_PASS.check(
    "legacy-session-id-charset", ERROR, kinds=["result"], directions=["s2c"], transports=["http"], section="4.8",
    spec=spec.LEGACY_SESSIONS, conformance="server-session-id-visible-ascii",
    quote="The session ID MUST only contain visible ASCII characters (ranging from 0x21 to 0x7E).",
    summary="An Mcp-Session-Id minted at initialize holds characters outside 0x21–0x7E.",
    why="Clients must echo it in a header; proxies and HTTP stacks mangle or reject such values.",
    example="Mcp-Session-Id: abc def",
)
def legacy_session_id_charset(obs: Decoded, ctx, st: _State) -> None:
    """The `Mcp-Session-Id` response header of a successful legacy `initialize` holds a space, a
    control character or a non-ASCII character."""
    if not _initialize_result(obs):
        return
    sid = header(obs.exchange.response_headers, "mcp-session-id")
    bad = sorted({c for c in sid if not "\x21" <= c <= "\x7e"}) if sid is not None else None
    if bad:
        ctx.emit(f"the Mcp-Session-Id {quoted(sid)} minted with {at(obs.msg)} holds {', '.join(map(repr, bad))}; the session "
                 "ID MUST only contain visible ASCII characters (0x21 to 0x7E)", messages=[obs.msg.index])


def _session_of(obs: Decoded, st: _State) -> tuple | None:
    """The legacy session a client POST belongs to (by its Mcp-Session-Id, else by its client address
    and endpoint), for a message that is neither modern nor a new initialize; else None."""
    msg, x = obs.msg, obs.exchange
    if x is None or not (st.by_client or st.by_sid) or msg.era is MODERN or msg.method == "initialize":
        return None
    sid = header(x.headers, "mcp-session-id")
    return st.by_sid.get(sid) if sid is not None else st.by_client.get((x.path, x.client))


@LEGACY_PASS.check(
    "legacy-session-header-missing", ERROR, directions=["c2s"], transports=["http"], section="4.8",
    spec=spec.LEGACY_SESSIONS,
    quote="If an MCP-Session-Id is returned by the server during initialization, clients using the Streamable HTTP "
          "transport MUST include it in the MCP-Session-Id header on all of their subsequent HTTP requests.",
    summary="After a legacy session was assigned, a client POST lacks Mcp-Session-Id.",
    why="The server cannot find the session: it answers 400 or, worse, starts treating the client as new.",
    example="initialize → Mcp-Session-Id: s1; POST tools/list without the header",
)
def legacy_session_header_missing(obs: Decoded, ctx, st: _State) -> None:
    """A POST (request, notification or response; not a modern request, not a new initialize) from
    the same client address to an endpoint whose initialize minted a session id, without
    `Mcp-Session-Id`. GET and DELETE requests carry no message and are not judged."""
    session = _session_of(obs, st)
    if session is not None and session[0] is not None and header(obs.exchange.headers, "mcp-session-id") is None:
        msg = obs.msg
        ctx.emit(f"{at(msg)} is POSTed without Mcp-Session-Id, though initialize ({at(session[2])}) assigned "
                 f"session {quoted(session[0])} to this client; clients MUST include it on all subsequent requests",
                 messages=[session[2].index, msg.index])


@LEGACY_PASS.check(
    "legacy-protocol-version-header-missing", ERROR, directions=["c2s"], transports=["http"], section="4.8",
    spec=spec.LEGACY_VERSION_HEADER,
    quote="If using HTTP, the client MUST include the MCP-Protocol-Version: <protocol-version> HTTP header on all "
          "subsequent requests to the MCP server",
    summary="A post-initialize legacy POST without MCP-Protocol-Version (a warning when it differs from the negotiated one).",
    why="Without it the server must assume 2025-03-26 and may answer in an older shape.",
    example="initialize negotiates 2025-11-25; POST tools/call without MCP-Protocol-Version",
)
def legacy_protocol_version_header_missing(obs: Decoded, ctx, st: _State) -> None:
    """A POST after a legacy initialize that negotiated 2025-06-18 or later (same session id, or
    same client address and endpoint) without `MCP-Protocol-Version`; a header naming another
    version than the negotiated one is reported as a warning (it SHOULD be the negotiated one)."""
    session = _session_of(obs, st)
    if session is None:
        return
    version = session[1]
    if type(version) is not str or version < VERSION_HEADER_SINCE:
        return
    msg = obs.msg
    sent = header(obs.exchange.headers, "mcp-protocol-version")
    if sent is None:
        ctx.emit(f"{at(msg)} is POSTed without MCP-Protocol-Version after initialize negotiated {version!r} "
                 f"({at(session[2])}); the client MUST include it on all subsequent requests",
                 messages=[session[2].index, msg.index])
    elif sent.strip() != version:
        ctx.emit(f"{at(msg)} sends MCP-Protocol-Version {quoted(sent.strip())}, not the negotiated {version!r} "
                 f"({at(session[2])}); it SHOULD be the negotiated version", messages=[session[2].index, msg.index],
                 severity=WARNING)


# --- server results ------------------------------------------------------------------------------------------------


@LEGACY_PASS.check(
    "modern-artifact-in-legacy", WARNING, kinds=["result"], directions=["s2c"], eras=[LEGACY], section="4.8",
    spec=spec.VERSIONING_MATRIX,
    quote="An initialize request selects legacy semantics, scoped to the stdio process (stdio) or the session "
          "(HTTP), as specified by the negotiated legacy protocol version.",
    summary="A legacy-era request answered with input_required, task or inputRequests.",
    why="The legacy client treats it as a complete result and shows the user an empty answer.",
    example='legacy tools/call → {"resultType":"input_required","inputRequests":{…}}',
)
def modern_artifact_in_legacy(obs: Decoded, ctx, st: _State) -> None:
    """A result to a request classified legacy whose `resultType` is "input_required" or "task", or
    that carries `inputRequests`: MRTR does not exist in 2025-11-25, so a legacy client cannot act on
    it (derived)."""
    msg = obs.msg
    res = msg.result
    if msg.era is not LEGACY or type(res) is not dict:
        return
    rt = res.get("resultType")
    if rt == "input_required" or rt == "task" or "inputRequests" in res:
        what = f"resultType {rt!r}" if rt in ("input_required", "task") else "inputRequests"
        req = obs.request
        ctx.emit(f"{at(msg)} answers the legacy {at(req) if req else 'request'} with {what}, which 2025-11-25 does "
                 "not have; a legacy request is served by the negotiated legacy revision",
                 messages=[i.index for i in (req, msg) if i is not None], chain=chain_of(obs))


@rule(
    "url-elicitation-has-elicitation-id", WARNING, on=Decoded, kinds=["result"], directions=["s2c"], eras=[MODERN],
    section="4.8",
    spec=spec.CHANGELOG_MINOR,
    quote="Remove the notifications/elicitation/complete notification and the elicitationId field of URL mode "
          "elicitation requests",
    summary="A URL-mode elicitation in a modern inputRequests carries elicitationId.",
    why="Usually a gateway translating a legacy server: the client will wait for a completion notification that "
        "no longer exists.",
    example='{"inputRequests":{"login":{"method":"elicitation/create","params":{"mode":"url","elicitationId":"e1",…}}}}',
)
def url_elicitation_has_elicitation_id(obs: Decoded, ctx) -> None:
    """On a modern exchange, an `inputRequests` value with method `elicitation/create` and `mode`
    "url" whose params carry `elicitationId` (a 2025-11-25 field, gone in 2026-07-28)."""
    msg = obs.msg
    res = msg.result
    if msg.era is not MODERN or type(res) is not dict:
        return
    ir = res.get("inputRequests")
    if type(ir) is dict:
        keys = [k for k, v in ir.items()  # URL-mode elicitations carrying elicitationId
                if type(v) is dict and v.get("method") == "elicitation/create" and type(p := v.get("params")) is dict
                and p.get("mode") == "url" and "elicitationId" in p]
        if keys:
            ctx.emit(f"{at(msg)}: the URL-mode elicitation {', '.join(map(repr, keys))} carries elicitationId, a "
                     "2025-11-25 field that 2026-07-28 removed", messages=[msg.index], chain=chain_of(obs))


# The order of a message's checks (the order of its findings): a client request's version, id and era,
# then a client POST's legacy session headers; a server result's modern artifacts, the session it mints
# (then, a rule of its own after the pass, reading no state: a modern result's legacy elicitationId).
LEGACY_PASS.order(
    era_modern_meta_legacy_version, legacy_request_id_reused_in_session, era_mixed_connection,
    legacy_session_header_missing, legacy_protocol_version_header_missing,
    modern_artifact_in_legacy, legacy_session_id_charset,
)


# --- legacy artifacts on a modern hop ----------------------------------------------------------------------------------


@rule(
    "elicitation-complete-notification", WARNING, on=Decoded, kinds=["notification"], directions=["s2c"],
    methods=["notifications/elicitation/complete"], section="4.8", spec=spec.CHANGELOG_MINOR,
    quote="Remove the notifications/elicitation/complete notification and the elicitationId field of URL mode "
          "elicitation requests",
    summary="notifications/elicitation/complete on a modern exchange.",
    why="Modern clients learn the outcome by retrying; nobody listens for this notification.",
    example='{"method":"notifications/elicitation/complete","params":{"elicitationId":"e1"}}',
)
def elicitation_complete_notification(obs: Decoded, ctx) -> None:
    """On a modern exchange, `notifications/elicitation/complete` (a 2025-11-25 notification). On a
    subscriptions/listen stream it is `subscription-unrequested-type` (an error) instead."""
    msg = obs.msg
    if msg.era is not MODERN:
        return
    req = on_stream_of(obs.exchange)
    m = params(msg).get("_meta")
    if (req is not None and req.method == "subscriptions/listen") or (type(m) is dict and
                                                                      "io.modelcontextprotocol/subscriptionId" in m):
        return
    ctx.emit(f"the server sent {at(msg)}, which 2026-07-28 removed; the client learns the outcome of a URL "
             "elicitation by retrying the original request", messages=[msg.index])


@rule(
    "url-elicitation-required-error", ERROR, on=Decoded, kinds=["error"], section="4.8", spec=spec.BASE_ERROR_CODES,
    quote="Implementations of this protocol version MUST NOT emit these codes: … -32042 — URL elicitation required "
          "(2025-11-25 only).",
    summary="-32042 (URL elicitation required) on a modern exchange.",
    why="Modern servers ask for a URL elicitation in an input_required result; the client does not know -32042.",
    example='tools/call → {"error":{"code":-32042,"data":{"elicitations":[…]}}}',
)
def url_elicitation_required_error(obs: Decoded, ctx) -> None:
    """On a modern exchange, an error with code -32042 (RULES.md §10.2: not also `error-code-removed`)."""
    msg = obs.msg
    if error_code(msg) == URL_ELICITATION_REQUIRED and (msg.era is MODERN or msg.era is MALFORMED):
        req = obs.request
        ctx.emit(f"{at(msg)}{' answering ' + at(req) if req else ''} uses -32042 (URL elicitation required, 2025-11-25 "
                 "only); this revision MUST NOT emit it: return an input_required result with a URL elicitation",
                 messages=[i.index for i in (req, msg) if i is not None], chain=chain_of(obs))


@rule(
    "legacy-url-elicitation-missing-id", ERROR, on=Decoded, kinds=["request"], directions=["s2c"],
    methods=["elicitation/create"], section="4.8", spec=spec.LEGACY_ELICIT_URL, conformance="wire-schema-valid",
    quote="elicitationId: string (ElicitRequestURLParams, required)",
    summary="A legacy URL-mode elicitation/create without elicitationId.",
    why="In 2025-11-25 the client correlates the completion notification by elicitationId; without it the "
        "interaction can never be reported complete.",
    example='legacy server → {"method":"elicitation/create","params":{"mode":"url","url":"https://…","message":"…"}}',
)
def legacy_url_elicitation_missing_id(obs: Decoded, ctx) -> None:
    """A legacy-era server request elicitation/create with `mode` "url" whose params have no string
    `elicitationId`."""
    msg = obs.msg
    p = params(msg)
    if msg.era is LEGACY and p.get("mode") == "url" and type(p.get("elicitationId")) is not str:
        ctx.emit(f"the legacy URL-mode {at(msg)} has no elicitationId; 2025-11-25 requires it to correlate the "
                 "completion", messages=[msg.index])


# --- legacy chains (RULES.md §13) ------------------------------------------------------------------------------------


@rule(
    "legacy-server-request-unattached", INFO, on=LegacyAsked, section="13", spec=spec.LEGACY_SPEC + "basic/transports",
    summary="A legacy server's question that no evidence ties to the open request it serves (it is no round).",
    why="A 2025-11-25 server asks while a client request is open; the inspector ties the question to that request "
        "only by evidence (the request's own event stream, a _meta relation, being the only request open), never "
        "by guess. Untied, the question and the user's answering time are not a round of any chain.",
    example="HTTP: roots/list on the session's GET stream, without relatedRequestId, while tools/call id 5 is open",
)
def legacy_server_request_unattached(obs: LegacyAsked, ctx) -> None:
    """A legacy `elicitation/create`, `sampling/createMessage` or `roots/list` from the server while
    a legacy chain is in flight in its session, that no evidence ties to a request: on HTTP it came on
    the GET stream (or a POST stream of no request) without a `_meta` relation; on stdio it names no
    request and more than one request was open."""
    if obs.round is not None:
        return
    msg = obs.msg
    where = "on the session's GET stream" if msg.transport == "http" else "on the pipe"
    waiting = f"{plural(obs.waiting, 'legacy chain request')} {'was' if obs.waiting == 1 else 'were'}"
    ctx.emit(f"{at(msg)} came {where} while {waiting} open; nothing ties it to one "
             "(no event stream of its own, no _meta relation, not the only request open), so it is no round of "
             "theirs", messages=[msg.index])
