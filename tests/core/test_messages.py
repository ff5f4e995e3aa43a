"""messages: classify every JSON-RPC shape; decode_message never raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.messages import (
    BATCH,
    ERROR,
    INVALID,
    NOTIFICATION,
    REQUEST,
    RESULT,
    Message,
    classify,
    decode_message,
    id_key,
    split_batch,
    target_of,
)
from tests.core.strategies import FUZZ


def classified(value) -> Message:
    return Message(*classify(b"", value))


@pytest.mark.parametrize("value, kind", [
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}, REQUEST),
    ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, REQUEST),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, NOTIFICATION),
    ({"jsonrpc": "2.0", "id": 1, "result": {}}, RESULT),
    ({"jsonrpc": "2.0", "id": 1, "result": None}, RESULT),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}, ERROR),
    ({"jsonrpc": "2.0", "error": {"code": -32700, "message": "parse"}}, ERROR),  # an error may lack its id
])
def test_well_formed_kinds(value, kind):
    m = classified(value)
    assert m.kind == kind and m.problem is None


def test_fields_are_taken_from_the_value():
    m = classified({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "x"}})
    assert (m.id, m.idk, m.method, m.params, m.label()) == ("a", ("s", "a"), "tools/call", {"name": "x"}, "tools/call id='a'")
    r = classified({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "m"}})
    assert (r.kind, r.id, r.error, r.result, r.is_response) == (ERROR, 3, {"code": 1, "message": "m"}, None, True)


@pytest.mark.parametrize("value, kind, problem", [
    ({"id": 1, "method": "x"}, REQUEST, "no jsonrpc member"),
    ({"jsonrpc": "1.0", "id": 1, "method": "x"}, REQUEST, "not \"2.0\""),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, REQUEST, "method is not a string"),
    ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": "s"}, REQUEST, "neither an object nor an array"),
    ({"jsonrpc": "2.0", "id": 1, "method": "x", "result": {}}, REQUEST, "carrying result or error"),
    ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, RESULT, "both result and error"),
    ({"jsonrpc": "2.0", "result": {}}, RESULT, "a result without id"),
    ({"jsonrpc": "2.0", "id": 1}, INVALID, "neither a request"),
    ({}, INVALID, "neither a request"),
    ("text", INVALID, "not an object"),
    (3, INVALID, "not an object"),
    (None, INVALID, "not an object"),
])
def test_malformed_envelopes_say_why(value, kind, problem):
    m = classified(value)
    assert m.kind == kind
    assert problem in m.problem and m.problem_reason == "envelope"


def test_batch_and_its_members():
    raw = b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},7]'
    m = decode_message(raw)
    assert m.kind == BATCH and m.problem_reason == "batch"
    members = split_batch(m)
    assert [x.kind for x in members] == [REQUEST, NOTIFICATION, INVALID]
    assert all(x.raw == raw for x in members)
    assert classified([]).problem == "an empty JSON array"


@pytest.mark.parametrize("id_value", [0, 1, -5, 2**70, "1", "", "é", 1.0, 1.5, True, False, None, [1], {"a": 1}])
def test_ids_of_every_json_type_are_kept(id_value):
    m = classified({"jsonrpc": "2.0", "id": id_value, "method": "x"})
    assert m.kind == REQUEST and m.id == id_value and type(m.id) is type(id_value)
    assert m.idk == id_key(id_value)
    hash(m.idk)


def test_id_key_keeps_types_apart():
    keys = [id_key(v) for v in (1, "1", 1.0, True, [1], "True")]
    assert len(set(keys)) == len(keys)
    assert id_key(None) is None
    assert id_key(1) == id_key(1) and id_key("a") == id_key("a") and id_key({"a": 1}) == id_key({"a": 1})


def test_decode_message_keeps_raw_bytes_and_reports_parse_problems():
    raw = b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}'
    m = decode_message(raw)
    assert m.raw == raw and m.id == 2 and m.duplicates[0].name == "id"
    bad = decode_message(b'{"jsonrpc":"2.0","id":1}\xff')
    assert (bad.kind, bad.problem_reason) == (INVALID, "utf8")
    assert decode_message(b"NaN").problem_reason == "constant"
    assert decode_message(b"[" * 300 + b"]" * 300).problem_reason == "depth"
    assert decode_message(b"[" * 10 + b"]" * 10, max_depth=5).problem_reason == "depth"


def test_target_of():
    assert target_of("tools/call", {"name": "deploy"}) == "deploy"
    assert target_of("prompts/get", {"name": "p"}) == "p"
    assert target_of("resources/read", {"uri": "file:///a", "name": "n"}) == "file:///a"
    assert target_of("tools/call", {"name": 5}) is None
    assert target_of("tools/call", ["x"]) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]) | st.text(max_size=3), c, max_size=5),
    max_leaves=15)


@FUZZ
@given(st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode())))
def test_decode_message_never_raises(raw):
    m = decode_message(raw)
    assert m.kind in (REQUEST, NOTIFICATION, RESULT, ERROR, INVALID, BATCH)
    assert m.raw == raw
    assert (m.problem is None) == (m.problem_reason is None)
    if m.kind == INVALID:
        assert m.problem
    m.label()
    for member in split_batch(m):
        member.label()


_ENVELOPE_VALUES = st.none() | st.booleans() | st.integers() | st.just(1.5) | st.sampled_from(["2.0", "1.0", "x"]) | st.just(
    {}) | st.just([]) | st.just({"a": 1}) | st.just([1])


@FUZZ
@given(st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]), _ENVELOPE_VALUES,
                       max_size=6), st.booleans())
def test_classify_common_cases_decide_as_the_general_path(value, canonical):
    """`classify`'s few lookups for well-formed messages give what its general path gives, for any
    mix of the envelope's members (present, absent, null, of any type)."""
    from mrtr_inspect.core.messages import _classify_object, classify

    assert classify(b"x", value, (), canonical) == _classify_object(b"x", value, (), canonical)
    assert classify(b"x", {**value, "jsonrpc": "2.0"}) == _classify_object(b"x", {**value, "jsonrpc": "2.0"}, (), False)
