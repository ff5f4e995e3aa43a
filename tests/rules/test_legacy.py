"""RULES.md §4.8, the legacy era and era mixing: each rule's trigger and near miss."""

from __future__ import annotations

from tests.traffic import CLIENT_INFO, HTTP_HEADERS, Traffic

INIT = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": CLIENT_INFO}
INIT_RESULT = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
URL_ELICIT = {"method": "elicitation/create", "params": {"mode": "url", "message": "Log in", "url": "https://x.example/a"}}


def legacy_stdio() -> Traffic:
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.result(a, INIT_RESULT, with_meta=False, result_type=None)
    t.notify("notifications/initialized")
    return t


def legacy_http(sid: str = "sess-1", version: str = "2025-11-25") -> Traffic:
    h = Traffic("http")
    x = h.post(h.request("initialize", {**INIT, "protocolVersion": version}, with_meta=False))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": {**INIT_RESULT, "protocolVersion": version}},
                   headers=(("content-type", "application/json"), ("mcp-session-id", sid)))
    return h


def session_headers(sid: str | None = "sess-1", version: str | None = "2025-11-25") -> tuple:
    h = HTTP_HEADERS
    if sid is not None:
        h += (("mcp-session-id", sid),)
    if version is not None:
        h += (("mcp-protocol-version", version),)
    return h


def only(r, rule: str) -> list:
    return [f.messages for f in r.of(rule)]


# --- legacy artifacts on a modern hop -------------------------------------------------------------------------------


def test_url_elicitation_has_elicitation_id():
    t = Traffic()
    a = t.tool("login")
    with_id = {**URL_ELICIT, "params": {**URL_ELICIT["params"], "elicitationId": "e1"}}
    t.irr(a, {"login": with_id, "plain": URL_ELICIT}, state="s")
    b = t.tool("login")
    t.irr(b, {"plain": URL_ELICIT}, state="s2")
    f = t.run().of("url-elicitation-has-elicitation-id")
    assert len(f) == 1 and f[0].messages == [1] and "'login'" in f[0].message


def test_elicitation_complete_notification():
    t = Traffic()
    t.call("tools/list")
    t.notify("notifications/elicitation/complete", {"elicitationId": "e1"}, direction="s2c")
    legacy = legacy_stdio()
    legacy.notify("notifications/elicitation/complete", {"elicitationId": "e1"}, direction="s2c")
    assert only(t.run(), "elicitation-complete-notification") == [[1]]
    assert not legacy.run().of("elicitation-complete-notification")


def test_url_elicitation_required_error():
    t = Traffic()
    a = t.tool("login")
    t.error(a, -32042, "URL elicitation required", data={"elicitations": [URL_ELICIT["params"]]})
    r = t.run()
    assert only(r, "url-elicitation-required-error") == [[0, 1]]
    assert not r.of("error-code-removed") and not r.of("error-code-reserved-undefined")


def test_url_elicitation_required_error_in_the_legacy_era_is_fine():
    t = legacy_stdio()
    a = t.call("tools/call", {"name": "login"}, with_meta=False)
    t.error(a, -32042, "URL elicitation required", data={"elicitations": []})
    assert not t.run().of("url-elicitation-required-error")


# --- the legacy era itself -----------------------------------------------------------------------------------------


def test_modern_artifact_in_legacy():
    t = legacy_stdio()
    a = t.call("tools/call", {"name": "deploy"}, with_meta=False)
    t.result(a, {"resultType": "input_required", "inputRequests": {"c": URL_ELICIT}}, with_meta=False)
    b = t.call("tools/call", {"name": "deploy"}, with_meta=False)
    t.result(b, {"content": []}, with_meta=False, result_type=None)
    f = t.run().of("modern-artifact-in-legacy")
    assert len(f) == 1 and f[0].messages == [3, 4] and "'input_required'" in f[0].message


def test_era_mixed_connection():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    b = t.call("initialize", INIT, with_meta=False)
    t.result(b, INIT_RESULT, with_meta=False, result_type=None)
    t.call("tools/list", with_meta=False)
    t.call("tools/list")
    f = t.run().of("era-mixed-connection")
    assert len(f) == 1 and f[0].messages == [0, 2] and f[0].severity == "info"


def test_era_mixed_connection_legacy_first():
    """Legacy first, then modern: the first modern request reaches the check (the pass's gate holds
    for it), the later ones do not, and the finding is made once."""
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.result(a, INIT_RESULT, with_meta=False, result_type=None)
    t.call("server/discover")  # a probe: not the first modern request
    t.call("tools/list")
    t.call("tools/list")
    f = t.run().of("era-mixed-connection")
    assert len(f) == 1 and f[0].messages == [0, 3]


