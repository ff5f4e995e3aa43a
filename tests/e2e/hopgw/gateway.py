"""A gateway with two real hops (test-only code): a 2026-07-28 HTTP front, ONE upstream over stdio.

    python -m tests.e2e.hopgw.gateway [--bug NAME] [--wrap] [--era legacy|modern] [-- CMD ARGS...]

It says `listening on http://127.0.0.1:PORT/mcp` on stdout (tests/e2e/servers.py `serve`), then, before
it serves, starts CMD (default: `python -m tests.e2e.hopgw.upstream`) with its stdin and stdout as the
upstream connection; the test may put the real tee there (`-- mrtr-inspect stdio --hop back --record R
-- python -m tests.e2e.hopgw.upstream`). With --era legacy (the default) it initializes the upstream
as a 2025-11-25 client; with --era modern it sends server/discover and speaks 2026-07-28 to it.

The front:

- server/discover, tools/list: the upstream's tools, or with --wrap ONE tool `gw_call {tool,
  arguments}` that calls the upstream tool `tool` with `arguments` (as mcpx's `mcpx_call` does);
- tools/call (no requestState): a tools/call upstream with a fresh id. A result or an error from the
  upstream is the front's answer. A question (legacy: the upstream's elicitation/create request)
  becomes a front `input_required` result, inputRequests {"q1": {"method": "elicitation/create",
  "params": the question's params without the 2025-11-25-only elicitationId}}, and a requestState;
- the retry (inputResponses + requestState): the answer inputResponses["q1"] goes to the upstream as
  the result of its pending elicitation/create (same id), and the upstream's next message for that
  call is the front's answer again (another question: another round). A retry without the answer is
  asked the same question again (a new round). With --era modern the upstream's own input_required
  rounds are passed through: its inputRequests go to the front under their own keys, and the retry
  goes upstream with a new id, the front's inputResponses and the upstream's requestState.

requestState is base64url(JSON payload) "." HMAC-SHA256 under a key made per process. The payload
names the pending call and its round (a state is good for one retry), binds a digest of the tool
name and arguments of the request it was issued to, and expires after 30 minutes.

Which call a question belongs to. A 2025-11-25 elicitation/create carries nothing naming the
tools/call it is asked for, and this gateway invents no field for that. Instead it serializes: a
message that lets the upstream go on with a call (the tools/call itself, or the answer to one of its
questions) is sent only while holding one lock, and the lock is held until that call's next message
(its response, by id, or a question) has arrived. So a question that arrives is the question of the
call holding the lock. The upstream never asks on its own afterwards (its calls wait on nothing but
their answers), so the attribution is exact; it costs concurrency only while an upstream call runs.

--bug NAME (one at a time) makes it misbehave the way the first seed says mcpx does
(shared/seeds/000_80286e4496e5d5fe.txt):

    answer-not-delivered       a retry's answer is never forwarded; the same question is asked again
                               (a new round and state) and after 8 rounds the front gets -32603
                               "tools/call was still asking for input after 8 rounds"; the upstream
                               call, its question unanswered, is cancelled (notifications/cancelled)
    result-collapsed           a call that went through a question comes back as ONE text block
                               (the blocks' texts joined, structuredContent dropped; isError kept)
    legacy-field-passthrough   the question's params go to the front unchanged, elicitationId included
    question-altered           the front's question is not the upstream's: the message reworded and
                               requestedSchema's `required` list dropped
    error-masked               an upstream error (JSON-RPC error, or isError) reaches the front as a
                               success, text "ok"
    state-binding              server/discover mints an Mcp-Session-Id; requestState binds the session
                               id of the first call, and a retry without that header (or with another)
                               is refused -32602 "this requestState belongs to another session"
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import sys
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..servers import serve

VERSION = "2026-07-28"
LEGACY = "2025-11-25"
BUGS = ("answer-not-delivered", "result-collapsed", "legacy-field-passthrough", "question-altered",
        "error-masked", "state-binding")
ASK_ROUNDS = 8
STATE_TTL = 30 * 60
KEY = "q1"  # the inputRequests key of a legacy upstream's question
WAIT = 60.0  # seconds the upstream may take to send a call's next message
SERVER_INFO = {"name": "hopgw", "version": "0.0.1"}
CLIENT_INFO = {"name": "hopgw", "version": "0.0.1"}
CAPABILITIES = {"elicitation": {"form": {}, "url": {}}}
WRAPPER = {"name": "gw_call", "description": "Call one of the upstream's tools.",
           "inputSchema": {"type": "object", "properties": {"tool": {"type": "string"},
                                                            "arguments": {"type": "object"}},
                           "required": ["tool"]}}


class Failure(Exception):
    """A JSON-RPC error the front gets."""

    def __init__(self, code: int, message: str, data=None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Call:
    """One front tools/call across its rounds, and the upstream call behind it."""

    def __init__(self, cid: int, name: str, arguments: dict, up_name: str, up_arguments: dict, binding: str) -> None:
        self.id, self.name, self.arguments = cid, name, arguments
        self.up_name, self.up_arguments = up_name, up_arguments
        self.binding = binding
        self.up_id = None  # the id of the upstream tools/call now open
        self.events: asyncio.Queue = asyncio.Queue()  # ("response" | "question" | "gone", message)
        self.question_id = None  # legacy: the id of the upstream's elicitation/create awaiting its answer
        self.questions: dict = {}  # the front's inputRequests of the round now open
        self.up_state = None  # modern: the upstream's requestState
        self.rounds = 0  # input_required results sent to the front


class Upstream:
    """The upstream process: writes JSON lines to its stdin, reads its stdout on one task."""

    def __init__(self, cmd: list[str]) -> None:
        self.cmd = cmd
        self.ids = itertools.count(1)
        self.waiting: dict = {}  # request id → Call or Future
        self.asking: Call | None = None  # the call holding the gateway's turn (see the docstring)
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(*self.cmd, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, limit=1 << 24)
        self.reader = asyncio.create_task(self.read())

    async def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 20)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()

    async def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **msg}, separators=(",", ":")) + "\n").encode())
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict) -> dict:
        """A request of the gateway's own (initialize, tools/list); its response message."""
        rid = next(self.ids)
        done = self.waiting[rid] = asyncio.get_running_loop().create_future()
        await self.send({"id": rid, "method": method, "params": params})
        return await asyncio.wait_for(done, WAIT)

    async def read(self) -> None:
        while line := await self.proc.stdout.readline():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if "method" not in msg:  # a response
                waiter = self.waiting.pop(msg.get("id"), None)
                if isinstance(waiter, Call):
                    waiter.events.put_nowait(("response", msg))
                elif waiter is not None and not waiter.done():
                    waiter.set_result(msg)
            elif "id" in msg:  # a request of the upstream's
                if msg["method"] == "elicitation/create" and self.asking is not None:
                    self.asking.events.put_nowait(("question", msg))
                elif msg["method"] == "ping":
                    await self.send({"id": msg["id"], "result": {}})
                else:
                    await self.send({"id": msg["id"], "error": {
                        "code": -32601, "message": f"the gateway does not answer {msg['method']} here"}})
        for waiter in self.waiting.values():  # the upstream is gone
            if isinstance(waiter, Call):
                waiter.events.put_nowait(("gone", None))
            elif not waiter.done():
                waiter.set_exception(ConnectionError("the upstream exited"))
        self.waiting.clear()


