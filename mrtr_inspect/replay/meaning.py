"""What a fixture means, for the pytest plugin's re-recording: two recordings that differ only in
what changes from run to run (times, session ids, JSON-RPC ids, the `requestState` a server seals
afresh, event ids, dates, ports, lengths) mean the same, and the fixture on disk is kept as it was,
so that its diff is empty. Anything else (a request, an answer, a result, a status, a header that
stays) is a change.

    sessions(path) -> [session meaning, …]     one per recorded session (session_meaning)
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

from ..core.events import HttpBody, HttpRequest, HttpResponse, SessionEnd, SessionStart, SseEvent, StdioLine
from ..core.framing import parse_sse_event
from ..recording.reader import read_frames

# headers whose values change between two runs of the same session
VOLATILE_HEADERS = frozenset({"date", "host", "content-length", "mcp-session-id", "last-event-id", "server-timing",
                              "x-request-id"})
_PORT = re.compile(r"(//[^/:\s]+):\d+")
_STATE = "<requestState>"


def _message(data: bytes) -> Any:
    """A JSON-RPC message without what a fresh run changes (its id, every requestState)."""
    try:
        value = json.loads(data)
    except ValueError:
        return data
    if isinstance(value, dict):
        value.pop("id", None)
    return _states(value)


def _states(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (_STATE if k == "requestState" else _states(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_states(v) for v in value]
    return value


def _info(info: dict) -> Any:
    """A session header's or end's info without the tool's version and with ports left out."""
    return json.dumps({k: _PORT.sub(r"\1:PORT", v) if isinstance(v, str) else v for k, v in info.items()
                       if k != "tool"}, sort_keys=True, default=str)


def frame_meaning(frame: Any) -> tuple:
    """A frame without its time and session (and, by kind, what changes from run to run)."""
    t = type(frame)
    if t is SessionStart:
        return ("start", frame.transport, _info(frame.info))
    if t is SessionEnd:  # how the server process ended (0, or the client's SIGTERM when it is slow to go)
        return ("end",)
    if t is StdioLine:
        return ("line", frame.direction, json.dumps(_message(frame.data), sort_keys=True, default=str), frame.eol)
    if t in (HttpRequest, HttpResponse):
        headers = tuple((k.lower(), v) for k, v in frame.headers if k.lower() not in VOLATILE_HEADERS)
        rest = ((frame.method, frame.path, json.dumps(_message(frame.body), sort_keys=True, default=str),
                 frame.complete) if t is HttpRequest else (frame.status,))
        return (t.__name__, frame.exchange, headers, *rest)
    if t is HttpBody:
        return ("body", frame.exchange, json.dumps(_message(frame.data), sort_keys=True, default=str), frame.complete)
    if t is SseEvent:
        data = parse_sse_event(frame.raw).data
        return ("event", frame.exchange, json.dumps(_message(data), sort_keys=True, default=str) if data else None)
    return (t.__name__, *(getattr(frame, f.name) for f in fields(frame) if f.name not in ("time", "session")))


def session_meaning(frames: list) -> tuple:
    """A session's meaning: its header, then what each side sent in its own order (stdio: the
    client's lines, the server's lines; HTTP: each exchange's frames, the exchanges as a sorted
    whole). How the two sides interleave, and the numbers of concurrent exchanges, vary from run to
    run."""
    head: list = []
    streams: dict[Any, list] = {}
    for f in frames:
        m = frame_meaning(f)
        if type(f) in (SessionStart, SessionEnd):
            head.append(m)
        elif hasattr(f, "exchange"):
            streams.setdefault(("x", f.exchange), []).append(m[:1] + m[2:])  # without its number
        else:
            streams.setdefault(("d", getattr(f, "direction", "")), []).append(m)
    stdio = tuple(tuple(v) for k, v in sorted(streams.items(), key=lambda kv: str(kv[0])) if k[0] == "d")
    http = tuple(sorted((tuple(v) for k, v in streams.items() if k[0] == "x"), key=repr))
    return (tuple(head), stdio, http)


def sessions(path) -> list[tuple]:
    """The meaning of each session of a recording, in file order."""
    out: dict[str, list] = {}
    for frame in read_frames(path):
        out.setdefault(frame.session, []).append(frame)
    return [session_meaning(v) for v in out.values()]
