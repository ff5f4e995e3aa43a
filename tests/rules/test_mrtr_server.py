"""RULES.md §4.1 (MRTR, the server side): each rule fires on the traffic it describes and stays quiet
on the nearest traffic that is fine."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters.offline import replay_outputs
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.messages import Message
from mrtr_inspect.rules import load_rules
from mrtr_inspect.rules.registry import REGISTRY
from tests.captures import ROOT, capture_frames, capture_names
from tests.core.pipeline import analyse
from tests.traffic import ACCEPT, CAPS_ALL, ELICIT, ROOTS, SAMPLE, Traffic, dumps

URL_ELICIT = {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in",
                                                         "url": "https://example.com/auth"}}
FORM_ONLY = {"elicitation": {"form": {}}}


def answer(result: dict, method: str = "tools/call", caps: dict | None = None, transport: str = "stdio", **send):
    """One modern request answered with `result` (taken as is: resultType included or not)."""
    t = Traffic(transport)
    params = {"uri": "file:///r"} if method == "resources/read" else {"name": "deploy", "arguments": {}}
    rid = t.call(method, params if method in ("tools/call", "prompts/get", "resources/read") else {}, caps=caps)
    t.result(rid, result, result_type=None, **send)
    return t.run()


def irr(input_requests: dict | None = None, state: str | None = "s1", caps: dict | None = None,
        method: str = "tools/call", **extra):
    r: dict = {"resultType": "input_required"}
    if input_requests is not None:
        r["inputRequests"] = input_requests
    if state is not None:
        r["requestState"] = state
    r.update(extra)
    return answer(r, method, caps)


def with_params(request: dict, **params) -> dict:
    out = copy.deepcopy(request)
    out["params"].update(params)
    return out


def form(properties: dict) -> dict:
    return {"method": "elicitation/create", "params": {"message": "Fill in", "requestedSchema": {
        "type": "object", "properties": properties}}}


def legacy_server_request(method: str, params: dict | None, answer: dict = ACCEPT):
    """A 2025-11-25 stdio session in which, during a tools/call, the server sends `method` to the client
    (id 100) and the client answers `answer`."""
    t = Traffic()
    init = t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                                 "clientInfo": {"name": "c", "version": "1"}}, with_meta=False)
    t.result(init, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
             with_meta=False, result_type=None)
    t.notify("notifications/initialized")
    call = t.call("tools/call", {"name": "deploy", "arguments": {}}, with_meta=False)
    msg = {"jsonrpc": "2.0", "id": 100, "method": method}
    if params is not None:
        msg["params"] = params
    t.server(msg)
    t.client({"jsonrpc": "2.0", "id": 100, "result": answer})
    t.result(call, {"content": []}, with_meta=False, result_type=None)
    return t.run()


# --- resultType ---------------------------------------------------------------------------------


def test_result_type_missing():
    r = answer({"content": []})
    [f] = r.of("result-type-missing")
    assert f.severity == "error" and "has no resultType" in f.message and f.messages == [0, 1]


def test_result_type_missing_near_miss_legacy_and_present():
    assert "result-type-missing" not in answer({"content": [], "resultType": "complete"}).rules()
    assert "result-type-missing" not in legacy_server_request("elicitation/create", ELICIT["params"]).rules()


def test_result_type_not_string():
    assert "result-type-not-string" in answer({"content": [], "resultType": 1}).rules()
    assert "result-type-not-string" not in answer({"content": [], "resultType": "complete"}).rules()


def test_result_type_unrecognized():
    [f] = answer({"resultType": "partial"}).of("result-type-unrecognized")
    assert "'partial'" in f.message
    assert "result-type-unrecognized" in answer({"resultType": "task", "taskId": "t1"}).rules()


def test_result_type_unrecognized_near_miss_declared_task_extension():
    caps = {**CAPS_ALL, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert "result-type-unrecognized" not in answer({"resultType": "task", "taskId": "t1"}, caps=caps).rules()
    assert "result-type-unrecognized" not in irr({"q": ELICIT}).rules()


def test_input_requests_without_input_required():
    r = answer({"inputRequests": {"q": ELICIT}, "requestState": "s"})
    [f] = r.of("input-requests-without-input-required")
    assert "inputRequests and requestState" in f.message and "no resultType" in f.message
    assert "input-requests-without-input-required" in answer({"resultType": "complete", "requestState": "s"}).rules()


def test_input_requests_without_input_required_near_miss():
    assert "input-requests-without-input-required" not in irr({"q": ELICIT}).rules()
    assert "input-requests-without-input-required" not in answer({"resultType": "complete", "content": []}).rules()


@pytest.mark.parametrize("sse", [False, True])
def test_input_required_results_are_read_on_http_too(sse):
    r = answer({"resultType": "input_required", "inputRequests": {"q": URL_ELICIT}}, caps=FORM_ONLY,
               transport="http", sse=sse)
    assert r.rules() & OURS == {"input-request-undeclared-capability"}


def test_irr_unsupported_method():
    [f] = irr({"q": ELICIT}, method="tools/list").of("irr-unsupported-method")
    assert "tools/list" in f.message


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_irr_unsupported_method_near_miss(method):
    assert "irr-unsupported-method" not in irr({"q": ELICIT}, method=method).rules()


# --- the input_required result ------------------------------------------------------------------


def test_irr_empty():
    assert "irr-empty" in irr(None, state=None).rules()
    assert "irr-empty" in irr(None, state=None, inputRequests=None).rules()


def test_irr_empty_near_miss_state_only():
    r = irr(None, state="retry-later")
    assert "irr-empty" not in r.rules() and "irr-empty-map" not in r.rules()


def test_irr_empty_map():
    assert "irr-empty-map" in irr({}, state=None).rules()
    assert "irr-empty-map" not in irr({}, state="s").rules()


def test_irr_field_types():
    [f] = irr({"q": ELICIT, "bad": "ask the user"}, state=None, requestState={"step": 2}).of("irr-field-types")
    assert "requestState is" in f.message and "inputRequests['bad']" in f.message
    assert "irr-field-types" in irr(None, state=None, inputRequests=["q"]).rules()


def test_irr_field_types_near_miss():
    assert "irr-field-types" not in irr({"q": ELICIT, "s": SAMPLE, "r": ROOTS}).rules()


def test_input_requests_duplicate_key():
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"q":' + dumps(ELICIT) + \
          b',"q":' + dumps(SAMPLE) + b'}}}'
    t = Traffic()
    t.call("tools/call", {"name": "deploy"})
    t.answer(raw)
    [f] = t.run().of("input-requests-duplicate-key")
    assert "'q' 2 times" in f.message


def test_input_requests_duplicate_key_near_miss_elsewhere():
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"q":' + dumps(ELICIT) + \
          b'},"x":1,"x":2}}'
    t = Traffic()
    t.call("tools/call", {"name": "deploy"})
    t.answer(raw)
    assert "input-requests-duplicate-key" not in t.run().rules()


def test_input_request_method_invalid():
    r = irr({"p": {"method": "ping"}, "n": {"params": {}}, "ok": ELICIT})
    found = r.of("input-request-method-invalid")
    assert sorted(f.details["key"] for f in found) == ["n", "p"]
    assert any("has no method" in f.message for f in found)


def test_input_request_method_invalid_near_miss():
    assert "input-request-method-invalid" not in irr({"e": ELICIT, "s": SAMPLE, "r": ROOTS}).rules()


@pytest.mark.parametrize("value, problem", [
    ({"method": "elicitation/create", "params": {"message": "Proceed?"}}, "params.requestedSchema"),
    ({"method": "elicitation/create", "params": {"mode": "popup", "message": "x"}}, "params.mode"),
    ({"method": "elicitation/create", "params": {"mode": "url", "message": "x"}}, "params.url"),
    ({"method": "elicitation/create", "params": {"message": "x", "requestedSchema": {"type": "array",
                                                                                     "properties": {}}}},
     "params.requestedSchema.type"),
    (with_params(SAMPLE, maxTokens="50"), "params.maxTokens"),
    (with_params(SAMPLE, messages=[{"role": "system", "content": {"type": "text", "text": "x"}}]),
     "params.messages[0].role"),
    ({"method": "sampling/createMessage"}, "params"),
    ({"method": "roots/list", "params": "all"}, "params"),
])
def test_input_request_params_invalid(value, problem):
    [f] = irr({"q": value}).of("input-request-params-invalid")
    assert problem in f.message and f.details["key"] == "q"


def test_input_request_params_invalid_near_miss():
    mode_absent = {"method": "elicitation/create", "params": {"message": "Proceed?", "requestedSchema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}}}}
    r = irr({"e": ELICIT, "m": mode_absent, "u": URL_ELICIT, "s": SAMPLE, "r": ROOTS,
             "r2": {"method": "roots/list", "params": {"_meta": {}}}})
    assert "input-request-params-invalid" not in r.rules()


def test_input_request_params_invalid_legacy_server_request():
    r = legacy_server_request("elicitation/create", {"message": "Proceed?"})
    [f] = r.of("input-request-params-invalid")
    assert "server request elicitation/create id=100" in f.message


def test_input_request_params_invalid_legacy_near_miss():
    """A valid legacy elicitation; and a legacy URL elicitation without elicitationId, which is §4.8's."""
    assert not legacy_server_request("elicitation/create", ELICIT["params"]).rules() & OURS
    r = legacy_server_request("elicitation/create", URL_ELICIT["params"])
    assert "input-request-params-invalid" not in r.rules()


