"""RULES.md §4.6, Streamable HTTP: each rule's trigger and near miss (server-initiated-request and
client-sent-response on stdio too), the real SDK captures, and the request-metadata pass whose rules
can be turned off one by one."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.config import Config
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.rules.http.values import _Annotations, decode_header_value
from mrtr_inspect.rules.registry import REGISTRY
from tests.captures import capture_frames, capture_names
from tests.rules.test_legacy import legacy_stdio
from tests.traffic import ELICIT, HTTP_HEADERS, VERSION, Traffic

NAME_FIELD = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
              "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
SSE_HEADERS = (("content-type", "text/event-stream"), ("x-accel-buffering", "no"))
REGION_TOOL = {"name": "sql", "inputSchema": {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
    "limit": {"type": "integer", "x-mcp-header": "Limit"},
    "query": {"type": "string"}}}}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def headers_for(msg: dict, drop: tuple = (), **values: str) -> tuple:
    """The headers a conforming client sends with `msg` (as tests.traffic derives them, tasks/* too),
    without the `drop` ones, with `values` (mcp_name="x" → Mcp-Name: x) set or replaced."""
    params = msg.get("params") or {}
    h = dict(HTTP_HEADERS)
    version = (params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
    if version:
        h["mcp-protocol-version"] = version
    if "method" in msg:
        h["mcp-method"] = msg["method"]
    field = NAME_FIELD.get(msg.get("method"))
    if field and field in params:
        h["mcp-name"] = params[field]
    for k in drop:
        h.pop(k, None)
    h.update({k.replace("_", "-"): v for k, v in values.items()})
    return tuple(h.items())


def post(t: Traffic, method: str, params: dict | None = None, *, drop: tuple = (), id: Any = None,
         with_meta: bool = True, **values: str) -> tuple[int, Any]:
    """POST a request with conforming headers (changed by drop/values); returns (exchange, id)."""
    msg = t.request(method, params, id, with_meta=with_meta)
    return t.post(msg, headers=headers_for(msg, drop, **values)), msg["id"]


def ok(t: Traffic, x: int, id: Any, result: dict | None = None, **kw) -> None:
    t.respond_json(x, {"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete", **(result or {})}}, **kw)


def fail(t: Traffic, x: int, id: Any, code: int, status: int) -> None:
    t.respond_json(x, {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "no"}}, status=status)


def with_tools(*tools: dict) -> Traffic:
    """An HTTP session whose server listed these tools."""
    t = Traffic("http")
    x, i = post(t, "tools/list")
    ok(t, x, i, {"tools": list(tools), "ttlMs": 0, "cacheScope": "public"})
    return t


def only(r, rule: str) -> list[Finding]:
    return r.of(rule)


# --- the request: Accept, body, notifications -----------------------------------------------------------------------


def test_accept_header():
    t = Traffic("http")
    x, i = post(t, "tools/list", accept="application/json")
    ok(t, x, i)
    x, i = post(t, "tools/list", accept="text/event-stream;q=0.9, application/json; charset=utf-8")
    ok(t, x, i)
    x, i = post(t, "initialize", {"protocolVersion": "2025-11-25"}, with_meta=False, accept="*/*")  # legacy too
    ok(t, x, i)
    f = t.run().of("http-accept-header")
    assert [x.messages for x in f] == [[0], [4]]
    assert "'application/json'" in f[0].message and "text/event-stream" in f[0].message


def test_accept_header_skips_a_post_of_unknown_era():
    t = Traffic("http")
    t.post(t.request("tools/list", with_meta=False), headers=(("content-type", "application/json"),))
    assert not t.run().of("http-accept-header")


def test_body_not_single_message():
    t = Traffic("http")
    modern = (*HTTP_HEADERS, ("mcp-protocol-version", VERSION))
    t.post([t.request("tools/list"), t.request("prompts/list")], headers=modern)
    t.post(b"", headers=modern)
    t.post(t.request("tools/list"))
    f = t.run().of("http-body-not-single-message")
    assert len(f) == 2
    assert "batch) of 2 messages" in f[0].message and "is empty" in f[1].message


def test_body_batch_of_a_legacy_client_is_left_alone():
    t = Traffic("http")
    t.post([t.request("tools/list", with_meta=False)], headers=(*HTTP_HEADERS, ("mcp-protocol-version", "2025-03-26")))
    assert not t.run().of("http-body-not-single-message")


def notification_post(t: Traffic, version: str = VERSION) -> int:
    return t.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                  headers=(*HTTP_HEADERS, ("mcp-protocol-version", version)))


