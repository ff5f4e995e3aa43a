"""shapes.py: input requests and input responses judged by the mcp-types models, per version."""

import pytest

from mrtr_inspect.rules import shapes
from mrtr_inspect.rules.shapes import ELICIT, LEGACY, MODERN, ROOTS, SAMPLE
from tests.traffic import ACCEPT, ROOTS_ANSWER, SAMPLED
from tests.traffic import ELICIT as ELICIT_REQUEST
from tests.traffic import SAMPLE as SAMPLE_REQUEST

URL = {"mode": "url", "message": "Sign in", "url": "https://example.com/auth"}


@pytest.mark.parametrize("version", [MODERN, LEGACY])
def test_valid_input_requests_have_no_problems(version):
    assert shapes.input_request_problems(ELICIT, ELICIT_REQUEST["params"], version) == []
    assert shapes.input_request_problems(SAMPLE, SAMPLE_REQUEST["params"], version) == []
    assert shapes.input_request_problems(ROOTS, None, version) == []
    assert shapes.input_request_problems(ROOTS, {}, version) == []


def test_url_elicitation_id_is_neither_required_in_2025_here_nor_in_2026():
    """2026-07-28 removed elicitationId; in 2025-11-25 it is required, but RULES.md §4.8 reports that."""
    assert shapes.input_request_problems(ELICIT, URL, MODERN) == []
    assert shapes.input_request_problems(ELICIT, URL, LEGACY) == []
    assert shapes.input_request_problems(ELICIT, {**URL, "url": 5}, LEGACY) == ["params.url: should be a valid string"]


def test_validation_is_strict():
    """JSON "50" is not the number 50, and true is not 1."""
    for bad in ("50", True, 50.5):
        params = {**SAMPLE_REQUEST["params"], "maxTokens": bad}
        assert shapes.input_request_problems(SAMPLE, params) == ["params.maxTokens: should be a valid integer"]


@pytest.mark.parametrize("params, expected", [
    (None, ["params: an elicitation request needs params (mode, message…)"]),
    ({"mode": "popup", "message": "x"}, ['params.mode: \'popup\' is neither "form" nor "url"']),
    ({"message": "x"}, ["params.requestedSchema: missing"]),
    ({"mode": "url", "message": "x"}, ["params.url: missing"]),
    ({"message": "x", "requestedSchema": {"properties": {}}}, ["params.requestedSchema.type: missing"]),
])
def test_elicitation_problems_are_chosen_by_mode(params, expected):
    assert shapes.input_request_problems(ELICIT, params) == expected


def test_sampling_and_roots_problems():
    assert shapes.input_request_problems(SAMPLE, None) == ["params: a sampling request needs params (messages, maxTokens)"]
    assert shapes.input_request_problems(SAMPLE, {"maxTokens": 5}) == ["params.messages: missing"]
    assert shapes.input_request_problems(ROOTS, "all") == ["params: should be a JSON object"]


def test_primitive_schemas():
    for ok in ({"type": "string"}, {"type": "integer", "minimum": 1}, {"type": "boolean"},
               {"type": "string", "enum": ["a"]}, {"type": "array", "items": {"type": "string", "enum": ["a"]}}):
        assert shapes.primitive_schema_ok(ok), ok
        assert shapes.primitive_schema_ok(ok, LEGACY), ok
    for bad, why in (({"type": "object", "properties": {}}, "a nested object"), ({"$ref": "#/x"}, "a $ref"),
                     ({"type": "array", "items": {"type": "object"}}, "an array of objects"),
                     ({"anyOf": [{"type": "string"}]}, "a composition outside the enum forms"),
                     ("string", "not a schema object")):
        assert not shapes.primitive_schema_ok(bad), bad
        assert shapes.why_not_primitive(bad) == why


@pytest.mark.parametrize("version", [MODERN, LEGACY])
def test_input_responses_of_each_kind(version):
    assert shapes.input_response_errors(ELICIT, ACCEPT, version) == []
    assert shapes.input_response_errors(SAMPLE, SAMPLED, version) == []
    assert shapes.input_response_errors(ROOTS, ROOTS_ANSWER, version) == []
    assert [e["loc"] for e in shapes.input_response_errors(ELICIT, {"action": "ok"}, version)] == [("action",)]
    assert [e["loc"] for e in shapes.input_response_errors(ROOTS, {"roots": [{}]}, version)] == [("roots", 0, "uri")]


def test_a_union_that_matches_no_branch_is_one_line():
    value = {"role": "assistant", "content": {"type": "html"}, "model": "m"}
    errors = shapes.input_response_errors(SAMPLE, value)
    assert len(errors) > 5  # one per branch of the content union
    assert shapes.describe(errors, value, MODERN) == ["content: matches none of the forms the schema allows (type 'html')"]