def test_elicit_form_schema_not_flat():
    r = irr({"q": form({"name": {"type": "string"}, "address": {"type": "object", "properties": {}},
                        "tags": {"type": "array", "items": {"type": "object"}}, "ref": {"$ref": "#/defs/x"}})})
    [f] = r.of("elicit-form-schema-not-flat")
    assert f.details["properties"] == ["address", "ref", "tags"]
    assert "'address' is a nested object" in f.message and "'ref' is a $ref" in f.message


def test_elicit_form_schema_not_flat_near_miss_enum_forms():
    props = {
        "s": {"type": "string", "format": "email", "minLength": 3},
        "n": {"type": "integer", "minimum": 0},
        "b": {"type": "boolean", "default": False},
        "e": {"type": "string", "enum": ["a", "b"]},
        "o": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "m": {"type": "array", "items": {"type": "string", "enum": ["a"]}},
        "t": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
        "l": {"type": "string", "enum": ["a"], "enumNames": ["A"]},
    }
    assert not irr({"q": form(props)}).rules() & OURS


def test_elicit_form_sensitive():
    r = irr({"q": form({"apiKey": {"type": "string"}, "pin": {"type": "string", "description": "Your password"}})})
    assert sorted(f.details["property"] for f in r.of("elicit-form-sensitive")) == ["apiKey", "pin"]
    assert all(f.details["confidence"] == "low" for f in r.of("elicit-form-sensitive"))


