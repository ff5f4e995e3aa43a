"""RULES.md §4.5, the base protocol of 2026-07-28: each rule once triggered, once nearly."""

from __future__ import annotations

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpResponse, SseEvent, HttpEnd
from mrtr_inspect.rules.registry import REGISTRY
from tests.traffic import CLIENT_INFO, Traffic, dumps

LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SID = "io.modelcontextprotocol/subscriptionId"
DISCOVER_RESULT = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}


def server_note(t: Traffic, method: str, params: dict | None = None) -> None:
    t.notify(method, params, direction="s2c")


def one(r, rule: str):
    """The single finding of `rule`, whatever else was found."""
    found = r.of(rule)
    assert len(found) == 1, (rule, [f.message for f in r.findings])
    return found[0]


def sse(h: Traffic, x: int, msgs: list) -> None:
    """A modern SSE response on exchange x, its events one frame each."""
    h.respond_sse(x, msgs)


# --- envelope and ids ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, part", [
    (b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}', "jsonrpc is '1.0'"),
    (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}', "both result and error"),
    (b'{"jsonrpc":"2.0","id":1}', "neither a request, a notification nor a response"),
    (b'[{"jsonrpc":"2.0","method":"notifications/x"}]', None),  # a batch of a valid message: stdio-framing says it
])
def test_envelope_invalid(raw, part):
    t = Traffic()
    t.line("c2s", raw)
    r = t.run()
    if part is None:
        assert not r.of("jsonrpc-envelope-invalid")
    else:
        assert part in one(r, "jsonrpc-envelope-invalid").message


def test_envelope_invalid_result_and_error_members():
    t = Traffic()
    a = t.call("tools/list")
    t.answer({"jsonrpc": "2.0", "id": a, "result": [1, 2]})
    b = t.call("tools/list")
    t.answer({"jsonrpc": "2.0", "id": b, "error": {"code": -32603}})
    found = [f.message for f in t.run().of("jsonrpc-envelope-invalid")]
    assert len(found) == 2 and "not an object" in found[0] and "no string message" in found[1]


def test_envelope_near_miss_and_http_body_not_json():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    assert not t.run().findings
    h = Traffic("http")
    x = h.post(h.request("tools/list"))
    h.respond(x, 200, b'{"jsonrpc":"2.0","id":1,')
    assert "not one JSON value" in one(h.run(), "jsonrpc-envelope-invalid").message


@pytest.mark.parametrize("id_raw, rule", [
    (b"null", "request-id-null"), (b"1.5", "request-id-type"), (b"1.0", "request-id-type"),
    (b"true", "request-id-type"), (b'{"a":1}', "request-id-type"), (b"1", None), (b'"1"', None), (b"0", None),
])
def test_request_id_null_and_type(id_raw, rule):
    t = Traffic()
    meta = dumps(t.request("tools/list")["params"])
    t.line("c2s", b'{"jsonrpc":"2.0","id":' + id_raw + b',"method":"tools/list","params":' + meta + b"}")
    r = t.run()
    got = r.rules() & {"request-id-null", "request-id-type"}
    assert got == ({rule} if rule else set())