def test_input_responses_map():
    assert shapes.input_responses_problems({"a": ACCEPT, "b": SAMPLED, "c": ROOTS_ANSWER}) == []
    assert shapes.input_responses_problems({"a": 12345}) == ["inputResponses.a: matches none of the forms the schema allows"]
    assert shapes.input_responses_problems(None) == ["inputResponses: should be a JSON object"]


def test_missing_capability_data():
    def err(data):
        e = {"code": -32021, "message": "missing"}
        if data is not None:
            e["data"] = data
        return {"jsonrpc": "2.0", "id": 1, "error": e}

    assert shapes.missing_capability_data_problems(err({"requiredCapabilities": {"elicitation": {"url": {}}}})) == []
    assert shapes.missing_capability_data_problems(err(None)) == ["error.data: missing"]
    assert shapes.missing_capability_data_problems(err({"requiredCapabilities": ["sampling"]})) == [
        "error.data.requiredCapabilities: should be a JSON object"]


def test_validators_are_built_once():
    assert shapes._adapter(MODERN, "ElicitResult") is shapes._adapter(MODERN, "ElicitResult")
    assert shapes._adapter(MODERN, "ElicitResult") is not shapes._adapter(LEGACY, "ElicitResult")


@pytest.mark.parametrize("value, ok", [("https://a.b/c", True), ("mailto:x@y.z", True), ("file:///w", True),
                                       ("/relative", False), ("example.com", False), ("https://a b", False),
                                       ("https:", False), (5, False)])
def test_absolute_uri(value, ok):
    assert shapes.absolute_uri(value) is ok


# --- the common valid shapes, judged without the models (shapes._QUICK) ---------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from tests.core.strategies import FUZZ  # noqa: E402

_ANY = st.sampled_from([None, True, False, 0, 1, -1, 2 ** 63, 1.5, "", "x", "form", "text", "user", "assistant",
                        "accept", "object", "boolean", "string", "number", "integer", "email", "date", [], ["a"],
                        [1], {}, {"a": 1}, {"type": "text", "text": "t"}])