def test_an_input_request_asked_again_is_judged_again_from_what_was_found_of_it():
    """Input requests of the same bytes share what their value decides (`AskFacts`): asked in two
    captures, each reports the same findings about it; one byte more is another input request, and
    a value orjson cannot write (an integer past 64 bits) is judged on its own."""
    from mrtr_inspect.rules import asks

    bad = form({"api_key": {"type": "string"}, "address": {"type": "object", "properties": {}}})
    bad["params"].pop("message")
    ids = ("input-request-params-invalid", "elicit-form-schema-not-flat", "elicit-form-sensitive")
    first, again = irr({"q": bad}), irr({"q": copy.deepcopy(bad)})
    for r in (first, again):
        assert [f.rule for f in r.findings if f.rule in ids] == list(ids)
    assert ([(f.message, f.details) for f in first.findings if f.rule in ids]
            == [(f.message, f.details) for f in again.findings if f.rule in ids])
    fine = form({"api_key_hint": {"type": "string", "title": "Where to find it"}})
    assert asks._facts_of(fine, "2026-07-28") is not asks._facts_of(bad, "2026-07-28")
    assert asks._facts_of(bad, "2025-11-25") is not asks._facts_of(bad, "2026-07-28")
    huge = form({"n": {"type": "integer", "maximum": 1 << 70}, "pin": {"type": "string", "title": "Password"}})
    assert asks._facts_of(huge, "2026-07-28") is not asks._facts_of(huge, "2026-07-28")
    assert [f.details["property"] for f in irr({"q": huge}).of("elicit-form-sensitive")] == ["pin"]


def test_an_input_requests_facts_are_given_while_another_thread_changes_the_kept_ones(monkeypatch):
    """Analyses in threads share the kept facts: one that finds the dict changing under its look
    for the oldest still gives the facts (the eviction waits for the next one)."""
    from mrtr_inspect.rules import asks

    class Changing(dict):
        def __iter__(self):
            raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(asks, "_FACTS_KEPT", 1)
    monkeypatch.setattr(asks, "_FACTS", Changing())
    for i in range(3):
        assert type(asks._facts_of(form({f"n{i}": {"type": "string"}}), "2026-07-28")) is asks.AskFacts


def test_elicit_form_sensitive_first_look_at_all_texts_at_once():
    """`_sensitive` first searches the hint in all its texts joined: it finds what the look at each
    text alone finds, nothing across two texts, and lower() gives the joined text what it gives each
    one (the Kelvin sign is a k, a final sigma stays a letter of its own text)."""
    from mrtr_inspect.rules.asks import _sensitive

    assert _sensitive("pa", "ss") is None and _sensitive("to", "ken", None, 3) is None
    assert _sensitive("name", None, "Your API \u212aey") == "api key"
    assert _sensitive("ΑΣ", "secret") == "secret" and _sensitive(None, "ΑΣ", "cvv") == "cvv"
    assert _sensitive("apiToken") == "token" and _sensitive("x", "y", "z", "password") == "password"


def test_elicit_form_sensitive_near_miss():
    r = irr({"q": form({"username": {"type": "string"}, "max_tokens": {"type": "integer", "title": "Max tokens"},
                        "email": {"type": "string", "format": "email"}})})
    assert "elicit-form-sensitive" not in r.rules()
    secret_by_url = {"method": "elicitation/create", "params": {"mode": "url", "message": "Enter your API key",
                                                                "url": "https://example.com/key"}}
    assert "elicit-form-sensitive" not in irr({"q": secret_by_url}).rules()