def test_notification_status():
    t = Traffic("http")
    t.respond(notification_post(t), 200, b"{}")
    t.respond(notification_post(t), 202, b"")
    t.respond(notification_post(t), 400, b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"no"}}')
    f = t.run().of("http-notification-status")
    assert len(f) == 1 and "status 200 with a body" in f[0].message and f[0].messages == [0, 1]


def test_client_notification():
    t = Traffic("http")
    t.respond(notification_post(t), 202, b"")
    t.respond(notification_post(t, "2025-11-25"), 202, b"")
    f = t.run().of("http-client-notification")
    assert len(f) == 1 and f[0].severity == "info" and f[0].messages == [0]


def test_response_content_type():
    t = Traffic("http")
    x, _ = post(t, "tools/list")
    t.respond(x, 200, b"ok", headers=(("content-type", "text/plain"),))
    x, _ = post(t, "tools/list")
    t.respond(x, 202, b"", headers=())
    x, i = post(t, "tools/list")
    ok(t, x, i, headers=(("content-type", "application/json; charset=utf-8"),))
    x, i = post(t, "tools/list")
    t.respond(x, 500, b"<html>oops</html>", headers=(("content-type", "text/html"),))  # error statuses: left alone
    f = t.run().of("http-response-content-type")
    assert len(f) == 2
    assert "Content-Type 'text/plain'" in f[0].message and "status 202 and no body" in f[1].message


# --- request metadata headers ----------------------------------------------------------------------------------------


def test_protocol_version_header_missing():
    t = Traffic("http")
    x, i = post(t, "tools/list", drop=("mcp-protocol-version",))
    ok(t, x, i)
    t.respond(t.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}), 202, b"")
    r = t.run()
    f = r.of("http-protocol-version-header-missing")
    assert [(x.severity, x.messages) for x in f] == [("error", [0]), ("warning", [2])]


def test_protocol_version_header_missing_not_for_a_legacy_candidate():
    t = Traffic("http")
    x, i = post(t, "tools/list", with_meta=False)  # no _meta version, no header: a 2025-03-26 client
    ok(t, x, i)
    assert not t.run().of("http-protocol-version-header-missing")


def test_protocol_version_header_mismatch():
    t = Traffic("http")
    post(t, "tools/list", mcp_protocol_version="2025-11-25")
    post(t, "tools/list", mcp_protocol_version=VERSION)
    f = t.run().of("http-protocol-version-header-mismatch")
    assert len(f) == 1 and "'2025-11-25'" in f[0].message and f[0].messages == [0]


def test_mcp_method_missing():
    t = Traffic("http")
    post(t, "tools/list", drop=("mcp-method",))
    msg = t.request("tools/list")
    t.post(msg, headers=tuple((k.upper(), v) for k, v in headers_for(msg)))  # names are case-insensitive
    f = t.run().of("http-mcp-method-missing")
    assert len(f) == 1 and f[0].messages == [0]


def test_mcp_method_mismatch():
    t = Traffic("http")
    post(t, "tools/call", {"name": "deploy"}, mcp_method="tools/list")
    post(t, "tools/call", {"name": "deploy"})
    f = t.run().of("http-mcp-method-mismatch")
    assert len(f) == 1 and "'tools/list'" in f[0].message and '"tools/call"' in f[0].message


def test_mcp_name_missing():
    t = Traffic("http")
    post(t, "tools/call", {"name": "deploy"}, drop=("mcp-name",))
    post(t, "tasks/get", {"taskId": "t1"}, drop=("mcp-name",))
    post(t, "tools/list", drop=("mcp-name",))
    post(t, "resources/read", {"uri": "file:///a"})
    f = t.run().of("http-mcp-name-missing")
    assert [x.messages for x in f] == [[0], [1]]
    assert "params.taskId" in f[1].message


