"""RULES.md §4.3: each answer is judged by the kind of input request it answers; each rule fires on
the answer it describes and stays quiet on the nearest answer that is fine."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rules.test_mrtr_server import OURS, URL_ELICIT, legacy_server_request
from tests.traffic import ACCEPT, ELICIT, ROOTS, ROOTS_ANSWER, SAMPLE, SAMPLED, Traffic

TOOLS = [{"name": "lookup", "inputSchema": {"type": "object"}}]


def answered(asked: dict, answers: dict):
    """tools/call → input_required asking `asked` → a retry answering `answers` → complete."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, asked, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses=answers, requestState="s1")
    t.result(b, {"content": []})
    return t.run()


def one(asked: dict, answer) -> set:
    return answered({"q": asked}, {"q": answer}).rules()


def form(properties: dict, required: list | None = None) -> dict:
    schema = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return {"method": "elicitation/create", "params": {"message": "Fill in", "requestedSchema": schema}}


# --- ElicitResult -------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [{"action": "ok"}, {"content": {"confirm": True}}, 12345, "accept"])
def test_elicit_result_action_invalid(answer):
    r = answered({"confirm": ELICIT}, {"confirm": answer})
    [f] = r.of("elicit-result-action-invalid")
    assert "'confirm'" in f.message and f.messages == [1, 2] and f.chain == "c1"
    assert "elicit-result-content-type" not in r.rules()


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_elicit_result_action_invalid_near_miss(action):
    assert "elicit-result-action-invalid" not in one(ELICIT, {"action": action})


@pytest.mark.parametrize("content", ["yes", [True], {"confirm": {"value": True}}, {"confirm": [1, 2]},
                                     {"confirm": None}])
def test_elicit_result_content_type(content):
    [f] = answered({"q": ELICIT}, {"q": {"action": "accept", "content": content}}).of("elicit-result-content-type")
    assert "content" in f.message


def test_elicit_result_content_type_near_miss():
    content = {"s": "x", "i": 3, "f": 2.5, "b": False, "l": ["a", "b"]}
    assert "elicit-result-content-type" not in one(ELICIT, {"action": "accept", "content": content})


def test_elicit_result_url_content():
    [f] = answered({"auth": URL_ELICIT}, {"auth": {"action": "accept", "content": {"token": "t"}}}).of(
        "elicit-result-url-content")
    assert f.severity == "warning" and "URL mode" in f.message


def test_elicit_result_url_content_near_miss():
    assert "elicit-result-url-content" not in one(URL_ELICIT, {"action": "accept"})
    assert "elicit-result-url-content" not in one(ELICIT, ACCEPT)


def test_elicit_result_content_on_decline():
    [f] = answered({"q": ELICIT}, {"q": {"action": "decline", "content": {"confirm": False}}}).of(
        "elicit-result-content-on-decline")
    assert f.severity == "info" and "'decline'" in f.message


def test_elicit_result_content_on_decline_near_miss():
    assert "elicit-result-content-on-decline" not in one(ELICIT, {"action": "cancel"})
    assert "elicit-result-content-on-decline" not in one(ELICIT, ACCEPT)


def test_elicit_result_accept_missing_content():
    asked = form({"name": {"type": "string"}, "age": {"type": "integer"}}, required=["name", "age"])
    [f] = answered({"q": asked}, {"q": {"action": "accept", "content": {"name": "x"}}}).of(
        "elicit-result-accept-missing-content")
    assert f.details == {"key": "q", "missing": ["age"]}
    assert "elicit-result-accept-missing-content" in one(asked, {"action": "accept"})


def test_elicit_result_accept_missing_content_near_miss():
    asked = form({"name": {"type": "string"}, "age": {"type": "integer"}}, required=["name"])
    assert "elicit-result-accept-missing-content" not in one(asked, {"action": "accept", "content": {"name": "x"}})
    assert "elicit-result-accept-missing-content" not in one(asked, {"action": "decline"})
    assert "elicit-result-accept-missing-content" not in one(URL_ELICIT, {"action": "accept"})