def test_elicit_url_invalid():
    for url in ("/auth?x=1", "example.com/auth", "https://exa mple.com"):
        assert "elicit-url-invalid" in irr({"q": with_params(URL_ELICIT, url=url)}).rules(), url


def test_elicit_url_invalid_near_miss():
    assert "elicit-url-invalid" not in irr({"q": URL_ELICIT}).rules()


def test_elicit_url_not_https():
    [f] = irr({"q": with_params(URL_ELICIT, url="http://example.com/auth")}).of("elicit-url-not-https")
    assert "http://example.com/auth" in f.message and "not https" in f.message


@pytest.mark.parametrize("url", ["https://example.com/a", "http://localhost:8080/a", "http://127.0.0.1/a",
                                 "http://[::1]:3000/a", "http://app.localhost/a"])
def test_elicit_url_not_https_near_miss(url):
    assert "elicit-url-not-https" not in irr({"q": with_params(URL_ELICIT, url=url)}).rules()


# --- capabilities -----------------------------------------------------------------------------------


@pytest.mark.parametrize("caps, ask, need", [
    ({}, ELICIT, "elicitation"),
    (FORM_ONLY, URL_ELICIT, "elicitation.url"),
    ({"elicitation": {}}, URL_ELICIT, "elicitation.url"),
    ({"elicitation": {"url": {}}}, ELICIT, "elicitation.form"),
    ({"elicitation": {}}, SAMPLE, "sampling"),
    ({"sampling": {}}, with_params(SAMPLE, tools=[{"name": "t", "inputSchema": {"type": "object"}}]), "sampling.tools"),
    ({"sampling": {}}, with_params(SAMPLE, toolChoice={"mode": "auto"}), "sampling.tools"),
    ({"sampling": {}}, ROOTS, "roots"),
])
def test_input_request_undeclared_capability(caps, ask, need):
    [f] = irr({"q": ask}, caps=caps).of("input-request-undeclared-capability")
    assert f.details["capability"] == need and f.messages == [0, 1]


@pytest.mark.parametrize("caps, ask", [
    ({"elicitation": {}}, ELICIT),  # {} means form
    (FORM_ONLY, ELICIT),
    ({"elicitation": {"url": {}}}, URL_ELICIT),
    ({"sampling": {"tools": {}}}, with_params(SAMPLE, tools=[])),
    ({"roots": {}}, ROOTS),
])
def test_input_request_undeclared_capability_near_miss(caps, ask):
    assert "input-request-undeclared-capability" not in irr({"q": ask}, caps=caps).rules()


def test_capabilities_are_not_carried_over_from_an_earlier_round():
    """Round 1's request declared url mode; the retry declares form only, and round 2 asks in url mode."""
    t = Traffic()
    a = t.call("tools/call", {"name": "deploy", "arguments": {}}, caps={"elicitation": {"form": {}, "url": {}}})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.call("tools/call", {"name": "deploy", "arguments": {}, "inputResponses": {"confirm": ACCEPT},
                              "requestState": "s1"}, caps=FORM_ONLY)
    t.irr(b, {"auth": URL_ELICIT}, state="s2")
    [f] = t.run().of("input-request-undeclared-capability")
    assert f.messages == [2, 3] and "'auth'" in f.message


def test_sampling_include_context_undeclared():
    ask = with_params(SAMPLE, includeContext="allServers")
    [f] = irr({"s": ask}, caps={"sampling": {}}).of("sampling-include-context-undeclared")
    assert f.severity == "warning" and "'allServers'" in f.message


def test_sampling_include_context_undeclared_near_miss():
    assert "sampling-include-context-undeclared" not in irr(
        {"s": with_params(SAMPLE, includeContext="thisServer")}, caps={"sampling": {"context": {}}}).rules()
    assert "sampling-include-context-undeclared" not in irr(
        {"s": with_params(SAMPLE, includeContext="none")}, caps={"sampling": {}}).rules()


def missing_capability(data, caps: dict | None = None, transport: str = "stdio", status: int = 400):
    t = Traffic(transport)
    rid = t.call("tools/call", {"name": "deploy", "arguments": {}}, caps=caps)
    t.error(rid, -32021, "missing capability", data, **({"status": status} if transport == "http" else {}))
    return t.run()


@pytest.mark.parametrize("data", [None, {}, {"requiredCapabilities": ["elicitation"]},
                                  {"requiredCapabilities": "elicitation"}, {"requiredCapabilities": {"sampling": 1}}])
def test_missing_capability_error_shape(data):
    assert "missing-capability-error-shape" in missing_capability(data, caps={}).rules()


def test_missing_capability_error_shape_near_miss():
    r = missing_capability({"requiredCapabilities": {"elicitation": {"url": {}}}}, caps={})
    assert not r.of("missing-capability-error-shape")