def test_mcp_name_mismatch_and_base64_decoding():
    t = Traffic("http")
    post(t, "tools/call", {"name": "deploy"}, mcp_name="get_weather")
    post(t, "tools/call", {"name": "Hello, 世界"}, mcp_name=b64("Hello, 世界"))
    post(t, "tools/call", {"name": "deploy"}, mcp_name=b64("deploy"))  # encoding a safe value is allowed
    r = t.run()
    f = r.of("http-mcp-name-mismatch")
    assert len(f) == 1 and f[0].messages == [0] and "'get_weather'" in f[0].message
    assert not r.of("http-header-value-encoding")


@pytest.mark.parametrize("name, header, words", [
    ("Hello, 世界", "Hello, 世界", "outside visible ASCII"),
    ("deploy", "=?BASE64?ZGVwbG95?=", "upper case"),
    ("deploy", "=?base64?ZGVwbG95", "without closing"),
    ("deploy", "=?base64?not base64!?=", "invalid Base64"),
    ("=?base64?literal?=", "=?base64?literal?=", "must itself be Base64-encoded"),
])
def test_header_value_encoding(name, header, words):
    t = Traffic("http")
    post(t, "tools/call", {"name": name}, mcp_name=header)
    r = t.run()
    f = r.of("http-header-value-encoding")
    assert len(f) == 1 and words in f[0].message
    assert not r.of("http-mcp-name-mismatch")


def test_header_value_encoding_near_miss_sentinel_value_encoded():
    t = Traffic("http")
    post(t, "tools/call", {"name": "=?base64?literal?="}, mcp_name=b64("=?base64?literal?="))
    post(t, "tools/call", {"name": "us west 1"}, mcp_name="us west 1")  # inner spaces are safe
    r = t.run()
    assert not r.of("http-header-value-encoding") and not r.of("http-mcp-name-mismatch")


def test_decode_header_value_spec_examples():
    assert decode_header_value("us-west1") == ("us-west1", None)
    assert decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=") == ("Hello, 世界", None)
    assert decode_header_value("=?base64?IHBhZGRlZCA=?=") == (" padded ", None)
    assert decode_header_value("=?base64?bGluZTEKbGluZTI=?=") == ("line1\nline2", None)
    assert decode_header_value(" padded ")[1] == "has leading or trailing whitespace (such values must be Base64-encoded)"
    assert decode_header_value("a\tb") == ("a\tb", None)
    assert decode_header_value("line1\nline2")[0] is None
    assert decode_header_value("=?base64?/w==?=") == (None, "carries Base64 that does not decode to UTF-8 text")


def call_sql(t: Traffic, arguments: dict, **values: str) -> None:
    post(t, "tools/call", {"name": "sql", "arguments": arguments}, **values)


def test_mcp_param_missing():
    t = with_tools(REGION_TOOL)
    call_sql(t, {"region": "us-west1", "query": "q"})
    call_sql(t, {"region": "us-west1", "query": "q"}, mcp_param_region="us-west1")
    call_sql(t, {"query": "q"})  # not in the arguments: no header expected
    f = t.run().of("http-mcp-param-missing")
    assert len(f) == 1 and f[0].messages == [2] and "Mcp-Param-Region" in f[0].message


def test_mcp_param_follows_the_latest_tools_list():
    t = with_tools(REGION_TOOL)
    call_sql(t, {"region": "us-west1"})
    x, i = post(t, "tools/list")
    ok(t, x, i, {"tools": [REGION_TOOL], "ttlMs": 0, "cacheScope": "public"})  # the same definition again
    call_sql(t, {"region": "us-west1"})
    plain = {"name": "sql", "inputSchema": {"type": "object", "properties": {"region": {"type": "string"}}}}
    x, i = post(t, "tools/list")
    ok(t, x, i, {"tools": [plain], "ttlMs": 0, "cacheScope": "public"})  # the annotation is gone
    call_sql(t, {"region": "us-west1"})
    assert [f.messages for f in t.run().of("http-mcp-param-missing")] == [[2], [5]]


