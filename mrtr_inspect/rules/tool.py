"""Rules of the tool itself, not of the specification: what happened around the traffic.

`inspector-error` judges the pipeline's own failures (`InspectorFailed`); the rule engine reports
the same id for a check that raised (`registry.RuleEngine._internal_error`). `message-too-large`
says which messages were past the size limit, and so not analysed.
"""

from __future__ import annotations

from ..core.events import UPSTREAM_ERROR
from ..core.messages import INVALID
from ..core.observations import Decoded, ExchangeDone, InspectorFailed
from .common import side
from .registry import WARNING, rule


@rule(
    "inspector-error", WARNING, on=InspectorFailed, section="tool",
    summary="The analysis failed on some input; the traffic passed unchanged and analysis went on.",
    why="A silent analysis failure would hide findings; a loud one must not break the session.",
    example="could not analyse a StdioLine frame: RecursionError: maximum recursion depth exceeded; the traffic was "
            "not affected, analysis goes on",
)
def inspector_error(obs: InspectorFailed, ctx) -> None:
    """An exception inside a rule or the decoder. mrtr-inspect never lets its own failure touch the
    traffic: the bytes were forwarded before analysis, and the failure is reported here instead."""
    e = obs.error
    if obs.frame is None:
        ctx.emit(f"could not close the analysis: {type(e).__name__}: {e}", time=obs.time)
    else:
        ctx.emit(f"could not analyse a {obs.frame} frame: {type(e).__name__}: {e}; the traffic was not affected, "
                 "analysis goes on", time=obs.time)


def _too_large(obs: Decoded) -> bool:
    return obs.msg.problem_reason == "size"


@rule(
    "message-too-large", WARNING, on=Decoded, kinds=[INVALID], section="tool", gate=_too_large,
    summary="A message past max_message_bytes (or a body that decodes past it): forwarded and recorded unchanged, "
            "not analysed.",
    why="Holding, decoding and parsing any size a peer sends would let one message (a long line, a compressed "
        "body of a few KiB that decodes to GiBs) exhaust the tool's memory and stall the traffic; what was not "
        "analysed must be said, since its findings (and an answer it carried) are missing.",
    example="message #7 from the server (stdout) is 500 MiB (524288000 bytes), more than 64 MiB: forwarded and "
            "recorded unchanged, not analysed (max_message_bytes)",
)
def message_too_large(obs: Decoded, ctx) -> None:
    """A stdio line, an HTTP body or an SSE event longer than `max_message_bytes`, or a body whose
    content-encoding decodes to more (decoding stops at the limit: the body is kept as its wire bytes).
    The traffic passed unchanged and the recording holds every byte; the analysis kept none of the
    message, so a response it was goes unpaired and its content is not checked."""
    msg = obs.msg
    where = "stdout" if msg.direction == "s2c" else "stdin"
    if msg.transport == "http":
        where = f"HTTP exchange {msg.exchange}" if msg.exchange is not None else "HTTP"
    ctx.emit(f"message #{msg.index} from the {side(msg)} ({where}) {msg.problem}: forwarded and recorded unchanged, "
             "not analysed (max_message_bytes)", messages=[msg.index], time=msg.time)


@rule(
    "upstream-error", WARNING, on=ExchangeDone, section="tool",
    summary="The proxy could not get a response from the upstream server; the client got 502 or a cut stream.",
    why="A request that never reached the server, or a response the server broke off, explains a chain that "
        "stops or a client that fails; it is the server's availability, not a breach of the specification.",
    example="POST /mcp tools/call: upstream-error: [Errno 111] Connect call failed ('127.0.0.1', 3000)",
)
def upstream_error(obs: ExchangeDone, ctx) -> None:
    """An HTTP exchange ended with `upstream-error: …`: the upstream could not be reached, or it closed
    the connection or sent something that is not HTTP before its response was over."""
    x = obs.exchange
    if not x.error or not x.error.startswith(UPSTREAM_ERROR):
        return
    req = x.request
    what = req.label() if req is not None else f"{x.method} {x.path}"
    got = f"after status {x.status}" if x.status is not None else "the client got 502 Bad Gateway"
    creq = obs.creq
    ctx.emit(f"{what}: the upstream failed ({x.error[len(UPSTREAM_ERROR):]}); {got}",
             messages=[req.index] if req is not None else [], chain=creq.chain.id if creq is not None else None,
             time=x.end_time)
