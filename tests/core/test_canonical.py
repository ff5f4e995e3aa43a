"""Canonical JSON and the digests stitching keys on (core/canonical.py, RULES.md §3 digest(R))."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.canonical import _canon_num, canonical_json, params_digest, state_hash
from tests.core.strategies import FUZZ


def test_canonical_json_sorts_members_keeps_text_and_drops_spaces():
    assert canonical_json({"b": [1, {"d": None, "c": "é"}], "a": True}) == '{"a":true,"b":[1,{"c":"é","d":null}]}'
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1})


def test_canonical_json_writes_a_value_json_cannot_take_by_str_and_then_integral_floats_as_integers():
    assert canonical_json({"x": b"1", "n": 2.0}) == '{"n":2,"x":"b\'1\'"}'
    assert canonical_json({"n": float("nan"), "m": 3.0}) == '{"m":3,"n":NaN}'
    assert canonical_json({"n": 2.0}) == '{"n":2.0}'  # as written: params_digest is where 2.0 is 2


def test_state_hash_is_the_sha256_of_the_state_in_utf8():
    assert state_hash("s1") == hashlib.sha256(b"s1").hexdigest()
    assert state_hash("é\ud800") == hashlib.sha256("é\ud800".encode("utf-8", "surrogatepass")).hexdigest()


def test_params_digest_ignores_meta_and_mrtr_fields_and_absent_arguments():
    base = params_digest("tools/call", {"name": "x"})
    assert base == params_digest("tools/call", {"name": "x", "arguments": {}, "_meta": {"a": 1},
                                                "inputResponses": {"k": {}}, "requestState": "s"})
    assert params_digest("tools/call", {"name": "x", "arguments": {"n": 1}}) == params_digest(
        "tools/call", {"arguments": {"n": 1.0}, "name": "x"})  # member order and integral floats
    assert base != params_digest("tools/call", {"name": "x", "arguments": {"n": 1}})
    assert params_digest("resources/read", {"uri": "u"}) != params_digest("resources/read", {"uri": "u", "arguments": {}})


def _digest_as_specified(method, params) -> str:
    """digest(R) as RULES.md §3 defines it (the code before its shortcut)."""
    if type(params) is not dict:
        p = params
    else:
        p = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}
        if method != "resources/read" and "arguments" not in p:
            p["arguments"] = {}
        p = _canon_num(p)
    return hashlib.sha256(canonical_json(p).encode("utf-8", "surrogatepass")).hexdigest()[:32]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(alphabet='a.e+-1"\\', max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='ae."\\', max_size=3), c, max_size=3),
    max_leaves=12)


@FUZZ
@given(st.sampled_from(["tools/call", "resources/read", "prompts/get"]),
       st.dictionaries(st.sampled_from(["name", "uri", "arguments", "_meta", "requestState", "x"]), _JSON, max_size=4)
       | _JSON)
def test_params_digest_shortcut_gives_the_specified_digest(method, params):
    assert params_digest(method, params) == _digest_as_specified(method, params)
