"""An MCP server on stdio for the two-hop gateway's back hop (test-only code, stdlib only).

    python -m tests.e2e.hopgw.upstream [--era legacy|modern]

Newline-delimited JSON-RPC on stdin and stdout, one loop, no threads. Tools:

    create_issue {title}   asks ONE question (confirm: boolean); accepted with confirm true →
                           "created #7" + structuredContent {number: 7, url}; otherwise "cancelled",
                           isError
    connect {}             asks in URL mode (a sign-in link, elicitationId "el-1"); → "connected"
    echo {text}            no question; returns the text
    fail {}                JSON-RPC error -32000 "upstream failed"

--era legacy (the default, 2025-11-25): answers initialize; while a tools/call is open it sends the
client an elicitation/create REQUEST and finishes the call when the client's result for that request
arrives. Several calls may be open at once: each open call is kept under the id of the question it
is waiting on. notifications/cancelled for a call forgets it (its question is never answered).

--era modern (2026-07-28): no initialize needed; a tools/call that needs an answer gets
resultType "input_required" with inputRequests and a requestState (the call's name and arguments, in
base64 JSON); the retry carrying inputResponses and that requestState completes it.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import sys

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SERVER_INFO = {"name": "hopgw-upstream", "version": "0.0.1"}
KEY = "confirm"  # the modern era's inputRequests key

CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
ISSUE = {"number": 7, "url": "https://example.test/issues/7"}
TOOLS = [
    {"name": "create_issue", "description": "Create an issue (asks to confirm first).",
     "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
     "outputSchema": {"type": "object", "properties": {"number": {"type": "integer"}, "url": {"type": "string"}},
                      "required": ["number", "url"]}},
    {"name": "connect", "description": "Connect the account (sends a sign-in link).",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "echo", "description": "Returns its text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object", "properties": {}}},
]


def question(name: str, arguments: dict) -> dict | None:
    """The params of the elicitation/create a call needs answered, or None (no question)."""
    if name == "create_issue":
        return {"message": f"Create issue '{arguments.get('title')}'?", "requestedSchema": CONFIRM_SCHEMA}
    if name == "connect":
        return {"mode": "url", "message": "Sign in", "url": "https://example.test/login", "elicitationId": "el-1"}
    return None


def finish(name: str, arguments: dict, answer: dict | None) -> dict:
    """The tools/call response body ({"result": ...} or {"error": ...}) once the call has what it needs."""
    if name == "echo":
        return {"result": {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]}}
    if name == "fail":
        return {"error": {"code": -32000, "message": "upstream failed"}}
    if name == "connect":
        if (answer or {}).get("action") != "accept":
            return {"result": {"content": [{"type": "text", "text": "not connected"}], "isError": True}}
        return {"result": {"content": [{"type": "text", "text": "connected"}]}}
    if name == "create_issue":
        if (answer or {}).get("action") == "accept" and ((answer or {}).get("content") or {}).get("confirm") is True:
            return {"result": {"content": [{"type": "text", "text": "created #7"}], "structuredContent": dict(ISSUE)}}
        return {"result": {"content": [{"type": "text", "text": "cancelled"}], "isError": True}}
    return {"error": {"code": -32602, "message": f"unknown tool: {name}"}}


class Server:
    def __init__(self, era: str) -> None:
        self.era = era
        self.ids = itertools.count(1)  # the ids of the requests this server sends
        self.open: dict[object, tuple[object, str, dict]] = {}  # question id → (call id, name, arguments)

    def send(self, msg: dict) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def handle(self, msg: dict) -> None:
        if "method" not in msg:
            if "id" in msg:  # a response: the answer to one of our questions
                self.answered(msg)
            return
        if "id" not in msg:  # a notification
            if msg["method"] == "notifications/cancelled":
                call = (msg.get("params") or {}).get("requestId")
                for qid in [q for q, (c, _, _) in self.open.items() if c == call]:
                    del self.open[qid]
            return
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            version = LEGACY if self.era == "legacy" else MODERN
            self.send({"id": rid, "result": {"protocolVersion": version, "capabilities": {"tools": {}},
                                             "serverInfo": SERVER_INFO}})
        elif method == "server/discover":
            self.send({"id": rid, "result": {"supportedVersions": [MODERN], "capabilities": {"tools": {}},
                                             "serverInfo": SERVER_INFO}})
        elif method == "ping":
            self.send({"id": rid, "result": {}})
        elif method == "tools/list":
            self.send({"id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            self.call(rid, params)
        else:
            self.send({"id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}})

    def call(self, rid, params: dict) -> None:
        name, arguments = params.get("name"), params.get("arguments") or {}
        ask = question(name, arguments)
        if ask is None:
            self.send({"id": rid, **finish(name, arguments, None)})
        elif self.era == "legacy":
            qid = next(self.ids)
            self.open[qid] = (rid, name, arguments)
            self.send({"id": qid, "method": "elicitation/create", "params": ask})
        elif "requestState" in params or "inputResponses" in params:
            state = params.get("requestState")
            try:
                held = json.loads(base64.urlsafe_b64decode(state)) if isinstance(state, str) else None
            except ValueError:
                held = None
            if held != {"name": name, "arguments": arguments}:
                self.send({"id": rid, "error": {"code": -32602, "message": "requestState does not match this call"}})
                return
            answer = (params.get("inputResponses") or {}).get(KEY)
            if answer is None:  # no answer to our question: ask again
                self.send({"id": rid, "result": self.input_required(name, arguments, ask)})
            else:
                self.send({"id": rid, **finish(name, arguments, answer)})
        else:
            self.send({"id": rid, "result": self.input_required(name, arguments, ask)})

    def input_required(self, name: str, arguments: dict, ask: dict) -> dict:
        ask = {k: v for k, v in ask.items() if k != "elicitationId"}  # 2025-11-25 only
        state = base64.urlsafe_b64encode(json.dumps({"name": name, "arguments": arguments}).encode()).decode()
        return {"resultType": "input_required", "inputRequests": {KEY: {"method": "elicitation/create", "params": ask}},
                "requestState": state}

    def answered(self, msg: dict) -> None:
        held = self.open.pop(msg["id"], None)
        if held is None:
            return  # not a question we are waiting on (cancelled, or never asked)
        rid, name, arguments = held
        answer = msg.get("result") if "result" in msg else {"action": "cancel"}
        self.send({"id": rid, **finish(name, arguments, answer)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.hopgw.upstream")
    parser.add_argument("--era", choices=["legacy", "modern"], default="legacy")
    server = Server(parser.parse_args(argv).era)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            server.send({"id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if isinstance(msg, dict):
            server.handle(msg)


if __name__ == "__main__":
    main()