def test_missing_capability_http_status():
    [f] = missing_capability({"requiredCapabilities": {"sampling": {}}}, caps={}, transport="http",
                             status=200).of("missing-capability-http-status")
    assert f.details == {"status": 200}


def test_missing_capability_http_status_near_miss():
    assert "missing-capability-http-status" not in missing_capability(
        {"requiredCapabilities": {"sampling": {}}}, caps={}, transport="http", status=400).rules()
    assert "missing-capability-http-status" not in missing_capability({"requiredCapabilities": {"sampling": {}}}).rules()


def test_missing_capability_contradicts_declared():
    r = missing_capability({"requiredCapabilities": {"elicitation": {"form": {}}}}, caps={"elicitation": {}})
    [f] = r.of("missing-capability-contradicts-declared")
    assert "elicitation.form" in f.message


def test_missing_capability_contradicts_declared_near_miss():
    r = missing_capability({"requiredCapabilities": {"elicitation": {"url": {}}}}, caps={"elicitation": {}})
    assert "missing-capability-contradicts-declared" not in r.rules()


# --- the server's answer to a retry -------------------------------------------------------------------


def retry(answers: dict | None, then: str, state: str = "s1"):
    """tools/call → IRR asking a and b → retry with `answers` → `then` (error, irr or complete)."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"a": ELICIT, "b": ELICIT}, state=state)
    p = {"requestState": state} if answers is None else {"requestState": state, "inputResponses": answers}
    b = t.tool("deploy", {"env": "prod"}, **p)
    reply(t, b, then, "b", "s2")
    return t.run()


def reply(t: Traffic, rid, then: str, ask: str, state: str, code: int = -32602) -> None:
    """Answer request `rid` with `then`: error `code`, an input_required asking `ask` (with `state`), or complete."""
    if then == "error":
        t.error(rid, code, f"inputResponses lacks {ask}")
    elif then == "irr":
        t.irr(rid, {ask: ELICIT}, state=state)
    else:
        t.result(rid, {"content": []})


def test_server_error_instead_of_reask():
    [f] = retry({"a": ACCEPT}, "error").of("server-error-instead-of-reask")
    assert f.details == {"missing": ["b"]} and "error -32602" in f.message
    assert "server-error-instead-of-reask" in retry(None, "error").rules()


def test_server_error_instead_of_reask_near_miss():
    assert "server-error-instead-of-reask" not in retry({"a": ACCEPT}, "irr").rules()
    assert "server-error-instead-of-reask" not in retry({"a": ACCEPT, "b": ACCEPT}, "error").rules()
    assert "server-error-instead-of-reask" not in retry({"a": {"action": 1}}, "error").rules()  # a protocol error


def unsolicited(answers, then: str, method: str = "tools/call", legacy: bool = False, after_complete: bool = False,
                code: int = -32602, **params):
    """A request carrying `answers` as inputResponses that link to no round (a fresh call; after
    `after_complete`, the retry of a chain whose result was complete) → `then` (error, irr or complete)."""
    t = Traffic()
    p = {"uri": "file:///r"} if method == "resources/read" else {"name": "deploy", "arguments": {}}
    if legacy:  # a 2025-11-25 session
        init = t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                                     "clientInfo": {"name": "c", "version": "1"}}, with_meta=False)
        t.result(init, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
                 with_meta=False, result_type=None)
        t.notify("notifications/initialized")
    if after_complete:  # asks, but without resultType: complete (the broken conformance server's no-result-type)
        first = t.call(method, p)
        t.result(first, {"inputRequests": {"user_name": ELICIT}, "content": []}, result_type=None)
    rid = t.call(method, {**p, "inputResponses": answers, **params}, with_meta=not legacy)
    reply(t, rid, then, "user_name", "s1", code)
    return t.run()


def test_server_error_instead_of_reask_on_unlinked_answers():
    """The conformance probe: a fresh tools/call answering {wrong_key}, answered with an error."""
    r = unsolicited({"wrong_key": ACCEPT}, "error")
    assert "input-responses-unsolicited" in r.rules()
    [f] = r.of("server-error-instead-of-reask")
    assert f.details == {"unlinked": "responses-unsolicited", "answered": ["wrong_key"]}
    assert "inputResponses ('wrong_key') that answer no input_required round" in f.message and "error -32602" in f.message
    assert f.messages == [0, 1] and f.severity == "warning"
    for method in ("prompts/get", "resources/read"):
        assert "server-error-instead-of-reask" in unsolicited({"wrong_key": ACCEPT}, "error", method).rules(), method
    r = unsolicited({"wrong_key": ACCEPT}, "error", after_complete=True)
    assert "retry-after-complete" in r.rules()
    [f] = r.of("server-error-instead-of-reask")
    assert f.details["unlinked"] == "after-complete" and "had completed" in f.message


def test_server_error_instead_of_reask_on_unlinked_answers_near_miss():
    assert "server-error-instead-of-reask" not in unsolicited({"wrong_key": ACCEPT}, "irr").rules()  # re-asks
    assert "server-error-instead-of-reask" not in unsolicited({"wrong_key": ACCEPT}, "complete").rules()
    for bad in (None, [ACCEPT], {"wrong_key": 12345}, {"wrong_key": {"action": 1}}):  # protocol errors
        r = unsolicited(bad, "error")
        assert "server-error-instead-of-reask" not in r.rules(), bad
    r = unsolicited({"wrong_key": ACCEPT}, "error", legacy=True)  # a 2025-11-25 request: no MRTR
    assert "server-error-instead-of-reask" not in r.rules()
    for code in (-32601, -32021):  # the method is not served; the client lacks a capability to be asked with
        assert "server-error-instead-of-reask" not in unsolicited({"wrong_key": ACCEPT}, "error", code=code).rules()
    r = unsolicited({"wrong_key": ACCEPT}, "error", requestState="never-issued")  # an error about the state
    assert "request-state-unsolicited" in r.rules() and "server-error-instead-of-reask" not in r.rules()


def test_server_accepted_invalid_input_responses():
    [f] = retry({"a": 12345, "b": ACCEPT}, "complete").of("server-accepted-invalid-input-responses")
    assert "'a'" in f.message and "not an object" in f.message


def test_server_accepted_invalid_input_responses_unlinked_probe():
    """The conformance probes: inputResponses null, or {user_name: 12345}, on a fresh call, answered complete."""
    for bad in (None, {"user_name": 12345}):
        t = Traffic()
        rid = t.tool("greet", inputResponses=bad)
        t.result(rid, {"content": []})
        assert "server-accepted-invalid-input-responses" in t.run().rules(), bad


def test_server_accepted_invalid_input_responses_near_miss():
    assert "server-accepted-invalid-input-responses" not in retry({"a": 12345, "b": ACCEPT}, "error").rules()
    assert "server-accepted-invalid-input-responses" not in retry({"a": ACCEPT, "b": ACCEPT}, "complete").rules()


# --- informational ------------------------------------------------------------------------------------


def test_irr_caching_hints():
    [f] = irr({"q": ELICIT}, ttlMs=0, cacheScope="private").of("irr-caching-hints")
    assert "ttlMs, cacheScope" in f.message and f.severity == "info"
    assert "irr-caching-hints" not in irr({"q": ELICIT}).rules()


def test_irr_hybrid_fields():
    [f] = irr({"q": ELICIT}, content=[{"type": "text", "text": "waiting"}]).of("irr-hybrid-fields")
    assert "content" in f.message
    assert "irr-hybrid-fields" not in irr({"q": ELICIT}).rules()


def test_input_request_jsonrpc_envelope():
    [f] = irr({"q": {"jsonrpc": "2.0", "id": 7, **ELICIT}}).of("input-request-jsonrpc-envelope")
    assert "jsonrpc and id" in f.message
    assert "input-request-jsonrpc-envelope" not in irr({"q": ELICIT}).rules()


# --- past the gates: each check still tests its own condition ------------------------------------------------

# The checks of an input_required result's own members run only behind one gate (`_unusual_irr`):
# their near misses above are ordinary results, which the gate stops first. Here the gate holds (each
# result is unusual by one member, and that member's rule fires, so all eight ran) and the other seven
# find nothing: each is held to its own condition, not only to the gate.
IRR_OWN = {"irr-empty", "irr-empty-map", "irr-field-types", "input-requests-duplicate-key",
           "input-request-method-invalid", "irr-caching-hints", "irr-hybrid-fields", "input-request-jsonrpc-envelope"}


@pytest.mark.parametrize("result, fires", [
    (irr({"q": ELICIT}, ttlMs=0), "irr-caching-hints"),
    (irr({"q": ELICIT}, state=None, cacheScope="private"), "irr-caching-hints"),  # no requestState either
    (irr({"q": ELICIT}, structuredContent={}), "irr-hybrid-fields"),
    (irr({"q": {"jsonrpc": "2.0", **ELICIT}}), "input-request-jsonrpc-envelope"),
    (irr({"q": ELICIT, "p": {"method": "ping"}}), "input-request-method-invalid"),
    (irr({}, state="s", ttlMs=1), "irr-caching-hints"),  # an empty map with a state: not irr-empty-map
])
def test_irr_own_checks_near_miss_past_the_gate(result, fires):
    assert result.rules() & IRR_OWN == {fires}


def test_retry_keys_near_miss_past_the_update():
    """A retry of a round that asked nothing (its state only), without inputResponses: the update of
    the four key checks hands it to them (it does not answer exactly what was asked), none fires."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, None, state="s1")
    b = t.tool("deploy", {"env": "prod"}, requestState="s1")
    t.result(b, {"content": []})
    r = t.run()
    assert "chain-linked" in r.rules()
    assert not r.rules() & {"retry-without-input-responses", "input-responses-missing-key",
                            "input-responses-unknown-key", "input-responses-stale-key"}


