"""RULES.md §4.5, logging, progress and cancellation: log notifications against the logLevel their
request set (and where they travel), progress tokens and values, and what cancellation allows."""

from __future__ import annotations

from ...core.era import MODERN
from ...core.messages import LOG_LEVEL_KEY, NOTIFICATION, SUBSCRIPTION_ID_KEY, Message, format_id, id_key
from ...core.observations import Cancelled, Decoded
from .. import spec
from ..common import at, bounded, chain_of, meta_value, on_stream_of, params
from ..registry import ERROR, WARNING, rule
from .messages import LISTEN, LOG_LEVELS, MESSAGES, _State, _unusual


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
    if msg.era is not MODERN:
        return
    req = on_stream_of(x)
    if req is not None:
        if req.method != LISTEN and _log_level(req) is None and new_situation(st, ctx, req.index):
            ctx.emit(f"{at(msg)} on the stream of {at(req)}, which set no io.modelcontextprotocol/logLevel; the server "
                     "MUST NOT emit notifications/message for such a request (reported once per stream)",
                     messages=[req.index, msg.index])
    elif x is None and not _tagged(msg):
        flight = list(obs.flight)
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
    if msg.era is not MODERN or level is None:
        return
    req = on_stream_of(x)
    if req is not None:
        candidates = [req]
    elif x is None:
        candidates = list(obs.flight)
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
    if msg.era is not MODERN:
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


def progress_owner(obs: Decoded) -> tuple:
    """(token key, the active request that set this progress notification's token, or None)."""
    msg, x = obs.msg, obs.exchange
    tk = id_key(params(msg).get("progressToken"))
    if tk is None:
        return None, None
    req = on_stream_of(x)
    if req is not None and id_key(meta_value(req, "progressToken")) == tk and not any(r.idk == req.idk for r in x.responses):
        return tk, req
    for r in obs.flight:
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
    tk, owner = progress_owner(obs)
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
    tk, owner = progress_owner(obs)
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
    if msg.era is not MODERN:
        return
    rid = params(msg).get("requestId")
    req = obs.flight.get(id_key(rid))
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
    if obs.request is not None or n.kind != NOTIFICATION or (n.transport == "http" and n.era is MODERN):
        return
    rid = params(n).get("requestId")
    ctx.emit(f"{at(n)} names request {format_id(rid)}, which is not in flight (never sent, or already answered; a "
             "cancel crossing its response is an allowed race)", messages=[n.index])


def _after_cancel(obs: Decoded, cancel: Message, ctx) -> None:
    msg = obs.msg
    ctx.emit(f"{at(msg)} came after {at(cancel)} cancelled the request; the server MUST NOT send further messages for "
             "a cancelled request (unless the two crossed on the wire)", messages=[cancel.index, msg.index],
             chain=chain_of(obs))


@MESSAGES.check(
    "message-after-cancel", WARNING, kinds=["result", "error"], directions=["s2c"], section="4.5",
    spec=spec.STDIO_CANCEL,
    quote="Servers SHOULD stop work on a cancelled request as soon as practical and MUST NOT send any further "
          "messages for it.",
    summary="After the client cancelled a request on stdio, the server still sent its response or progress.",
    why="The client has stopped waiting; late messages are dropped, or mistaken for those of a new request.",
    example="tools/call id 3; notifications/cancelled {requestId: 3}; then the result id 3",
    gate=_unusual,
)
def message_after_cancel(obs: Decoded, ctx, st: _State) -> None:
    """On stdio, a response to a request, or a progress notification with its token, sent after the
    client's notifications/cancelled for it. A passive tee cannot know when the server read the
    cancel, so this is a warning (heuristic)."""
    c = st.cancel
    if c is not None:
        _after_cancel(obs, c[1], ctx)


@MESSAGES.also("message-after-cancel", kinds=["notification"], methods=["notifications/progress"])
def progress_after_cancel(obs: Decoded, ctx, st: _State) -> None:
    """A progress notification for the token of a cancelled request."""
    if not st.cancelled:
        return
    msg = obs.msg
    tk = id_key(params(msg).get("progressToken"))
    for req, cancel in st.cancelled.values():
        if tk is not None and id_key(meta_value(req, "progressToken")) == tk:
            _after_cancel(obs, cancel, ctx)
            return