def test_mcp_param_missing_needs_the_tool_definition():
    t = Traffic("http")
    call_sql(t, {"region": "us-west1"})
    assert not t.run().of("http-mcp-param-missing")


def test_mcp_param_mismatch():
    t = with_tools(REGION_TOOL)
    call_sql(t, {"region": "us-west1"}, mcp_param_region="us-east1")
    call_sql(t, {"verbose": True}, mcp_param_verbose="True")  # booleans are lowercase
    call_sql(t, {"limit": 42, "verbose": False}, mcp_param_limit="42.0", mcp_param_verbose="false")
    call_sql(t, {"region": "Hello, 世界"}, mcp_param_region=b64("Hello, 世界"))
    f = t.run().of("http-mcp-param-mismatch")
    assert [x.messages for x in f] == [[2], [3]]
    assert "'us-east1'" in f[0].message and '"us-west1"' in f[0].message


def test_mcp_param_null_present():
    t = with_tools(REGION_TOOL)
    call_sql(t, {"verbose": None}, mcp_param_verbose="false")
    call_sql(t, {"verbose": None})
    f = t.run().of("http-mcp-param-null-present")
    assert len(f) == 1 and "is null" in f[0].message


@pytest.mark.parametrize("schema, why", [
    ({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}, "empty"),
    ({"properties": {"a": {"type": "string", "x-mcp-header": "My Region"}}}, "token"),
    ({"properties": {"a": {"type": "string", "x-mcp-header": "Région"}}}, "token"),
    ({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, "not integer, string or boolean"),
    ({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}, "not integer, string or boolean"),
    ({"properties": {"a": {"type": "string", "x-mcp-header": "Id"}, "b": {"type": "string", "x-mcp-header": "ID"}}},
     "case-insensitively unique"),
    ({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}, "statically reachable"),
    ({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}, "statically reachable"),
])
def test_invalid_x_mcp_header_definitions(schema, why):
    assert why in _Annotations({"type": "object", **schema}).problem


def test_valid_x_mcp_header_definitions():
    ann = _Annotations({"type": "object", "properties": {
        "where": {"type": "object", "properties": {"region": {"type": ["string", "null"], "x-mcp-header": "Region"}}},
        "n": {"type": "integer", "x-mcp-header": "N", "default": {"x-mcp-header": "data, not a schema"}}}})
    assert ann.problem is None
    assert [(p, n) for p, n, _, _ in ann.headers] == [(("where", "region"), "Region"), (("n",), "N")]


def test_invalid_x_mcp_header_tool_called():
    bad = {"name": "bad", "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}}
    t = with_tools(bad, REGION_TOOL)
    post(t, "tools/call", {"name": "bad", "arguments": {"x": 1.5}})
    call_sql(t, {"query": "q"})
    r = t.run()
    f = r.of("http-invalid-x-mcp-header-tool-called")
    assert len(f) == 1 and f[0].severity == "warning" and "'bad'" in f[0].message
    assert not r.of("http-mcp-param-missing")  # an invalid definition designates nothing


def test_session_id_sent():
    t = Traffic("http")
    post(t, "tools/list", mcp_session_id="abc")
    t.post(t.request("tools/list", with_meta=False),
           headers=(*HTTP_HEADERS, ("mcp-session-id", "abc"), ("mcp-protocol-version", "2025-11-25")))
    f = t.run().of("http-session-id-sent")
    assert len(f) == 1 and f[0].severity == "info" and f[0].messages == [0]


def test_one_pass_many_rules_each_can_be_turned_off():
    t = Traffic("http")
    post(t, "tools/call", {"name": "deploy"}, drop=("mcp-protocol-version", "mcp-method"))
    both = {"http-protocol-version-header-missing", "http-mcp-method-missing"}
    assert both <= t.run().rules()
    first_off = t.run(Config(disabled={"http-protocol-version-header-missing"})).rules()
    assert "http-mcp-method-missing" in first_off and "http-protocol-version-header-missing" not in first_off
    child_off = t.run(Config(disabled={"http-mcp-method-missing"})).rules()
    assert "http-protocol-version-header-missing" in child_off and "http-mcp-method-missing" not in child_off


# --- the server's reaction to header validation ------------------------------------------------------------------


def test_server_accepted_header_mismatch():
    t = Traffic("http")
    x, i = post(t, "tools/call", {"name": "delete_everything"}, mcp_name="get_weather")
    ok(t, x, i, {"content": []})
    x, i = post(t, "tools/call", {"name": "delete_everything"}, mcp_name="get_weather")
    fail(t, x, i, -32020, 400)
    r = t.run()
    f = r.of("http-server-accepted-header-mismatch")
    assert len(f) == 1 and f[0].messages == [0, 1] and "http-mcp-name-mismatch" in f[0].message
    assert not r.of("http-header-mismatch-wrong-status-or-code")


def test_header_mismatch_wrong_status_or_code():
    t = Traffic("http")
    x, i = post(t, "tools/call", {"name": "deploy"}, mcp_method="tools/list")
    fail(t, x, i, -32020, 200)  # right code, wrong status
    x, i = post(t, "tools/call", {"name": "deploy"}, mcp_method="tools/list")
    fail(t, x, i, -32603, 400)  # wrong code
    x, i = post(t, "tools/call", {"name": "deploy"}, mcp_method="tools/list")
    fail(t, x, i, -32602, 400)  # may take precedence (RULES.md §7.12)
    x, i = post(t, "tools/call", {"name": "deploy"}, mcp_method="tools/list")
    t.respond(x, 400, b"")  # an intermediary: a status alone is allowed
    f = t.run().of("http-header-mismatch-wrong-status-or-code")
    assert [x.messages for x in f] == [[0, 1], [2, 3]]
    assert "HTTP status 200" in f[0].message and "error code -32603" in f[1].message


def test_header_mismatch_spurious():
    t = Traffic("http")
    x, i = post(t, "tools/list")
    fail(t, x, i, -32020, 400)
    x, i = post(t, "tools/call", {"name": "unknown_tool", "arguments": {"a": 1}})  # its annotations are unknown
    fail(t, x, i, -32020, 400)
    f = t.run().of("http-header-mismatch-spurious")
    assert len(f) == 1 and f[0].messages == [0, 1]


# --- error statuses, sessions, GET/DELETE, Last-Event-ID ---------------------------------------------------------


def test_method_not_found_status():
    t = Traffic("http")
    x, i = post(t, "foo/bar")
    fail(t, x, i, -32601, 200)
    x, i = post(t, "foo/bar")
    fail(t, x, i, -32601, 404)
    x, i = post(t, "initialize", {"protocolVersion": "2025-11-25"}, with_meta=False)
    fail(t, x, i, -32601, 200)  # legacy
    f = t.run().of("http-method-not-found-status")
    assert len(f) == 1 and f[0].messages == [0, 1]


def test_unsupported_version_status():
    t = Traffic("http")
    x, i = post(t, "tools/list")
    fail(t, x, i, -32022, 200)
    x, i = post(t, "tools/list")
    fail(t, x, i, -32022, 400)
    f = t.run().of("http-unsupported-version-status")
    assert len(f) == 1 and f[0].messages == [0, 1]


def test_session_id_minted():
    t = Traffic("http")
    x, i = post(t, "tools/list")
    ok(t, x, i, headers=(("content-type", "application/json"), ("mcp-session-id", "s-1")))
    x, i = post(t, "initialize", {"protocolVersion": "2025-11-25"}, with_meta=False)
    ok(t, x, i, headers=(("content-type", "application/json"), ("mcp-session-id", "s-2")))
    f = t.run().of("http-session-id-minted")
    assert len(f) == 1 and "'s-1'" in f[0].message


def discover_then(versions: list[str], status: int) -> Traffic:
    t = Traffic("http")
    x, i = post(t, "server/discover")
    ok(t, x, i, {"supportedVersions": versions, "capabilities": {}})
    x = t.post(b"", method="GET", headers=(("accept", "text/event-stream"),))
    t.respond(x, status, b"", headers=(("content-type", "text/event-stream"),))
    return t


def test_get_delete_modern():
    f = discover_then([VERSION], 200).run().of("http-get-delete-modern")
    assert len(f) == 1 and "GET /mcp" in f[0].message and "405" in f[0].message
    assert not discover_then([VERSION], 405).run().of("http-get-delete-modern")
    assert not discover_then([VERSION, "2025-11-25"], 200).run().of("http-get-delete-modern")


def test_get_delete_modern_only_on_the_mcp_endpoint():
    t = discover_then([VERSION], 405)
    t.respond(t.post(b"", method="GET", path="/.well-known/oauth-protected-resource"), 200, b"{}")
    assert not t.run().of("http-get-delete-modern")


LEGACY_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "1"}}