@pytest.mark.parametrize("schema, value", [
    ({"type": "boolean"}, "yes"),
    ({"type": "integer"}, 2.5),
    ({"type": "number", "minimum": 0}, -1),
    ({"type": "number", "maximum": 10}, 11),
    ({"type": "string"}, 5),
    ({"type": "string", "enum": ["red", "green"]}, "blue"),
    ({"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}]}, "#0f0"),
    ({"type": "string", "minLength": 3}, "ab"),
    ({"type": "string", "maxLength": 3}, "abcd"),
    ({"type": "string", "format": "email"}, "not-an-email"),
    ({"type": "string", "format": "uri"}, "no scheme"),
    ({"type": "string", "format": "date"}, "2026-02-30"),
    ({"type": "string", "format": "date-time"}, "2026-07-28 10:00"),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, ["c"]),
    ({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}, ["b"]),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1}, []),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1}, ["a", "b"]),
])
def test_elicit_result_schema_mismatch(schema, value):
    [f] = answered({"q": form({"v": schema})}, {"q": {"action": "accept", "content": {"v": value}}}).of(
        "elicit-result-schema-mismatch")
    assert f.details["properties"] == ["v"] and "v: " in f.message


def test_elicit_result_schema_mismatch_near_miss():
    props = {
        "b": {"type": "boolean"}, "i": {"type": "integer", "minimum": 0, "maximum": 10}, "n": {"type": "number"},
        "e": {"type": "string", "enum": ["red"]}, "o": {"type": "string", "oneOf": [{"const": "#f00"}]},
        "s": {"type": "string", "minLength": 1, "maxLength": 5}, "m": {"type": "string", "format": "email"},
        "u": {"type": "string", "format": "uri"}, "d": {"type": "string", "format": "date"},
        "t": {"type": "string", "format": "date-time"},
        "a": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
    }
    content = {"b": True, "i": 3, "n": 2.5, "e": "red", "o": "#f00", "s": "abc", "m": "a@b.io", "u": "https://x.io/a",
               "d": "2026-07-28", "t": "2026-07-28T10:00:00Z", "a": ["a", "b"]}
    assert "elicit-result-schema-mismatch" not in one(form(props), {"action": "accept", "content": content})


# --- CreateMessageResult ----------------------------------------------------------------------------


@pytest.mark.parametrize("answer, problem", [
    ({"role": "assistant", "content": {"type": "text", "text": "hi"}}, "model"),
    ({**SAMPLED, "role": "bot"}, "role"),
    ({**SAMPLED, "content": {"type": "html", "text": "x"}}, "content"),
    ({**SAMPLED, "content": [{"type": "text", "text": "x"},
                             {"type": "tool_result", "toolUseId": "u1", "content": []}]}, "mixes tool_result"),
    # a block whose type is no string (a list: no set can hold it) is other content too
    ({**SAMPLED, "content": [{"type": []}, {"type": "tool_result", "toolUseId": "u1", "content": []}]},
     "mixes tool_result"),
])
def test_create_message_result_invalid(answer, problem):
    r = answered({"s": SAMPLE}, {"s": answer})
    [f] = r.of("create-message-result-invalid")
    assert problem in f.message
    assert "inspector-error" not in r.rules()


def test_create_message_result_invalid_near_miss():
    only_results = {**SAMPLED, "role": "user", "content": [{"type": "tool_result", "toolUseId": "u1", "content": []}]}
    r = answered({"a": SAMPLE, "b": SAMPLE}, {"a": SAMPLED, "b": only_results})
    assert "create-message-result-invalid" not in r.rules()


def test_create_message_result_tool_use_unoffered():
    use = {**SAMPLED, "stopReason": "toolUse", "content": {"type": "tool_use", "id": "u1", "name": "lookup", "input": {}}}
    assert "create-message-result-tool-use-unoffered" in one(SAMPLE, use)
    assert "create-message-result-tool-use-unoffered" in one(SAMPLE, {**SAMPLED, "stopReason": "toolUse"})


def test_create_message_result_tool_use_unoffered_near_miss():
    offered = {"method": "sampling/createMessage", "params": {**SAMPLE["params"], "tools": TOOLS}}
    use = {**SAMPLED, "stopReason": "toolUse", "content": {"type": "tool_use", "id": "u1", "name": "lookup", "input": {}}}
    assert "create-message-result-tool-use-unoffered" not in one(offered, use)
    assert "create-message-result-tool-use-unoffered" not in one(SAMPLE, {**SAMPLED, "stopReason": "endTurn"})


