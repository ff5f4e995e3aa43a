"""RULES.md §4.5: the base protocol of 2026-07-28 (JSON-RPC envelope, ids, error codes, `_meta`,
versions, discovery, caching hints, logging, progress, cancellation, subscriptions).

Most conditions here can hold for any message, and many need what earlier messages of the session
showed (a request cancelled, a server shown to be modern, a -32022 waiting for the client's retry):
they are the checks of one pass, `MESSAGES`, whose state (`_State`) holds that per capture session.
Each check is its own rule; the engine dispatches each message once into the pass, which runs the
checks that can apply to it, in the order `MESSAGES.order` gives at the end of this module. Rules
that need another observation (a reused id in flight, an answered request, a cancellation) are
rules of their own.

Eras (RULES.md §2): requirements that 2026-07-28 introduced are judged on modern exchanges only;
the JSON-RPC rules that 2025-11-25 shares (ids, envelope, progress, cancellation, `_meta` key names)
apply to both eras.
"""

from __future__ import annotations

import json
import re

from ..core.era import LEGACY, MALFORMED, MODERN, UNKNOWN
from ..core.events import header
from ..core.findings import plural
from ..core.messages import (
    BATCH,
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    ERROR as ERROR_KIND,
    INVALID,
    LEGACY_VERSIONS,
    LOG_LEVEL_KEY,
    NOTIFICATION,
    PROTOCOL_VERSION_KEY,
    REQUEST,
    RESULT,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    Message,
    format_id,
    id_key,
    target_of,
)
from ..core.observations import Answered, Cancelled, Decoded, ExchangeDone, InFlightReuse, SessionOver
from . import spec
from .common import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    JSONRPC_CODES,
    METHOD_NOT_FOUND,
    MODERN_CODES,
    RESOURCE_NOT_FOUND_2025,
    UNSUPPORTED_VERSION,
    URL_ELICITATION_REQUIRED,
    at,
    bounded,
    chain_of,
    client_at,
    endpoint,
    error_code,
    foreign_answer,
    in_flight,
    meta_value,
    on_stream_of,
    once,
    params,
    side,
)
from .registry import ERROR, INFO, WARNING, Pass, declare, rule