def legacy_client(t: Traffic, session_id: str | None = "sid-1", status: int = 200, init_ok: bool = True) -> None:
    """A 2025-11-25 client as the SDKs run it: initialize (the server mints `session_id`; or rejects it
    with 400 when not `init_ok`), then a GET stream and a DELETE carrying MCP-Protocol-Version
    2025-11-25 and the session id, both answered with `status`."""
    x, i = post(t, "initialize", LEGACY_INIT, with_meta=False)
    minted = (("mcp-session-id", session_id),) if session_id and init_ok else ()
    answer = ({"result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}
              if init_ok else {"error": {"code": -32602, "message": "missing _meta protocolVersion"}})
    t.respond_json(x, {"jsonrpc": "2.0", "id": i, **answer}, status=200 if init_ok else 400,
                   headers=(("content-type", "application/json"),) + minted)
    h = (("mcp-protocol-version", "2025-11-25"),) + ((("mcp-session-id", session_id),) if session_id else ())
    t.respond(t.post(b"", method="GET", headers=(("accept", "text/event-stream"),) + h), status, b"",
              headers=(("content-type", "text/event-stream"),))
    t.respond(t.post(b"", method="DELETE", headers=h), status, b"")


def test_get_delete_modern_judges_each_request_by_its_era():
    """A dual-era server whose discover lists only the modern version: a legacy client's GET and DELETE
    in the session the server minted answering initialize are legacy traffic it serves, whether a
    modern client came first or not (the audit's order dependence)."""
    modern_first = discover_then([VERSION], 405)
    legacy_client(modern_first)
    assert not modern_first.run().of("http-get-delete-modern")
    legacy_first = Traffic("http")
    legacy_client(legacy_first)
    x, i = post(legacy_first, "server/discover")
    ok(legacy_first, x, i, {"supportedVersions": [VERSION], "capabilities": {}})
    assert not legacy_first.run().of("http-get-delete-modern")
    # a server that mints no session id: the legacy header on an endpoint that answered initialize
    stateless = discover_then([VERSION], 405)
    legacy_client(stateless, session_id=None)
    assert not stateless.run().of("http-get-delete-modern")


def test_get_delete_modern_without_legacy_evidence_still_warns():
    """Near misses: a legacy client whose initialize the modern-only server rejected, GETting and
    DELETEing with the legacy header and a session id the server never minted; and a legacy header on
    an endpoint that never answered initialize (the header is the client's claim, not the server's)."""
    t = discover_then([VERSION], 405)
    legacy_client(t, init_ok=False)
    f = t.run().of("http-get-delete-modern")
    assert [m.message.split(" (")[0] for m in f] == ["GET /mcp", "DELETE /mcp"]
    t = discover_then([VERSION], 200)  # its GET carries no header, no session
    t.respond(t.post(b"", method="DELETE", headers=(("mcp-protocol-version", "2025-11-25"),)), 200, b"")
    assert [m.message.split(" (")[0] for m in t.run().of("http-get-delete-modern")] == ["GET /mcp", "DELETE /mcp"]


def sse_event(msg: dict | None, event_id: str | None = None) -> bytes:
    from tests.traffic import dumps
    head = f"id: {event_id}\r\n".encode() if event_id is not None else b""
    return head + b"event: message\r\ndata: " + dumps(msg) + b"\r\n\r\n"


def test_last_event_id():
    t = Traffic("http")
    post(t, "tools/list", last_event_id="7")
    x, i = post(t, "tools/list")
    t.respond_sse(x, [], raw_events=[
        sse_event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}, "1"),
        sse_event({"jsonrpc": "2.0", "id": i, "result": {"resultType": "complete", "tools": []}}, "2")])
    f = t.run().of("http-last-event-id")
    assert len(f) == 2 and "Last-Event-ID '7'" in f[0].message and "id: '1'" in f[1].message


