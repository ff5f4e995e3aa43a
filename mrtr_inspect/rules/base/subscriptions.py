"""RULES.md §4.5, subscriptions: a subscriptions/listen stream's acknowledgment, the subscriptionId
tag of its notifications, and the notification types its filter asked for (the subscription of a
notification is worked out by the pass's `_update`, messages.py)."""

from __future__ import annotations

from ...core.messages import Message, format_id, id_key
from ...core.observations import Decoded
from .. import spec
from ..common import at, bounded, meta_value, params
from ..registry import ERROR
from .messages import ACKNOWLEDGED, LISTEN_FILTER, MESSAGES, RESOURCE_UPDATED, _State


# --- subscriptions -----------------------------------------------------------------------------------------------


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
    listen = st.listen.listen
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
    untagged = st.listen.untagged
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
    listen = st.listen.listen
    if listen is not None and not _requested(listen, obs.msg):
        ctx.emit(f"{at(obs.msg)} on the subscription {at(listen)}, whose notifications filter did not ask for it; the "
                 "server MUST NOT send notification types the client has not explicitly requested",
                 messages=[listen.index, obs.msg.index])
