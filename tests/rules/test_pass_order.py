"""No check of a pass depends on its position: every change to a pass's state is made by its
`update`, before any of its checks runs, so running the checks in reverse order finds the same
findings (the report lists them in another order, nothing else). Each scenario below makes checks of
one pass meet state that another step or check of the same observation touches."""

from __future__ import annotations

import pytest

from mrtr_inspect.rules import registry
from tests.rules.test_base import ack, server_note, SID
from tests.rules.test_http import ok, post, with_tools
from tests.rules.test_legacy import legacy_http, session_headers
from tests.traffic import Traffic


def _header_failures_then_a_result() -> Traffic:
    t = with_tools({"name": "deploy", "inputSchema": {"type": "object", "properties": {
        "env": {"type": "string", "x-mcp-header": "Env"}}}})
    x, i = post(t, "tools/call", {"name": "deploy", "arguments": {"env": "prod"}},
                drop=("mcp-protocol-version", "mcp-method"), mcp_name="other")
    ok(t, x, i, {"content": []})  # accepted although three headers failed: the reaction names them
    return t


def _discover_404_of_a_modern_server() -> Traffic:
    h = Traffic("http")
    y = h.post(h.request("server/discover", id=2))
    h.respond_json(y, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "not found"}}, status=404)
    x = h.post(h.request("tools/list", id=3))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 3, "error": {"code": -32022, "message": "v",
                                                            "data": {"supported": ["2026-07-28"], "requested": "x"}}},
                   status=400)
    h.post(h.request("tools/list", id=4, with_meta=True))
    return h


def _stdio_session() -> Traffic:
    t = Traffic()
    t.line("c2s", b'{"jsonrpc":"2.0","id":')  # unreadable: the id-less error below answers it
    t.answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    t.answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    a = t.call("server/discover")
    t.error(a, -32601, "Method not found")  # waits for evidence that the server is modern
    b = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}}, id=7)
    t.notify("notifications/cancelled", {"requestId": b})
    t.result(b, {"content": []})  # after the cancel, and evidence that the server is modern
    c = t.call("tools/list")
    t.error(c, -32022, "v", {"supported": ["2026-01-01"], "requested": "2026-07-28"})
    t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, with_meta=False)
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1)
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 1}})  # before the acknowledgement
    server_note(t, "notifications/subscriptions/acknowledged", ack(1, toolsListChanged=True))
    server_note(t, "notifications/prompts/list_changed")  # untagged, and not asked for
    return t


def _legacy_session() -> Traffic:
    h = legacy_http()
    h.post(h.request("tools/list", with_meta=False), headers=session_headers(sid=None))
    h.post(h.request("tools/list", with_meta=False), headers=session_headers(version=None))
    return h


SCENARIOS = [_header_failures_then_a_result, _discover_404_of_a_modern_server, _stdio_session, _legacy_session]


def _findings(traffic: Traffic) -> list[tuple]:
    return [(f.rule, f.severity, f.message, tuple(f.messages), f.chain) for f in traffic.run().findings]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__.strip("_"))
def test_the_checks_of_a_pass_find_the_same_in_any_order(scenario, monkeypatch):
    forward = _findings(scenario())
    assert len({f[0] for f in forward}) >= 2  # the scenario reaches several rules
    made = registry._PassRun.__init__

    def reversed_checks(self, engine, p) -> None:
        made(self, engine, p)
        self.checks.reverse()

    monkeypatch.setattr(registry._PassRun, "__init__", reversed_checks)
    backward = _findings(scenario())
    assert sorted(backward) == sorted(forward)
