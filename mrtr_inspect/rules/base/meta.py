"""RULES.md §4.5, `_meta`, versions and discovery: the required `_meta` of a request and a result
(and how a server answers a request without it), `_meta` key names, progress tokens, the version a
client retries with, how responses pair with their requests, and what a modern server must say of
itself (server/discover, initialize errors), some of it judged once the server is shown modern."""

from __future__ import annotations

import json
import re

from ...core.era import LEGACY, MALFORMED, MODERN, UNKNOWN
from ...core.events import C2S, header
from ...core.messages import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    ERROR as ERROR_KIND,
    LOG_LEVEL_KEY,
    NOTIFICATION,
    PROTOCOL_VERSION_KEY,
    RESULT,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    Message,
    format_id,
    id_key,
)
from ...core.observations import Decoded, ExchangeDone
from .. import spec
from ..common import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_VERSION,
    at,
    chain_of,
    endpoint,
    error_code,
    meta_value,
    once,
    params,
    side,
)
from ..registry import ERROR, INFO, WARNING
from .messages import LISTEN, LOG_LEVELS, MESSAGES, _good_keys, _State, _lost_request, _unusual, meta_key_problem


DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# --- _meta key names ---------------------------------------------------------------------------------------

# --- client requests: _meta --------------------------------------------------------------------------------------


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
    if era is MODERN:
        return _caps_problem(req.params["_meta"])
    if era is not MALFORMED and era != UNKNOWN:
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
    gate=_unusual,
)
def request_meta_missing(obs: Decoded, ctx, st: _State) -> None:
    """A client request that declares a 2026-07-28 shape but lacks a required per-request field: on
    a modern request, `io.modelcontextprotocol/clientCapabilities` missing or not an object; on a
    request from a peer or endpoint that has already spoken modern (era malformed), or one that
    carries clientCapabilities or clientInfo, a missing `_meta` or `protocolVersion`. Every round of
    a chain counts."""
    msg = obs.msg
    era = msg.era
    if era is MODERN:
        meta = msg.params["_meta"]
        if type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict:
            ctx.emit(f"{at(msg)}: {_caps_problem(meta)}; a request missing a required field is malformed",
                     messages=[msg.index], chain=chain_of(obs))
    elif era is MALFORMED or era == UNKNOWN:
        why = _meta_problem(msg)
        if why is not None:
            ctx.emit(f"{at(msg)}: {why}; a request missing a required field is malformed", messages=[msg.index],
                     chain=chain_of(obs))


@MESSAGES.check(
    "server-accepted-request-missing-meta", ERROR, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.BASE_META, conformance="sep-2575-request-meta-invalid-missing-meta",
    quote="On HTTP, the response status MUST be 400 Bad Request.",
    summary="The server answered a request that lacks required _meta with something other than -32602 (HTTP 400).",
    why="A server that guesses the missing version or capabilities serves the request under assumptions the "
        "client never made; clients probing a server's era rely on the rejection.",
    example="tools/list without _meta → {\"result\":{\"tools\":[…]}}", gate=_unusual,
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
    if era is LEGACY or (era is MODERN and type(req.params["_meta"].get(CLIENT_CAPABILITIES_KEY)) is dict):
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
             "rejected with -32602 (on HTTP, status 400)", messages=[req.index, msg.index], chain=chain_of(obs))


