"""Rewriting recorded messages for a live peer, touching only the bytes that must change.

A replayed message keeps the recorded bytes (escapes, member order, spacing) except the member
being rewritten: the JSON-RPC id, a requestState, a progressToken. When a member cannot be
replaced in place (it is absent, or not a scalar), the message is re-serialised.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..core import rawjson

_MISSING = object()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def set_member(raw: bytes, path: tuple, value: Any = _MISSING) -> bytes:
    """`raw` with the member at `path` set to `value` (removed when `value` is not given)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    span = rawjson.raw_member_span(text, path) if value is not _MISSING else None
    if span is not None:
        return (text[: span[0]] + dumps(value) + text[span[1]:]).encode("utf-8")
    try:
        obj = json.loads(text)
    except ValueError:
        return raw
    node = obj
    for k in path[:-1]:
        if type(node) is not dict:
            return raw
        node = node.setdefault(k, {}) if value is not _MISSING else node.get(k)
    if type(node) is not dict:
        return raw
    if value is _MISSING:
        if path[-1] not in node:
            return raw
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return dumps(obj).encode("utf-8")


def map_sse_data(event: bytes, fn: Callable[[bytes], bytes]) -> bytes:
    """An SSE event with its data (the message it carries) passed through `fn`; its other lines,
    and their line ends, as they were."""
    lines = event.splitlines(keepends=True)
    data_at = [i for i, ln in enumerate(lines) if ln.startswith(b"data:")]
    if not data_at:
        return event
    eol = lines[data_at[0]][len(lines[data_at[0]].rstrip(b"\r\n")):] or b"\n"
    parts = []
    for i in data_at:
        v = lines[i].rstrip(b"\r\n")[5:]
        parts.append(v[1:] if v.startswith(b" ") else v)
    new = fn(b"\n".join(parts))
    if len(data_at) == 1 and b"\n" not in new:
        lead = b"data: " if lines[data_at[0]].startswith(b"data: ") else b"data:"
        lines[data_at[0]] = lead + new + eol
        return b"".join(lines)
    first = data_at[0]
    rebuilt = [b"data: " + ln + eol for ln in new.split(b"\n")]
    keep = [ln for i, ln in enumerate(lines) if i not in data_at]
    at = sum(1 for i in range(first) if i not in data_at)
    return b"".join(keep[:at] + rebuilt + keep[at:])


def sse_event(message: bytes) -> bytes:
    """A message as one event of an event stream (for a reply that was not recorded as one)."""
    return b"event: message\ndata: " + message + b"\n\n"