def test_notification_with_id():
    t = Traffic()
    t.call("tools/call", {"name": "x", "_meta": {"progressToken": 1}})
    t.server({"jsonrpc": "2.0", "id": 9, "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}})
    t.server({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 2}})
    r = t.run()
    assert "notifications MUST NOT include an ID" in one(r, "notification-with-id").message
    assert not r.of("server-initiated-request")  # a malformed notification, not a server request


def test_notification_answered_over_http():
    h = Traffic("http")
    x = h.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": {}})
    y = h.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    h.respond(y, 202, b"")
    assert "a notification" in one(h.run(), "notification-with-id").message


def test_request_id_in_flight_reuse():
    t = Traffic()
    t.call("tools/call", {"name": "a"}, id=3)
    t.call("tools/list", id=3)
    f = one(t.run(), "request-id-in-flight-reuse")
    assert f.messages == [0, 1] and "still waiting" in f.message


def _two_in_flight_over_http(users: tuple[str, str] | None = None) -> Traffic:
    """tools/call id 7 from two POSTs of one address and clientInfo, neither answered yet; `users`:
    an X-User header on each."""
    h = Traffic("http")
    for n in range(2):
        extra = (("x-user", users[n]),) if users else ()
        h.call("tools/call", {"name": "deploy"}, id=7, headers=h.default_headers + extra)
    return h


def test_request_id_in_flight_reuse_over_http_is_a_warning_unless_the_sender_is_named():
    """Two client processes on one machine look like one HTTP peer (RULES.md §10.4): without a
    peer_header, the reuse is a warning that says so; with one naming the same sender, an error."""
    f = one(_two_in_flight_over_http().run(), "request-id-in-flight-reuse")
    assert f.severity == "warning" and "look alike" in f.message and "peer_header" in f.message
    assert f.messages == [0, 1]
    named = Config(peer_header="X-User")
    f = one(_two_in_flight_over_http(("ann", "ann")).run(named), "request-id-in-flight-reuse")
    assert f.severity == "error" and "look alike" not in f.message
    assert _two_in_flight_over_http(("ann", "ann")).run().of("request-id-in-flight-reuse")[0].severity == "warning"


def test_look_alike_clients_reusing_ids_are_one_warning_per_group_and_session():
    """RULES.md §10.10: 20 look-alike clients (one address, one clientInfo), each counting its ids from 1
    with 3 calls in flight, then a second group (another clientInfo) and a second session: one warning
    per group and session, naming the group, counting the overlaps, every overlap in its messages."""
    h = Traffic("http")
    for n in range(20):
        for i in (1, 2, 3):
            h.call("tools/call", {"name": "deploy"}, id=i)
    for n in range(2):
        h.call("tools/list", id=1, client_info={"name": "other-sdk", "version": "2.0"})
    h.next_session("s2")
    for n in range(2):
        h.call("tools/call", {"name": "deploy"}, id=9)
    found = h.run().of("request-id-in-flight-reuse")
    assert [(f.severity, f.details["overlaps"], f.details["ids"]) for f in found] == [
        ("warning", 57, 3), ("warning", 1, 1), ("warning", 1, 1)]
    first, other, second = found
    assert "57 requests of the clients at 127.0.0.1 with clientInfo test-client/1.0" in first.message
    assert "3 distinct ids" in first.message and "peer_header" in first.message
    assert first.messages == list(range(60))  # each overlap: the request and the one in flight it reused the id of
    assert "clientInfo other-sdk/2.0" in other.message and other.messages == [60, 61]
    assert second.messages == [62, 63]


def test_near_miss_look_alike_clients_with_distinct_ids_or_answered_first_give_nothing():
    h = Traffic("http")
    for n in range(20):
        h.call("tools/call", {"name": "deploy"}, id=n + 1)  # distinct ids: no overlap
    for n in range(3):
        h.call("tools/list", id="a")
        h.result("a", {"tools": [], "ttlMs": 0, "cacheScope": "public"})  # answered before the next one
    assert not h.run().of("request-id-in-flight-reuse")


def test_near_miss_two_named_senders_may_use_the_same_id_over_http():
    assert not _two_in_flight_over_http(("ann", "bob")).run(Config(peer_header="X-User")).of(
        "request-id-in-flight-reuse")


def test_request_id_reuse_after_the_answer_is_fine():
    t = Traffic()
    t.call("tools/list", id=3)
    t.result(3, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    t.call("tools/list", id=3)
    t.call("tools/list", id="3")  # another id: "3" is not 3
    assert not t.run().of("request-id-in-flight-reuse")


def test_request_reissued_same_id():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "deploy"}, id=7))
    h.respond_sse(x, [])  # the stream ends without a response
    h.post(h.request("tools/call", {"name": "deploy"}, id=7))
    assert "with the same id" in one(h.run(), "request-reissued-same-id").message


def test_request_reissued_with_a_new_id_is_fine():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "deploy"}, id=7))
    h.respond_sse(x, [])
    h.post(h.request("tools/call", {"name": "deploy"}, id=8))
    y = h.post(h.request("tools/list", id=9))
    h.respond_json(y, {"jsonrpc": "2.0", "id": 9, "result": {"tools": []}})
    h.post(h.request("tools/list", id=9))  # answered before: reusing its id is not a re-issue
    assert not h.run().of("request-reissued-same-id")


