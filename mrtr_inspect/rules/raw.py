"""Byte-level facts of a message that parsing hides (RULES.md §7.23, §9).

Duplicate member names in `inputRequests` (§4.1 `input-requests-duplicate-key`, error) and in
`inputResponses` (§4.2 `input-responses-duplicate-key`, warning) have rules of their own; a repeated
name anywhere else is reported here, at info.
"""

from __future__ import annotations

from ..core.observations import DuplicateMembers
from . import spec
from .common import at, creq_of
from .registry import INFO, rule

_OWN_RULES = {("result", "inputRequests"), ("params", "inputResponses")}


def _path(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if type(p) is int else (f".{p}" if out else p)
    return out or "the top-level object"


@rule(
    "duplicate-member-name", INFO, on=DuplicateMembers, section="7.23", spec=spec.BASE_MESSAGES,
    quote="All messages between MCP clients and servers MUST follow the JSON-RPC 2.0 specification.",
    summary="A JSON object in a message repeats a member name (outside inputRequests and inputResponses).",
    why="Parsers disagree on which value wins (Python keeps the last, some parsers the first), so a gateway "
        "and a server can read different messages from the same bytes: the root of parser-differential attacks. "
        "Only raw bytes show it; the conformance suite's parsed JSON cannot.",
    example='{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/call",…}',
)
def duplicate_member_name(obs: DuplicateMembers, ctx) -> None:
    """Any object of any message whose raw bytes name the same member twice, except the
    `inputRequests` and `inputResponses` maps (their own rules). Reported once per object and name,
    with the path of the object."""
    msg = obs.msg
    for d in msg.duplicates:
        if d.path in _OWN_RULES:
            continue
        creq = creq_of(ctx, msg)  # none yet: duplicates are observed before the message is stitched
        chain = creq.chain.id if creq is not None else None
        ctx.emit(f"{at(msg)} repeats the member name {d.name!r} {d.count} times in "
                 f"{_path(d.path)}; parsers disagree on which value wins",
                 messages=[msg.index], chain=chain, details={"path": list(d.path), "name": d.name})
