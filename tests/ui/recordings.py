"""Recordings for the view's tests, written as a tee writes them (recording/format.py)."""

from __future__ import annotations

import json
from pathlib import Path

from mrtr_inspect.core.events import SessionStart, StdioLine
from mrtr_inspect.recording import format as fmt

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
HOSTILE = "[bold red]evil[/] \x1b[31mred\x1b]0;title\x07"  # textual markup, an ANSI colour, a title change


def _ask(key: str, field: str) -> dict:
    return {key: {"method": "elicitation/create",
                  "params": {"mode": "form", "message": f"Which {field}?",
                             "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}},
                                                 "required": [field]}}}}


class Writer:
    """Messages of one stdio session as recording lines."""

    def __init__(self, session: str = "s1", t: float = 1_800_000_000.0) -> None:
        self.session, self.t = session, t
        self.lines: list[bytes] = [fmt.encode(SessionStart(t, session, "stdio", {"command": ["server"]}))]

    def send(self, direction: str, msg: dict) -> None:
        self.t += 0.01
        self.lines.append(fmt.encode(StdioLine(self.t, self.session, direction,
                                               json.dumps(msg).encode("utf-8"))))

    def call(self, rid: int, tool: str, args: dict | None = None, **extra) -> None:
        self.send("c2s", {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                          "params": {"name": tool, "arguments": args or {}, "_meta": META, **extra}})

    def ask(self, rid: int, key: str, field: str, state: str) -> None:
        self.send("s2c", {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required",
                                                                   "inputRequests": _ask(key, field),
                                                                   "requestState": state}})

    def done(self, rid: int, text: str = "ok") -> None:
        self.send("s2c", {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete",
                                                                   "content": [{"type": "text", "text": text}]}})

    def answer(self, key: str, value: str) -> dict:
        return {key: {"action": "accept", "content": {key: value}}}

    def discover(self, rid: int = 0) -> None:
        self.send("c2s", {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": META}})
        self.send("s2c", {"jsonrpc": "2.0", "id": rid, "result": {
            "resultType": "complete", "supportedVersions": [V], "capabilities": {"tools": {}}, "ttlMs": 0,
            "cacheScope": "private"}})

    def wizard(self, rid: int, tool: str = "wizard") -> int:
        """A chain of two rounds: ids rid, rid+1, rid+2 (the last two retries)."""
        self.call(rid, tool, {"n": rid})
        self.ask(rid, "name", "name", f"st-{rid}-1")
        self.call(rid + 1, tool, {"n": rid}, inputResponses=self.answer("name", "x"), requestState=f"st-{rid}-1")
        self.ask(rid + 1, "color", "color", f"st-{rid}-2")
        self.call(rid + 2, tool, {"n": rid}, inputResponses=self.answer("color", "red"), requestState=f"st-{rid}-2")
        self.done(rid + 2)
        return rid + 3

    def write(self, path: Path, mode: str = "wb") -> Path:
        with open(path, mode) as f:
            f.write(b"".join(self.lines))
        self.lines = []
        return path


def sample(path: Path) -> Path:
    """c1 wizard (2 rounds, ids 1-3), c2 deploy, c3 wizard (ids 5-7), c4 the hostile tool, c5 a call
    that carries c6's state (the error: mrtr-fields-parallel-misuse), c6 connect, abandoned."""
    w = Writer()
    w.discover()
    rid = w.wizard(1)
    w.call(rid, "deploy")
    w.done(rid)
    w.wizard(5)
    w.call(8, HOSTILE)
    w.done(8, HOSTILE)
    w.call(9, "connect")
    w.ask(9, "login", "login", "st-9")
    w.call(10, "create_issue", {"title": "crash"}, inputResponses=w.answer("login", "me"), requestState="st-9")
    w.done(10)
    return w.write(path)