def test_an_event_id_that_looks_like_a_credential_is_never_quoted():
    """A recording made before ids were redacted (or by another tool) keeps a session token as an SSE
    id and in Last-Event-ID: the findings say what it looks like, not the token (issue 25, item 6).
    Near miss: a counter id is quoted (test_last_event_id)."""
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzZXNzaW9uIn0.c2lnbmF0dXJlc2VjcmV0MTIz"
    t = Traffic("http")
    post(t, "tools/list", last_event_id=jwt)
    x, i = post(t, "tools/list")
    t.respond_sse(x, [], raw_events=[sse_event({"jsonrpc": "2.0", "id": i, "result": {"resultType": "complete", "tools": []}}, jwt)])
    f = t.run().of("http-last-event-id")
    assert len(f) == 2 and all("<a JWT, not shown>" in m.message and jwt not in m.message for m in f)


def test_last_event_id_on_a_legacy_stream_is_fine():
    t = Traffic("http")
    msg = t.request("tools/list", with_meta=False)
    x = t.post(msg, headers=(*HTTP_HEADERS, ("mcp-protocol-version", "2025-11-25"), ("last-event-id", "3")))
    t.respond_sse(x, [], raw_events=[sse_event({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}}, "4")])
    assert not t.run().of("http-last-event-id")


