"""Byte-level facts of a message that parsing hides (RULES.md §7.23, §9).

Duplicate member names in `inputRequests` (§4.1 `input-requests-duplicate-key`, error) and in
`inputResponses` (§4.2 `input-responses-duplicate-key`, warning) have rules of their own; a repeated
name anywhere else is reported here, at info, or at warning for the members that decide a message's
meaning repeated with different values (§10.11).
"""

from __future__ import annotations

import hashlib
import json

from ..core.messages import MRTR_METHODS
from ..core.observations import DuplicateMembers
from . import spec
from .common import at
from .registry import INFO, WARNING, rule

_OWN_RULES = {("result", "inputRequests"), ("params", "inputResponses")}

# RULES.md §10.11: the members that decide what a message means, by the object that holds them
_DECIDING = {(): {"jsonrpc", "id", "method", "result", "error"},
             ("result",): {"resultType", "requestState", "inputRequests"},
             ("params",): {"requestState", "inputResponses"}}
_MRTR_TARGET = {"name", "uri"}  # params.name / params.uri of an MRTR request
_SHOWN = 60  # characters of each value a finding shows


def _deciding(msg, path: tuple, name: str) -> bool:
    """Whether a member repeated at `path` decides the message's meaning (RULES.md §10.11). In a
    batch the path starts with the member's index."""
    root, prefix = msg.value, ()
    if path and type(path[0]) is int:
        root = root[path[0]] if type(root) is list and path[0] < len(root) else None
        prefix, path = path[:1], path[1:]
    if name in _DECIDING.get(path, ()):
        return True
    if path != ("params",) or name not in _MRTR_TARGET or type(root) is not dict:
        return False
    # the method any parser may read: a repeated method is read as either of its values
    methods = {root.get("method")}
    for d in msg.duplicates:
        if d.path == prefix and d.name == "method":
            methods.update(v for v in d.values if type(v) is str)
    return not methods.isdisjoint(MRTR_METHODS)


def _canonical(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _shown(name: str, text: str) -> str:
    """A value as a finding shows it: a state as its hash (it may hold secrets), others cut short."""
    if name == "requestState":
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


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
    with the path of the object.

    A warning (RULES.md §10.11) where two parsers would read a different message: a member that
    decides its meaning (`jsonrpc`, `id`, `method`, `result`, `error` at the top; `resultType`,
    `requestState`, `inputRequests` in `result`; `requestState`, `inputResponses` in `params`; and
    `params.name` / `params.uri` of an MRTR request) repeated with different values. The finding
    then shows the values (a `requestState` as its hash) and `details.values` holds them."""
    msg = obs.msg
    for d in msg.duplicates:
        if d.path in _OWN_RULES:
            continue
        chain = None  # duplicates are observed before the message is paired or stitched
        texts = [_canonical(v) for v in d.values]
        if len(set(texts)) > 1 and _deciding(msg, d.path, d.name):
            shown = [_shown(d.name, t) for t in texts]
            ctx.emit(f"{at(msg)} repeats the member name {d.name!r} {d.count} times in {_path(d.path)} with different "
                     f"values ({' and '.join(shown)}); parsers disagree on which value wins, so a proxy, a gateway and "
                     "a server may each act on another one", messages=[msg.index], chain=chain, severity=WARNING,
                     details={"path": list(d.path), "name": d.name, "values": shown})
            continue
        ctx.emit(f"{at(msg)} repeats the member name {d.name!r} {d.count} times in "
                 f"{_path(d.path)}; parsers disagree on which value wins",
                 messages=[msg.index], chain=chain, details={"path": list(d.path), "name": d.name})
