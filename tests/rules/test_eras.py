"""RULES.md §2 through the rules: 2025-11-25 traffic is decoded and shown as what it is and judged by
the legacy rules only; legacy artifacts leaking onto a modern hop are flagged (§4.8); the real SDK
captures give no error from the rules of §4.5, §4.7 and §4.8."""

from __future__ import annotations

import pytest

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.events import HttpResponse, SseEvent, HttpEnd
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.messages import Message
from mrtr_inspect.rules import load_rules
from mrtr_inspect.rules.registry import REGISTRY
from tests.captures import capture_frames, capture_names
from tests.traffic import CLIENT_INFO, HTTP_HEADERS, Traffic, dumps

load_rules()
OURS = {r.id for r in REGISTRY.values() if r.section in ("4.5", "4.7", "4.8")} | {
    "server-initiated-request", "client-sent-response"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": CLIENT_INFO}
INIT_RESULT = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
ELICIT = {"method": "elicitation/create", "params": {"mode": "form", "message": "Deploy?", "requestedSchema": {
    "type": "object", "properties": {"ok": {"type": "boolean"}}}}}


def not_info(r) -> list[str]:
    return [f"{f.rule}: {f.message}" for f in r.findings if f.severity != "info"]


def shown(r) -> list[tuple]:
    return [(m.direction, m.kind, m.method, m.era) for m in r.messages]


def test_legacy_stdio_session_is_shown_as_legacy_and_judged_by_legacy_rules():
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.result(a, INIT_RESULT, with_meta=False, result_type=None)
    t.notify("notifications/initialized")
    b = t.call("tools/list", with_meta=False)
    t.result(b, {"tools": [{"name": "deploy", "inputSchema": {"type": "object"}}]}, with_meta=False, result_type=None)
    c = t.call("tools/call", {"name": "deploy", "arguments": {}, "_meta": {"progressToken": 7}}, with_meta=False)
    t.server({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}})
    t.server({"jsonrpc": "2.0", "id": 0, **ELICIT})  # the server asks the user, the legacy way
    t.client({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"ok": True}}})
    t.server({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "deploying"}})
    t.result(c, {"content": [{"type": "text", "text": "deployed"}]}, with_meta=False, result_type=None)
    d = t.call("ping", with_meta=False)
    t.result(d, {}, with_meta=False, result_type=None)
    r = t.run()
    assert shown(r) == [
        ("c2s", "request", "initialize", "legacy"), ("s2c", "result", None, "legacy"),
        ("c2s", "notification", "notifications/initialized", "legacy"),
        ("c2s", "request", "tools/list", "legacy"), ("s2c", "result", None, "legacy"),
        ("c2s", "request", "tools/call", "legacy"),
        ("s2c", "notification", "notifications/progress", "legacy"),
        ("s2c", "request", "elicitation/create", "legacy"),
        ("c2s", "result", None, "legacy"),
        ("s2c", "notification", "notifications/message", "legacy"),
        ("s2c", "result", None, "legacy"),
        ("c2s", "request", "ping", "legacy"), ("s2c", "result", None, "legacy"),
    ]
    assert r.request_of(r.messages[8]) is r.messages[7]  # the client's answer is paired with the server's request
    assert r.messages[7].version is None and r.messages[0].version == "2025-11-25"
    assert not not_info(r), not_info(r)


