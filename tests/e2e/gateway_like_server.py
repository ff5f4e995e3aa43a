"""A gateway that handles `input_required` the way the first seed says mcpx does (test-only code;
shared/seeds/000_80286e4496e5d5fe.txt, "mcpx as the server: a modern host, a legacy upstream").

    python -m tests.e2e.gateway_like_server      says `listening on http://127.0.0.1:PORT/mcp`

The upstream behind it is simulated in-process: each tool call starts a "daemon task" that asks one
question, the way a legacy upstream sends elicitation/create, and finishes once the answer is
delivered. On the wire, as in the seed:

- server/discover mints an Mcp-Session-Id (2026-07-28 has no sessions);
- the question goes out verbatim as the upstream asked it, elicitationId of a URL-mode request included;
- requestState is base64(payload).HMAC-SHA256 under a key made per process, with payload
  {"c": call id, "b": binding, "e": expiry}; the binding is the Mcp-Session-Id of the first call, or
  "" for a client without one;
- a retry whose binding is "" (a conformant client: no session) is not delivered: the question goes
  "back to the broker", a round is counted, the same question is asked again, and after ASK_ROUNDS
  rounds the call is abandoned with -32603 "tools/call was still asking for input after 8 rounds";
- a retry without the session header the state is bound to is refused: "this requestState belongs to
  another session";
- the state binds the call, not the request: a state presented on another tools/call is accepted, and
  that call gets the first call's result;
- the finished result is one text block, whatever the upstream returned (the tools declare an
  outputSchema, so the structured result they promise is lost).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import os
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .servers import serve

VERSION = "2026-07-28"
ASK_ROUNDS = 8  # proto.askRounds
STATE_TTL = 30 * 60  # proto.stateTTL
SERVER_META = {"io.modelcontextprotocol/serverInfo": {"name": "gateway-like", "version": "0.0.1"}}

ISSUE_SCHEMA = {"type": "object", "properties": {"number": {"type": "integer"}, "url": {"type": "string"}},
                "required": ["number", "url"]}
TOOLS = [
    {"name": "github.create_issue", "description": "Create an issue (the upstream asks to confirm).",
     "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
     "outputSchema": ISSUE_SCHEMA},
    {"name": "github.connect", "description": "Connect the GitHub account (the upstream sends a sign-in URL).",
     "inputSchema": {"type": "object", "properties": {}}},
]


def upstream_question(tool: str, arguments: dict) -> dict:
    """The params of the elicitation/create the (legacy) upstream sends for this call."""
    if tool == "github.connect":
        return {"mode": "url", "message": "Sign in to GitHub to continue.",
                "url": "https://github.com/login/device?code=WDJB-MJHT", "elicitationId": str(uuid.uuid4())}
    return {"message": f"Create the issue {arguments.get('title')!r}?", "requestedSchema": {
        "type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}


def upstream_result(tool: str, arguments: dict, answer: dict) -> dict:
    """What the upstream returns once it has its answer (a structured result for create_issue)."""
    if tool == "github.connect":
        return {"content": [{"type": "text", "text": "GitHub account connected."}]}
    if answer.get("action") != "accept" or not (answer.get("content") or {}).get("confirm"):
        return {"content": [{"type": "text", "text": "Issue not created."}], "isError": True}
    issue = {"number": 42, "url": "https://github.com/acme/app/issues/42"}
    return {"content": [{"type": "text", "text": json.dumps(issue)}], "structuredContent": issue}


class Task:
    """The upstream call, held open while its question waits for an answer."""

    def __init__(self, tool: str, arguments: dict, key: str) -> None:
        self.tool, self.arguments, self.key = tool, arguments, key
        self.question = upstream_question(tool, arguments)
        self.rounds = 1


class Gateway:
    def __init__(self) -> None:
        self.key = os.urandom(32)  # per process, never persisted
        self.sessions: set[str] = set()
        self.tasks: dict[int, Task] = {}
        self.calls = itertools.count(1)

    # -- requestState: base64(payload).HMAC ---------------------------------------------------------
    def seal(self, payload: dict) -> str:
        data = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()
        return data + "." + hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()

    def unseal(self, state: str) -> dict | None:
        data, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac, hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()):
            return None
        payload = json.loads(base64.urlsafe_b64decode(data))
        return payload if payload["e"] > time.time() else None

    # -- HTTP --------------------------------------------------------------------------------------
    async def endpoint(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        msg = json.loads(await request.body())
        method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
        session = request.headers.get("mcp-session-id")
        if method == "server/discover":
            sid = uuid.uuid4().hex
            self.sessions.add(sid)
            discovered = {"supportedVersions": [VERSION], "capabilities": {"tools": {}}, "ttlMs": 0,
                          "cacheScope": "private"}
            return reply(rid, discovered, headers={"Mcp-Session-Id": sid})
        if method == "tools/list":
            return reply(rid, {"tools": TOOLS, "ttlMs": 0, "cacheScope": "private"})
        if method == "tools/call":
            return self.call(rid, params, session if session in self.sessions else "")
        return error(rid, -32601, f"method not found: {method}", status=404)

    def call(self, rid, params: dict, session: str) -> Response:
        state = params.get("requestState")
        if state is None:
            c = next(self.calls)
            task = self.tasks[c] = Task(params.get("name"), params.get("arguments") or {}, f"elc-{c}")
            return self.ask(rid, task, {"c": c, "b": session, "e": time.time() + STATE_TTL})
        payload = self.unseal(state) if isinstance(state, str) else None
        if payload is None or payload["c"] not in self.tasks:
            return error(rid, -32602, "invalid or expired requestState")
        if payload["b"] and payload["b"] != session:
            return error(rid, -32602, "this requestState belongs to another session")
        task = self.tasks[payload["c"]]  # the call it names, whatever this request is
        answer = (params.get("inputResponses") or {}).get(task.key)
        if not payload["b"] or answer is None:  # no binding: the question goes back to the broker
            if task.rounds >= ASK_ROUNDS:
                del self.tasks[payload["c"]]
                return error(rid, -32603, f"tools/call was still asking for input after {ASK_ROUNDS} rounds")
            task.rounds += 1
            return self.ask(rid, task, payload)
        del self.tasks[payload["c"]]
        done = upstream_result(task.tool, task.arguments, answer)
        text = " ".join(b.get("text", "") for b in done["content"])  # collapsed to one text block
        return reply(rid, {"content": [{"type": "text", "text": text}], "isError": bool(done.get("isError"))})

    def ask(self, rid, task: Task, payload: dict) -> Response:
        irr = {"resultType": "input_required",
               "inputRequests": {task.key: {"method": "elicitation/create", "params": task.question}},
               "requestState": self.seal(payload)}
        return reply(rid, irr)


def reply(rid, result: dict, headers: dict | None = None) -> Response:
    result = {"resultType": "complete", **result, "_meta": SERVER_META}
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result}, headers=headers)


def error(rid, code: int, message: str, status: int = 200) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}, status_code=status)


def app() -> Starlette:
    return Starlette(routes=[Route("/mcp", Gateway().endpoint, methods=["POST", "GET", "DELETE"])])


if __name__ == "__main__":
    serve(app())
