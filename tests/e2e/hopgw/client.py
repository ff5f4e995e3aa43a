"""A 2026-07-28 client in plain HTTP for the two-hop gateway (test-only code, stdlib only).

    c = HopClient(url)
    t = c.call("create_issue", {"title": "A"})             answers every question: accept, confirm true
    t.result / t.error / t.rounds / t.exchanges             the final result or error, each round's pair

`answer` may be a dict (every question gets it), a callable (key, inputRequest) → answer dict, or
None for a retry that carries no inputResponses. With `keep_session` the client keeps the
Mcp-Session-Id a server mints and sends it back (2026-07-28 has no sessions; a conformant client
sends none).
"""

from __future__ import annotations

import http.client
import itertools
import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

VERSION = "2026-07-28"
TIMEOUT = 60.0
CONFIRM = {"action": "accept", "content": {"confirm": True}}


def meta(name: str) -> dict:
    """The _meta of each request of the client called `name`."""
    return {"io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1.0"}}


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One POST on a fresh connection; status, headers (lower-case names), body."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
    try:
        conn.request("POST", u.path, body=body, headers={"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream", **headers})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@dataclass
class Transcript:
    """One tools/call across its rounds: each (request, response) pair in order."""

    exchanges: list[tuple[dict, dict]] = field(default_factory=list)

    @property
    def final(self) -> dict:
        return self.exchanges[-1][1]

    @property
    def result(self) -> dict | None:
        return self.final.get("result")

    @property
    def error(self) -> dict | None:
        return self.final.get("error")

    @property
    def rounds(self) -> int:
        """How many input_required results the call got."""
        return sum(1 for _, r in self.exchanges if (r.get("result") or {}).get("resultType") == "input_required")

    @property
    def questions(self) -> list[dict]:
        """Every inputRequests map the call was sent, in order."""
        return [r["result"]["inputRequests"] for _, r in self.exchanges
                if (r.get("result") or {}).get("resultType") == "input_required"]


class HopClient:
    def __init__(self, url: str, keep_session: bool = False, name: str = "hopgw-client") -> None:
        """`name`: the clientInfo name; clients used at once need their own (each numbers its
        requests from 1)."""
        self.url = url
        self.meta = meta(name)
        self.keep_session = keep_session
        self.session: str | None = None
        self.ids = itertools.count(1)

    def request(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        params = {**(params or {}), "_meta": self.meta}
        headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
        if session and self.session:
            headers["Mcp-Session-Id"] = self.session
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        status, response_headers, raw = post(self.url, json.dumps(body).encode(), headers)
        if self.keep_session and "mcp-session-id" in response_headers:
            self.session = response_headers["mcp-session-id"]
        assert status == 200, f"{method}: HTTP {status} {raw[:200]!r}"
        return json.loads(raw)

    def discover(self) -> dict:
        return self.request("server/discover")

    def tools(self) -> list[dict]:
        return self.request("tools/list")["result"]["tools"]

    def call(self, tool: str, arguments: dict, answer=CONFIRM, max_rounds: int = 20, session: bool = True,
             retry_session: bool | None = None) -> Transcript:
        """tools/call, then a retry for each input_required, until a complete result, an error, or
        `max_rounds` rounds. `retry_session` (default: `session`) says whether the retries send the
        kept Mcp-Session-Id."""
        retry_session = session if retry_session is None else retry_session
        t = Transcript()
        params = {"name": tool, "arguments": arguments}
        response = self.request("tools/call", params, session)
        t.exchanges.append((params, response))
        while (response.get("result") or {}).get("resultType") == "input_required" and t.rounds <= max_rounds:
            result = response["result"]
            params = {"name": tool, "arguments": arguments, "requestState": result["requestState"]}
            if answer is not None:
                params["inputResponses"] = {k: answer(k, q) if callable(answer) else answer
                                            for k, q in result["inputRequests"].items()}
            response = self.request("tools/call", params, retry_session)
            t.exchanges.append((params, response))
        return t
