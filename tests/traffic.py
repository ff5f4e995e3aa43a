"""Build MCP traffic as frames for tests, run it through the core, look at what came out.

    t = Traffic()                                   # a stdio session
    rid = t.call("tools/call", {"name": "deploy", "arguments": {"env": "prod"}})
    t.irr(rid, {"confirm": ELICIT}, state="s1")
    rid2 = t.call("tools/call", {"name": "deploy", "arguments": {"env": "prod"},
                                 "inputResponses": {"confirm": ACCEPT}, "requestState": "s1"})
    t.result(rid2, {"content": []})
    r = t.run()
    assert r.rules() == {"chain-linked"}
    assert r.chains[0]["outcome"] == "complete"

HTTP: `h = Traffic("http")`; `h.post(message, headers=…)` then `h.respond_json(x, message)` or
`h.respond_sse(x, [messages])`; `h.call(...)` / `h.result(...)` work there too (one exchange per request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.config import Config
from mrtr_inspect.core.events import (
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SessionEnd,
    SessionStart,
    SseEvent,
    StdioClose,
    StdioLine,
)
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded

VERSION = "2026-07-28"
CAPS_ALL = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
CLIENT_INFO = {"name": "test-client", "version": "1.0"}
SERVER_META = {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}

ELICIT = {"method": "elicitation/create", "params": {"mode": "form", "message": "Proceed?", "requestedSchema": {
    "type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}}
ACCEPT = {"action": "accept", "content": {"confirm": True}}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {
    "type": "text", "text": "Summarize"}}], "maxTokens": 50}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}
ROOTS = {"method": "roots/list"}
ROOTS_ANSWER = {"roots": [{"uri": "file:///work"}]}

HTTP_HEADERS = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"))


def meta(caps: dict | None = None, version: str = VERSION, client_info: dict | None = CLIENT_INFO, **extra) -> dict:
    m = {"io.modelcontextprotocol/protocolVersion": version,
         "io.modelcontextprotocol/clientCapabilities": CAPS_ALL if caps is None else caps}
    if client_info is not None:
        m["io.modelcontextprotocol/clientInfo"] = client_info
    m.update(extra)
    return m


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class Result:
    messages: list[Message]
    chains: list[dict]
    findings: list[Finding]
    events: list[ChainEvent] = field(default_factory=list)
    answers: dict[int, Message] = field(default_factory=dict)  # response index -> the request it answers (Decoded)

    def request_of(self, msg: Message) -> Message | None:
        """The request the pipeline paired a response with."""
        return self.answers.get(msg.index)

    def rules(self, severity: str | None = None) -> set[str]:
        return {f.rule for f in self.findings if severity is None or f.severity == severity}

    def of(self, rule: str) -> list[Finding]:
        return [f for f in self.findings if f.rule == rule]

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def chain(self, cid: str = "c1") -> dict:
        return next(c for c in self.chains if c["id"] == cid)


class Traffic:
    def __init__(self, transport: str = "stdio", session: str = "s1", start: float = 1000.0,
                 with_session_start: bool = True, client: str = "127.0.0.1", info: dict | None = None) -> None:
        self.transport = transport
        self.session = session
        self.t = start
        self.frames: list = []
        self.client_addr = client
        self._next_id = 1
        self._x = 0
        self._x_of_id: dict[Any, int] = {}
        self.default_headers: tuple = HTTP_HEADERS
        if with_session_start:
            self.frames.append(SessionStart(self.t, session, transport, dict(info or {})))  # type: ignore[arg-type]

    # -- time ---------------------------------------------------------------------------------
    def tick(self, seconds: float = 0.001) -> float:
        self.t += seconds
        return self.t

    # -- raw ----------------------------------------------------------------------------------
    def line(self, direction: str, data: bytes | dict | list, eol: bool = True) -> None:
        raw = data if isinstance(data, bytes) else dumps(data)
        self.frames.append(StdioLine(self.tick(), self.session, direction, raw, eol))  # type: ignore[arg-type]

    def client(self, data: bytes | dict | list) -> None:
        """One client→server message (stdio: a line; HTTP: a POST of its own, answered 202)."""
        if self.transport == "stdio":
            self.line("c2s", data)
        else:
            x = self.post(data)
            self.respond(x, 202, b"")

    def server(self, data: bytes | dict | list) -> None:
        """One server→client message on stdio."""
        assert self.transport == "stdio", "on HTTP use respond_json / respond_sse"
        self.line("s2c", data)

    # -- JSON-RPC -----------------------------------------------------------------------------
    def request(self, method: str, params: dict | None = None, id: Any = None, with_meta: bool = True,
                caps: dict | None = None, **meta_extra) -> dict:
        if id is None:
            id = self._next_id
            self._next_id += 1
        p = dict(params or {})
        if with_meta:
            p["_meta"] = {**meta(caps, **meta_extra), **p.get("_meta", {})}
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if p:
            msg["params"] = p
        return msg

    def call(self, method: str, params: dict | None = None, id: Any = None, headers: tuple | None = None,
             **kw) -> Any:
        """Send a client request; returns its id. On HTTP it is POSTed on a new exchange."""
        msg = self.request(method, params, id, **kw)
        if self.transport == "stdio":
            self.line("c2s", msg)
        else:
            self._x_of_id[json.dumps(msg["id"])] = self.post(msg, headers=headers)
        return msg["id"]

    def tool(self, name: str, arguments: dict | None = None, id: Any = None, **params) -> Any:
        p = {"name": name, "arguments": arguments or {}}
        p.update(params)
        return self.call("tools/call", p, id=id)

    def result(self, id: Any, result: dict | None = None, with_meta: bool = True, result_type: str | None = "complete",
               **kw) -> None:
        r = dict(result or {})
        if result_type is not None and "resultType" not in r:
            r["resultType"] = result_type
        if with_meta and "_meta" not in r:
            r["_meta"] = SERVER_META
        self.answer({"jsonrpc": "2.0", "id": id, "result": r}, **kw)

    def irr(self, id: Any, input_requests: dict | None = None, state: str | None = None, **extra) -> None:
        r: dict[str, Any] = {"resultType": "input_required"}
        if input_requests is not None:
            r["inputRequests"] = input_requests
        if state is not None:
            r["requestState"] = state
        r.update(extra)
        self.result(id, r)

    def error(self, id: Any, code: int, message: str = "error", data: Any = None, **kw) -> None:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.answer({"jsonrpc": "2.0", "id": id, "error": err}, **kw)

    def notify(self, method: str, params: dict | None = None, direction: str = "c2s") -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if direction == "c2s":
            self.client(msg)
        else:
            self.server(msg)

    def answer(self, msg: dict | bytes, status: int = 200, sse: bool = False, headers: tuple | None = None) -> None:
        """Send a server response: stdio a line; HTTP on the exchange of the request with that id."""
        if self.transport == "stdio":
            self.line("s2c", msg)
            return
        mid = json.loads(msg)["id"] if isinstance(msg, bytes) else msg.get("id")
        x = self._x_of_id.pop(json.dumps(mid), None)
        if x is None:
            x = self._x
        if sse:
            self.respond_sse(x, [msg], status=status, headers=headers)
        else:
            self.respond_json(x, msg, status=status, headers=headers)

    # -- HTTP ---------------------------------------------------------------------------------
    def post(self, body: bytes | dict | list, headers: tuple | None = None, method: str = "POST", path: str = "/mcp",
             derive_headers: bool = True) -> int:
        """A request on a new exchange; returns the exchange number. Modern headers (MCP-Protocol-Version,
        Mcp-Method, Mcp-Name) are derived from the body unless given or derive_headers is False."""
        self._x += 1
        raw = body if isinstance(body, bytes) else dumps(body)
        h = list(self.default_headers if headers is None else headers)
        if derive_headers and headers is None and isinstance(body, dict):
            params = body.get("params") or {}
            m = (params.get("_meta") or {}) if isinstance(params, dict) else {}
            v = m.get("io.modelcontextprotocol/protocolVersion")
            if v:
                h.append(("mcp-protocol-version", v))
            if "method" in body:
                h.append(("mcp-method", body["method"]))
                if body["method"] in ("tools/call", "prompts/get") and isinstance(params, dict) and "name" in params:
                    h.append(("mcp-name", str(params["name"])))
                if body["method"] == "resources/read" and isinstance(params, dict) and "uri" in params:
                    h.append(("mcp-name", str(params["uri"])))
        self.frames.append(HttpRequest(self.tick(), self.session, self._x, method, path, tuple(h), raw,
                                       self.client_addr))
        return self._x

    def respond(self, x: int, status: int, body: bytes, headers: tuple = (("content-type", "application/json"),),
                end_error: str | None = None) -> None:
        self.frames.append(HttpResponse(self.tick(), self.session, x, status, tuple(headers)))
        if body:
            self.frames.append(HttpBody(self.tick(), self.session, x, body))
        self.frames.append(HttpEnd(self.tick(), self.session, x, end_error))

    def respond_json(self, x: int, msg: dict | bytes, status: int = 200, headers: tuple | None = None) -> None:
        raw = msg if isinstance(msg, bytes) else dumps(msg)
        self.respond(x, status, raw, headers or (("content-type", "application/json"),))

    def respond_sse(self, x: int, msgs: list, status: int = 200, headers: tuple | None = None,
                    end_error: str | None = None, raw_events: list[bytes] | None = None) -> None:
        h = headers or (("content-type", "text/event-stream"), ("x-accel-buffering", "no"))
        self.frames.append(HttpResponse(self.tick(), self.session, x, status, tuple(h)))
        for m in msgs:
            raw = m if isinstance(m, bytes) else dumps(m)
            self.frames.append(SseEvent(self.tick(), self.session, x, b"event: message\r\ndata: " + raw + b"\r\n\r\n"))
        for ev in raw_events or ():
            self.frames.append(SseEvent(self.tick(), self.session, x, ev))
        self.frames.append(HttpEnd(self.tick(), self.session, x, end_error))

    # -- run ----------------------------------------------------------------------------------
    def close(self, direction: str | None = None) -> None:
        if self.transport == "stdio":
            for d in ([direction] if direction else ["c2s", "s2c"]):
                self.frames.append(StdioClose(self.tick(), self.session, d))  # type: ignore[arg-type]

    def end(self) -> None:
        self.frames.append(SessionEnd(self.tick(), self.session, {}))

    def next_session(self, session: str, info: dict | None = None, end: bool = True) -> None:
        """End this session (unless `end` is False: its recorder was killed) and go on in a new one,
        as a second run recorded to the same file."""
        if end:
            self.end()
        self.session = session
        self.frames.append(SessionStart(self.tick(), session, self.transport, dict(info or {})))  # type: ignore[arg-type]

    def run(self, config: Config | None = None, close: bool = True) -> Result:
        answers: dict[int, Message] = {}

        def observe(obs) -> None:
            if type(obs) is Decoded and obs.request is not None:
                answers[obs.msg.index] = obs.request

        insp = Analysis(config, observe)
        outs: list = []
        for f in self.frames:
            outs.extend(insp.feed(f))
        if close:
            outs.extend(insp.close())
        msgs = [o for o in outs if type(o) is Message]
        events = [o for o in outs if type(o) is ChainEvent]
        chains = sorted((e.chain.summary() for e in events if e.kind == "closed"), key=lambda c: int(c["id"][1:]))
        findings = [o for o in outs if type(o) is Finding]
        return Result(msgs, chains, findings, events, answers)