def test_retry_id_checks_past_their_gate():
    """The gate of the two id checks holds for an id seen before in either form; each check then
    fires on its own form only."""
    for second, fires in ((1, "retry-reused-id"), ("1", "retry-id-stringly-equal")):
        t = Traffic()
        a = t.tool("deploy", {"env": "prod"}, id=1)
        t.irr(a, {"q": ELICIT}, state="s1")
        b = t.tool("deploy", {"env": "prod"}, id=second, requestState="s1", inputResponses={"q": ACCEPT})
        t.result(b, {"content": []})
        assert t.run().rules() & {"retry-reused-id", "retry-id-stringly-equal"} == {fires}


# --- real traffic ------------------------------------------------------------------------------------------

SECTION_4_1 = [
    "result-type-missing", "result-type-not-string", "result-type-unrecognized", "input-requests-without-input-required",
    "irr-unsupported-method", "irr-empty", "irr-empty-map", "irr-field-types", "input-requests-duplicate-key",
    "input-request-method-invalid", "input-request-params-invalid", "elicit-form-schema-not-flat",
    "elicit-form-sensitive", "elicit-url-invalid", "elicit-url-not-https", "input-request-undeclared-capability",
    "sampling-include-context-undeclared", "missing-capability-error-shape", "missing-capability-http-status",
    "missing-capability-contradicts-declared", "server-error-instead-of-reask",
    "server-accepted-invalid-input-responses", "irr-caching-hints", "irr-hybrid-fields",
    "input-request-jsonrpc-envelope",
]
SECTION_4_3 = [
    "elicit-result-action-invalid", "elicit-result-content-type", "elicit-result-url-content",
    "elicit-result-content-on-decline", "elicit-result-accept-missing-content", "elicit-result-schema-mismatch",
    "create-message-result-invalid", "create-message-result-tool-use-unoffered", "list-roots-result-invalid",
    "root-uri-not-file", "input-response-error-shaped",
]
OURS = set(SECTION_4_1 + SECTION_4_3)