def test_response_id_mismatch_stdio():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a + 1, {})
    t.result(a, {})
    t.result(a, {})  # a second response
    found = t.run().of("response-id-mismatch")
    assert [f.messages for f in found] == [[1], [3]]


def test_response_id_mismatch_http_json_body():
    h = Traffic("http")
    x = h.post(h.request("tools/list", id=2))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete"}})
    y = h.post(h.request("tools/list", id=4))
    h.respond_json(y, {"jsonrpc": "2.0", "id": 4, "result": {"resultType": "complete"}})
    f = one(h.run(), "response-id-mismatch")
    assert "does not carry the id" in f.message and f.messages == [0, 1]


def test_error_response_missing_id():
    t = Traffic()
    t.call("tools/call", {"name": "x"}, id=5)
    t.answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad"}})
    assert one(t.run(), "error-response-missing-id").messages == [2 - 1]


def test_error_without_id_for_an_unreadable_request_is_fine():
    t = Traffic()
    t.call("tools/call", {"name": "x"}, id=5)  # in flight, readable
    t.line("c2s", b'{"jsonrpc":"2.0","id":')  # unreadable
    t.answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert not t.run().of("error-response-missing-id")


def test_error_response_missing_id_http():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "x"}, id=5))
    h.respond_json(x, {"jsonrpc": "2.0", "error": {"code": -32602, "message": "bad"}}, status=400)
    y = h.post(b'{"jsonrpc":"2.0","id":')
    h.respond_json(y, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, status=400)
    assert one(h.run(), "error-response-missing-id").messages == [0, 1]


# --- error codes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code, rule", [
    ("-32602", "error-code-not-integer"), (-32602.0, "error-code-not-integer"),
    (-32050, "error-code-reserved-undefined"), (-32099, "error-code-reserved-undefined"),
    (-32002, "error-code-removed"), (-32004, "error-code-legacy-range"), (-32000, "error-code-legacy-range"),
    (-32500, "error-code-jsonrpc-reserved"), (-32768, "error-code-jsonrpc-reserved"),
    (-32602, None), (-32700, None), (-32021, None), (-32022, None), (-1, None), (1234, None), (-32042, None),
])
def test_error_codes_modern(code, rule):
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.error(a, code, "failed", data={"requiredCapabilities": {}, "supported": ["2026-07-28"], "requested": "2026-07-28"})
    codes = {"error-code-not-integer", "error-code-reserved-undefined", "error-code-removed", "error-code-legacy-range",
             "error-code-jsonrpc-reserved"}
    assert t.run().rules() & codes == ({rule} if rule else set())


def test_legacy_range_names_the_draft_code():
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.error(a, -32004, "Unsupported protocol version")
    assert "UnsupportedProtocolVersion (now -32022)" in one(t.run(), "error-code-legacy-range").message


def test_error_codes_of_a_legacy_exchange_are_not_judged():
    t = legacy_stdio()
    a = t.call("resources/read", {"uri": "file:///x"}, with_meta=False)
    t.error(a, -32002, "Resource not found")
    b = t.call("tools/call", {"name": "x"}, with_meta=False)
    t.error(b, -32050, "private")
    assert not [f for f in t.run().findings if f.severity != "info"]  # chain-ended-error: the chains' outcome


def test_error_code_not_integer_in_any_era():
    t = legacy_stdio()
    a = t.call("tools/list", with_meta=False)
    t.error(a, "oops", "failed")
    assert one(t.run(), "error-code-not-integer").severity == "error"


# --- _meta -------------------------------------------------------------------------------------------------------


def legacy_stdio() -> Traffic:
    t = Traffic()
    a = t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO},
               with_meta=False)
    t.result(a, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
             with_meta=False, result_type=None)
    t.notify("notifications/initialized")
    return t


def test_request_meta_missing():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    t.call("tools/list", with_meta=False)  # the pipe spoke modern: malformed
    t.call("tools/list", {"_meta": {"io.modelcontextprotocol/clientCapabilities": None}})
    found = t.run().of("request-meta-missing")
    assert len(found) == 2
    assert "no params" in found[0].message and "clientCapabilities is null" in found[1].message