class Gateway:
    def __init__(self, cmd: list[str], bug: str | None, wrap: bool, era: str) -> None:
        self.bug, self.wrap, self.era = bug, wrap, era
        self.upstream = Upstream(cmd)
        self.key = os.urandom(32)  # per process, never persisted
        self.calls: dict[int, Call] = {}
        self.call_ids = itertools.count(1)
        self.turn = asyncio.Lock()
        self.tools: list[dict] = []
        self.sessions: set[str] = set()

    # -- the upstream ---------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.upstream.start()
        if self.era == "legacy":
            init = await self.upstream.request("initialize", {"protocolVersion": LEGACY, "capabilities": CAPABILITIES,
                                                              "clientInfo": CLIENT_INFO})
            if "result" not in init:
                raise RuntimeError(f"the upstream refused initialize: {init}")
            await self.upstream.send({"method": "notifications/initialized"})
            listed = await self.upstream.request("tools/list", {})
        else:
            await self.upstream.request("server/discover", {"_meta": self.meta()})
            listed = await self.upstream.request("tools/list", {"_meta": self.meta()})
        self.tools = (listed.get("result") or {}).get("tools") or []

    def meta(self) -> dict:
        return {"io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO}

    async def step(self, call: Call, msg: dict) -> tuple[str, dict | None]:
        """Send `msg` (a message that lets the upstream go on with `call`) and wait for the call's next
        message, holding the turn all the while: a question that arrives meanwhile is this call's."""
        async with self.turn:
            self.upstream.asking = call
            try:
                await self.upstream.send(msg)
                return await asyncio.wait_for(call.events.get(), WAIT)
            except asyncio.TimeoutError:
                return "gone", None
            finally:
                self.upstream.asking = None

    async def send_call(self, call: Call, extra: dict | None = None) -> tuple[str, dict | None]:
        call.up_id = rid = next(self.upstream.ids)
        self.upstream.waiting[rid] = call
        params = {"name": call.up_name, "arguments": call.up_arguments, **(extra or {})}
        if self.era == "modern":
            params["_meta"] = self.meta()
        return await self.step(call, {"id": rid, "method": "tools/call", "params": params})

    async def abandon(self, call: Call) -> None:
        self.calls.pop(call.id, None)
        if call.up_id is not None and self.upstream.waiting.pop(call.up_id, None) is not None:
            await self.upstream.send({"method": "notifications/cancelled", "params": {
                "requestId": call.up_id, "reason": "the client stopped answering"}})

    # -- requestState --------------------------------------------------------------------------------
    def seal(self, payload: dict) -> str:
        data = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()
        return data + "." + hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()

    def unseal(self, state) -> dict | None:
        if not isinstance(state, str):
            return None
        data, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac, hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()):
            return None
        payload = json.loads(base64.urlsafe_b64decode(data))
        return payload if payload.get("e", 0) > time.time() else None

    @staticmethod
    def digest(name: str, arguments: dict) -> str:
        return hashlib.sha256(json.dumps([name, arguments], sort_keys=True).encode()).hexdigest()

    # -- the front ---------------------------------------------------------------------------------------
    async def endpoint(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        try:
            msg = json.loads(await request.body())
        except ValueError:
            return error(None, -32700, "parse error", status=400)
        if not isinstance(msg, dict) or "method" not in msg:
            return Response(status_code=400)
        if "id" not in msg:
            return Response(status_code=202)  # a notification
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        session = request.headers.get("mcp-session-id") or ""
        if method == "server/discover":
            found = {"supportedVersions": [VERSION], "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO,
                     "ttlMs": 0, "cacheScope": "private"}
            if self.bug == "state-binding":
                sid = uuid.uuid4().hex
                self.sessions.add(sid)
                return reply(rid, found, headers={"Mcp-Session-Id": sid})
            return reply(rid, found)
        if method == "ping":
            return reply(rid, {})
        if method == "tools/list":
            return reply(rid, {"tools": [WRAPPER] if self.wrap else self.tools, "ttlMs": 0, "cacheScope": "private"})
        if method == "tools/call":
            try:
                return reply(rid, await self.tools_call(params, session))
            except Failure as f:
                return error(rid, f.code, f.message, f.data)
        return error(rid, -32601, f"method not found: {method}")

    async def tools_call(self, params: dict, session: str) -> dict:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise Failure(-32602, "tools/call needs a name and object arguments")
        if "requestState" not in params and "inputResponses" not in params:
            return await self.first(name, arguments, session)
        payload = self.unseal(params.get("requestState"))
        if payload is None:
            raise Failure(-32602, "invalid or expired requestState")
        call = self.calls.get(payload["c"])
        if call is None:
            raise Failure(-32602, "this requestState names no open call")
        if self.bug == "state-binding" and payload.get("b") != session:
            raise Failure(-32602, "this requestState belongs to another session")
        if payload["d"] != self.digest(name, arguments):
            raise Failure(-32602, "this requestState was issued to another request")
        if payload["r"] != call.rounds:
            raise Failure(-32602, "this requestState was already used")
        answers = params.get("inputResponses") or {}
        if self.bug == "answer-not-delivered":  # the answer goes nowhere; the question is asked again
            if call.rounds >= ASK_ROUNDS:
                await self.abandon(call)
                raise Failure(-32603, f"tools/call was still asking for input after {ASK_ROUNDS} rounds")
            return self.ask(call)
        if self.era == "legacy":
            if not isinstance(answers, dict) or KEY not in answers:
                return self.ask(call)  # no answer: ask again
            qid, call.question_id = call.question_id, None
            event = await self.step(call, {"id": qid, "result": answers[KEY]})
        else:
            event = await self.send_call(call, {"inputResponses": answers, "requestState": call.up_state})
        return await self.front(call, event)

    async def first(self, name: str, arguments: dict, session: str) -> dict:
        if self.wrap:
            if name != WRAPPER["name"]:
                raise Failure(-32602, f"unknown tool: {name}")
            up_name, up_arguments = arguments.get("tool"), arguments.get("arguments") or {}
            if not isinstance(up_name, str) or not isinstance(up_arguments, dict):
                raise Failure(-32602, "gw_call needs a tool name and object arguments")
        else:
            up_name, up_arguments = name, arguments
        call = Call(next(self.call_ids), name, arguments, up_name, up_arguments, session)
        self.calls[call.id] = call
        return await self.front(call, await self.send_call(call))

    async def front(self, call: Call, event: tuple[str, dict | None]) -> dict:
        """The front's answer to the upstream's next message for `call`."""
        kind, msg = event
        if kind == "gone":
            await self.abandon(call)
            raise Failure(-32603, "the upstream did not answer")
        if kind == "question":
            call.question_id = msg["id"]
            call.questions = {KEY: {"method": "elicitation/create", "params": self.question(msg.get("params") or {})}}
            return self.ask(call)
        if "error" in msg:
            self.calls.pop(call.id, None)
            if self.bug == "error-masked":
                return {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
            e = msg["error"] or {}
            raise Failure(e.get("code", -32603), e.get("message", "upstream error"), e.get("data"))
        result = dict(msg.get("result") or {})
        if result.get("resultType") == "input_required":  # a modern upstream asks
            call.up_state = result.get("requestState")
            call.questions = {k: {**q, "params": self.question(q.get("params") or {})}
                              if q.get("method") == "elicitation/create" else q
                              for k, q in (result.get("inputRequests") or {}).items()}
            return self.ask(call)
        self.calls.pop(call.id, None)
        result.pop("_meta", None)
        result["resultType"] = "complete"
        if self.bug == "error-masked" and result.get("isError"):
            return {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
        if self.bug == "result-collapsed" and call.rounds:
            text = " ".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
            collapsed = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
            if "isError" in result:
                collapsed["isError"] = result["isError"]
            return collapsed
        return result

    def question(self, params: dict) -> dict:
        """The front's question for the upstream's elicitation/create params."""
        if self.bug == "legacy-field-passthrough":
            return dict(params)
        out = {k: v for k, v in params.items() if k != "elicitationId"}
        if self.bug == "question-altered":
            out["message"] = f"The upstream would like to know: {params.get('message', '')}".strip()
            if isinstance(out.get("requestedSchema"), dict):
                out["requestedSchema"] = {k: v for k, v in out["requestedSchema"].items() if k != "required"}
        return out

    def ask(self, call: Call) -> dict:
        """A front input_required round for the call's open question(s)."""
        call.rounds += 1
        payload = {"c": call.id, "r": call.rounds, "d": self.digest(call.name, call.arguments),
                   "e": time.time() + STATE_TTL}
        if self.bug == "state-binding":
            payload["b"] = call.binding
        return {"resultType": "input_required", "inputRequests": call.questions, "requestState": self.seal(payload)}


def reply(rid, result: dict, headers: dict | None = None) -> Response:
    """A 2026-07-28 result: it says its resultType and names the server in its _meta."""
    result = {"resultType": "complete", **result, "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result}, headers=headers)


def error(rid, code: int, message: str, data=None, status: int = 200) -> Response:
    body = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": body}, status_code=status)


def app(gateway: Gateway) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        await gateway.start()
        try:
            yield
        finally:
            await gateway.upstream.stop()

    return Starlette(routes=[Route("/mcp", gateway.endpoint, methods=["POST", "GET", "DELETE"])], lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    own, cmd = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.hopgw.gateway")
    parser.add_argument("--bug", choices=BUGS)
    parser.add_argument("--wrap", action="store_true", help="front one tool, gw_call {tool, arguments}")
    parser.add_argument("--era", choices=["legacy", "modern"], default="legacy", help="what the upstream speaks")
    args = parser.parse_args(own)
    if not cmd:
        cmd = [sys.executable, "-m", "tests.e2e.hopgw.upstream", "--era", args.era]
    serve(app(Gateway(cmd, args.bug, args.wrap, args.era)))


if __name__ == "__main__":
    main()
