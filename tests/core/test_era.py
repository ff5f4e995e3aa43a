"""The era of each request (RULES.md §2), as the pipeline sets it on messages."""

from __future__ import annotations

from mrtr_inspect.core.era import LEGACY, MALFORMED, MODERN, UNKNOWN, EraTracker
from mrtr_inspect.core.messages import decode_message
from tests.traffic import HTTP_HEADERS, Traffic, dumps

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
INIT_RESULT = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}


def eras(r) -> list[tuple]:
    """(method or kind, era, version) of each message, in order."""
    return [(m.method or m.kind, m.era, m.version) for m in r.messages]


def test_modern_by_meta_version_whatever_the_version():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": []})
    b = t.call("tools/list", version="2025-11-25")  # a legacy version in _meta is still the modern shape
    t.result(b, {"tools": []})
    assert eras(t.run()) == [
        ("tools/list", MODERN, "2026-07-28"), ("result", MODERN, None),
        ("tools/list", MODERN, "2025-11-25"), ("result", MODERN, None),
    ]


def test_stdio_initialize_makes_the_process_legacy():
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.result(a, INIT_RESULT, with_meta=False, result_type=None)
    t.notify("notifications/initialized")
    b = t.call("tools/list", with_meta=False)
    t.result(b, {"tools": []}, with_meta=False, result_type=None)
    t.server({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {}})  # a legacy server request
    assert eras(t.run()) == [
        ("initialize", LEGACY, "2025-11-25"), ("result", LEGACY, None),
        ("notifications/initialized", LEGACY, None),
        ("tools/list", LEGACY, None), ("result", LEGACY, None),
        ("elicitation/create", LEGACY, None),
    ]


def test_an_initialize_that_failed_does_not_make_the_process_legacy():
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.error(a, -32601, "method not found")
    t.call("tools/list", with_meta=False)
    msgs = t.run().messages
    assert msgs[0].era == LEGACY and msgs[1].era == LEGACY
    assert msgs[2].era == UNKNOWN


def test_no_meta_after_modern_is_malformed_and_before_is_unknown():
    t = Traffic()
    t.call("tools/list", with_meta=False)
    t.call("tools/list")
    t.call("tools/list", with_meta=False)
    assert [m.era for m in t.run().messages] == [UNKNOWN, MODERN, MALFORMED]


def test_each_stdio_session_has_its_own_era():
    t = Traffic(session="a")
    t.call("tools/list")
    other = Traffic(session="b")
    other.call("tools/list", with_meta=False)
    t.frames += other.frames
    assert [m.era for m in t.run().messages] == [MODERN, UNKNOWN]


def test_http_legacy_protocol_version_header():
    h = Traffic("http")
    x = h.post(h.request("tools/list", with_meta=False), headers=HTTP_HEADERS + (("MCP-Protocol-Version", " 2025-06-18 "),))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
    y = h.post(h.request("tools/list", with_meta=False), headers=HTTP_HEADERS + (("mcp-protocol-version", "2026-07-28"),))
    h.respond_json(y, {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}})
    assert eras(h.run()) == [
        ("tools/list", LEGACY, "2025-06-18"), ("result", LEGACY, None),
        ("tools/list", UNKNOWN, None), ("result", UNKNOWN, None),  # a modern header alone is no _meta
    ]


def test_http_known_legacy_session_id():
    h = Traffic("http")
    x = h.post(h.request("initialize", INIT, with_meta=False))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT},
                   headers=(("content-type", "application/json"), ("mcp-session-id", "sess-1")))
    with_sid = HTTP_HEADERS + (("Mcp-Session-Id", "sess-1"),)
    h.post(h.request("tools/list", with_meta=False), headers=with_sid)
    h.post(h.request("tools/list", with_meta=False), headers=HTTP_HEADERS + (("mcp-session-id", "unknown"),))
    assert [m.era for m in h.run().messages] == [LEGACY, LEGACY, LEGACY, UNKNOWN]


def test_http_malformed_is_per_endpoint():
    h = Traffic("http")
    h.post(h.request("tools/list"))
    h.post(h.request("tools/list", with_meta=False))
    h.post(h.request("tools/list", with_meta=False), path="/other")
    assert [m.era for m in h.run().messages] == [MODERN, MALFORMED, UNKNOWN]


def test_server_messages_no_request_covers_take_the_context_era():
    t = Traffic()
    t.server({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    t.call("tools/list")
    t.server({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    t.server({"jsonrpc": "2.0", "id": 99, "result": {}})  # answers nothing known
    assert [m.era for m in t.run().messages] == [UNKNOWN, MODERN, MODERN, MODERN]


def test_era_tracker_directly():
    tr = EraTracker()
    req = decode_message(dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 7}}))
    assert tr.classify_request(req.method, req.params, "ctx") == (LEGACY, None)
    assert tr.spoke("ctx") == (False, True)
    assert tr.context_era("ctx") == LEGACY
    assert not tr.legacy_session("sid") and not tr.legacy_session(None)
    tr.initialize_answered("ctx", "sid")
    assert tr.legacy_session("sid")
    weird = decode_message(dumps({"jsonrpc": "2.0", "id": 2, "method": "x", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": 20260728}}}))
    assert tr.classify_request(weird.method, weird.params, "ctx2") == (UNKNOWN, None)  # a version that is not a string is no version