# --- ListRootsResult -------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [{}, {"roots": "file:///work"}, {"roots": [{"name": "work"}]}])
def test_list_roots_result_invalid(answer):
    assert "list-roots-result-invalid" in one(ROOTS, answer)


def test_list_roots_result_invalid_near_miss():
    assert "list-roots-result-invalid" not in one(ROOTS, {"roots": []})
    assert "list-roots-result-invalid" not in one(ROOTS, ROOTS_ANSWER)


def test_root_uri_not_file():
    [f] = answered({"r": ROOTS}, {"r": {"roots": [{"uri": "file:///a"}, {"uri": "https://github.com/o/r"}]}}).of(
        "root-uri-not-file")
    assert "https://github.com/o/r" in f.message and "file:///a" not in f.message


def test_root_uri_not_file_near_miss():
    assert "root-uri-not-file" not in one(ROOTS, {"roots": [{"uri": "file:///a", "name": "a"}]})


# --- any kind -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [{"code": -32603, "message": "sampling failed"},
                                    {"error": {"code": -1, "message": "no"}}])
def test_input_response_error_shaped(answer):
    rules = one(SAMPLE, answer)
    assert "input-response-error-shaped" in rules
    assert "create-message-result-invalid" not in rules  # one finding for one fact


def test_input_response_error_shaped_near_miss():
    assert "input-response-error-shaped" not in one(SAMPLE, SAMPLED)
    assert "input-response-error-shaped" not in one(ELICIT, {"action": "cancel"})


# --- which question an answer answers ----------------------------------------------------------------------


def test_an_answer_resent_for_an_earlier_round_is_judged_by_that_round_question():
    t = Traffic()
    a = t.tool("deploy")
    t.irr(a, {"roots": ROOTS}, state="s1")
    b = t.tool("deploy", inputResponses={"roots": ROOTS_ANSWER}, requestState="s1")
    t.irr(b, {"confirm": ELICIT}, state="s2")
    c = t.tool("deploy", inputResponses={"roots": {"roots": "x"}, "confirm": ACCEPT}, requestState="s2")
    t.result(c, {"content": []})
    [f] = t.run().of("list-roots-result-invalid")
    assert "'roots'" in f.message and "tools/call id=3" in f.message


def test_answers_to_questions_nobody_asked_are_not_judged():
    t = Traffic()
    rid = t.tool("deploy", inputResponses={"q": {"action": "ok"}})
    t.result(rid, {"content": []})
    assert "elicit-result-action-invalid" not in t.run().rules()


# --- legacy: the client's results to server requests --------------------------------------------------------


def test_legacy_client_result_is_judged_by_the_2025_11_25_models():
    r = legacy_server_request("elicitation/create", ELICIT["params"], {"action": "sure"})
    [f] = r.of("elicit-result-action-invalid")
    assert "client's result result id=100" in f.message
    assert "list-roots-result-invalid" in legacy_server_request("roots/list", None, {"roots": [{}]}).rules()


def test_legacy_client_result_near_miss():
    assert not legacy_server_request("elicitation/create", ELICIT["params"], ACCEPT).rules() & OURS
    assert "list-roots-result-invalid" not in legacy_server_request("roots/list", None, ROOTS_ANSWER).rules()


# --- robustness ----------------------------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False) | \
    st.sampled_from(["", "form", "url", "accept", "object", "boolean", "elicitation/create", "sampling/createMessage",
                     "roots/list", "file:///w", "http://x", "tool_use", "tool_result"])
_keys = st.sampled_from(["method", "params", "mode", "message", "requestedSchema", "properties", "type", "url", "roots",
                         "uri", "action", "content", "role", "model", "messages", "maxTokens", "tools", "required",
                         "enum", "items", "code", "error", "a", "q"])
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
                     max_leaves=12)


def broken_here(findings) -> list:
    """The failures of the checks of these sections (other sections have their own tests)."""
    return [f.message for f in findings if f.rule == "inspector-error" and (f.details or {}).get("rule") in OURS]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(asked=st.dictionaries(st.sampled_from(["q", "r"]), _json | st.sampled_from([ELICIT, SAMPLE, ROOTS])),
       answers=st.dictionaries(st.sampled_from(["q", "r"]), _json) | _json,
       extra=st.dictionaries(st.sampled_from(["content", "ttlMs", "inputRequests"]), _json, max_size=2))