def test_legacy_http_session_with_a_get_stream():
    h = Traffic("http")
    x = h.post(h.request("initialize", INIT, with_meta=False))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT},
                   headers=(("content-type", "application/json"), ("mcp-session-id", "s-1")))
    sess = HTTP_HEADERS + (("mcp-session-id", "s-1"), ("mcp-protocol-version", "2025-11-25"))
    y = h.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=sess)
    h.respond(y, 202, b"")
    get = h.post(b"", headers=sess, method="GET")
    h.frames.append(HttpResponse(h.tick(), "s1", get, 200, (("content-type", "text/event-stream"),
                                                             ("mcp-session-id", "s-1"))))
    call = h.post(h.request("tools/call", {"name": "deploy", "arguments": {}}, id=2, with_meta=False), headers=sess)
    h.frames.append(SseEvent(h.tick(), "s1", get, b"data: " + dumps({"jsonrpc": "2.0", "id": 0, **ELICIT}) + b"\n\n"))
    answer = h.post({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"ok": True}}}, headers=sess)
    h.respond(answer, 202, b"")
    h.respond_sse(call, [{"jsonrpc": "2.0", "id": 2, "result": {"content": []}}])
    h.frames.append(HttpEnd(h.tick(), "s1", get))
    r = h.run()
    assert shown(r) == [
        ("c2s", "request", "initialize", "legacy"), ("s2c", "result", None, "legacy"),
        ("c2s", "notification", "notifications/initialized", "legacy"),
        ("c2s", "request", "tools/call", "legacy"),
        ("s2c", "request", "elicitation/create", "legacy"),
        ("c2s", "result", None, "legacy"),
        ("s2c", "result", None, "legacy"),
    ]
    assert r.request_of(r.messages[5]) is r.messages[4]
    assert not [f for f in r.findings if f.rule in OURS], [f.message for f in r.findings if f.rule in OURS]


def test_legacy_artifacts_leaking_onto_a_modern_hop():
    """A translating gateway in front of a legacy server, speaking 2026-07-28 to its client."""
    t = Traffic()
    a = t.call("server/discover")
    t.result(a, {"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": 0, "cacheScope": "public"})
    b = t.tool("login")
    t.server({"jsonrpc": "2.0", "id": 0, **ELICIT})
    t.client({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"ok": True}}})
    t.irr(b, {"l": {"method": "elicitation/create", "params": {"mode": "url", "message": "Log in", "url": "https://a.example",
                                                                 "elicitationId": "e1"}}}, state="s")
    t.notify("notifications/elicitation/complete", {"elicitationId": "e1"}, direction="s2c")
    c = t.tool("login", requestState="s", inputResponses={"l": {"action": "accept"}})
    t.error(c, -32042, "URL elicitation required", data={"elicitations": []})
    r = t.run()
    assert [m.era for m in r.messages if m.direction == "s2c"] == ["modern"] * 5
    assert {f.rule for f in r.findings if f.rule in OURS} == {
        "server-initiated-request", "client-sent-response", "url-elicitation-has-elicitation-id",
        "elicitation-complete-notification", "url-elicitation-required-error"}


