"""RULES.md §4.6, SSE response streams: what a request's stream may carry, events after its
response, a second or foreign response, a stream that ends without one, proxy buffering, an
input_required result on a stream; then the legacy artifacts on a modern hop, on both transports
(`server-initiated-request`, `client-sent-response`)."""

from __future__ import annotations

from ...core.era import MODERN
from ...core.events import header
from ...core.findings import plural
from ...core.messages import Message, format_id, id_key
from ...core.observations import Decoded, ExchangeDone, SseSeen
from .. import spec
from ..common import at, on_stream_of
from ..registry import ERROR, INFO, WARNING, rule
from .posts import _response_to, _result_type, _where
from .values import OWS


LISTEN_ONLY = frozenset({
    "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed",
    "notifications/resources/updated", "notifications/subscriptions/acknowledged", "notifications/tasks",
})


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
    if x is None or not x.event_stream or x.era is not MODERN:
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
    if x.after_response_events != 1 or x.era is not MODERN:
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
    if x is None or not x.event_stream or x.era is not MODERN:
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
    if not x.event_stream or x.era is not MODERN or (x.error is not None and not x.error.startswith("upstream")):
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
    if x.era is not MODERN:
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
    if not x.event_stream or not x.responses or x.era is not MODERN:
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
    if msg.era is not MODERN or (msg.method or "").startswith("notifications/"):
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
    if msg.era is not MODERN:
        return
    req = obs.request
    what = f", answering {at(req)}" if req is not None else ""
    ctx.emit(f"the client sent the response {at(msg)}{what}; clients MUST NOT send JSON-RPC responses in 2026-07-28: "
             "answers go in inputResponses on a retry", messages=[i.index for i in (req, msg) if i is not None])