def test_request_meta_missing_partial_modern_meta_on_a_new_pipe():
    t = Traffic()
    t.call("tools/list", {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, with_meta=False)
    assert "no io.modelcontextprotocol/protocolVersion" in one(t.run(), "request-meta-missing").message


def test_request_without_meta_on_a_new_pipe_is_a_legacy_candidate():
    t = Traffic()
    a = t.call("tools/list", with_meta=False)
    t.result(a, {"tools": []}, with_meta=False, result_type=None)
    assert not t.run().findings


def test_server_accepted_request_missing_meta():
    t = Traffic()
    t.call("server/discover")
    t.result(1, DISCOVER_RESULT)
    b = t.call("tools/list", with_meta=False)
    t.result(b, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    c = t.call("tools/list", with_meta=False)
    t.error(c, -32602, "missing _meta")
    f = one(t.run(), "server-accepted-request-missing-meta")
    assert f.messages == [2, 3] and "with a result" in f.message


def test_server_accepted_request_missing_meta_http_status():
    h = Traffic("http")
    x = h.post(h.request("tools/list", id=1))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "resultType": "complete"}})
    y = h.post(h.request("tools/list", id=2, with_meta=False))
    h.respond_json(y, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "missing _meta"}}, status=200)
    z = h.post(h.request("tools/list", id=3, with_meta=False))
    h.respond_json(z, {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "missing _meta"}}, status=400)
    assert "HTTP status 200" in one(h.run(), "server-accepted-request-missing-meta").message


def test_client_info_missing_once_per_client():
    t = Traffic()
    t.call("tools/list", client_info=None)
    t.call("prompts/list", client_info=None)
    t.call("tools/list")
    assert one(t.run(), "client-info-missing").messages == [0]


def test_server_info_missing():
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.result(a, {"content": []}, with_meta=False)
    b = t.call("tools/call", {"name": "x"})
    t.result(b, {"content": []}, with_meta=False)
    assert one(t.run(), "server-info-missing").messages == [1]


def test_server_info_present():
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.result(a, {"content": []})
    legacy = legacy_stdio()  # legacy results carry serverInfo in InitializeResult only
    b = legacy.call("tools/call", {"name": "x"}, with_meta=False)
    legacy.result(b, {"content": []}, with_meta=False, result_type=None)
    assert not t.run().findings and not legacy.run().findings


@pytest.mark.parametrize("key, bad", [
    ("-bad.example/key", True), ("com.example/_private", True), ("com..example/x", True), ("1com/x", True),
    ("com.example/", False), ("com.example/ok-key.v2", False), ("traceparent", False), ("progressToken", False),
    ("dev.mcp/x_y", False), ("a/b/c", True),
])
def test_meta_key_format(key, bad):
    t = Traffic()
    t.call("tools/list", {"_meta": {key: 1}})
    assert bool(t.run().of("meta-key-format-invalid")) == bad


