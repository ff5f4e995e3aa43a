"""What a fixture means (replay/meaning.py): what changes from one recording of a session to the
next (times, session ids, JSON-RPC ids, sealed states, how the two sides interleave, the server's
exit, volatile headers) is no change; a request or an answer that changed is one."""

from __future__ import annotations

import json

from mrtr_inspect.core.events import HttpBody, HttpRequest, HttpResponse, SessionEnd, SessionStart, StdioLine
from mrtr_inspect.replay.meaning import session_meaning



def _stdio(session: str, t0: float, first_id: int, state: str, answer: bool, interleave: bool, exit_code: int):
    call = {"jsonrpc": "2.0", "id": first_id, "method": "tools/call", "params": {"name": "deploy", "arguments": {}}}
    irr = {"jsonrpc": "2.0", "id": first_id, "result": {"resultType": "input_required", "requestState": state}}
    retry = {"jsonrpc": "2.0", "id": first_id + 1, "method": "tools/call",
             "params": {"name": "deploy", "arguments": {}, "requestState": state,
                        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": answer}}}}}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    lines = [("c2s", call), ("s2c", irr), ("c2s", note), ("c2s", retry)]
    if interleave:
        lines = [("c2s", call), ("c2s", note), ("s2c", irr), ("c2s", retry)]
    frames = [SessionStart(t0, session, "stdio", {"command": ["server"], "tool": f"mrtr-inspect {t0}"})]
    frames += [StdioLine(t0 + i, session, d, json.dumps(m).encode()) for i, (d, m) in enumerate(lines)]
    return frames + [SessionEnd(t0 + 9, session, {"exit": exit_code})]


def test_what_changes_from_run_to_run_is_no_change_and_an_answer_is_one():
    a = session_meaning(_stdio("s1", 100.0, 1, "sealed-A", True, False, 0))
    assert a == session_meaning(_stdio("s2", 200.0, 7, "sealed-B", True, True, -15))
    assert a != session_meaning(_stdio("s2", 200.0, 1, "sealed-A", False, False, 0))  # the answer changed


def test_http_headers_that_vary_and_exchange_numbers_are_no_change():
    def http(session, x, date, port, result):
        body = json.dumps({"jsonrpc": "2.0", "id": x, "method": "tools/list"}).encode()
        return [SessionStart(0.0, session, "http", {"upstream": f"http://127.0.0.1:{port}/mcp"}),
                HttpRequest(1.0, session, x, "POST", "/mcp", (("Host", f"127.0.0.1:{port}"),), body),
                HttpResponse(2.0, session, x, 200, (("date", date), ("content-type", "application/json"))),
                HttpBody(3.0, session, x, json.dumps({"jsonrpc": "2.0", "id": x, "result": result}).encode())]

    a = session_meaning(http("s1", 1, "Mon", 3000, {"tools": []}))
    assert a == session_meaning(http("s2", 4, "Tue", 4000, {"tools": []}))
    assert a != session_meaning(http("s2", 4, "Tue", 4000, {"tools": [{"name": "x"}]}))
