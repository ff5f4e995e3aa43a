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


_ANY_TEXT = st.text(alphabet=st.characters(codec=None), max_size=6) | st.text(
    alphabet='\x00\x1f\x7f\u2028é\U0001f600\ud800"\\/.e+-n ull', max_size=6)
_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**64 + 1)
    | st.floats() | _ANY_TEXT,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(_ANY_TEXT, c, max_size=3), max_leaves=12)


@FUZZ
@given(st.sampled_from(["tools/call", "resources/read"]), st.dictionaries(_ANY_TEXT | st.just("arguments"), _ANY_JSON,
                                                                          max_size=4))
def test_params_digest_by_orjson_gives_the_specified_digest(method, params):
    """orjson writes the params where its bytes are the canonical text's: strings of any code point
    (controls, non-ASCII, lone surrogates, which orjson refuses), integers past 64 bits (refused), floats
    of every kind (NaN and the infinities, which orjson writes as null), nulls, "." and "e+" in strings."""
    assert params_digest(method, params) == _digest_as_specified(method, params)


def test_params_digest_takes_orjson_for_plain_params_and_the_json_module_for_floats_and_nulls():
    from mrtr_inspect.core import canonical

    canonical._orjson_digest.cache_clear()
    params_digest("tools/call", {"name": "x", "arguments": {"v": "1.2.3", "s": "e+1", "ok": True, "n": 12}})
    params_digest("tools/call", {"name": "x", "arguments": {"v": 1.5}})
    params_digest("tools/call", {"name": "x", "arguments": {"v": None}})
    params_digest("tools/call", {"name": "x", "arguments": {"v": float("inf")}})
    digests = [canonical._orjson_digest(k) for k in ['{"arguments":{"n":12,"ok":true,"s":"e+1","v":"1.2.3"},"name":"x"}',
                                                     '{"arguments":{"v":1.5},"name":"x"}',
                                                     '{"arguments":{"v":null},"name":"x"}']]
    assert digests[0] is not None and digests[1] is None and digests[2] is None
    # each was written by orjson first (the infinity as null, the bytes of the None's params: a hit)
    assert canonical._orjson_digest.cache_info().hits == 4
