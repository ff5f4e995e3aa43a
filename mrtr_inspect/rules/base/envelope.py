"""RULES.md §4.5, the JSON-RPC envelope and ids: what every message must be, the ids of requests
(null, a float, a notification's, one in flight, one re-issued after a broken stream)."""

from __future__ import annotations

import json

from ...core.era import LEGACY
from ...core.findings import plural
from ...core.messages import BATCH, INVALID, NOTIFICATION, RESULT, Message, target_of
from ...core.observations import Decoded, InFlightReuse, SessionOver
from ...core.events import S2C
from .. import spec
from ..common import at, foreign_answer, side
from ..registry import ERROR, WARNING, rule
from .messages import MESSAGES, _State, _unusual


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
    gate=_unusual,
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
    elif reason in ("json", "extra-data", "constant") and x is not None and msg.direction == S2C:
        if foreign_answer(x):  # a 404 page, a 405 of another URL: no MCP answer (`upstream-not-mcp` says so)
            return
        where = "an SSE event's data" if x.event_stream else "the response body"
        ctx.emit(f"{where} (message #{msg.index}) on HTTP exchange {x.number} is not one JSON value: {msg.problem}; "
                 "every message must be a JSON-RPC 2.0 message", messages=[msg.index])


@MESSAGES.also("jsonrpc-envelope-invalid", kinds=["result", "error"], gate=_unusual)
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


@MESSAGES.also("stdio-framing", gate=_unusual)
def unterminated_last_message(obs: Decoded, ctx, st: _State) -> None:
    """RULES.md §4.7 `stdio-framing` (stdio.py), for a valid message: it ends its stream without a
    newline. Checked here, where every message passes, in the order its finding had."""
    msg = obs.msg
    if msg.note is not None and obs.exchange is None and (
            msg.problem_reason is None or (msg.kind != INVALID and msg.kind != BATCH)):
        ctx.emit(f"{at(msg)} from the {side(msg)} is the last bytes of its stream and no newline ends it: a reader "
                 "that waits for the newline never delivers it; stdio messages are delimited by newlines",
                 messages=[msg.index], severity=WARNING)


# --- ids -----------------------------------------------------------------------------------------------------


@MESSAGES.check(
    "request-id-null", ERROR, kinds=["request"], section="4.5", spec=spec.BASE_REQUESTS,
    conformance="wire-schema-valid",
    quote="Unlike base JSON-RPC, the ID MUST NOT be null.",
    summary="A request whose id is null.",
    why="null is what an error carries when the request's id could not be read; a null-id request cannot be "
        "answered distinguishably.",
    example='{"jsonrpc":"2.0","id":null,"method":"tools/list"}', gate=_unusual,
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
    example='{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', gate=_unusual,
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
    example='{"jsonrpc":"2.0","id":4,"method":"notifications/progress","params":{…}}', gate=_unusual,
)
def notification_with_id(obs: Decoded, ctx, st: _State) -> None:
    """A message whose method starts with `notifications/` and that carries `id` (any era), or on
    HTTP a JSON-RPC result returned for a POSTed notification (the receiver MUST NOT send a
    response)."""
    msg = obs.msg
    if _notification_method(msg):
        ctx.emit(f"{at(msg)} from the {side(msg)} carries an id ({json.dumps(msg.id)[:40]}); notifications MUST NOT "
                 "include an ID", messages=[msg.index])


@MESSAGES.also("notification-with-id", kinds=["result"], directions=["s2c"], transports=["http"], gate=_unusual)
def result_to_notification(obs: Decoded, ctx, st: _State) -> None:
    """A result the server returned for a POSTed notification."""
    msg, x = obs.msg, obs.exchange
    if obs.request is not None or msg.id is None or x is None or x.request is not None:
        return
    posted = x.request_messages[0] if x.request_messages else None
    if posted is not None and posted.kind == NOTIFICATION:
        ctx.emit(f"the server answered {at(posted)}, a notification, with {at(msg)}; the receiver of a "
                 "notification MUST NOT send a response", messages=[posted.index, msg.index])


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
    if msg.era is LEGACY:
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
    msg, first = obs.msg, st.reissue_of
    if first is not None and first.method == msg.method and target_of(first.method, first.params) == target_of(
            msg.method, msg.params):
        ctx.emit(f"{at(msg)} re-issues {at(first)}, whose response stream ended without a response, with the same id; "
                 "a lost request MUST be re-issued with a new request ID", messages=[first.index, msg.index])
