"""RULES.md §4.6, error statuses and sessions: the HTTP status of a -32601 or -32022, session ids
minted on a modern hop, GET and DELETE (a legacy session's verbs), Last-Event-ID resumption, and
Origin validation (not observable)."""

from __future__ import annotations

from ...core.era import LEGACY, MALFORMED, MODERN
from ...core.events import header
from ...core.messages import LEGACY_VERSIONS
from ...core.observations import Answered, Decoded, ExchangeDone, SseSeen
from .. import spec
from ..common import METHOD_NOT_FOUND, UNSUPPORTED_VERSION, at, integer_code, quoted
from ..registry import ERROR, INFO, WARNING, declare, rule
from .posts import _first, _where, post_era
from .values import OWS, _header_map


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
    if x is None or req is None or req.era not in (MODERN, MALFORMED) or integer_code(obs.response) != METHOD_NOT_FOUND:
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
    if x is None or req is None or req.era is LEGACY or integer_code(obs.response) != UNSUPPORTED_VERSION:
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
    if x.era is not MODERN:
        return
    sid = header(x.response_headers, "mcp-session-id")
    if sid is not None:
        req = x.request
        ctx.emit(f"the response to {_where(req) if req else 'exchange ' + str(x.number)} carries Mcp-Session-Id "
                 f"{quoted(sid)}; this revision has no sessions", messages=[req.index] if req else [])


def _legacy_served(obs: ExchangeDone, ctx) -> bool:
    """A GET or DELETE that the server's own answers show to be legacy traffic it serves: its
    Mcp-Session-Id was minted by the server's answer to initialize, or it names a legacy version in
    MCP-Protocol-Version on an endpoint whose server answered initialize (a server minting no session)."""
    if obs.legacy_session:
        return True
    x = obs.exchange
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
    if versions and not _legacy_served(obs, ctx):
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
        if obs.fields.id is None or x.era is not MODERN or x in ctx.mem:
            return
        ctx.mem[x] = True
        req = x.request
        ctx.emit(f"the SSE stream answering {_where(req) if req else 'exchange ' + str(x.number)} carries event ids "
                 f"(id: {quoted(obs.fields.id)}); streams of this revision are not resumable",
                 messages=[obs.msg.index] if obs.msg is not None else [])
        return
    x = _first(obs)
    if x is None or post_era(x) != MODERN:
        return
    last = _header_map(x.headers)[0].get("last-event-id")
    if last is not None:
        ctx.emit(f"{_where(obs.msg)} carries Last-Event-ID {quoted(last)}; streams of this revision are not resumable",
                 messages=[obs.msg.index])


declare(
    "http-origin-403", ERROR, section="4.6", spec=spec.HTTP_SECURITY, observable=False,
    quote="If the Origin header is present and invalid, servers MUST respond with HTTP 403 Forbidden.",
    summary="A request with an invalid Origin must get 403 Forbidden.",
    doc="Not observable passively: which origins are valid is the server's own allowlist, which the traffic "
        "does not show. It could be checked only if mrtr-inspect were told that allowlist.",
    why="Without Origin validation a web page can reach a local MCP server through DNS rebinding.",
)