def test_origin_403_is_declared_not_observable():
    r = REGISTRY["http-origin-403"]
    assert r.check is None and r.observable is False and "allowlist" in r.doc


# --- SSE response streams -----------------------------------------------------------------------------------------


def progress(token: Any) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 0.5}}


def call_with_stream(t: Traffic, events: list, token: Any = 5, method: str = "tools/call", **kw) -> Any:
    params = {"name": "deploy", "_meta": {"progressToken": token}} if method == "tools/call" else {}
    x, i = post(t, method, params)
    t.respond_sse(x, [e(i) if callable(e) else e for e in events], **kw)
    return i


def done(i: Any) -> dict:
    return {"jsonrpc": "2.0", "id": i, "result": {"resultType": "complete", "content": []}}


def test_sse_notification_unrelated():
    t = Traffic("http")
    call_with_stream(t, [progress(9), done])
    call_with_stream(t, [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, done])
    call_with_stream(t, [progress(5), done])  # its own token
    call_with_stream(t, [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}], method="subscriptions/listen")
    f = t.run().of("sse-notification-unrelated")
    assert len(f) == 2
    assert "token 9, not the request's token 5" in f[0].message and "subscriptions/listen stream" in f[1].message


def test_sse_events_after_response():
    t = Traffic("http")
    call_with_stream(t, [done, progress(5), progress(5)])
    call_with_stream(t, [progress(5), done])
    r = t.run()
    f = r.of("sse-events-after-response")
    assert len(f) == 1 and f[0].severity == "warning"
    # the response, then the event after it: its message's own index (the event is seen once it has one)
    first_after = [m.index for m in r.messages if m.method == "notifications/progress"][0]
    assert f[0].messages == [first_after - 1, first_after]


def test_sse_multiple_or_foreign_response():
    t = Traffic("http")
    call_with_stream(t, [done, done])
    call_with_stream(t, [lambda i: done(i + 100)])
    call_with_stream(t, [progress(5), done])
    f = t.run().of("sse-multiple-or-foreign-response")
    assert len(f) == 2 and "another response" in f[0].message and "for id 102" in f[1].message


def test_sse_no_response():
    t = Traffic("http")
    call_with_stream(t, [progress(5)])
    call_with_stream(t, [progress(5)], end_error="client-disconnected")  # the client cancelled
    call_with_stream(t, [progress(5), done])
    f = t.run().of("sse-no-response")
    assert len(f) == 1 and f[0].severity == "info" and f[0].messages == [0]