def test_meta_key_format_in_results_and_once_per_key():
    t = Traffic()
    a = t.call("tools/call", {"name": "x"})
    t.result(a, {"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}, "x y/z": 1}})
    b = t.call("tools/call", {"name": "x"})
    t.result(b, {"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}, "x y/z": 1}})
    assert one(t.run(), "meta-key-format-invalid").messages == [1]


# --- versions and discovery -------------------------------------------------------------------------------------


def test_protocol_version_unsupported_served():
    t = Traffic()
    a = t.call("server/discover")
    t.result(a, DISCOVER_RESULT)
    b = t.call("tools/list", version="2027-01-01")
    t.result(b, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    c = t.call("tools/list")
    t.result(c, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    d = t.call("tools/list")
    t.error(d, -32022, "unsupported", data={"supported": ["2026-07-28"], "requested": "2026-07-28"})
    found = t.run().of("protocol-version-unsupported-served")
    assert [f.messages for f in found] == [[2, 3], [6, 7]]
    assert "served it" in found[0].message and "refused it" in found[1].message


def test_unsupported_version_error_shape():
    t = Traffic()
    a = t.call("tools/list", version="1900-01-01")
    t.error(a, -32022, "Unsupported protocol version")
    b = t.call("tools/list", version="1900-01-01")
    t.error(b, -32022, "Unsupported protocol version", data={"supported": ["2026-07-28"], "requested": "1901-01-01"})
    c = t.call("tools/list", version="1900-01-01")
    t.error(c, -32022, "Unsupported protocol version", data={"supported": ["2026-07-28"], "requested": "1900-01-01"})
    found = t.run().of("unsupported-version-error-shape")
    assert len(found) == 2
    assert "data.supported" in found[0].message and "declared '1900-01-01'" in found[1].message


def test_version_retry_not_from_supported():
    t = Traffic()
    a = t.call("tools/list", version="1900-01-01")
    t.error(a, -32022, "unsupported", data={"supported": ["2026-07-28"], "requested": "1900-01-01"})
    t.call("tools/list", version="1901-01-01")
    assert one(t.run(), "version-retry-not-from-supported").messages == [1, 2]


def test_version_retry_from_supported():
    t = Traffic()
    a = t.call("tools/list", version="1900-01-01")
    t.error(a, -32022, "unsupported", data={"supported": ["2026-07-28"], "requested": "1900-01-01"})
    t.call("tools/list")
    t.call("tools/list", version="1901-01-01")  # not the request after the error any more
    assert not t.run().of("version-retry-not-from-supported")


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}


def test_fallback_after_modern_error():
    t = Traffic()
    a = t.call("tools/list", version="1900-01-01")
    t.error(a, -32022, "unsupported", data={"supported": ["2026-07-28"], "requested": "1900-01-01"})
    t.call("initialize", INIT, with_meta=False)
    assert one(t.run(), "fallback-after-modern-error").messages == [1, 2]


def test_fallback_to_a_listed_legacy_version_is_the_supported_retry():
    t = Traffic()
    a = t.call("tools/list", version="1900-01-01")
    t.error(a, -32022, "unsupported", data={"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"})
    t.call("initialize", INIT, with_meta=False)
    b = Traffic()
    c = b.call("server/discover")
    b.error(c, -32601, "Method not found")  # not a modern error: the legacy fallback is right
    b.call("initialize", INIT, with_meta=False)
    assert not t.run().of("fallback-after-modern-error") and not b.run().of("fallback-after-modern-error")


def test_discover_not_implemented_once_the_server_is_shown_modern():
    t = Traffic()
    a = t.call("server/discover")
    t.error(a, -32601, "Method not found")
    b = t.call("tools/list")
    t.result(b, {"tools": [], "ttlMs": 0, "cacheScope": "public"})  # resultType: a modern server
    f = one(t.run(), "discover-not-implemented")
    assert f.messages == [0, 1] and "shown to be modern" in f.message


def test_discover_failing_on_a_legacy_server_is_the_probe():
    t = Traffic()
    a = t.call("server/discover")
    t.error(a, -32601, "Method not found")
    b = t.call("initialize", INIT, with_meta=False)
    t.result(b, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
             with_meta=False, result_type=None)
    assert not t.run().of("discover-not-implemented")


def test_discover_not_implemented_http_404():
    h = Traffic("http")
    x = h.post(h.request("tools/list", id=1))
    h.respond_json(x, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "v",
                                                            "data": {"supported": ["2026-07-28"], "requested": "x"}}},
                   status=400)
    y = h.post(h.request("server/discover", id=2))
    h.respond(y, 404, b"")
    assert one(h.run(), "discover-not-implemented").messages == [2]


@pytest.mark.parametrize("result, problem", [
    ({"capabilities": {}, "ttlMs": 0, "cacheScope": "public"}, "supportedVersions"),
    ({"supportedVersions": ["2026-07-28"], "capabilities": [], "ttlMs": 0, "cacheScope": "public"}, "capabilities"),
    ({"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": -1, "cacheScope": "public"}, "ttlMs is -1"),
    ({"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": 0}, "cacheScope is missing"),
    (DISCOVER_RESULT, None),
])
def test_discover_result_invalid(result, problem):
    t = Traffic()
    a = t.call("server/discover")
    t.result(a, result)
    r = t.run()
    if problem is None:
        assert not r.findings
    else:
        assert problem in one(r, "discover-result-invalid").message
    assert not r.of("cacheable-result-missing-hints")  # server/discover's hints are judged above


def test_cacheable_result_missing_hints():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": []})
    b = t.call("resources/read", {"uri": "file:///x"})
    t.result(b, {"contents": [], "ttlMs": 5, "cacheScope": "shared"})
    found = t.run().of("cacheable-result-missing-hints")
    assert [f.messages for f in found] == [[0, 1], [2, 3]]
    assert "ttlMs is missing" in found[0].message and "cacheScope is \"shared\"" in found[1].message


def test_cacheable_hints_present_or_not_required():
    t = Traffic()
    a = t.call("resources/read", {"uri": "file:///x"})
    t.irr(a, {"c": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {
        "type": "object", "properties": {}}}}}, state="s")  # an input_required result carries no hints
    b = t.call("tools/list")
    t.result(b, {"tools": [], "ttlMs": 0, "cacheScope": "private"})
    c = t.call("tools/call", {"name": "x"})
    t.result(c, {"content": []})
    assert not t.run().of("cacheable-result-missing-hints")


def test_retry_result_cached_is_documented_but_not_observable():
    r = REGISTRY["retry-result-cached"]
    assert r.observable is False and r.check is None and r.severity == "error"


def test_removed_method_modern():
    t = Traffic()
    t.call("ping")
    t.call("logging/setLevel", {"level": "debug"})
    found = t.run().of("removed-method-modern")
    assert [f.messages for f in found] == [[0], [1]]


def test_removed_methods_in_the_legacy_era_are_fine():
    t = legacy_stdio()
    t.call("ping", with_meta=False)
    t.call("logging/setLevel", {"level": "debug"}, with_meta=False)
    assert not t.run().of("removed-method-modern")


def test_initialize_error_without_versions():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    b = t.call("initialize", INIT, with_meta=False)
    t.error(b, -32601, "Method not found")
    c = t.call("initialize", INIT, with_meta=False)
    t.error(c, -32601, "This server speaks 2026-07-28 only")
    assert one(t.run(), "initialize-error-without-versions").messages == [2, 3]


def test_initialize_error_from_a_server_not_shown_modern():
    t = Traffic()
    a = t.call("initialize", INIT, with_meta=False)
    t.error(a, -32602, "Unsupported protocol version")
    assert not t.run().of("initialize-error-without-versions")


# --- logging ------------------------------------------------------------------------------------------------------


def log(t: Traffic, level: str = "info") -> None:
    server_note(t, "notifications/message", {"level": level, "data": "x"})


def test_log_without_loglevel_stdio():
    t = Traffic()
    t.call("tools/call", {"name": "x"})
    log(t)
    log(t)  # the same situation: not reported again
    t.call("tools/call", {"name": "y"})
    log(t)
    assert [f.messages for f in t.run().of("log-without-loglevel")] == [[1], [4]]


def test_log_with_loglevel_stdio():
    t = Traffic()
    t.call("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "debug"}})
    log(t)
    assert not t.run().findings


def test_log_without_loglevel_http():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "x"}, id=1))
    sse(h, x, [{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
               {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}}])
    y = h.post(h.request("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "info"}}, id=2))
    sse(h, y, [{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
               {"jsonrpc": "2.0", "id": 2, "result": {"content": [], "resultType": "complete"}}])
    assert one(h.run(), "log-without-loglevel").messages == [0, 1]


def test_log_below_level():
    t = Traffic()
    t.call("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "error"}})
    log(t, "debug")
    log(t, "error")
    log(t, "emergency")
    assert one(t.run(), "log-below-level").messages == [0, 1]


def test_log_off_request_stream():
    h = Traffic("http")
    x = h.post(h.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1))
    sse(h, x, [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {SID: 1}, "notifications": {"toolsListChanged": True}}},
               {"jsonrpc": "2.0", "method": "notifications/message", "params": {"_meta": {SID: 1}, "level": "info",
                                                                                  "data": "x"}}])
    y = h.post(h.request("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "info"}}, id=2))
    sse(h, y, [{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
               {"jsonrpc": "2.0", "id": 2, "result": {"content": [], "resultType": "complete"}}])
    r = h.run()
    assert one(r, "log-off-request-stream").messages == [0, 2]
    assert not r.of("log-without-loglevel") and not r.of("subscription-unrequested-type")


def test_log_level_invalid():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "verbose"}})
    t.result(a, {"content": []})
    b = t.call("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "verbose"}})
    t.error(b, -32602, "invalid log level")
    c = t.call("tools/call", {"name": "x", "_meta": {LOG_LEVEL: "warning"}})
    t.result(c, {"content": []})
    assert one(t.run(), "log-level-invalid").messages == [0, 1]


# --- progress -----------------------------------------------------------------------------------------------------


def progress(t: Traffic, token, value) -> None:
    server_note(t, "notifications/progress", {"progressToken": token, "progress": value})


def test_progress_token_not_active():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    progress(t, "p", 1)
    t.result(a, {"content": []})
    progress(t, "p", 2)  # after the response
    progress(t, 1, 3)  # never given (and "p" is not 1)
    assert [f.messages for f in t.run().of("progress-token-not-active")] == [[3], [4]]


def test_progress_token_active_over_http():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "x", "_meta": {"progressToken": 5}}, id=1))
    sse(h, x, [{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 5, "progress": 1}},
               {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}},
               {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 5, "progress": 2}}])
    assert one(h.run(), "progress-token-not-active").messages == [3]