@MESSAGES.check(
    "client-info-missing", WARNING, kinds=["request"], directions=["c2s"], section="4.5", spec=spec.BASE_META,
    conformance="sep-2575-client-sends-client-info",
    quote="Clients SHOULD include io.modelcontextprotocol/clientInfo on every request unless specifically "
          "configured not to do so.",
    summary="A modern request without io.modelcontextprotocol/clientInfo.",
    why="Without it servers, gateways and logs cannot tell which client sent what.",
    example='tools/list with _meta {protocolVersion, clientCapabilities} only', gate=_unusual,
)
def client_info_missing(obs: Decoded, ctx, st: _State) -> None:
    """A modern client request whose `_meta` has no `io.modelcontextprotocol/clientInfo`; reported
    once per client (the stdio pipe, the HTTP peer)."""
    msg = obs.msg
    if msg.era is MODERN and CLIENT_INFO_KEY not in msg.params["_meta"] and once(st, ("client-info", msg.peer)):
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
    example='"_meta": {"-bad.example/key": 1} or {"com.example/_private": 1}', gate=_unusual,
)
def meta_key_format_invalid(obs: Decoded, ctx, st: _State) -> None:
    """A key of a request's or notification's `params._meta` or of a result's `_meta` whose prefix
    is not dot-separated labels (letter first, letter or digit last, hyphens inside) or whose name
    does not begin and end with a letter or digit. `traceparent`, `tracestate` and `baggage` are
    exempt. Any era (2025-11-25 has the same format); reported once per key and session."""
    msg = obs.msg
    if msg.era is MODERN:
        meta = msg.params["_meta"]
        if not _good_keys.issuperset(meta):
            _bad_meta_keys(msg, meta, st, ctx)


@MESSAGES.also("meta-key-format-invalid", kinds=["notification"])
def notification_meta_keys(obs: Decoded, ctx, st: _State) -> None:
    """The `params._meta` keys of a notification, from either side."""
    m = params(obs.msg).get("_meta")
    if type(m) is dict and not _good_keys.issuperset(m):
        _bad_meta_keys(obs.msg, m, st, ctx)


@MESSAGES.check(
    "progress-token-duplicate-active", ERROR, kinds=["request"], directions=["c2s"], section="4.5",
    spec=spec.PROGRESS_FLOW,
    quote="Progress tokens can be chosen by the client using any means, but MUST be unique across all active requests.",
    summary="A request reuses the progressToken of another request that is still in flight.",
    why="Progress notifications name only the token: the client can no longer tell whose progress it sees.",
    example="tools/call id 2 and tools/call id 3 both with progressToken \"p\", neither answered",
    gate=_unusual,
)
def progress_token_duplicate_active(obs: Decoded, ctx, st: _State) -> None:
    """A client request whose `_meta.progressToken` (type and value) equals that of another of the
    sender's requests still waiting for its response. Reuse on a retry after the previous round was
    answered is fine. Any era."""
    msg = obs.msg
    if msg.era is not MODERN:
        return
    token = msg.params["_meta"].get("progressToken")
    if token is None:
        return
    flight = obs.flight
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
    gate=_unusual,
)
def version_retry_not_from_supported(obs: Decoded, ctx, st: _State) -> None:
    """The first request of a client after a -32022 UnsupportedProtocolVersionError declares a
    protocol version that is not in that error's `data.supported`."""
    msg, pending = obs.msg, st.retry_for
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
    msg, seen = obs.msg, st.fallback_for
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
    example="tools/call id 2 → {\"id\":3,\"result\":{…}}", gate=_unusual,
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
    if msg.direction == C2S:
        if msg.era is LEGACY:
            ctx.emit(f"{at(msg)} from the client answers no server request in flight", messages=[msg.index])
        return
    if x is not None:
        posted = x.request_messages[0] if x.request_messages else None
        if x.request is None and posted is not None and posted.kind == NOTIFICATION and msg.kind == RESULT:
            return  # notification-with-id
        if x.event_stream and x.era is MODERN:
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
    gate=_unusual,
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
    if st.excused:  # it answers a client message whose id could not be read
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
    example='{"result":{"tools":[],"resultType":"complete"}}', gate=_unusual,
)
def server_info_missing(obs: Decoded, ctx, st: _State) -> None:
    """A result to a modern request without `_meta["io.modelcontextprotocol/serverInfo"]`; reported
    once per server (stdio process, HTTP endpoint)."""
    msg = obs.msg
    if msg.era is not MODERN or type(msg.result) is not dict or obs.request is None:
        return
    m = msg.result.get("_meta")
    if (type(m) is not dict or SERVER_INFO_KEY not in m) and once(st, ("server-info", endpoint(msg, obs.exchange))):
        ctx.emit(f"{at(msg)} has no io.modelcontextprotocol/serverInfo in its _meta; servers SHOULD identify "
                 "themselves in every result (reported once per server)", messages=[msg.index])