def test_a_legacy_post_stream_on_a_dual_era_endpoint_keeps_its_era():
    """Messages on a request's POST response stream take that request's era, not the endpoint's
    (RULES.md §2): a legacy server request there is allowed even if the endpoint spoke modern."""
    h = Traffic("http")
    x = h.post(h.request("tools/list", id=1))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "resultType": "complete"}})
    legacy = HTTP_HEADERS + (("mcp-protocol-version", "2025-11-25"),)
    y = h.post(h.request("tools/call", {"name": "deploy"}, id=2, with_meta=False), headers=legacy)
    h.respond_sse(y, [{"jsonrpc": "2.0", "id": 0, **ELICIT},
                      {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
                      {"jsonrpc": "2.0", "id": 2, "result": {"content": []}}])
    r = h.run()
    assert [m.era for m in r.messages] == ["modern", "modern", "legacy", "legacy", "legacy", "legacy"]
    assert not r.of("server-initiated-request") and not r.of("log-without-loglevel")


def test_modern_rules_are_not_applied_to_legacy_candidates():
    """Requests with no _meta on a pipe that never spoke modern: a legacy client, or a capture that began
    after initialize. Nothing modern is asked of them."""
    t = Traffic()
    a = t.call("tools/list", with_meta=False)
    t.result(a, {"tools": []}, with_meta=False, result_type=None)
    b = t.call("resources/read", {"uri": "file:///x"}, with_meta=False)
    t.error(b, -32002, "Resource not found")
    r = t.run()
    assert {m.era for m in r.messages} == {"unknown"}
    assert not [f for f in r.findings if f.rule in OURS]


# --- the real SDK captures ------------------------------------------------------------------------------------------

NAMES = capture_names()


def analyse(name: str) -> tuple[list[Message], list[Finding]]:
    insp = Analysis()
    outs = []
    for f in capture_frames(name):
        outs += insp.feed(f)
    outs += insp.close()
    return [o for o in outs if type(o) is Message], [o for o in outs if type(o) is Finding]


@pytest.mark.skipif(not NAMES, reason="fixtures/captures not present")
@pytest.mark.parametrize("name", NAMES)
def test_captures_give_no_error_or_warning_from_these_rules(name):
    msgs, findings = analyse(name)
    ours = [f"{f.rule}: {f.message}" for f in findings if f.rule in OURS and f.severity != "info"]
    assert not ours, ours
    eras = {m.era for m in msgs}
    assert eras == ({"legacy"} if "legacy" in name else {"modern"}), (name, eras)


# --- RULES.md §13: each exchange judged by its own era, and linked to its own revision ----------------------------


def _probe_answered_400(code: int) -> Traffic:
    """A modern client's era probe (server/discover over HTTP) answered 400 by the server's own error, id null."""
    h = Traffic("http")
    x = h.post(h.request("server/discover"))
    h.respond_json(x, {"jsonrpc": "2.0", "error": {"code": code, "message": "Bad Request: Server not initialized"},
                       "id": None}, status=400)
    return h


def test_a_legacy_servers_answer_to_the_era_probe_is_judged_as_legacy():
    r = _probe_answered_400(-32000).run()
    assert r.messages[1].era == "legacy"
    assert not r.of("error-code-legacy-range")  # a 2026-07-28 SHOULD: not for a legacy server's answer
    (f,) = r.of("error-response-missing-id")  # true in both revisions
    assert f.spec == "https://modelcontextprotocol.io/specification/2025-11-25/basic#error-responses"
    assert f.conformance is None  # the 2026-07-28 suite's check is not this exchange's


def test_near_miss_a_modern_error_to_the_probe_and_a_legacy_range_code_on_a_modern_exchange():
    modern = _probe_answered_400(-32022).run()  # UnsupportedProtocolVersion: the server is modern
    assert modern.messages[1].era == "modern"
    (f,) = modern.of("error-response-missing-id")
    assert f.spec == "basic/index.mdx#error-responses" and f.conformance == "sep-2575-http-server-error-jsonrpc-id"
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.error(a, -32000, "failed")
    (g,) = t.run().of("error-code-legacy-range")
    assert g.spec == "basic/index.mdx#error-codes"


def test_legacy_links_by_revision():
    from mrtr_inspect.rules import spec

    legacy = "https://modelcontextprotocol.io/specification/2025-11-25/"
    assert spec.legacy(spec.ELICIT_FORM_SECURITY) == legacy + "client/elicitation#form-mode-security"
    assert spec.legacy(spec.HTTP_SENDING) == legacy + "basic/transports#sending-messages-to-the-server"
    assert spec.legacy(spec.STDIO) == legacy + "basic/transports#stdio"
    assert spec.legacy(spec.CANCEL) == legacy + "basic/utilities/cancellation#behavior-requirements"
    assert spec.legacy(spec.BASE_ERRORS) == legacy + "basic#error-responses"
    # 2026-07-28's own sentences have no 2025-11-25 page: the finding keeps its link
    assert spec.legacy(spec.MRTR_CLIENT) is None and spec.legacy(spec.DISCOVER) is None
    assert spec.legacy(spec.STDIO_BACKCOMPAT) is None and spec.legacy(spec.BASE_ERROR_CODES) is None
    assert spec.legacy(spec.LEGACY_SESSIONS) is None  # already a 2025-11-25 link


def test_findings_on_legacy_exchanges_link_2025_11_25_and_on_modern_ones_2026_07_28():
    from tests.rules.test_legacy import legacy_stdio

    t = legacy_stdio()
    a = t.call("tools/call", {"name": "x"}, with_meta=False)
    t.error(a, "oops", "failed")
    legacy = t.run().of("error-code-not-integer")
    m = Traffic()
    b = m.call("tools/call", {"name": "x"})
    m.error(b, "oops", "failed")
    modern = m.run().of("error-code-not-integer")
    assert [(f.spec, f.conformance) for f in legacy] == [
        ("https://modelcontextprotocol.io/specification/2025-11-25/basic#error-responses", None)]
    assert [(f.spec, f.conformance) for f in modern] == [("basic/index.mdx#error-responses", "wire-schema-valid")]