def test_progress_not_increasing():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    progress(t, "p", 10)
    progress(t, "p", 10.5)
    progress(t, "p", 10.5)
    progress(t, "p", 3)
    t.result(a, {"content": []})
    b = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})  # the token again, a new request
    progress(t, "p", 1)
    t.result(b, {"content": []})
    assert [f.messages for f in t.run().of("progress-not-increasing")] == [[2, 3], [3, 4]]


def test_progress_token_duplicate_active():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    t.call("tools/call", {"name": "y", "_meta": {"progressToken": "p"}})
    t.result(a, {"content": []})
    t.call("tools/call", {"name": "z", "_meta": {"progressToken": "q"}})
    assert one(t.run(), "progress-token-duplicate-active").messages == [0, 1]


def test_progress_token_reused_after_the_answer_is_fine():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    t.result(a, {"content": []})
    t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    assert not t.run().of("progress-token-duplicate-active")


# --- cancellation -------------------------------------------------------------------------------------------------


def test_server_cancelled_non_listen():
    t = Traffic()
    t.call("tools/call", {"name": "x"}, id=2)
    t.call("subscriptions/listen", {"notifications": {}}, id=3)
    server_note(t, "notifications/cancelled", {"requestId": 2})
    server_note(t, "notifications/cancelled", {"requestId": 3})
    assert one(t.run(), "server-cancelled-non-listen").messages == [2]