LOG_LEVELS = {"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}
LISTEN = "subscriptions/listen"
LISTEN_FILTER = {  # notification -> the listen filter field that opts into it
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
RESOURCE_UPDATED = "notifications/resources/updated"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LISTEN_TYPES = frozenset(LISTEN_FILTER) | {RESOURCE_UPDATED, ACKNOWLEDGED}
CACHEABLE = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
REMOVED_METHODS = ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
                   "tasks/list", "tasks/result", "notifications/initialized", "notifications/roots/list_changed")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
DRAFT_CODES = {-32001: "HeaderMismatch (now -32020)", -32003: "MissingRequiredClientCapability (now -32021)",
               -32004: "UnsupportedProtocolVersion (now -32022)"}


# --- _meta key names ---------------------------------------------------------------------------------------

_LABEL = re.compile(r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
_key_ok: dict[str, str | None] = {}  # key -> why it is invalid (None: valid); a memo, bounded below
_good_keys: set[str] = set()  # the valid keys of _key_ok, so a whole _meta is checked with one set operation


def meta_key_problem(key: str) -> str | None:
    """Why a `_meta` key name breaks the format of basic/index.mdx `_meta` (None when it does not)."""
    if key in _key_ok:
        return _key_ok[key]
    why = None
    if key not in _TRACE_KEYS:
        prefix, slash, name = key.partition("/")
        if slash and not all(_LABEL.fullmatch(label) for label in prefix.split(".")):
            why = f"its prefix {prefix + '/'!r} is not dot-separated labels that start with a letter and end with a letter or digit"
        elif not _NAME.fullmatch(name if slash else key):
            why = f"its name {(name if slash else key)!r} does not begin and end with a letter or digit, or holds other characters than - _ ."
    if len(_key_ok) > 4096:
        _key_ok.clear()
        _good_keys.clear()
    _key_ok[key] = why
    if why is None:
        _good_keys.add(key)
    return why


# --- the per-message pass ------------------------------------------------------------------------------------


class _State:
    """What the per-message pass remembers about one capture session (dropped at SessionOver)."""

    __slots__ = ("unreadable", "cancelled", "retry", "modern_error", "broken", "modern", "pending", "once", "discover",
                 "situations", "progress", "acked", "listen")

    def __init__(self, ctx) -> None:
        self.unreadable = 0  # stdio: client messages whose id could not be read, not yet answered by an id-less error
        self.cancelled: dict[int, tuple] = {}  # request index -> (request, cancel notification), stdio
        self.retry: dict = {}  # client -> (the -32022 error, its supported versions)
        self.modern_error: dict = {}  # client -> (a recognized modern error, whether it allows a legacy fallback)
        self.broken: dict = {}  # (peer, id key) -> request whose HTTP stream ended without a response
        self.modern: set = set()  # endpoints shown to be modern servers
        self.pending: dict = {}  # endpoint -> findings waiting for evidence that the server is modern
        self.once: set = set()
        self.discover = ctx.knowledge.discover  # the inspector's DiscoverResults, per session
        self.situations: dict = {}  # log rule id -> the situation it last reported
        self.progress: dict = {}  # request index -> (its last progress value, the notification's index)
        self.acked: dict = {}  # listen request index -> the listen, once its subscription is acknowledged
        self.listen: tuple = (None, None)  # (the message, its subscription) for the subscription checks


MESSAGES = Pass("messages", state=_State)


def _anomalous(obs: Decoded) -> bool:
    """What the checks of the envelope, the ids and the pairing of responses can find something in:
    a message the core found a problem with or noted something about, a request whose id is neither
    a string nor an integer or whose method is a notification's, a response that is not a result
    object paired with its request. Most messages are none of these: the gate of those checks
    spares them the calls."""
    msg = obs.msg
    if msg.problem_reason is not None or msg.note is not None:
        return True
    k = msg.kind
    if k == REQUEST:
        ti = type(msg.id)
        method = msg.method
        return (ti is not int and ti is not str) or (method is not None and method.startswith("notifications/"))
    if k == RESULT or k == ERROR_KIND:
        return k == ERROR_KIND or type(msg.result) is not dict or obs.request is None
    return False


def _notification_method(msg: Message) -> bool:
    method = msg.method
    return method is not None and method.startswith("notifications/")


# --- envelope ------------------------------------------------------------------------------------------------


@MESSAGES.check(
    "jsonrpc-envelope-invalid", ERROR, section="4.5", spec=spec.BASE_MESSAGES,
    conformance="wire-schema-valid",
    quote="All messages between MCP clients and servers MUST follow the JSON-RPC 2.0 specification.",
    summary="A message that is not a valid JSON-RPC 2.0 request, notification or response.",
    why="A peer cannot route what it cannot classify: the message is dropped or answered with -32600, and the "
        "request it was meant to be never completes.",
    example='{"jsonrpc":"1.0","id":1,"method":"tools/list"}, or {"jsonrpc":"2.0","id":1,"result":{},"error":{…}}',
    gate=_anomalous,
)
def jsonrpc_envelope_invalid(obs: Decoded, ctx, st: _State) -> None:
    """A message whose `jsonrpc` is not "2.0", that is neither a request, a notification nor a
    response, a response with both or neither of `result` and `error`, a `result` that is not an
    object, an `error` that is not an object with a `code` and a string `message`, or (on HTTP) a
    server's response body or SSE data that is not JSON at all (not the body of a non-2xx answer
    whose Content-Type is not JSON: that is no MCP answer, `upstream-not-mcp`). Any era: both
    revisions require JSON-RPC 2.0."""
    msg, x = obs.msg, obs.exchange
    reason = msg.problem_reason
    if reason == "envelope":
        ctx.emit(f"message #{msg.index} from the {side(msg)} is not a valid JSON-RPC 2.0 message: {msg.problem}",
                 messages=[msg.index])
    elif reason in ("json", "extra-data", "constant") and x is not None and msg.direction == "s2c":
        if foreign_answer(x):  # a 404 page, a 405 of another URL: no MCP answer (`upstream-not-mcp` says so)
            return
        where = "an SSE event's data" if x.event_stream else "the response body"
        ctx.emit(f"{where} (message #{msg.index}) on HTTP exchange {x.number} is not one JSON value: {msg.problem}; "
                 "every message must be a JSON-RPC 2.0 message", messages=[msg.index])


@MESSAGES.also("jsonrpc-envelope-invalid", kinds=["result", "error"], gate=_anomalous)
def response_members(obs: Decoded, ctx, st: _State) -> None:
    """The parts of a response the core does not judge: result and error members."""
    msg = obs.msg
    if msg.kind == RESULT:
        if msg.problem_reason is None and type(msg.result) is not dict:
            ctx.emit(f"{at(msg)} from the {side(msg)}: result is {json.dumps(msg.result)[:40]}, not an object",
                     messages=[msg.index])
        return
    err = msg.error
    if type(err) is not dict:
        ctx.emit(f"{at(msg)} from the {side(msg)}: error is {json.dumps(err)[:40]}, not an object with code and message",
                 messages=[msg.index])
    elif "code" not in err or type(err.get("message")) is not str:
        what = "no code" if "code" not in err else "no string message"
        ctx.emit(f"{at(msg)} from the {side(msg)}: the error has {what}; error responses MUST include an error field "
                 "with a code and message", messages=[msg.index])


@MESSAGES.also("stdio-framing", gate=_anomalous)
def unterminated_last_message(obs: Decoded, ctx, st: _State) -> None:
    """RULES.md §4.7 `stdio-framing` (stdio.py), for a valid message: it ends its stream without a
    newline. Checked here, where every message passes, in the order its finding had."""
    msg = obs.msg
    if msg.note is not None and obs.exchange is None and (
            msg.problem_reason is None or (msg.kind != INVALID and msg.kind != BATCH)):
        ctx.emit(f"{at(msg)} from the {side(msg)} is the last bytes of its stream and no newline ends it: a reader "
                 "that waits for the newline never delivers it; stdio messages are delimited by newlines",
                 messages=[msg.index], severity=WARNING)


@MESSAGES.step(kinds=["invalid", "batch"], directions=["c2s"], gate=_anomalous)
def count_unreadable(obs: Decoded, ctx, st: _State) -> None:
    """A stdio client message the server cannot read an id in (not JSON, a batch): the server may
    answer it with an id-less error."""
    if obs.msg.problem_reason is not None and obs.exchange is None:
        st.unreadable += 1


# --- ids -----------------------------------------------------------------------------------------------------




@MESSAGES.check(
    "request-id-null", ERROR, kinds=["request"], section="4.5", spec=spec.BASE_REQUESTS,
    conformance="wire-schema-valid",
    quote="Unlike base JSON-RPC, the ID MUST NOT be null.",
    summary="A request whose id is null.",
    why="null is what an error carries when the request's id could not be read; a null-id request cannot be "
        "answered distinguishably.",
    example='{"jsonrpc":"2.0","id":null,"method":"tools/list"}', gate=_anomalous,
)
def request_id_null(obs: Decoded, ctx, st: _State) -> None:
    """A request (a message with `method` and `id`) whose `id` is JSON null, from either side, in any
    era."""
    msg = obs.msg
    if msg.id is None and not _notification_method(msg):
        ctx.emit(f"{at(msg)} from the {side(msg)} has id null; a request ID MUST NOT be null", messages=[msg.index])


@MESSAGES.check(
    "request-id-type", ERROR, kinds=["request"], section="4.5", spec=spec.BASE_REQUESTS,
    conformance="wire-schema-valid",
    quote="Requests MUST include a string or integer ID.",
    summary="A request id that is neither a string nor an integer (1.5, 1.0, true, an object).",
    why="Peers pair responses by id; a float or an object is compared differently by different JSON stacks.",
    example='{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', gate=_anomalous,
)
def request_id_type(obs: Decoded, ctx, st: _State) -> None:
    """A request whose `id` is a number with a fraction or exponent as written (`1.0` too), a
    boolean, an object or an array. Any era."""
    msg = obs.msg
    i = msg.id
    ti = type(i)
    if ti is not int and ti is not str and i is not None and not _notification_method(msg):
        ctx.emit(f"{at(msg)} from the {side(msg)} has id {json.dumps(i)[:40]} ({ti.__name__}); requests MUST include a "
                 "string or integer ID", messages=[msg.index])


@MESSAGES.check(
    "notification-with-id", ERROR, kinds=["request"], section="4.5", spec=spec.BASE_NOTIFICATIONS,
    conformance="wire-schema-valid",
    quote="Notifications MUST NOT include an ID.",
    summary="A notifications/* message that carries an id, or a response to a notification.",
    why="With an id a notification becomes a request: the receiver answers it, and the sender has no one "
        "waiting for that answer.",
    example='{"jsonrpc":"2.0","id":4,"method":"notifications/progress","params":{…}}', gate=_anomalous,
)
def notification_with_id(obs: Decoded, ctx, st: _State) -> None:
    """A message whose method starts with `notifications/` and that carries `id` (any era), or on
    HTTP a JSON-RPC result returned for a POSTed notification (the receiver MUST NOT send a
    response)."""
    msg = obs.msg
    if _notification_method(msg):
        ctx.emit(f"{at(msg)} from the {side(msg)} carries an id ({json.dumps(msg.id)[:40]}); notifications MUST NOT "
                 "include an ID", messages=[msg.index])


@MESSAGES.also("notification-with-id", kinds=["result"], directions=["s2c"], transports=["http"], gate=_anomalous)
def result_to_notification(obs: Decoded, ctx, st: _State) -> None:
    """A result the server returned for a POSTed notification."""
    msg, x = obs.msg, obs.exchange
    if obs.request is not None or msg.id is None or x is None or x.request is not None:
        return
    posted = x.request_messages[0] if x.request_messages else None
    if posted is not None and posted.kind == NOTIFICATION:
        ctx.emit(f"the server answered {at(posted)}, a notification, with {at(msg)}; the receiver of a "
                 "notification MUST NOT send a response", messages=[posted.index, msg.index])


@MESSAGES.step(kinds=["request"], directions=["c2s"], gate=_anomalous)
def count_unreadable_id(obs: Decoded, ctx, st: _State) -> None:
    """A stdio client request whose id is neither a string nor an integer: the server may answer it
    with an id-less error."""
    ti = type(obs.msg.id)
    if ti is not int and ti is not str and obs.msg.transport == "stdio":
        st.unreadable += 1


LOOK_ALIKE_LISTED = 1000  # overlaps of one look-alike group whose messages a finding lists


class _LookAlike:
    """The id reuses of one look-alike group (an HTTP peer without a peer_header) in one session."""

    __slots__ = ("overlaps", "ids", "messages", "first")

    def __init__(self, first: tuple) -> None:
        self.overlaps = 0
        self.ids: set = set()
        self.messages: set[int] = set()
        self.first = first  # (prior, msg) of the first overlap


def look_alike_group(peer: str) -> str:
    """How a finding names the clients an HTTP peer (RULES.md §10.4) cannot tell apart."""
    who = peer.split("|", 1)[1] if "|" in peer else peer
    if who.startswith("auth:"):
        return f"the clients sharing one Authorization (hash {who[5:]})"
    if who.startswith("ip:"):
        addr, _, info = who[3:].partition("|")
        return f"the clients at {addr} with clientInfo {info}" if info else f"the clients at {addr} without clientInfo"
    return f"the clients of peer {who}"


@rule(
    "request-id-in-flight-reuse", ERROR, on=(InFlightReuse, SessionOver), section="4.5", spec=spec.BASE_REQUESTS,
    quote="The request ID MUST NOT match the ID of any other request the sender has issued and not yet received a "
          "response for.",
    summary="A request reuses the id of a request from the same sender that is still unanswered.",
    why="The responses can no longer be told apart: one of the two requests gets the other's answer.",
    example="tools/call id 3 sent, and before its response another tools/list id 3",
)
def request_id_in_flight_reuse(obs, ctx) -> None:
    """A client request whose id (type and value) equals that of an earlier request of the same
    sender (the stdio pipe, the HTTP peer) that has not been answered yet: one finding per reuse.
    Legacy-era requests are judged by `legacy-request-id-reused-in-session`, which forbids any
    reuse in the session.

    On HTTP the sender is the peer of RULES.md §10.4, which only a configured `peer_header` tells
    apart process by process: client processes of one machine and SDK (a parallel test run) share an
    address and a `clientInfo`, and often a token, and each counts its ids from 1. There, unless
    `peer_header` names the sender, the reuses of one such look-alike group are one warning for the
    session (RULES.md §10.10, a documented downgrade), given when the session ends: it names the
    group, counts the overlaps and the ids they reused, says how to tell the clients apart
    (`peer_header`), and lists the messages of each overlap (the first 1,000 overlaps) in `messages`.
    The same ids from two processes are no fault, and the traffic cannot tell which it is."""
    mem = ctx.mem
    if type(obs) is SessionOver:
        groups = mem.pop(obs.session, None)
        for peer, g in (groups or {}).items():
            prior, msg = g.first
            listed = "" if g.overlaps <= LOOK_ALIKE_LISTED else f" (the first {LOOK_ALIKE_LISTED} in this finding's messages)"
            ctx.emit(
                f"{plural(g.overlaps, 'request')} of {look_alike_group(peer)} reused an id still in flight ({len(g.ids)}"
                f"{'+' if len(g.ids) >= LOOK_ALIKE_LISTED else ''} "
                f"distinct {'id' if len(g.ids) == 1 else 'ids'}{listed}; the first: {at(msg)} and {at(prior)}); on HTTP, client processes of one "
                "machine and SDK look alike (one address and clientInfo, often one token, each counting its ids from "
                "1): if these are several clients this is no fault; name a request header that differs per client "
                "as peer_header (docs/http-proxy.md) to tell them apart and judge each sender's ids",
                messages=sorted(g.messages), severity=WARNING,
                details={"group": peer.split("|", 1)[-1], "overlaps": g.overlaps, "ids": len(g.ids)})
        return
    msg, prior = obs.msg, obs.prior
    if msg.era == LEGACY:
        return
    if msg.transport == "http" and not ctx.config.peer_header:
        groups = mem.get(msg.session)
        if groups is None:
            groups = mem[msg.session] = {}
        g = groups.get(msg.peer)
        if g is None:
            g = groups[msg.peer] = _LookAlike((prior, msg))
        g.overlaps += 1
        if len(g.ids) < LOOK_ALIKE_LISTED:
            g.ids.add(msg.idk)
        if g.overlaps <= LOOK_ALIKE_LISTED:
            g.messages.update((prior.index, msg.index))
        return
    ctx.emit(f"{at(msg)} reuses the id of {at(prior)}, which is still waiting for its response; the sender MUST NOT "
             "reuse the ID of a request it has not received a response for", messages=[prior.index, msg.index])


@MESSAGES.step(on=ExchangeDone)
def remember_broken_stream(obs: ExchangeDone, ctx, st: _State) -> None:
    """A modern request whose HTTP exchange ended with no response carrying its id: its peer may send
    it again."""
    x = obs.exchange
    req = _lost_request(x)
    if req is not None:
        bounded(st.broken, (x.peer, req.idk), req)


def _lost_request(x):
    """The modern request of an exchange that ended without a response carrying its id (else None)."""
    req = x.request
    if req is None or req.era != MODERN:
        return None
    for r in x.responses:
        if r.idk == req.idk:
            return None
    return req


@MESSAGES.check(
    "request-reissued-same-id", ERROR, kinds=["request"], directions=["c2s"], transports=["http"], section="4.5",
    spec=spec.CHANGELOG,
    quote="A broken response stream loses the in-flight request; clients MUST re-issue it as a new request with a "
          "new request ID",
    summary="After an HTTP response stream broke without a response, the client re-sent the request with the same id.",
    why="The server may still be finishing the first one; the same id makes the two indistinguishable.",
    example="POST tools/call id 7 → stream closed without a response; POST tools/call id 7 again",
)
def request_reissued_same_id(obs: Decoded, ctx, st: _State) -> None:
    """On HTTP, a modern request's exchange ended with no JSON-RPC response carrying its id (the
    stream broke, or the client went away), and the same peer then sends the same method and target
    with the same id."""
    msg = obs.msg
    if not st.broken or obs.exchange is None:
        return
    first = st.broken.pop((msg.peer, msg.idk), None)
    if first is not None and first.method == msg.method and target_of(first.method, first.params) == target_of(
            msg.method, msg.params):
        ctx.emit(f"{at(msg)} re-issues {at(first)}, whose response stream ended without a response, with the same id; "
                 "a lost request MUST be re-issued with a new request ID", messages=[first.index, msg.index])


# --- client requests: _meta --------------------------------------------------------------------------------------


def _unusual_meta(obs: Decoded) -> bool:
    """What the checks of a client request's `_meta` can find something in: a request that is not
    modern, or a modern one whose `_meta` lacks clientCapabilities (an object) or clientInfo, names a
    key not yet known to be well formed, or carries a progressToken. An ordinary modern request is
    none of these: the gate of those checks spares it the calls (each check still tests its own
    condition)."""
    msg = obs.msg
    if msg.era != MODERN:
        return True
    meta = msg.params["_meta"]
    return (type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict or CLIENT_INFO_KEY not in meta
            or not meta.keys() <= _good_keys or meta.get("progressToken") is not None)


def _caps_problem(meta: dict) -> str | None:
    caps = meta.get(CLIENT_CAPABILITIES_KEY)
    if type(caps) is dict:
        return None
    if CLIENT_CAPABILITIES_KEY not in meta:
        return "its _meta has no io.modelcontextprotocol/clientCapabilities"
    return f"io.modelcontextprotocol/clientCapabilities is {json.dumps(caps)[:30]}, not an object"


def _meta_problem(req: Message) -> str | None:
    """Why a client request lacks required `_meta` (RULES.md request-meta-missing), or None."""
    era = req.era
    if era == MODERN:
        return _caps_problem(req.params["_meta"])
    if era != MALFORMED and era != UNKNOWN:
        return None
    meta = req.meta
    if era == UNKNOWN and (meta is None or (CLIENT_CAPABILITIES_KEY not in meta and CLIENT_INFO_KEY not in meta)):
        return None  # a legacy candidate
    if type(req.params) is not dict:
        return "it has no params, so no _meta"
    if meta is None:
        return "it has no params._meta"
    if PROTOCOL_VERSION_KEY not in meta:
        return "its _meta has no io.modelcontextprotocol/protocolVersion"
    return f"io.modelcontextprotocol/protocolVersion is {json.dumps(meta[PROTOCOL_VERSION_KEY])[:30]}, not a string"


@MESSAGES.check(
    "request-meta-missing", ERROR, kinds=["request"], directions=["c2s"], section="4.5", spec=spec.BASE_META,
    conformance="sep-2575-client-populates-meta",
    quote="A request missing any required field is malformed; the server MUST reject it with JSON-RPC error code "
          "-32602 (Invalid params).",
    summary="A client request without _meta, its protocolVersion (a string) or its clientCapabilities (an object).",
    why="Without them the server cannot know the version or capabilities: it must reject the request.",
    example='tools/call with params._meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"} only',
    gate=_unusual_meta,
)
def request_meta_missing(obs: Decoded, ctx, st: _State) -> None:
    """A client request that declares a 2026-07-28 shape but lacks a required per-request field: on
    a modern request, `io.modelcontextprotocol/clientCapabilities` missing or not an object; on a
    request from a peer or endpoint that has already spoken modern (era malformed), or one that
    carries clientCapabilities or clientInfo, a missing `_meta` or `protocolVersion`. Every round of
    a chain counts."""
    msg = obs.msg
    era = msg.era
    if era == MODERN:
        meta = msg.params["_meta"]
        if type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict:
            ctx.emit(f"{at(msg)}: {_caps_problem(meta)}; a request missing a required field is malformed",
                     messages=[msg.index], chain=chain_of(ctx, msg))
    elif era == MALFORMED or era == UNKNOWN:
        why = _meta_problem(msg)
        if why is not None:
            ctx.emit(f"{at(msg)}: {why}; a request missing a required field is malformed", messages=[msg.index],
                     chain=chain_of(ctx, msg))


def _unusual_answer(obs: Decoded) -> bool:
    """What the checks of a response's request and `_meta` can find something in: a response that is
    not a modern result object to a modern request, or one whose request lacks clientCapabilities (an
    object), sets a logLevel or is a subscriptions/listen, or whose result's `_meta` lacks serverInfo
    or names a key not yet known to be well formed. An ordinary answer is none of these: the gate of
    those checks spares it the calls (each check still tests its own condition)."""
    msg = obs.msg
    req = obs.request
    if req is None or req.era != MODERN or msg.era != MODERN or type(msg.result) is not dict:
        return True
    meta = req.params["_meta"]
    if type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict or meta.get(LOG_LEVEL_KEY) is not None or req.method == LISTEN:
        return True
    m = msg.result.get("_meta")
    return type(m) is not dict or SERVER_INFO_KEY not in m or not m.keys() <= _good_keys


@MESSAGES.check(
    "server-accepted-request-missing-meta", ERROR, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.BASE_META, conformance="sep-2575-request-meta-invalid-missing-meta",
    quote="On HTTP, the response status MUST be 400 Bad Request.",
    summary="The server answered a request that lacks required _meta with something other than -32602 (HTTP 400).",
    why="A server that guesses the missing version or capabilities serves the request under assumptions the "
        "client never made; clients probing a server's era rely on the rejection.",
    example="tools/list without _meta → {\"result\":{\"tools\":[…]}}", gate=_unusual_answer,
)
def server_accepted_request_missing_meta(obs: Decoded, ctx, st: _State) -> None:
    """The response to a request flagged by `request-meta-missing` is a result, or an error other
    than -32602 (-32020 is accepted when only protocolVersion is missing from the body and the
    MCP-Protocol-Version header is present, RULES.md §7.12), or on HTTP a -32602 under a status
    other than 400."""
    msg, x = obs.msg, obs.exchange
    req = obs.request
    if req is None:
        return
    era = req.era
    if era == LEGACY or (era == MODERN and type(req.params["_meta"].get(CLIENT_CAPABILITIES_KEY)) is dict):
        return
    why = _meta_problem(req)
    if why is None:
        return
    code = error_code(msg) if msg.kind == ERROR_KIND else None
    if code == INVALID_PARAMS:
        if x is None or x.status in (None, 400):
            return
        how = f"with -32602 but HTTP status {x.status}, not 400 Bad Request"
    elif code == HEADER_MISMATCH and x is not None and "protocolVersion" in why and header(x.headers, "mcp-protocol-version"):
        return  # RULES.md §7.12: -32020 is defensible when only the body lacks the version
    else:
        how = "with a result" if msg.kind == RESULT else f"with error {code}, not -32602 (Invalid params)"
    ctx.emit(f"the server answered {at(req)} ({why}) {how} ({at(msg)}); a request missing a required field MUST be "
             "rejected with -32602 (on HTTP, status 400)", messages=[req.index, msg.index], chain=chain_of(ctx, msg))


@MESSAGES.check(
    "client-info-missing", WARNING, kinds=["request"], directions=["c2s"], section="4.5", spec=spec.BASE_META,
    conformance="sep-2575-client-sends-client-info",
    quote="Clients SHOULD include io.modelcontextprotocol/clientInfo on every request unless specifically "
          "configured not to do so.",
    summary="A modern request without io.modelcontextprotocol/clientInfo.",
    why="Without it servers, gateways and logs cannot tell which client sent what.",
    example='tools/list with _meta {protocolVersion, clientCapabilities} only', gate=_unusual_meta,
)
def client_info_missing(obs: Decoded, ctx, st: _State) -> None:
    """A modern client request whose `_meta` has no `io.modelcontextprotocol/clientInfo`; reported
    once per client (the stdio pipe, the HTTP peer)."""
    msg = obs.msg
    if msg.era == MODERN and CLIENT_INFO_KEY not in msg.params["_meta"] and once(st, ("client-info", msg.peer)):
        ctx.emit(f"{at(msg)} carries no io.modelcontextprotocol/clientInfo; clients SHOULD identify themselves on "
                 "every request (reported once per client)", messages=[msg.index])


def _bad_meta_keys(msg: Message, meta: dict, st: _State, ctx) -> None:
    for key in meta:
        if key not in _good_keys:
            why = meta_key_problem(key)
            if why is not None and once(st, ("meta-key", key)):
                ctx.emit(f"{at(msg)} from the {side(msg)}: the _meta key {key!r} is malformed: {why} (reported once "
                         "per key)", messages=[msg.index])


@MESSAGES.check(
    "meta-key-format-invalid", ERROR, kinds=["request"], directions=["c2s"], section="4.5", spec=spec.BASE_META,
    quote="Labels MUST start with a letter and end with a letter or digit; interior characters can be letters, "
          "digits, or hyphens (-).",
    summary="A _meta key whose prefix labels or name break the key-name format.",
    why="Prefixes reserve namespaces (io.modelcontextprotocol/, vendors'); malformed keys collide or are dropped.",
    example='"_meta": {"-bad.example/key": 1} or {"com.example/_private": 1}', gate=_unusual_meta,
)
def meta_key_format_invalid(obs: Decoded, ctx, st: _State) -> None:
    """A key of a request's or notification's `params._meta` or of a result's `_meta` whose prefix
    is not dot-separated labels (letter first, letter or digit last, hyphens inside) or whose name
    does not begin and end with a letter or digit. `traceparent`, `tracestate` and `baggage` are
    exempt. Any era (2025-11-25 has the same format); reported once per key and session."""
    msg = obs.msg
    if msg.era == MODERN:
        meta = msg.params["_meta"]
        if not meta.keys() <= _good_keys:
            _bad_meta_keys(msg, meta, st, ctx)


@MESSAGES.also("meta-key-format-invalid", kinds=["notification"])
def notification_meta_keys(obs: Decoded, ctx, st: _State) -> None:
    """The `params._meta` keys of a notification, from either side."""
    m = params(obs.msg).get("_meta")
    if type(m) is dict and not m.keys() <= _good_keys:
        _bad_meta_keys(obs.msg, m, st, ctx)


@MESSAGES.check(
    "progress-token-duplicate-active", ERROR, kinds=["request"], directions=["c2s"], section="4.5",
    spec=spec.PROGRESS_FLOW,
    quote="Progress tokens can be chosen by the client using any means, but MUST be unique across all active requests.",
    summary="A request reuses the progressToken of another request that is still in flight.",
    why="Progress notifications name only the token: the client can no longer tell whose progress it sees.",
    example="tools/call id 2 and tools/call id 3 both with progressToken \"p\", neither answered",
    gate=_unusual_meta,
)
def progress_token_duplicate_active(obs: Decoded, ctx, st: _State) -> None:
    """A client request whose `_meta.progressToken` (type and value) equals that of another of the
    sender's requests still waiting for its response. Reuse on a retry after the previous round was
    answered is fine. Any era."""
    msg = obs.msg
    if msg.era != MODERN:
        return
    token = msg.params["_meta"].get("progressToken")
    if token is None:
        return
    flight = in_flight(ctx, msg)
    if len(flight) < 2:  # only this request
        return
    tk = id_key(token)
    for other in flight:
        if other is not msg and id_key(meta_value(other, "progressToken")) == tk:
            ctx.emit(f"{at(msg)} uses progressToken {format_id(token)}, already used by {at(other)}, which is still in "
                     "flight; progress tokens MUST be unique across all active requests",
                     messages=[other.index, msg.index])
            return


@MESSAGES.check(
    "version-retry-not-from-supported", WARNING, kinds=["request"], directions=["c2s"], section="4.5",
    spec=spec.VERSIONING, conformance="sep-2575-client-retry-supported-version",
    quote="The client SHOULD select a mutually supported version from the supported list and retry the request",
    summary="After -32022, the client's next request uses a version the server did not list as supported.",
    why="Retrying with a version the server just refused can only fail again.",
    example='-32022 {"supported":["2026-07-28"]}, then a request with protocolVersion "2026-01-01"',
)
def version_retry_not_from_supported(obs: Decoded, ctx, st: _State) -> None:
    """The first request of a client after a -32022 UnsupportedProtocolVersionError declares a
    protocol version that is not in that error's `data.supported`."""
    if not st.retry:
        return
    msg = obs.msg
    pending = st.retry.pop(client_at(msg, obs.exchange), None)
    if pending is not None:
        err, supported = pending
        if msg.version is not None and msg.version not in supported:
            ctx.emit(f"{at(msg)} declares version {msg.version!r} after {at(err)} listed {', '.join(supported)} as "
                     "supported; the client SHOULD retry with a version from that list", messages=[err.index, msg.index])


@MESSAGES.check(
    "fallback-after-modern-error", WARNING, kinds=["request"], directions=["c2s"], methods=["initialize"],
    section="4.5", spec=spec.VERSIONING_BACKCOMPAT,
    quote="a recognized modern JSON-RPC error (such as UnsupportedProtocolVersionError) identifies a modern "
          "server: the client retries with a supported version rather than falling back.",
    summary="After a recognized modern error, the client fell back to initialize.",
    why="The server is modern; a legacy handshake cannot work with it (derived from the era rules).",
    example="tools/list → -32022 {\"supported\":[\"2026-07-28\"]}; then initialize",
)
def fallback_after_modern_error(obs: Decoded, ctx, st: _State) -> None:
    """A client sends `initialize` after the server answered it with -32020, -32021 or -32022, or on
    HTTP with a 404 carrying -32601. Not reported when the -32022 listed a legacy version (RULES.md
    §7.18: a legacy initialize is then the supported retry)."""
    if not st.modern_error:
        return
    msg = obs.msg
    seen = st.modern_error.pop(client_at(msg, obs.exchange), None)
    if seen is not None and not seen[1]:
        err = seen[0]
        ctx.emit(f"{at(msg)} falls back to the legacy handshake after {at(err)} (error {error_code(err)}), a "
                 "recognized modern error that identifies a modern server; the client should retry with a "
                 "supported version rather than fall back", messages=[err.index, msg.index])


# --- responses -------------------------------------------------------------------------------------------------


@MESSAGES.check(
    "response-id-mismatch", ERROR, kinds=["result", "error"], section="4.5", spec=spec.BASE_RESULTS,
    conformance="sep-2575-http-server-error-jsonrpc-id",
    quote="Result responses MUST include the same ID as the request they correspond to.",
    summary="A response whose id matches no outstanding request (stdio), or not the POSTed request's (HTTP).",
    why="The peer pairs responses by id; an unmatched response is dropped and its request waits forever.",
    example="tools/call id 2 → {\"id\":3,\"result\":{…}}", gate=_anomalous,
)
def response_id_mismatch(obs: Decoded, ctx, st: _State) -> None:
    """A server response with an id that no request in flight carries: on stdio none of the
    client's unanswered requests (never sent, or answered already), on an HTTP exchange not the
    POSTed request's id, or a second response to it. On a modern request's SSE stream
    `sse-multiple-or-foreign-response` (§4.6) says it instead. A legacy client's response to no
    server request counts too."""
    msg, x = obs.msg, obs.exchange
    if obs.request is not None or msg.id is None:
        return
    if msg.direction == "c2s":
        if msg.era == LEGACY:
            ctx.emit(f"{at(msg)} from the client answers no server request in flight", messages=[msg.index])
        return
    if x is not None:
        posted = x.request_messages[0] if x.request_messages else None
        if x.request is None and posted is not None and posted.kind == NOTIFICATION and msg.kind == RESULT:
            return  # notification-with-id
        if x.event_stream and x.era == MODERN:
            return  # sse-multiple-or-foreign-response (§4.6)
        req = x.request
        if req is not None:
            again = "a second response to" if msg.idk == req.idk else "a response that does not carry the id of"
            ctx.emit(f"{at(msg)} on HTTP exchange {x.number} is {again} the POSTed {at(req)}; responses MUST include "
                     "the same ID as their request", messages=[req.index, msg.index])
            return
    ctx.emit(f"{at(msg)} answers no request in flight (never sent, or already answered); responses MUST include the "
             "same ID as the request they correspond to", messages=[msg.index])


@MESSAGES.check(
    "error-response-missing-id", ERROR, kinds=["error"], directions=["s2c"], section="4.5", spec=spec.BASE_ERRORS,
    conformance="sep-2575-http-server-error-jsonrpc-id",
    quote="Error responses MUST include the same ID as the request they correspond to (except in error cases where "
          "the ID could not be read due a malformed request).",
    summary="An error response without an id for a request whose id was readable.",
    why="The client cannot tell which request failed; it waits for the real answer until it times out.",
    example="tools/call id 5 → {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32602,…}}",
    gate=_anomalous,
)
def error_response_missing_id(obs: Decoded, ctx, st: _State) -> None:
    """A server error whose `id` is absent or null although the request it answers had a readable
    id: on HTTP the POSTed request of its exchange; on stdio, no client message with an unreadable
    id (invalid JSON, a batch, a null or non-string, non-integer id) is waiting for such an error
    (heuristic)."""
    msg, x = obs.msg, obs.exchange
    if msg.id is not None or obs.request is not None:
        return
    if x is not None:
        req = x.request
        if req is not None and type(req.id) in (int, str):
            ctx.emit(f"{at(msg)} answers {at(req)} without its id; error responses MUST include the request's ID "
                     "unless it could not be read", messages=[req.index, msg.index])
        return
    if st.unreadable:
        st.unreadable -= 1
        return
    ctx.emit(f"{at(msg)} has no id, yet every client message on this pipe had a readable id; error responses MUST "
             "include the request's ID unless it could not be read", messages=[msg.index])


@MESSAGES.check(
    "server-info-missing", WARNING, kinds=["result"], directions=["s2c"], section="4.5", spec=spec.BASE_META,
    conformance="sep-2575-server-identifies-in-result-meta",
    quote="Servers SHOULD include the following io.modelcontextprotocol/* field in every result's _meta, unless "
          "specifically configured not to do so",
    summary="A modern result whose _meta lacks io.modelcontextprotocol/serverInfo.",
    why="With no session, each result is the only place a server can say who it is.",
    example='{"result":{"tools":[],"resultType":"complete"}}', gate=_unusual_answer,
)
def server_info_missing(obs: Decoded, ctx, st: _State) -> None:
    """A result to a modern request without `_meta["io.modelcontextprotocol/serverInfo"]`; reported
    once per server (stdio process, HTTP endpoint)."""
    msg = obs.msg
    if msg.era != MODERN or type(msg.result) is not dict or obs.request is None:
        return
    m = msg.result.get("_meta")
    if (type(m) is not dict or SERVER_INFO_KEY not in m) and once(st, ("server-info", endpoint(msg, obs.exchange))):
        ctx.emit(f"{at(msg)} has no io.modelcontextprotocol/serverInfo in its _meta; servers SHOULD identify "
                 "themselves in every result (reported once per server)", messages=[msg.index])


@MESSAGES.also("meta-key-format-invalid", kinds=["result"], directions=["s2c"], gate=_unusual_answer)
def result_meta_keys(obs: Decoded, ctx, st: _State) -> None:
    """The `_meta` keys of a server's result, in a modern exchange."""
    msg = obs.msg
    if msg.era != MODERN or type(msg.result) is not dict or obs.request is None:
        return
    m = msg.result.get("_meta")
    if type(m) is dict and not m.keys() <= _good_keys:
        _bad_meta_keys(obs.msg, m, st, ctx)


@MESSAGES.check(
    "log-level-invalid", WARNING, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.LOGGING_ERRORS,
    quote="If the io.modelcontextprotocol/logLevel value carried in a request's _meta is not a recognized log level, "
          "the server SHOULD reject that request with a standard JSON-RPC error",
    summary="A request's logLevel is not a LoggingLevel and the server did not reject it with -32602.",
    why="The client believes it asked for a level; the server silently picked another.",
    example='tools/call with logLevel "verbose" → a result', gate=_unusual_answer,
)
def log_level_invalid(obs: Decoded, ctx, st: _State) -> None:
    """A modern request whose `_meta["io.modelcontextprotocol/logLevel"]` is not one of debug, info,
    notice, warning, error, critical, alert, emergency, answered with anything but a -32602 error."""
    msg = obs.msg
    req = obs.request
    if req is None or msg.era != MODERN:
        return
    level = req.params["_meta"].get(LOG_LEVEL_KEY)
    code = error_code(msg) if msg.kind == ERROR_KIND else None
    if level is not None and not (type(level) is str and level in LOG_LEVELS) and code != INVALID_PARAMS:
        ctx.emit(f"{at(req)} asks for logLevel {json.dumps(level)[:30]}, which is no log level, and the server "
                 f"answered {at(msg)} instead of rejecting it with -32602", messages=[req.index, msg.index],
                 chain=chain_of(ctx, msg))


@MESSAGES.check(
    "protocol-version-unsupported-served", INFO, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.VERSIONING, conformance="sep-2575-server-unsupported-version-error",
    quote="it MUST respond with an UnsupportedProtocolVersionError listing the versions it does support",
    summary="A request was served under a version the server's own DiscoverResult does not list (or refused one it lists).",
    why="Either the discovery answer or the request handling is wrong; clients choose versions from discovery.",
    example='discover → supportedVersions ["2026-07-28"]; tools/list under "2027-01-01" → a result',
)
def protocol_version_unsupported_served(obs: Decoded, ctx, st: _State) -> None:
    """After a DiscoverResult was seen in the session: a result to a modern request whose version is
    not in its `supportedVersions`, or a -32022 for a version that is. Reported once per version."""
    msg = obs.msg
    req = obs.request
    if req is None or msg.era != MODERN or not st.discover:
        return
    if msg.kind == RESULT:
        if type(msg.result) is not dict:
            return
        served = True
    elif error_code(msg) == UNSUPPORTED_VERSION:
        served = False
    else:
        return
    disc = st.discover.get(msg.session)
    supported = disc.get("supportedVersions") if type(disc) is dict else None
    v = req.version
    if type(supported) is not list or v is None or (v not in supported) != served:
        return
    if once(st, ("version", v, served)):
        what = "served it" if served else "refused it with -32022"
        ctx.emit(f"{at(req)} declares version {v!r}; the server's DiscoverResult lists {', '.join(map(str, supported))}, "
                 f"yet it {what} ({at(msg)})", messages=[req.index, msg.index])


@MESSAGES.also("subscription-id-missing", kinds=["result"], directions=["s2c"], gate=_unusual_answer)
def listen_closed_untagged(obs: Decoded, ctx, st: _State) -> None:
    """The graceful-closure result of a modern subscriptions/listen without its subscriptionId."""
    msg = obs.msg
    req = obs.request
    if req is None or req.method != LISTEN or msg.era != MODERN or type(msg.result) is not dict:
        return
    m = msg.result.get("_meta")
    sid = m.get(SUBSCRIPTION_ID_KEY) if type(m) is dict else None
    if id_key(sid) != req.idk:
        ctx.emit(f"{at(msg)} closes {at(req)} but its _meta does not carry io.modelcontextprotocol/subscriptionId "
                 f"{format_id(req.id)}", messages=[req.index, msg.index])


# --- discovery and eras: findings that wait for a server to be shown modern ----------------------------------------


def _pend(st: _State, where, ctx, text: str, messages: list) -> None:
    """A finding of `ctx`'s rule that needs the server to be shown modern: now if it is, else when it is
    (`_modern_evidence`); it keeps its own rule id either way."""
    if where in st.modern:
        ctx.emit(text, messages=messages)
    else:
        waiting = st.pending.setdefault(where, [])
        if len(waiting) < 16:
            waiting.append((ctx, text, messages))


def _modern_evidence(where, st: _State) -> None:
    st.modern.add(where)
    for ctx, text, messages in st.pending.pop(where, ()):
        ctx.emit(text + " (a server shown to be modern by other answers)", messages=messages)


@MESSAGES.step(kinds=["result"], directions=["s2c"])
def modern_result_shown(obs: Decoded, ctx, st: _State) -> None:
    """A result with resultType, or a DiscoverResult, shows its server to be modern: findings waiting
    for that evidence are reported now."""
    msg = obs.msg
    res = msg.result
    if msg.era != MODERN or type(res) is not dict:
        return
    req = obs.request
    if req is not None and ("resultType" in res or req.method == "server/discover"):
        x = obs.exchange
        where = msg.session if x is None else (msg.session, x.path)  # endpoint(msg, x), for every result
        if where not in st.modern:
            _modern_evidence(where, st)


@MESSAGES.step(kinds=["error"], directions=["s2c"])
def modern_error_shown(obs: Decoded, ctx, st: _State) -> None:
    """A recognized modern error (-32020, -32021, -32022, or on HTTP a 404 with -32601) shows its
    server to be modern; the client's next request is judged against it (a version retry, a fallback
    to initialize)."""
    msg, x = obs.msg, obs.exchange
    if obs.request is None:
        return
    code = error_code(msg)
    if code not in MODERN_CODES and not (code == METHOD_NOT_FOUND and x is not None and x.status == 404):
        return
    where = endpoint(msg, x)
    if where not in st.modern:
        _modern_evidence(where, st)
    legacy_ok = False
    if code == UNSUPPORTED_VERSION:
        data = msg.error.get("data")
        supported = data.get("supported") if type(data) is dict else None
        if type(supported) is list:
            bounded(st.retry, client_at(msg, x), (msg, [v for v in supported if type(v) is str]))
            legacy_ok = any(v in LEGACY_VERSIONS for v in supported if type(v) is str)
    bounded(st.modern_error, client_at(msg, x), (msg, legacy_ok))


@MESSAGES.check(
    "discover-not-implemented", ERROR, kinds=["error"], directions=["s2c"], section="4.5", spec=spec.VERSIONING,
    conformance="sep-2575-server-implements-discover",
    quote="Servers MUST implement server/discover.",
    summary="A server otherwise shown to be modern answers server/discover with -32601 (or HTTP 404).",
    why="Clients probe with server/discover; a modern server without it is taken for a legacy one.",
    example="server/discover → -32601; tools/list → {\"resultType\":\"complete\",…}",
)
def discover_not_implemented(obs: Decoded, ctx, st: _State) -> None:
    """`server/discover` with valid modern `_meta` answered with -32601, or on HTTP a 404, by a
    server that is shown modern (a result with resultType, a DiscoverResult, -32020/-32021/-32022, a
    404 with a -32601 body), before or after. A legacy server failing the era probe is not
    reported."""
    msg, x = obs.msg, obs.exchange
    req = obs.request
    if (req is not None and req.method == "server/discover" and req.era == MODERN and _meta_problem(req) is None
            and error_code(msg) == METHOD_NOT_FOUND):
        _pend(st, endpoint(msg, x), ctx, f"the server answered {at(req)} with {at(msg)} (-32601 Method not found)",
              [req.index, msg.index])


@MESSAGES.also("discover-not-implemented", on=ExchangeDone)
def discover_404(obs: ExchangeDone, ctx, st: _State) -> None:
    """A modern server/discover POST answered with HTTP 404 and no JSON-RPC response."""
    x = obs.exchange
    req = _lost_request(x)
    if req is not None and req.method == "server/discover" and x.status == 404:
        _pend(st, endpoint(req, x), ctx, f"the server answered {at(req)} with HTTP 404 and no JSON-RPC response",
              [req.index])


@MESSAGES.check(
    "initialize-error-without-versions", WARNING, kinds=["error"], directions=["s2c"], section="4.5",
    spec=spec.VERSIONING_BACKCOMPAT,
    quote="A server that supports only modern versions SHOULD name the protocol versions it supports in any error it "
          "returns to an initialize request",
    summary="A modern server rejects initialize without naming the versions it supports.",
    why="Legacy clients have no fall-forward: that error message is all the user will see.",
    example='initialize → {"error":{"code":-32601,"message":"Method not found"}}',
)
def initialize_error_without_versions(obs: Decoded, ctx, st: _State) -> None:
    """An error answering `initialize` whose message and data hold no YYYY-MM-DD version, from a
    server shown to be modern (as for discover-not-implemented), before or after (heuristic)."""
    msg = obs.msg
    req = obs.request
    if req is None or req.method != "initialize":
        return
    err = msg.error if type(msg.error) is dict else {}
    text = f"{err.get('message')} {json.dumps(err.get('data'))}"
    if not DATE.search(text):
        _pend(st, endpoint(msg, obs.exchange), ctx,
              f"the server rejected {at(req)} with {at(msg)}, naming no protocol version it supports; legacy "
              "clients have no other diagnostic", [req.index, msg.index])


# --- error codes -----------------------------------------------------------------------------------------------


def _modern_code(msg: Message) -> int | None:
    """The integer code of an error on a modern exchange, for the allocation policy of basic/index.mdx
    "Error Codes" (None: no integer code, another era, or -32042, which is url-elicitation-required-error
    only, RULES.md §10.2)."""
    err = msg.error
    code = err.get("code") if type(err) is dict else None
    if type(code) is not int or (msg.era != MODERN and msg.era != MALFORMED) or code == URL_ELICITATION_REQUIRED:
        return None
    return code


@MESSAGES.check(
    "error-code-not-integer", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERRORS,
    conformance="wire-schema-valid",
    quote="Error codes MUST be integers.",
    summary="An error whose code is not an integer.",
    why="Peers switch on the code; -32602.0 or \"-32602\" matches nothing.",
    example='{"error":{"code":"-32602","message":"Invalid params"}}',
)
def error_code_not_integer(obs: Decoded, ctx, st: _State) -> None:
    """An error response whose `error.code` is not an integer as written (a string, `-32602.0`, a
    boolean), in any era."""
    msg = obs.msg
    err = msg.error
    if type(err) is dict and "code" in err and type(err["code"]) is not int:
        ctx.emit(f"{at(msg)} from the {side(msg)} has error code {json.dumps(err['code'])[:30]}; error codes MUST be "
                 "integers", messages=[msg.index])


@MESSAGES.check(
    "error-code-reserved-undefined", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="Implementations MUST NOT emit any code from this sub-range that is not defined by this specification",
    summary="An error code in -32099…-32020 other than -32020, -32021, -32022.",
    why="The sub-range is the specification's; a private code there collides with a future definition.",
    example='{"error":{"code":-32050,"message":"quota"}}',
)
def error_code_reserved_undefined(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in the MCP-reserved sub-range that this revision does not
    define (-32042 excepted: `url-elicitation-required-error`)."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32099 <= code <= -32020 and code not in MODERN_CODES:
        ctx.emit(f"{at(msg)} uses {code}, in the sub-range -32020…-32099 reserved for codes the specification defines "
                 "(only -32020, -32021, -32022 are); implementations MUST NOT emit others", messages=[msg.index])


@MESSAGES.check(
    "error-code-removed", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="Implementations of this protocol version MUST NOT emit these codes:",
    summary="-32002 (resource not found of 2025-11-25) on a modern exchange.",
    why="Modern clients look for -32602; -32002 is kept reserved only so old servers are understood.",
    example='resources/read → {"error":{"code":-32002,"message":"Resource not found"}}',
)
def error_code_removed(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, error code -32002; resource not found is -32602 now. (-32042 is
    `url-elicitation-required-error`, RULES.md §10.2.)"""
    msg = obs.msg
    if _modern_code(msg) == RESOURCE_NOT_FOUND_2025:
        ctx.emit(f"{at(msg)} uses -32002 (resource not found of 2025-11-25); this revision MUST NOT emit it: "
                 "resource not found is -32602", messages=[msg.index])


@MESSAGES.check(
    "error-code-legacy-range", WARNING, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="new implementations SHOULD NOT use codes from this sub-range at all.",
    summary="An error code in -32019…-32000 on a modern exchange (-32001, -32003, -32004: stale draft codes).",
    why="Receivers MUST NOT assume any meaning for these codes; a stale SDK sending -32004 is not understood as "
        "UnsupportedProtocolVersion.",
    example='{"error":{"code":-32004,"message":"Unsupported protocol version"}}',
)
def error_code_legacy_range(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in the legacy sub-range other than -32002. -32001, -32003
    and -32004 are called out: they are the pre-renumbering draft values of -32020, -32021 and
    -32022."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32019 <= code <= -32000 and code != RESOURCE_NOT_FOUND_2025:
        draft = f": {DRAFT_CODES[code]} in a pre-renumbering draft" if code in DRAFT_CODES else ""
        ctx.emit(f"{at(msg)} uses {code}, in the legacy sub-range -32000…-32019{draft}; new implementations SHOULD NOT "
                 "use codes from this sub-range", messages=[msg.index])


@MESSAGES.check(
    "error-code-jsonrpc-reserved", WARNING, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="New error codes for purposes not defined by this specification SHOULD be allocated outside the JSON-RPC "
          "reserved range (-32768 to -32000)",
    summary="An error code in -32768…-32100 that is not a standard JSON-RPC code.",
    why="JSON-RPC may define these codes one day; an application code there becomes ambiguous.",
    example='{"error":{"code":-32500,"message":"backend down"}}',
)
def error_code_jsonrpc_reserved(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in -32768…-32100 other than the standard -32700 and
    -32600…-32603."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32768 <= code <= -32100 and code not in JSONRPC_CODES:
        ctx.emit(f"{at(msg)} uses {code}, inside the JSON-RPC reserved range -32768…-32000 but no standard JSON-RPC "
                 "code; new error codes SHOULD be allocated outside it", messages=[msg.index])


@MESSAGES.check(
    "unsupported-version-error-shape", ERROR, kinds=["error"], directions=["s2c"], section="4.5",
    spec=spec.VERSIONING, conformance="sep-2575-server-unsupported-version-error",
    quote="it MUST respond with an UnsupportedProtocolVersionError listing the versions it does support",
    summary="A -32022 error without data.supported (string[]) and data.requested (the request's version).",
    why="The client picks its retry version from data.supported; without it the client can only give up.",
    example='{"error":{"code":-32022,"message":"Unsupported protocol version"}}',
)
def unsupported_version_error_shape(obs: Decoded, ctx, st: _State) -> None:
    """A -32022 error from the server whose `data` lacks `supported` (an array of strings) or
    `requested` (a string), or whose `requested` differs from the version the request declared."""
    msg = obs.msg
    if error_code(msg) != UNSUPPORTED_VERSION:
        return
    data = msg.error.get("data")
    data = data if type(data) is dict else {}
    supported, requested = data.get("supported"), data.get("requested")
    problems = []
    if type(supported) is not list or not all(type(v) is str for v in supported):
        problems.append("data.supported is not an array of version strings")
    req = obs.request
    if type(requested) is not str:
        problems.append("data.requested is not a string")
    elif req is not None and req.version is not None and requested != req.version:
        problems.append(f"data.requested is {requested!r}, but the request declared {req.version!r}")
    if problems:
        ctx.emit(f"{at(msg)}: {'; '.join(problems)}", messages=[msg.index])


# --- methods, discovery, caching -------------------------------------------------------------------------------


@MESSAGES.check(
    "removed-method-modern", WARNING, kinds=["request", "notification"], directions=["c2s"],
    methods=REMOVED_METHODS, section="4.5", spec=spec.CHANGELOG,
    quote="Make MCP stateless: remove the initialize/notifications/initialized handshake.",
    summary="A modern request or notification uses a method 2026-07-28 removed (initialize, ping, logging/setLevel…).",
    why="Modern servers answer them with -32601 (404 on HTTP); the client expects a feature that is gone.",
    example='{"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",…}}}',
)
def removed_method_modern(obs: Decoded, ctx, st: _State) -> None:
    """A modern client message (a request with modern `_meta`, or a notification in a modern context)
    whose method is initialize, ping, logging/setLevel, resources/subscribe, resources/unsubscribe,
    tasks/list, tasks/result, notifications/initialized or notifications/roots/list_changed."""
    msg = obs.msg
    if msg.era == MODERN:
        ctx.emit(f"{at(msg)} is a modern message, but 2026-07-28 removed {msg.method}", messages=[msg.index])


@rule(
    "discover-result-invalid", ERROR, on=Answered, kinds=["result"], methods=["server/discover"], section="4.5",
    spec=spec.DISCOVER_RESULT, conformance="sep-2575-server-implements-discover",
    quote="Servers MUST include caching hints on results with resultType: \"complete\" returned by the following "
          "operations: server/discover",
    summary="A DiscoverResult without supportedVersions, capabilities, resultType, ttlMs ≥ 0 or cacheScope.",
    why="The client chooses its version and features from it; a partial answer makes the probe fail.",
    example='{"result":{"capabilities":{},"resultType":"complete"}}',
)
def discover_result_invalid(obs: Answered, ctx) -> None:
    """The result of a modern `server/discover` lacks `supportedVersions` (an array of strings),
    `capabilities` (an object) or `resultType`, or has no valid caching hints (`ttlMs` an integer
    ≥ 0, `cacheScope` "public" or "private"; for server/discover these are reported here, not as
    cacheable-result-missing-hints)."""
    res, req = obs.response.result, obs.request
    if req.era != MODERN or type(res) is not dict:
        return
    problems = []
    sv = res.get("supportedVersions")
    if type(sv) is not list or not all(type(v) is str for v in sv):
        problems.append("supportedVersions is not an array of version strings")
    if type(res.get("capabilities")) is not dict:
        problems.append("capabilities is not an object")
    if "resultType" not in res:
        problems.append("resultType is missing")
    problems += _hint_problems(res)
    if problems:
        ctx.emit(f"the DiscoverResult {at(obs.response)} for {at(req)}: {'; '.join(problems)}",
                 messages=[req.index, obs.response.index])


def _hint_problems(res: dict) -> list[str]:
    out = []
    ttl = res.get("ttlMs")
    if ttl is None:
        out.append("ttlMs is missing")
    elif type(ttl) is not int or ttl < 0:
        out.append(f"ttlMs is {json.dumps(ttl)[:20]}, not an integer ≥ 0")
    scope = res.get("cacheScope")
    if scope is None:
        out.append("cacheScope is missing")
    elif scope not in ("public", "private"):
        out.append(f"cacheScope is {json.dumps(scope)[:20]}, not \"public\" or \"private\"")
    return out


@rule(
    "cacheable-result-missing-hints", ERROR, on=Answered, kinds=["result"], methods=CACHEABLE, section="4.5",
    spec=spec.CACHING, conformance="sep-2549-resources-read-caching-hints",
    quote="Servers MUST include caching hints on results with resultType: \"complete\" returned by the following "
          "operations:",
    summary="A complete result of a list method or resources/read without valid ttlMs and cacheScope.",
    why="Without hints clients either re-fetch constantly or cache what they should not share.",
    example='tools/list → {"tools":[…],"resultType":"complete"}',
)
def cacheable_result_missing_hints(obs: Answered, ctx) -> None:
    """A complete result (resultType "complete" or absent) to a modern tools/list, prompts/list,
    resources/list, resources/templates/list or resources/read (the final round of a chain too)
    without `ttlMs` (an integer ≥ 0) or `cacheScope` ("public" or "private"). input_required
    results are exempt."""
    res, req = obs.response.result, obs.request
    if req.era != MODERN or type(res) is not dict or res.get("resultType", "complete") != "complete":
        return
    problems = _hint_problems(res)
    if problems:
        ctx.emit(f"{at(obs.response)} completes {at(req)}: {'; '.join(problems)}",
                 messages=[req.index, obs.response.index], chain=chain_of(ctx, obs.response))


declare(
    "retry-result-cached", ERROR, section="4.5", spec=spec.CACHING, observable=False,
    quote="Results produced by retrying a request through the multi round-trip requests mechanism … MUST NOT be cached",
    summary="A client served an MRTR retry's result from its cache.",
    doc="Not observable: a cache hit never reaches the wire.",
    why="Retry results depend on inputs that are not part of the cache key.",
)


# --- logging -----------------------------------------------------------------------------------------------------


def _log_level(req: Message):
    return LOG_LEVELS.get(meta_value(req, LOG_LEVEL_KEY))


def _tagged(msg: Message) -> bool:
    """A server notification that names a subscription: on stdio, that is being on a listen stream."""
    m = params(msg).get("_meta")
    return type(m) is dict and SUBSCRIPTION_ID_KEY in m


_LOG = dict(kinds=["notification"], directions=["s2c"], methods=["notifications/message"], section="4.5")


def new_situation(st: _State, ctx, situation) -> bool:
    """False while a log rule's situation (the stream's request, or the requests in flight on a pipe)
    is the one it last reported in this session: a server that logs all the time is reported once
    per situation."""
    rid = ctx.rule.id
    if st.situations.get(rid) == situation:
        return False
    st.situations[rid] = situation
    return True


@MESSAGES.check(
    "log-without-loglevel", ERROR, **_LOG, spec=spec.LOGGING_PER_REQUEST,
    conformance="sep-2575-server-no-log-without-loglevel",
    quote="The server MUST NOT emit notifications/message for a request that does not include this field.",
    summary="A log notification for a request that did not set io.modelcontextprotocol/logLevel.",
    why="Logging is opt-in per request now; unsolicited log traffic is noise the client never asked for.",
    example="tools/call without logLevel; its stream carries notifications/message",
)
def log_without_loglevel(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange: on HTTP, a `notifications/message` on the stream of a request whose
    `_meta` has no valid logLevel; on stdio (heuristic: a log notification names no request), one
    sent while no request in flight has set a logLevel. Listen streams are `log-off-request-stream`.
    Reported once per request stream, or on stdio once per set of requests in flight."""
    msg, x = obs.msg, obs.exchange
    if msg.era != MODERN:
        return
    req = on_stream_of(x)
    if req is not None:
        if req.method != LISTEN and _log_level(req) is None and new_situation(st, ctx, req.index):
            ctx.emit(f"{at(msg)} on the stream of {at(req)}, which set no io.modelcontextprotocol/logLevel; the server "
                     "MUST NOT emit notifications/message for such a request (reported once per stream)",
                     messages=[req.index, msg.index])
    elif x is None and not _tagged(msg):
        flight = list(in_flight(ctx, msg))
        if not any(_log_level(r) is not None for r in flight) and new_situation(st, ctx, [r.index for r in flight]):
            ctx.emit(f"{at(msg)} while no request in flight set io.modelcontextprotocol/logLevel; the server MUST NOT "
                     "emit notifications/message for a request that does not include it (reported once while the "
                     "same requests are in flight)", messages=[msg.index])


@MESSAGES.check(
    "log-below-level", WARNING, **_LOG, spec=spec.LOGGING_PER_REQUEST,
    quote="When the field is present, the server MAY send notifications/message notifications at or above the "
          "requested level",
    summary="A log notification below the level its request asked for.",
    why="The client asked not to see these; they cost bandwidth and clutter its log view.",
    example='logLevel "error"; notifications/message {"level":"debug"}',
)
def log_below_level(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, a `notifications/message` whose `level` ranks below the logLevel of the
    request whose stream carries it (HTTP), or below the logLevel of every request in flight that set
    one (stdio). Reported once per request stream, or on stdio once per set of requests in flight."""
    msg, x = obs.msg, obs.exchange
    level = LOG_LEVELS.get(params(msg).get("level"))
    if msg.era != MODERN or level is None:
        return
    req = on_stream_of(x)
    if req is not None:
        candidates = [req]
    elif x is None:
        candidates = list(in_flight(ctx, msg))
    else:
        return
    asked = [r for r in candidates if _log_level(r) is not None]
    if asked and all(level < _log_level(r) for r in asked) and new_situation(st, ctx, [r.index for r in asked]):
        lowest = min(asked, key=_log_level)
        ctx.emit(f"{at(msg)} has level {params(msg)['level']!r}, below the logLevel "
                 f"{meta_value(lowest, LOG_LEVEL_KEY)!r} of {at(lowest)}; the server may only send at or above it",
                 messages=[lowest.index, msg.index])


@MESSAGES.check(
    "log-off-request-stream", ERROR, **_LOG, spec=spec.LOGGING_PER_REQUEST,
    quote="the server MUST NOT deliver it on a subscriptions/listen stream or on any stream other than the one "
          "carrying the response to the request that set the log level.",
    summary="A log notification on a subscriptions/listen stream.",
    why="notifications/message is request-scoped: on a listen stream no request owns it.",
    example="subscriptions/listen stream carrying notifications/message",
)
def log_off_request_stream(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, a `notifications/message` on the SSE stream of a `subscriptions/listen`
    request (HTTP), or tagged with an `io.modelcontextprotocol/subscriptionId` (stdio)."""
    msg, x = obs.msg, obs.exchange
    if msg.era != MODERN:
        return
    req = on_stream_of(x)
    if req is not None and req.method == LISTEN:
        ctx.emit(f"{at(msg)} on the subscriptions/listen stream of {at(req)}; log notifications belong on the stream "
                 "of the request that set the log level", messages=[req.index, msg.index])
    elif x is None and _tagged(msg):
        ctx.emit(f"{at(msg)} is tagged with a subscriptionId: it is delivered on a subscription; log notifications "
                 "belong to the request that set the log level", messages=[msg.index])


# --- progress ----------------------------------------------------------------------------------------------------

_PROGRESS = dict(kinds=["notification"], directions=["s2c"], methods=["notifications/progress"], section="4.5")


def progress_owner(msg: Message, x, ctx) -> tuple:
    """(token key, the active request that set this progress notification's token, or None)."""
    tk = id_key(params(msg).get("progressToken"))
    if tk is None:
        return None, None
    req = on_stream_of(x)
    if req is not None and id_key(meta_value(req, "progressToken")) == tk and not any(r.idk == req.idk for r in x.responses):
        return tk, req
    for r in in_flight(ctx, msg):
        if id_key(meta_value(r, "progressToken")) == tk:
            return tk, r
    return tk, None


@MESSAGES.check(
    "progress-token-not-active", ERROR, **_PROGRESS, spec=spec.PROGRESS,
    quote="Progress notifications MUST only reference tokens that: Were provided in an active request",
    summary="A progress notification whose token belongs to no request in flight (e.g. after the response).",
    why="The client has forgotten the token once the request completed; late progress is dropped or misrouted.",
    example="tools/call progressToken 1 → result; then notifications/progress {progressToken: 1}",
)
def progress_token_not_active(obs: Decoded, ctx, st: _State) -> None:
    """A server `notifications/progress` whose `progressToken` (type and value) is carried by no
    client request in flight in its scope: never given, or its request was already answered (the
    notification came after the response). Any era."""
    tk, owner = progress_owner(obs.msg, obs.exchange, ctx)
    if tk is not None and owner is None:
        msg = obs.msg
        ctx.emit(f"{at(msg)} reports progress for token {format_id(params(msg)['progressToken'])}, which no request in "
                 "flight carries (never given, or its request was already answered); progress MUST only reference "
                 "tokens of active requests", messages=[msg.index])


@MESSAGES.check(
    "progress-not-increasing", ERROR, **_PROGRESS, spec=spec.PROGRESS_FLOW,
    quote="The progress value MUST increase with each notification, even if the total is unknown.",
    summary="A progress value that does not exceed the previous one for the same token.",
    why="Clients draw progress bars from it; a value going back or standing still reads as a hang.",
    example="progress 50, then progress 50 (or 40) for the same token",
)
def progress_not_increasing(obs: Decoded, ctx, st: _State) -> None:
    """For one active request's progressToken, a `progress` value less than or equal to the value
    of the previous progress notification. Any era."""
    msg = obs.msg
    value = params(msg).get("progress")
    if type(value) not in (int, float):
        return
    tk, owner = progress_owner(msg, obs.exchange, ctx)
    if owner is None:
        return
    seen = st.progress
    last = seen.get(owner.index)
    if last is not None and value <= last[0]:
        ctx.emit(f"{at(msg)} reports progress {value} for token {format_id(params(msg)['progressToken'])} of "
                 f"{at(owner)} after {last[0]} (message #{last[1]}); progress MUST increase with each notification",
                 messages=[last[1], msg.index])
    bounded(seen, owner.index, (value, msg.index))


# --- cancellation ------------------------------------------------------------------------------------------------


@MESSAGES.check(
    "server-cancelled-non-listen", ERROR, kinds=["notification"], directions=["s2c"],
    methods=["notifications/cancelled"], section="4.5", spec=spec.CANCEL,
    quote="Server-sent cancellation notifications MUST reference a subscriptions/listen request, to terminate that "
          "subscription stream",
    summary="A server notifications/cancelled whose requestId is not an open subscriptions/listen.",
    why="There are no server requests to cancel any more; the client does not know what the server means.",
    example='server → {"method":"notifications/cancelled","params":{"requestId":2}} where 2 is a tools/call',
)
def server_cancelled_non_listen(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, a `notifications/cancelled` from the server whose `requestId` is not
    the id of a `subscriptions/listen` request in flight."""
    msg = obs.msg
    if msg.era != MODERN:
        return
    rid = params(msg).get("requestId")
    req = in_flight(ctx, msg).get(id_key(rid))
    if req is None or req.method != LISTEN:
        what = f"{at(req)}, not a subscriptions/listen" if req is not None else "no request in flight"
        ctx.emit(f"{at(msg)} from the server names request {format_id(rid)}: {what}; servers MUST NOT send "
                 "notifications/cancelled except to end a subscription", messages=[msg.index])


@rule(
    "cancelled-unknown-request", WARNING, on=Cancelled, section="4.5", spec=spec.CANCEL,
    quote="Cancellation notifications MUST only reference requests that: Were previously issued by the client; Are "
          "believed to still be in-progress",
    summary="A client notifications/cancelled for an id that is not in flight.",
    why="The server cannot stop what it does not have; a cancel for the wrong id leaves the real request running.",
    example='{"method":"notifications/cancelled","params":{"requestId":42}} with no request 42 in flight',
)
def cancelled_unknown_request(obs: Cancelled, ctx) -> None:
    """A client `notifications/cancelled` whose `requestId` matches no client request in flight:
    never issued, or already answered. A cancel that crosses its response on the wire is a race the
    specification allows, so this is a warning. On modern HTTP cancellation is closing the stream
    (`http-client-notification` reports the notification)."""
    n = obs.notification
    if obs.request is not None or n.kind != NOTIFICATION or (n.transport == "http" and n.era == MODERN):
        return
    rid = params(n).get("requestId")
    ctx.emit(f"{at(n)} names request {format_id(rid)}, which is not in flight (never sent, or already answered; a "
             "cancel crossing its response is an allowed race)", messages=[n.index])


@MESSAGES.step(on=Cancelled)
def remember_cancel(obs: Cancelled, ctx, st: _State) -> None:
    """A stdio request the client cancelled: the server must send nothing more for it."""
    n, req = obs.notification, obs.request
    if req is not None and n.kind == NOTIFICATION and n.transport == "stdio":
        bounded(st.cancelled, req.index, (req, n))


def _after_cancel(msg: Message, cancel: Message, ctx) -> None:
    ctx.emit(f"{at(msg)} came after {at(cancel)} cancelled the request; the server MUST NOT send further messages for "
             "a cancelled request (unless the two crossed on the wire)", messages=[cancel.index, msg.index],
             chain=chain_of(ctx, msg))


@MESSAGES.check(
    "message-after-cancel", WARNING, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.STDIO_CANCEL,
    quote="Servers SHOULD stop work on a cancelled request as soon as practical and MUST NOT send any further "
          "messages for it.",
    summary="After the client cancelled a request on stdio, the server still sent its response or progress.",
    why="The client has stopped waiting; late messages are dropped, or mistaken for those of a new request.",
    example="tools/call id 3; notifications/cancelled {requestId: 3}; then the result id 3",
)
def message_after_cancel(obs: Decoded, ctx, st: _State) -> None:
    """On stdio, a response to a request, or a progress notification with its token, sent after the
    client's notifications/cancelled for it. A passive tee cannot know when the server read the
    cancel, so this is a warning (heuristic)."""
    if not st.cancelled:
        return
    msg = obs.msg
    req = obs.request
    c = st.cancelled.pop(req.index, None) if req is not None else None
    if c is not None:
        _after_cancel(msg, c[1], ctx)


@MESSAGES.also("message-after-cancel", kinds=["notification"], methods=["notifications/progress"])
def progress_after_cancel(obs: Decoded, ctx, st: _State) -> None:
    """A progress notification for the token of a cancelled request."""
    if not st.cancelled:
        return
    msg = obs.msg
    tk = id_key(params(msg).get("progressToken"))
    for req, cancel in st.cancelled.values():
        if tk is not None and id_key(meta_value(req, "progressToken")) == tk:
            _after_cancel(msg, cancel, ctx)
            return


# --- subscriptions -----------------------------------------------------------------------------------------------


class _OnListen:
    """Where a modern server notification stands with the subscriptions: the listen it belongs to
    (None: none, or none known), and, when its subscriptionId tag is wrong or missing, what to say."""

    __slots__ = ("listen", "untagged")

    def __init__(self, listen: Message | None, untagged: tuple | None) -> None:
        self.listen = listen
        self.untagged = untagged  # (the listen or None, the tag, whether it was tagged at all)


_NOT_ON_LISTEN = _OnListen(None, None)


def _on_listen(obs: Decoded, ctx, st: _State) -> _OnListen:
    """The subscription of a server notification (HTTP: the listen request's SSE stream; stdio: the
    listen its `_meta` names), computed once for the subscription checks of the message."""
    msg = obs.msg
    if st.listen[0] is msg:
        return st.listen[1]
    found = _NOT_ON_LISTEN
    if msg.era == MODERN:
        x = obs.exchange
        m = params(msg).get("_meta")
        tagged = type(m) is dict and SUBSCRIPTION_ID_KEY in m
        sid = m.get(SUBSCRIPTION_ID_KEY) if tagged else None
        req = on_stream_of(x)
        if req is not None:
            if req.method == LISTEN:  # another request's own stream: sse-notification-unrelated (§4.6)
                found = _OnListen(req, (req, sid, tagged) if id_key(sid) != req.idk else None)
        elif x is None:
            if not tagged:
                if msg.method in LISTEN_TYPES:
                    found = _OnListen(None, (None, sid, tagged))
            else:
                listen = in_flight(ctx, msg).get(id_key(sid))
                if listen is None or listen.method != LISTEN:
                    found = _OnListen(None, (None, sid, tagged))
                else:
                    found = _OnListen(listen, None)
    st.listen = (msg, found)
    return found


_SUBSCRIPTIONS = dict(kinds=["notification"], directions=["s2c"], section="4.5")


@MESSAGES.check(
    "subscription-ack-missing", ERROR, **_SUBSCRIPTIONS, spec=spec.SUBSCRIPTIONS_ACK,
    conformance="sep-2575-server-sends-subscription-ack",
    quote="The server MUST send notifications/subscriptions/acknowledged as the first message carrying the "
          "subscription's ID",
    summary="A subscription's first message is not notifications/subscriptions/acknowledged.",
    why="The acknowledgment says which notification types the server will honour; without it the client cannot "
        "know what it subscribed to.",
    example="subscriptions/listen id 1 → notifications/tools/list_changed before any acknowledgment",
)
def subscription_ack_missing(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, a server notification on a `subscriptions/listen` stream (HTTP: the
    listen request's SSE stream; stdio: a notification whose `_meta` names the listen's id) before
    that subscription's `notifications/subscriptions/acknowledged`; reported once per subscription."""
    listen = _on_listen(obs, ctx, st).listen
    if listen is None:
        return
    acked = st.acked
    if obs.msg.method == ACKNOWLEDGED:
        bounded(acked, listen.index, listen)
    elif listen.index not in acked:
        bounded(acked, listen.index, listen)
        ctx.emit(f"{at(obs.msg)} is the first message of the subscription {at(listen)}, before its "
                 "notifications/subscriptions/acknowledged; the acknowledgment MUST come first",
                 messages=[listen.index, obs.msg.index])


@MESSAGES.check(
    "subscription-id-missing", ERROR, **_SUBSCRIPTIONS, spec=spec.BASE_META,
    conformance="sep-2575-server-tags-subscription-id",
    quote="On notifications delivered via a subscriptions/listen stream, the server MUST include "
          "io.modelcontextprotocol/subscriptionId in _meta",
    summary="A notification on a listen stream without the subscriptionId, or with another id than the listen's.",
    why="On stdio all subscriptions share one pipe: the tag is the only way to demultiplex them.",
    example="subscriptions/listen id 1 → notifications/tools/list_changed with no _meta",
)
def subscription_id_missing(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange: a notification on a listen stream whose
    `_meta["io.modelcontextprotocol/subscriptionId"]` is missing or is not the listen request's id;
    on stdio, a change notification (list_changed, resources/updated, acknowledged) without it, or
    one naming no open listen; and the graceful-closure result of a listen without it."""
    untagged = _on_listen(obs, ctx, st).untagged
    if untagged is None:
        return
    msg = obs.msg
    listen, sid, tagged = untagged
    if listen is not None:
        what = f"the id of {at(listen)}" if not tagged else f"{format_id(sid)}, not the listen id {format_id(listen.id)}"
        text = f"{at(msg)} on the subscriptions/listen stream of {at(listen)} carries subscriptionId {what}" if tagged \
            else f"{at(msg)} on the subscriptions/listen stream of {at(listen)} does not carry {what} in " \
                 "_meta[\"io.modelcontextprotocol/subscriptionId\"]"
        ctx.emit(text, messages=[listen.index, msg.index])
    elif tagged:
        ctx.emit(f"{at(msg)} carries subscriptionId {format_id(sid)}, which names no open subscriptions/listen",
                 messages=[msg.index])
    else:
        ctx.emit(f"{at(msg)} belongs to a subscription, but carries no io.modelcontextprotocol/subscriptionId to say "
                 "which", messages=[msg.index])


def _requested(listen: Message, msg: Message) -> bool:
    """Whether the listen's notifications filter opted into this notification."""
    method = msg.method
    if method == ACKNOWLEDGED or method == "notifications/message":  # the latter: log-off-request-stream
        return True
    f = params(listen).get("notifications")
    f = f if type(f) is dict else {}
    field = LISTEN_FILTER.get(method)
    if field is not None:
        return f.get(field) is True
    p = params(msg)
    if method == RESOURCE_UPDATED:
        uri, subs = p.get("uri"), f.get("resourceSubscriptions")
        return type(uri) is str and type(subs) is list and any(
            type(s) is str and (uri == s or uri.startswith(s.rstrip("/") + "/")) for s in subs)
    if method == "notifications/progress":
        own = id_key(meta_value(listen, "progressToken"))
        return own is not None and id_key(p.get("progressToken")) == own
    return method == "notifications/cancelled" and id_key(p.get("requestId")) == listen.idk


@MESSAGES.check(
    "subscription-unrequested-type", ERROR, **_SUBSCRIPTIONS, spec=spec.SUBSCRIPTIONS_OPENING,
    conformance="sep-2575-server-honors-notification-filter",
    quote="The server MUST NOT send notification types the client has not explicitly requested.",
    summary="A notification on a listen stream that its notifications filter did not opt into.",
    why="The filter is the client's contract for what it will handle; other types are dropped or mishandled.",
    example='listen {"toolsListChanged":true} → notifications/prompts/list_changed',
)
def subscription_unrequested_type(obs: Decoded, ctx, st: _State) -> None:
    """On a modern listen stream, a notification whose type the listen's `notifications` filter did
    not ask for: list_changed without its flag set to true, resources/updated for a URI outside
    resourceSubscriptions (a sub-resource counts as inside, heuristic), or any other type
    (notifications/elicitation/complete included). Acknowledgments and log notifications
    (`log-off-request-stream`) are not reported here."""
    listen = _on_listen(obs, ctx, st).listen
    st.listen = (None, None)  # the last of the subscription checks: the state keeps no message
    if listen is not None and not _requested(listen, obs.msg):
        ctx.emit(f"{at(obs.msg)} on the subscription {at(listen)}, whose notifications filter did not ask for it; the "
                 "server MUST NOT send notification types the client has not explicitly requested",
                 messages=[listen.index, obs.msg.index])


# The order of the checks of one message, which is the order of its findings in the report: the
# envelope, then what the kind of message calls for (a request's id and _meta, the client's request
# against what the server said before; a response's pairing and _meta, the evidence it gives, the
# findings that waited for it), then the error codes, methods, logging, progress, cancellation and
# subscriptions.
MESSAGES.order(
    jsonrpc_envelope_invalid, unterminated_last_message, count_unreadable,
    # requests
    notification_with_id, request_id_null, request_id_type, count_unreadable_id,
    request_meta_missing, client_info_missing, meta_key_format_invalid, progress_token_duplicate_active,
    version_retry_not_from_supported, fallback_after_modern_error, request_reissued_same_id,
    # responses
    response_members, response_id_mismatch, error_response_missing_id, result_to_notification,
    server_accepted_request_missing_meta, server_info_missing, result_meta_keys, modern_result_shown,
    protocol_version_unsupported_served, listen_closed_untagged, log_level_invalid,
    modern_error_shown, discover_not_implemented, initialize_error_without_versions, message_after_cancel,
    # notifications
    notification_meta_keys, progress_after_cancel,
    # the rest, in the catalog's order
    error_code_not_integer, error_code_reserved_undefined, error_code_removed, error_code_legacy_range,
    error_code_jsonrpc_reserved, unsupported_version_error_shape, removed_method_modern,
    log_without_loglevel, log_below_level, log_off_request_stream, progress_token_not_active, progress_not_increasing,
    server_cancelled_non_listen, subscription_id_missing, subscription_ack_missing, subscription_unrequested_type,
    # other observations
    remember_broken_stream, discover_404, remember_cancel,
)