@MESSAGES.also("meta-key-format-invalid", kinds=["result"], directions=["s2c"], gate=_unusual)
def result_meta_keys(obs: Decoded, ctx, st: _State) -> None:
    """The `_meta` keys of a server's result, in a modern exchange."""
    msg = obs.msg
    if msg.era is not MODERN or type(msg.result) is not dict or obs.request is None:
        return
    m = msg.result.get("_meta")
    if type(m) is dict and not _good_keys.issuperset(m):
        _bad_meta_keys(obs.msg, m, st, ctx)


@MESSAGES.check(
    "log-level-invalid", WARNING, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.LOGGING_ERRORS,
    quote="If the io.modelcontextprotocol/logLevel value carried in a request's _meta is not a recognized log level, "
          "the server SHOULD reject that request with a standard JSON-RPC error",
    summary="A request's logLevel is not a LoggingLevel and the server did not reject it with -32602.",
    why="The client believes it asked for a level; the server silently picked another.",
    example='tools/call with logLevel "verbose" → a result', gate=_unusual,
)
def log_level_invalid(obs: Decoded, ctx, st: _State) -> None:
    """A modern request whose `_meta["io.modelcontextprotocol/logLevel"]` is not one of debug, info,
    notice, warning, error, critical, alert, emergency, answered with anything but a -32602 error."""
    msg = obs.msg
    req = obs.request
    if req is None or msg.era is not MODERN:
        return
    level = req.params["_meta"].get(LOG_LEVEL_KEY)
    code = error_code(msg) if msg.kind == ERROR_KIND else None
    if level is not None and not (type(level) is str and level in LOG_LEVELS) and code != INVALID_PARAMS:
        ctx.emit(f"{at(req)} asks for logLevel {json.dumps(level)[:30]}, which is no log level, and the server "
                 f"answered {at(msg)} instead of rejecting it with -32602", messages=[req.index, msg.index],
                 chain=chain_of(obs))


@MESSAGES.check(
    "protocol-version-unsupported-served", INFO, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.VERSIONING, conformance="sep-2575-server-unsupported-version-error",
    quote="it MUST respond with an UnsupportedProtocolVersionError listing the versions it does support",
    summary="A request was served under a version the server's own DiscoverResult does not list (or refused one it lists).",
    why="Either the discovery answer or the request handling is wrong; clients choose versions from discovery.",
    example='discover → supportedVersions ["2026-07-28"]; tools/list under "2027-01-01" → a result',
    gate=_unusual,
)
def protocol_version_unsupported_served(obs: Decoded, ctx, st: _State) -> None:
    """After a DiscoverResult was seen in the session: a result to a modern request whose version is
    not in its `supportedVersions`, or a -32022 for a version that is. Reported once per version."""
    msg = obs.msg
    req = obs.request
    if req is None or msg.era is not MODERN or not st.discover:
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


@MESSAGES.also("subscription-id-missing", kinds=["result"], directions=["s2c"], gate=_unusual)
def listen_closed_untagged(obs: Decoded, ctx, st: _State) -> None:
    """The graceful-closure result of a modern subscriptions/listen without its subscriptionId."""
    msg = obs.msg
    req = obs.request
    if req is None or req.method != LISTEN or msg.era is not MODERN or type(msg.result) is not dict:
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


def report_released(obs: Decoded, ctx, st: _State) -> None:
    """The findings that waited for evidence that their server is modern, which this answer gives:
    each keeps its own rule id (the context it was found with)."""
    for found, text, messages in st.released:
        found.emit(text + " (a server shown to be modern by other answers)", messages=messages)


MESSAGES.also("discover-not-implemented", kinds=["result"], directions=["s2c"], gate=_unusual)(report_released)
MESSAGES.also("discover-not-implemented", kinds=["error"], directions=["s2c"], gate=_unusual)(report_released)


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
    if (req is not None and req.method == "server/discover" and req.era is MODERN and _meta_problem(req) is None
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