_TEXT = {"type": "text", "text": "hello"}
_TEMPLATES = {
    "ElicitResult": {"action": "accept", "content": {"a": "x", "b": 1, "c": 1.5, "d": True, "e": ["x"], "f": None}},
    "ListRootsResult": {"roots": [{"uri": "file:///w", "name": "w"}, {"uri": "file:///v"}]},
    "CreateMessageResult": {"role": "assistant", "content": dict(_TEXT), "model": "m", "stopReason": "endTurn"},
    "ElicitRequestFormParams": {"message": "m", "mode": "form", "requestedSchema": {
        "type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "$schema": "s"}},
    "CreateMessageRequest.params": {"maxTokens": 10, "messages": [{"role": "user", "content": dict(_TEXT)}]},
    "BooleanSchema": {"type": "boolean", "default": True, "title": "t", "description": "d"},
    "StringSchema": {"type": "string", "default": "x", "format": "email", "maxLength": 3, "minLength": 1},
    "NumberSchema": {"type": "integer", "default": 1, "minimum": 0, "maximum": 2.5, "title": "t"},
}
_EXTRA_KEYS = ["_meta", "meta", "annotations", "stop_reason", "requested_schema", "schema_", "max_length",
               "min_length", "max_tokens", "temperature", "tools", "includeContext", "mode", "required", "uri",
               "name", "content", "role", "type", "text", "roots", "action", "unknown"]


@st.composite
def _mutated(draw, value, depth=0):
    """`value` with members replaced, dropped or added, at any depth."""
    if type(value) is list:
        return [draw(_mutated(v, depth + 1)) for v in value if not draw(st.booleans()) or depth > 3]
    if type(value) is not dict:
        return draw(_ANY) if draw(st.integers(0, 4)) == 0 else value
    out = {}
    for k, v in value.items():
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue
        out[k] = draw(_ANY) if choice == 1 else draw(_mutated(v, depth + 1))
    for _ in range(draw(st.integers(0, 2))):
        out[draw(st.sampled_from(_EXTRA_KEYS))] = draw(_ANY | st.just(dict(_TEXT)))
    return out


def _valid(name: str, value) -> bool:
    try:
        shapes._validator(MODERN, name).validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(_TEMPLATES))
def test_each_quick_check_is_registered_and_passes_the_common_shape(name):
    assert name in shapes._register()
    assert shapes._QUICK[name](_TEMPLATES[name]) and _valid(name, _TEMPLATES[name])


@FUZZ
@given(st.sampled_from(sorted(_TEMPLATES)).flatmap(lambda n: st.tuples(st.just(n), _mutated(_TEMPLATES[n]))))
def test_a_quick_check_accepts_only_what_the_model_accepts(case):
    name, value = case
    if shapes._register()[name](value):
        assert _valid(name, value), (name, value)


# the models come from mcp_types.methods' public rows wherever those reach them

_INPUT_MODELS = ("ElicitRequestFormParams", "ElicitRequestURLParams", "CreateMessageRequest", "ListRootsRequest",
                 "ElicitResult", "CreateMessageResult", "ListRootsResult")


@pytest.mark.parametrize("version", [MODERN, LEGACY])
def test_the_input_request_and_response_models_are_reached_through_the_public_method_maps(version):
    models = shapes._models(version)
    for name in _INPUT_MODELS + (("InputResponses",) if version == MODERN else ()):
        assert name in models.public, name
        # the very model of the version's package: the same validation, the same findings
        assert getattr(models, name) == getattr(models.package, name), name
    # what the public maps do not reach (a form property's schema, an error's data) is the package's
    for name in ("PrimitiveSchemaDefinition", "StringSchema") + (("MissingRequiredClientCapabilityError",)
                                                                  if version == MODERN else ()):
        assert name not in models.public and getattr(models, name) is getattr(models.package, name)


def test_a_name_two_models_share_is_not_taken_from_the_maps():
    from pydantic import create_model

    one, two = create_model("Same", x=(int, ...)), create_model("Same", y=(int, ...))
    root = create_model("Root", a=(one, ...), b=(list[two] | None, None))
    found = shapes._models_under([root])
    assert found["Root"] is root and "Same" not in found


# --- the models load on first need (issue 25 item 14) ------------------------------------------------


def test_the_quick_checks_kept_for_the_verified_mcp_types_are_what_its_models_say():
    """`_VERIFIED` spares loading the models to learn which quick checks hold: it must be what the
    models of that version say. With another version installed, the models are asked instead."""
    import importlib.metadata

    version, holds, other = shapes._VERIFIED
    assert shapes.installed_mcp_types() == importlib.metadata.version("mcp-types")
    if shapes.installed_mcp_types() == version:
        assert shapes._verdict_of_models() == (holds, other)
        assert holds == frozenset(shapes._CHECKS)  # every check holds for the version it was written for
    else:  # the models decide; update _VERIFIED to that version's verdict to spare loading them
        assert shapes._register().keys() == shapes._verdict_of_models()[0]


_NO_MODELS = """
import sys
from mrtr_inspect.cli import main
sys.argv = ["mrtr-inspect", "check", sys.argv[1], "--format", "json"]
try:
    main()
except SystemExit:
    pass
print(sorted(m for m in ("mcp_types", "pydantic") if m in sys.modules), file=sys.stderr)
"""


def _check_in_a_fresh_process(tmp_path, answer: dict) -> tuple[dict, str]:
    """`check` of a 10-message MRTR recording (discover, tools/list, a chain of 3 rounds) in a new
    process; its report, and which of mcp_types and pydantic it imported."""
    import json
    import subprocess
    import sys

    from mrtr_inspect.recording.format import encode
    from tests.traffic import ELICIT as ASK
    from tests.traffic import Traffic

    t = Traffic()
    t.result(t.call("server/discover"), {"supportedVersions": ["2026-07-28"], "capabilities": {}})
    t.result(t.call("tools/list"), {"tools": []})
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ASK}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": answer}, requestState="s1")
    t.irr(b, {"again": ASK}, state="s2")
    c = t.tool("deploy", {"env": "prod"}, inputResponses={"again": ACCEPT}, requestState="s2")
    t.result(c, {"content": []})
    t.end()
    path = tmp_path / "ten.jsonl"
    path.write_bytes(b"".join(encode(f) for f in t.frames))
    done = subprocess.run([sys.executable, "-c", _NO_MODELS, str(path)], capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout), done.stderr.strip().splitlines()[-1]


def test_check_of_common_mrtr_traffic_does_not_load_the_models(tmp_path):
    report, imported = _check_in_a_fresh_process(tmp_path, ACCEPT)
    assert report["summary"]["messages"] == 10
    assert imported == "[]"  # mcp_types and pydantic: a second of a short check's startup


def test_an_answer_the_quick_checks_cannot_judge_loads_them_and_is_judged(tmp_path):
    report, imported = _check_in_a_fresh_process(tmp_path, {"action": "accept", "content": {"confirm": {"x": 1}}})
    assert imported == "['mcp_types', 'pydantic']"
    assert "elicit-result-content-type" in {f["rule"] for f in report["findings"]}