def _ours_not_info(outs: list) -> list:
    return [o for o in outs if type(o) is Finding and (o.rule in OURS and o.severity != "info" or o.rule == "inspector-error")]


@pytest.mark.skipif(not capture_names(), reason="fixtures/captures not present")
@pytest.mark.parametrize("name", capture_names())
def test_sdk_captures_give_no_error_from_these_rules(name):
    """The official SDKs talking to each other (http_legacy at 2025-11-25; http_manual_tamper's altered
    state is §4.2's business): nothing from these rules above info."""
    assert not _ours_not_info(analyse(capture_frames(name)))


SDK_RECORDINGS = sorted(str(p) for p in (ROOT / "fixtures").glob("test_sdk_*/*.jsonl"))


@pytest.mark.skipif(not SDK_RECORDINGS, reason="fixtures/test_sdk_* not present")
@pytest.mark.parametrize("path", SDK_RECORDINGS)
def test_sdk_recordings_with_sampling_and_roots_give_nothing_from_these_rules(path):
    outs = list(replay_outputs([path]))
    asked = b"".join(o.raw for o in outs if type(o) is Message and o.direction == "s2c")
    assert b"sampling/createMessage" in asked and b"roots/list" in asked
    assert not _ours_not_info(outs)


def test_catalog_has_every_rule_of_the_sections():
    load_rules()
    for section, ids in (("4.1", SECTION_4_1), ("4.3", SECTION_4_3)):
        assert sorted(r for r, rule in REGISTRY.items() if rule.section == section) == sorted(ids)
    assert all(REGISTRY[r].check is not None and REGISTRY[r].doc and REGISTRY[r].spec for r in OURS)


# --- the pass's update spares a quiet input_required result the checks --------------------------------


