"""The real SDK captures in shared/captures/ (their own plain formats) as frames for the core.

    frames = capture_frames("stdio_auto.jsonl")

stdio captures: one message per line with its direction → StdioLine frames.
http captures: req / resp_head / resp_chunk / resp_end events per exchange → fed through
core.framing.HttpFramer chunk by chunk, as the proxy would, so SSE bodies are split into events.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mrtr_inspect.core.events import SessionEnd, SessionStart, StdioLine
from mrtr_inspect.core.framing import HttpFramer

ROOT = Path(__file__).resolve().parent.parent


def captures_dir() -> Path:
    """fixtures/captures (copies of the shared SDK captures), or $MRTR_CAPTURES."""
    env = os.environ.get("MRTR_CAPTURES")
    return Path(env) if env else ROOT / "fixtures" / "captures"


def capture_names(prefix: str = "") -> list[str]:
    d = captures_dir()
    return sorted(p.name for p in d.glob(f"{prefix}*.jsonl")) if d.is_dir() else []


def capture_frames(name: str, session: str = "cap") -> list:
    path = captures_dir() / name
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        return []
    t0 = records[0].get("t", 0.0)
    if "raw" in records[0] and "n" not in records[0]:
        frames: list = [SessionStart(t0, session, "stdio", {"capture": name})]
        for r in records:
            frames.append(StdioLine(r["t"], session, r["dir"], r["raw"].encode("utf-8")))
        frames.append(SessionEnd(records[-1]["t"], session, {}))
        return frames
    framer = HttpFramer(session)
    frames = [SessionStart(t0, session, "http", {"capture": name})]
    last = t0
    for r in records:
        t = r.get("t", last)
        last = t
        x = r["n"]
        d = r["dir"]
        if d == "req":
            headers = tuple((k, v) for k, v in (r.get("headers") or {}).items())
            frames += framer.request_head(t, x, r["method"], r["path"], headers, "127.0.0.1")
            body = r.get("body") or ""
            frames += framer.request_data(t, x, body.encode("utf-8"))
            frames += framer.request_end(t, x)
        elif d == "resp_head":
            headers = tuple((k, v) for k, v in (r.get("headers") or {}).items())
            frames += framer.response_head(t, x, r["status"], headers)
        elif d == "resp_chunk":
            frames += framer.response_data(t, x, r["raw"].encode("utf-8"))
        elif d == "resp_end":
            frames += framer.response_end(t, x)
    frames.append(SessionEnd(last, session, {}))
    return frames