def test_cancelled_unknown_request():
    t = Traffic()
    t.call("tools/call", {"name": "x"}, id=2)
    t.notify("notifications/cancelled", {"requestId": 42})
    t.notify("notifications/cancelled", {"requestId": 2})
    assert one(t.run(), "cancelled-unknown-request").messages == [1]


def test_message_after_cancel():
    t = Traffic()
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p"}}, id=2)
    t.notify("notifications/cancelled", {"requestId": a})
    progress(t, "p", 1)
    t.result(a, {"content": []})
    assert [f.messages for f in t.run().of("message-after-cancel")] == [[1, 2], [1, 3]]


def test_no_message_after_cancel():
    t = Traffic()
    a = t.call("tools/call", {"name": "x"}, id=2)
    progress(t, "p", 1)
    t.result(a, {"content": []})
    t.call("tools/call", {"name": "x"}, id=3)
    t.notify("notifications/cancelled", {"requestId": 3})
    assert not t.run().of("message-after-cancel")


# --- subscriptions ----------------------------------------------------------------------------------------------


def ack(listen_id, **filt) -> dict:
    return {"_meta": {SID: listen_id}, "notifications": filt}


def test_subscription_ack_missing_stdio():
    t = Traffic()
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1)
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 1}})
    server_note(t, "notifications/subscriptions/acknowledged", ack(1, toolsListChanged=True))
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 1}})
    assert one(t.run(), "subscription-ack-missing").messages == [0, 1]


def test_subscription_acknowledged_first():
    t = Traffic()
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1)
    t.call("subscriptions/listen", {"notifications": {"promptsListChanged": True}}, id=2)
    server_note(t, "notifications/subscriptions/acknowledged", ack(2, promptsListChanged=True))
    server_note(t, "notifications/prompts/list_changed", {"_meta": {SID: 2}})  # another subscription's: allowed
    server_note(t, "notifications/subscriptions/acknowledged", ack(1, toolsListChanged=True))
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 1}})
    assert not t.run().findings


