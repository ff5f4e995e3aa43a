"""Rules of the tool itself, not of the specification: what happened around the traffic.

`inspector-error` (the analysis failed on some input) is declared in `registry.py`; it is emitted
by the engine and the inspector themselves.
"""

from __future__ import annotations

from ..core.observations import ExchangeDone
from .common import creq_of
from .registry import WARNING, rule

UPSTREAM_ERROR = "upstream-error: "


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
    creq = creq_of(req) if req is not None else None
    ctx.emit(f"{what}: the upstream failed ({x.error[len(UPSTREAM_ERROR):]}); {got}",
             messages=[req.index] if req is not None else [], chain=creq.chain.id if creq is not None else None,
             time=x.end_time)