_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_ASKS = [ELICIT, URL_ELICIT, SAMPLE, ROOTS,
         {"method": "elicitation/create", "params": {"message": "Key?", "requestedSchema": {
             "type": "object", "properties": {"api_key": {"type": "string", "title": "Your API key"}}}}},
         {"method": "elicitation/create", "params": {"message": "Where?", "requestedSchema": {
             "type": "object", "properties": {"address": {"type": "object", "properties": {}}}}}},
         {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": _SCHEMA}},
         {"method": "elicitation/create", "params": {"mode": "url", "message": "Go", "url": "http://example.com/a"}},
         {"method": "elicitation/create", "params": {"mode": "url", "message": "Go", "url": "/relative"}},
         {"method": "elicitation/create", "params": {"message": "Proceed?"}},
         {**SAMPLE, "params": {**SAMPLE["params"], "includeContext": "allServers"}},
         {**SAMPLE, "params": {**SAMPLE["params"], "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}},
         {"method": "roots/list", "params": {"x": 1}}, {"method": "ping"}]
_CAPS = [CAPS_ALL, FORM_ONLY, {}, {"sampling": {}}, {"elicitation": {"url": {}}}, {"sampling": {"context": {}}},
         {"roots": {}, "elicitation": {}}, {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}}]


def _quiet_or_not(input_requests: dict, caps: dict, extra: dict) -> list:
    """The findings of an input_required result with the update of ASKED as it is (its verdict on the
    input requests first computed, then found kept by their bytes), and with it never saying the
    result is quiet (every check of the pass runs)."""
    from mrtr_inspect.rules import mrtr_server

    def findings():
        return [(f.rule, f.message, f.messages, f.chain, f.details) for f in irr(input_requests, caps=caps, **extra).findings]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mrtr_server, "_asks_quiet", lambda obs, r: None)
        everything = findings()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mrtr_server, "_QUIET", {})
        computed, kept = findings(), findings()
    return [computed, kept, everything]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(input_requests=st.dictionaries(st.sampled_from(["q", "r", "s"]), st.sampled_from(_ASKS), min_size=1, max_size=3),
       caps=st.sampled_from(_CAPS),
       extra=st.dictionaries(st.sampled_from(["ttlMs", "content", "note"]), st.just(1), max_size=1))
def test_a_quiet_input_required_result_is_one_no_check_finds_anything_in(input_requests, caps, extra):
    """The update of ASKED returning None for a quiet result (no check runs) changes no finding,
    whether its verdict on the input requests is computed or found kept."""
    computed, kept, everything = _quiet_or_not(input_requests, caps, extra)
    assert computed == everything
    assert kept == everything


def _spared(*results) -> list:
    """For each input_required result (`irr`'s arguments), whether the update of ASKED spared it the
    checks (returned None)."""
    import dataclasses

    from mrtr_inspect.rules import mrtr_server

    seen = []
    real = mrtr_server.ASKED.update

    def spy(obs, state):
        v = real.fn(obs, state)
        if type(obs) is mrtr_server.Answered:
            seen.append(v is None)
        return v

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mrtr_server.ASKED, "update", dataclasses.replace(real, fn=spy))
        for args, kw in results:
            irr(*args, **kw)
    return seen


def test_plain_input_required_results_are_quiet():
    """The plain input_required results are spared the checks; one with a finding is not."""
    assert _spared((({"q": ELICIT, "s": SAMPLE, "r": ROOTS},), {}), (({"q": URL_ELICIT},), {"caps": FORM_ONLY})) == [
        True, False]


def test_input_requests_asked_again_are_judged_again_by_what_was_kept_of_them():
    """The verdict kept for input requests is theirs: the same ones asked again are spared again, but
    not when the request did not declare what they need, nor when the result's own members are
    unusual; other input requests get their own verdict."""
    from mrtr_inspect.rules import mrtr_server

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mrtr_server, "_QUIET", {})
        assert _spared((({"q": ELICIT},), {}), (({"q": ELICIT},), {}), (({"q": ELICIT},), {"caps": {"roots": {}}}),
                       (({"q": ELICIT},), {"ttlMs": 5}), (({"q": ROOTS},), {})) == [True, True, False, False, True]
        assert len(mrtr_server._QUIET) == 2
        assert irr({"q": ELICIT}, caps={"roots": {}}).rules() & OURS == {"input-request-undeclared-capability"}
        assert irr({"q": ELICIT}, ttlMs=5).rules() & OURS == {"irr-caching-hints"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(input_requests=st.dictionaries(st.sampled_from(["q", "r", "s"]), st.sampled_from(_ASKS), max_size=3),
       big=st.booleans())
def test_the_text_input_requests_are_kept_by_is_orjsons(input_requests, big):
    """The verdict kept for input requests is found by orjson's text of them: their round's, which
    the core wrote for its summary, or written anew for a result of no round; none for a value orjson
    does not write (an integer past 64 bits)."""
    import orjson

    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.core.observations import Answered
    from mrtr_inspect.rules.asks import asked_text

    ir = copy.deepcopy(input_requests)
    if big:
        ir["n"] = {"method": "elicitation/create", "params": {"message": "m", "big": 1 << 70}}
    t = Traffic()
    t.irr(t.tool("deploy", {}), ir, state="s1")
    seen: list = []
    a = Analysis(None, lambda o: seen.append(o) if type(o) is Answered else None)
    for frame in t.frames:
        a.feed(frame)
    [obs] = seen
    r = obs.response.result["inputRequests"]
    assert obs.creq.chain.rounds[-1].input_requests is r  # (the round's text is the one read)
    assert asked_text(obs, r) == (None if big else orjson.dumps(r).decode("utf-8"))
    no_round = Answered.new(obs.response, obs.request, None, None)
    assert asked_text(no_round, r) == (None if big else orjson.dumps(r).decode("utf-8"))