def test_no_rule_of_these_sections_fails_on_any_json(asked, answers, extra):
    """Whatever a server asks and a client answers, the checks judge it and never fail themselves."""
    t = Traffic()
    a = t.tool("deploy")
    t.irr(a, asked, state="s1", **extra)
    b = t.tool("deploy", inputResponses=answers, requestState="s1")
    t.result(b, {"content": []})
    r = t.run()
    assert r.chain("c1")["requests"] == [a, b]  # the retry was linked: the §4.3 rules saw it
    assert not broken_here(r.findings)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_json, caps=_json, asked=_json)
def test_no_rule_of_these_sections_fails_on_any_capabilities_or_error_data(data, caps, asked):
    """The same for what a request declares, a -32021 error's data, and a legacy server request's params."""
    t = Traffic()
    a = t.call("tools/call", {"name": "deploy"}, caps=caps)
    t.error(a, -32021, "missing capability", data)
    b = t.call("tools/call", {"name": "deploy"}, caps=caps)
    t.irr(b, {"q": asked})
    assert not broken_here(t.run().findings)
    r = legacy_server_request("elicitation/create", asked if type(asked) is dict else None, answer={"x": asked})
    assert not broken_here(r.findings)


# --- the pass's update spares a quiet answer the checks ---------------------------------------------


class _Found:
    """A context that keeps what a check emits."""

    def __init__(self) -> None:
        self.found: list = []

    def emit(self, text: str, **kw) -> None:
        self.found.append(text)


def _judged(question: dict, value) -> tuple:
    """Whether `_quiet` holds for this answer to `question`, and what the checks of ANSWERS emit on it."""
    from mrtr_inspect.rules import input_responses as ir
    from mrtr_inspect.rules import load_rules

    load_rules()

    class Named(ir.Answer):
        where = "the answer"  # (no observation behind it)

    a = Named("q", question["method"], question.get("params"), value, ir.shapes.MODERN, None, [1, 2], "c1")
    ctx = _Found()
    for check in ir.ANSWERS.checks:
        try:
            check.fn(None, ctx, ir.Answers([a]))
        except Exception as e:  # an inspector-error in the pipeline: output too
            ctx.found.append(f"{check.rule_id} failed: {e!r}")
    return ir._quiet(a.method, a.params, a.mode, a.value, a.error_shaped, a.errors), ctx.found


_FORM = form({"n": {"type": "integer", "minimum": 0, "maximum": 9}, "s": {"type": "string", "format": "email"},
              "e": {"type": "string", "enum": ["a", "b"]}, "l": {"type": "array", "items": {"enum": ["x"]}},
              "b": {"type": "boolean"}}, ["n", "s"])
_TOOL_USE = {"type": "tool_use", "id": "u1", "name": "lookup", "input": {}}
_TOOL_RESULT = {"type": "tool_result", "toolUseId": "u1", "content": []}
_QUESTIONS = [ELICIT, URL_ELICIT, _FORM, SAMPLE, ROOTS, {**SAMPLE, "params": {**SAMPLE["params"], "tools": [{}]}}]
_content = st.dictionaries(st.sampled_from(["n", "s", "e", "l", "b", "confirm", "x"]),
                           _scalars | st.sampled_from([3, -1, "a@b.co", "c", ["x"], ["y"], True]) | _json, max_size=5)
_answer = st.one_of(
    st.fixed_dictionaries({"action": st.sampled_from(["accept", "decline", "cancel", "ok"])},
                           optional={"content": _content | _json}),
    st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user", "bot"]), "model": st.just("m"),
                           "content": st.sampled_from([{"type": "text", "text": "t"}, _TOOL_USE, [_TOOL_RESULT],
                                                       [_TOOL_RESULT, {"type": "text", "text": "t"}]])},
                          optional={"stopReason": st.sampled_from(["endTurn", "toolUse"])}),
    st.fixed_dictionaries({"roots": st.lists(st.fixed_dictionaries(
        {"uri": st.sampled_from(["file:///w", "https://x", 3])}, optional={"name": st.just("w")}), max_size=3)}),
    _json)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(question=st.sampled_from(_QUESTIONS), value=_answer)