def test_era_mixed_connection_near_miss_modern_only():
    """Modern requests only: none fires, and past the first the pass's gate spares them the legacy
    checks (the gate, then the check when it holds, as the pass runs them)."""
    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.core.observations import Decoded
    from mrtr_inspect.rules import legacy

    t = Traffic()
    for _ in range(3):
        t.result(t.call("tools/list"), {"tools": []})
    assert not t.run().of("era-mixed-connection")
    requests: list = []
    a = Analysis(None, lambda o: requests.append(o) if type(o) is Decoded and o.msg.kind == "request" else None)
    for frame in t.frames:
        a.feed(frame)
    st, held = legacy._State(None), []
    for o in requests:
        held.append(legacy._legacy_or_first(o, st))
        if held[-1]:
            legacy.era_mixed_connection(o, None, st)  # (it finds nothing: it would fail on ctx None)
    assert held == [True, False, False]


def test_era_mixed_connection_http_per_endpoint():
    h = Traffic("http")
    h.post(h.request("tools/list"))
    h.post(h.request("initialize", INIT, with_meta=False), path="/legacy")
    h.post(h.request("initialize", INIT, with_meta=False))
    f = h.run().of("era-mixed-connection")
    assert len(f) == 1 and f[0].messages == [0, 2] and "HTTP endpoint /mcp" in f[0].message


def test_era_modern_meta_legacy_version():
    t = Traffic()
    t.call("tools/list", version="2025-11-25")
    t.call("tools/list", version="2025-11-25")
    t.call("tools/list", version="2026-07-28")
    assert only(t.run(), "era-modern-meta-legacy-version") == [[0]]


def test_legacy_request_id_reused_in_session():
    t = legacy_stdio()
    a = t.call("tools/list", id=2, with_meta=False)
    t.result(a, {"tools": []}, with_meta=False, result_type=None)
    t.call("tools/call", {"name": "x"}, id=2, with_meta=False)
    t.server({"jsonrpc": "2.0", "id": 0, "method": "roots/list"})
    t.client({"jsonrpc": "2.0", "id": 0, "result": {"roots": []}})
    t.server({"jsonrpc": "2.0", "id": 0, "method": "roots/list"})
    r = t.run()
    assert only(r, "legacy-request-id-reused-in-session") == [[3, 5], [6, 8]]
    assert not r.of("request-id-in-flight-reuse")


def test_modern_id_reuse_after_the_answer_is_fine():
    t = Traffic()
    a = t.call("tools/list", id=2)
    t.result(a, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    t.call("tools/list", id=2)
    assert not t.run().of("legacy-request-id-reused-in-session")


def test_legacy_url_elicitation_missing_id():
    t = legacy_stdio()
    t.call("tools/call", {"name": "login"}, with_meta=False)
    t.server({"jsonrpc": "2.0", "id": 0, **URL_ELICIT})
    t.server({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
              "params": {**URL_ELICIT["params"], "elicitationId": "e1"}})
    t.server({"jsonrpc": "2.0", "id": 2, "method": "elicitation/create", "params": {"message": "form", "requestedSchema": {}}})
    assert only(t.run(), "legacy-url-elicitation-missing-id") == [[4]]


def test_legacy_session_id_charset():
    bad = legacy_http(sid="abc def")
    good = legacy_http(sid="d29711e91ae4494f9138dea796514133")
    assert only(bad.run(), "legacy-session-id-charset") == [[1]]
    assert not good.run().of("legacy-session-id-charset")


def test_legacy_session_header_missing():
    h = legacy_http()
    h.post(h.request("tools/list", with_meta=False), headers=session_headers(sid=None))
    h.post(h.request("tools/list", with_meta=False), headers=session_headers())
    h.post(h.request("tools/list"))  # a modern request needs no session
    assert only(h.run(), "legacy-session-header-missing") == [[1, 2]]


def test_legacy_protocol_version_header_missing():
    h = legacy_http()
    h.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session_headers(version=None))
    h.post(h.request("tools/list", with_meta=False), headers=session_headers(version="2025-06-18"))
    h.post(h.request("tools/list", with_meta=False), headers=session_headers())
    r = h.run()
    assert [(f.severity, f.messages) for f in r.of("legacy-protocol-version-header-missing")] == [
        ("error", [1, 2]), ("warning", [1, 3])]


def test_no_version_header_needed_before_2025_06_18():
    h = legacy_http(version="2025-03-26")
    h.post(h.request("tools/list", with_meta=False), headers=session_headers(version=None))
    assert not h.run().of("legacy-protocol-version-header-missing")


def test_findings_on_a_chain_name_it():
    t = Traffic()
    a = t.tool("login")
    t.irr(a, {"l": {**URL_ELICIT, "params": {**URL_ELICIT["params"], "elicitationId": "e1"}}}, state="s")
    b = t.tool("login", requestState="s", inputResponses={"l": {"action": "accept"}})
    t.error(b, -32042, "URL elicitation required")
    r = t.run()
    assert [f.chain for f in r.of("url-elicitation-has-elicitation-id") + r.of("url-elicitation-required-error")] == [
        "c1", "c1"]