def test_subscription_id_missing():
    t = Traffic()
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1)
    server_note(t, "notifications/subscriptions/acknowledged", ack(1, toolsListChanged=True))
    server_note(t, "notifications/tools/list_changed")  # untagged
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 9}})  # no such listen
    t.result(1, {})  # graceful closure without the tag
    assert [f.messages for f in t.run().of("subscription-id-missing")] == [[2], [3], [0, 4]]


def test_subscription_id_missing_http():
    h = Traffic("http")
    x = h.post(h.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1))
    sse(h, x, [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack(1, toolsListChanged=True)},
               {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SID: "1"}}},
               {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SID: 1}}},
               {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "_meta": {SID: 1}}}])
    assert one(h.run(), "subscription-id-missing").messages == [0, 2]


def test_subscription_unrequested_type():
    t = Traffic()
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                      "resourceSubscriptions": ["file:///project/"]}}, id=1)
    server_note(t, "notifications/subscriptions/acknowledged", ack(1, toolsListChanged=True))
    server_note(t, "notifications/tools/list_changed", {"_meta": {SID: 1}})
    server_note(t, "notifications/resources/updated", {"_meta": {SID: 1}, "uri": "file:///project/a.txt"})
    server_note(t, "notifications/prompts/list_changed", {"_meta": {SID: 1}})
    server_note(t, "notifications/resources/updated", {"_meta": {SID: 1}, "uri": "file:///other"})
    server_note(t, "notifications/elicitation/complete", {"_meta": {SID: 1}, "elicitationId": "e"})
    r = t.run()
    assert [f.messages for f in r.of("subscription-unrequested-type")] == [[0, 4], [0, 5], [0, 6]]
    assert not r.of("elicitation-complete-notification")  # on a listen stream it is the error above


# --- memory ---------------------------------------------------------------------------------------------------------


def test_what_the_rules_remember_of_a_session_goes_when_it_ends():
    from mrtr_inspect.analysis import Analysis

    t = Traffic()
    t.line("c2s", b"not json")
    a = t.call("tools/call", {"name": "x", "_meta": {"progressToken": "p", LOG_LEVEL: "info"}})
    progress(t, "p", 1)
    log(t)
    t.notify("notifications/cancelled", {"requestId": a})
    t.call("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=99)
    server_note(t, "notifications/subscriptions/acknowledged", ack(99, toolsListChanged=True))
    t.call("server/discover")
    t.end()
    insp = Analysis()
    for f in t.frames:
        insp.feed(f)
    ours = {"jsonrpc-envelope-invalid", "progress-not-increasing", "subscription-ack-missing", "log-without-loglevel",
            "legacy-request-id-reused-in-session", "stdio-framing", "stdio-era-probe",
            "messages", "legacy"}  # the state of the per-message passes of base.py and legacy.py, by session
    kept = {rid: list(m) for rid, m in insp.engine.ctx._mem.items() if rid in ours and m}
    assert kept == {}, kept


def test_an_error_code_or_log_level_that_is_an_array_is_reported_not_a_crash():
    """Found by the inspector fuzz: `error.code` as an array (or object) made the per-message pass
    fail on a set lookup (an inspector-error, the message's other checks lost), as did a logLevel
    array. Now the code is reported by error-code-not-integer and the level by log-level-invalid.
    Near miss: an integer code is no finding of those."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"}, _meta={"io.modelcontextprotocol/logLevel": ["debug"]})
    t.answer({"jsonrpc": "2.0", "id": a, "error": {"code": [-32021], "message": "no"}})
    b = t.tool("deploy", {"env": "qa"})
    t.answer({"jsonrpc": "2.0", "id": b, "error": {"code": {"n": 1}, "message": "no"}})
    c = t.tool("deploy", {"env": "dev"})
    t.error(c, -32021, "missing capability")
    r = t.run()
    assert "inspector-error" not in r.rules(), [f.message for f in r.of("inspector-error")]
    assert len(r.of("error-code-not-integer")) == 2 and len(r.of("log-level-invalid")) == 1
    assert [c["outcome"] for c in r.chains] == ["error"] * 3