def test_sse_x_accel_buffering():
    t = Traffic("http")
    call_with_stream(t, [done], headers=(("content-type", "text/event-stream"),))
    call_with_stream(t, [], headers=(("content-type", "text/event-stream"), ("x-accel-buffering", "yes")))
    call_with_stream(t, [done])
    f = t.run().of("sse-x-accel-buffering")
    assert len(f) == 2 and "no X-Accel-Buffering header" in f[0].message and "X-Accel-Buffering: yes" in f[1].message


def test_irr_on_sse():
    t = Traffic("http")
    irr = {"resultType": "input_required", "inputRequests": {"c": ELICIT}, "requestState": "s"}
    call_with_stream(t, [progress(5), lambda i: {"jsonrpc": "2.0", "id": i, "result": irr}])
    x, i = post(t, "tools/call", {"name": "deploy"})
    t.respond_json(x, {"jsonrpc": "2.0", "id": i, "result": irr})
    f = t.run().of("http-irr-on-sse")
    assert len(f) == 1 and f[0].severity == "info" and "as the last event" in f[0].message


# --- legacy artifacts on a modern hop, on both transports -----------------------------------------------------


def test_server_initiated_request_modern_stdio():
    t = Traffic()
    t.call("tools/call", {"name": "deploy"}, id=2)
    t.server({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {"message": "ok?",
                                                                                     "requestedSchema": {}}})
    r = t.run()
    f = r.of("server-initiated-request")
    assert len(f) == 1 and f[0].messages == [1] and "on stdout" in f[0].message


def test_server_request_on_a_legacy_process_is_fine():
    t = legacy_stdio()
    t.call("tools/call", {"name": "deploy"}, with_meta=False)
    t.server({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {"message": "ok?",
                                                                                     "requestedSchema": {}}})
    t.client({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {}}})
    r = t.run()
    assert not r.of("server-initiated-request") and not r.of("client-sent-response")


def test_server_initiated_request_on_a_modern_post_stream():
    h = Traffic("http")
    x = h.post(h.request("tools/call", {"name": "deploy"}, id=2))
    h.respond_sse(x, [{"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}},
                      {"jsonrpc": "2.0", "id": 2, "result": {"content": [], "resultType": "complete"}}])
    f = h.run().of("server-initiated-request")
    assert len(f) == 1 and f[0].messages == [0, 1] and "response stream of tools/call id=2" in f[0].message


def test_client_sent_response():
    t = Traffic()
    t.call("tools/list")
    t.client({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept"}})
    t.client({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}})
    assert [f.messages for f in t.run().of("client-sent-response")] == [[1], [2]]



# --- the real SDK captures --------------------------------------------------------------------------------------------

HTTP_CAPTURES = capture_names("http_")
MINE = tuple(r.id for r in REGISTRY.values() if r.section == "4.6")


def findings(name: str) -> list[Finding]:
    insp = Analysis()
    outs = []
    for f in capture_frames(name):
        outs += insp.feed(f)
    outs += insp.close()
    return [o for o in outs if type(o) is Finding and o.rule in MINE]


@pytest.mark.skipif(not HTTP_CAPTURES, reason="fixtures/captures not present")
@pytest.mark.parametrize("name", HTTP_CAPTURES)
def test_sdk_captures_break_no_http_rule(name):
    f = findings(name)
    assert not [x for x in f if x.severity != "info"], [x.message for x in f]
    if name == "http_progress_sse.jsonl":  # the input_required result of the first round came on the SSE stream
        assert [x.rule for x in f] == ["http-irr-on-sse"]


@pytest.mark.skipif("http_legacy.jsonl" not in HTTP_CAPTURES, reason="fixtures/captures not present")
def test_legacy_capture_gets_no_modern_rule():
    """2025-11-25 traffic: initialize, Mcp-Session-Id, a GET stream, DELETE; nothing modern applies."""
    assert findings("http_legacy.jsonl") == []