def test_a_quiet_answer_is_one_no_check_finds_anything_in(question, value):
    """`_quiet` (the update of ANSWERS returns None when every answer is quiet, and no check runs)
    holds only for answers on which every check of the pass is silent."""
    quiet, found = _judged(question, value)
    assert not (quiet and found), found


def test_plain_answers_are_quiet():
    """The plain answers of each kind are spared the checks (the update returns None)."""
    for question, value in [(ELICIT, ACCEPT), (URL_ELICIT, {"action": "accept"}), (ELICIT, {"action": "decline"}),
                            (_FORM, {"action": "accept", "content": {"n": 3, "s": "a@b.co", "e": "a", "l": ["x"]}}),
                            (SAMPLE, SAMPLED), (ROOTS, ROOTS_ANSWER)]:
        assert _judged(question, value) == (True, []), (question, value)
    for question, value in [(_FORM, {"action": "accept", "content": {"n": 10, "s": "a@b.co"}}),  # above the maximum
                            (_FORM, {"action": "accept", "content": {"n": 1, "s": "a@b.co", "x": None}}),  # a null
                            (SAMPLE, {**SAMPLED, "content": _TOOL_USE}), (ROOTS, {"roots": [{"uri": "https://x"}]})]:
        quiet, found = _judged(question, value)
        assert found and not quiet, (question, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(question=st.sampled_from(_QUESTIONS), value=_answer)
def test_findings_are_the_same_with_quiet_answers_left_untaken(question, value):
    """A retry whose answers are all quiet is not taken apart (`_QUIET`) and no check of ANSWERS runs:
    the findings, server-accepted-invalid-input-responses' included, are those of every check run,
    whether the retry is found quiet or found kept as such (`_QUIET_RETRIES`)."""
    from mrtr_inspect.rules import input_responses as ir

    def findings():
        r = answered({"q": question}, {"q": value})
        return [(f.rule, f.message, f.messages, f.chain, f.details) for f in r.findings]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ir, "_quiet", lambda *a: False)
        mp.setattr(ir, "_QUIET_RETRIES", {})
        everything = findings()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ir, "_QUIET_RETRIES", {})
        assert findings() == everything
        assert findings() == everything


def test_a_retry_kept_quiet_is_one_of_the_same_answers_to_the_same_questions():
    """What is kept of a quiet retry is its answers and its questions: the same answer to another
    question is judged again (and found wanting), and so is another answer to the same question."""
    from mrtr_inspect.rules import input_responses as ir

    form = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ir, "_QUIET_RETRIES", {})
        for _ in range(2):
            assert not answered({"q": ELICIT}, {"q": ACCEPT}).rules() & OURS
        assert len(ir._QUIET_RETRIES) == 1
        assert "elicit-result-accept-missing-content" in answered({"q": form}, {"q": ACCEPT}).rules()
        assert "elicit-result-action-invalid" in answered({"q": ELICIT}, {"q": {**ACCEPT, "action": "ok"}}).rules()
        assert len(ir._QUIET_RETRIES) == 1


def test_a_later_retry_is_kept_quiet_by_the_questions_of_every_round_up_to_its_own():
    """A retry of a later round may answer an earlier round's questions too: what is kept of it names
    the questions of every round up to its own, so the same answers to the same last round, after
    another first round, are judged again."""
    from mrtr_inspect.rules import input_responses as ir

    name = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}

    def two_rounds(first: dict) -> list:
        t = Traffic()
        a = t.tool("deploy", {"env": "prod"})
        t.irr(a, {"q": first}, state="s1")
        b = t.tool("deploy", {"env": "prod"}, requestState="s1", inputResponses={"q": ACCEPT})
        t.irr(b, {"r": ROOTS}, state="s2")
        c = t.tool("deploy", {"env": "prod"}, requestState="s2", inputResponses={"q": ACCEPT, "r": ROOTS_ANSWER})
        t.result(c, {"content": []})
        return [f.messages for f in t.run().of("elicit-result-accept-missing-content")]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ir, "_QUIET_RETRIES", {})
        assert two_rounds(ELICIT) == [] and two_rounds(ELICIT) == []
        assert len(ir._QUIET_RETRIES) == 2
        assert len(two_rounds(name)) == 2  # the first retry's answer, and the second's
