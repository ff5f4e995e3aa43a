"""RULES.md §4.6, a POST and its answer: the era of a POST, its Accept header and body, notifications
POSTed on a modern hop, and the response's status and content type; the helpers the other modules
of the section share (the first message of an exchange, the response to its request)."""

from __future__ import annotations

from ...core.era import LEGACY, MODERN, UNKNOWN
from ...core.events import header
from ...core.exchanges import HttpExchange
from ...core.framing import media_type
from ...core.messages import LEGACY_VERSIONS, NOTIFICATION, REQUEST, Message
from ...core.observations import Decoded, ExchangeDone
from .. import spec
from ..common import at, quoted
from ..registry import ERROR, INFO, rule
from .values import OWS, _header_map


JSON, SSE = "application/json", "text/event-stream"


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
    if x.event_stream or x.status is None or not 200 <= x.status < 300 or x.era is not MODERN:
        return
    ct = header(x.response_headers, "content-type")
    if x.body_messages:
        if ct == JSON or media_type(ct) == JSON:
            return
        what = f"Content-Type {quoted(ct)}" if ct is not None else "no Content-Type"
    elif x.error is not None:
        return  # cut short: the body may never have been seen
    else:
        what = f"status {x.status}" + (f", Content-Type {quoted(ct)}" if ct is not None else "") + " and no body"
    req = x.request
    ctx.emit(f"{_where(req)} was answered with {what}; a request gets application/json (one JSON object) or "
             "text/event-stream", messages=[req.index])
