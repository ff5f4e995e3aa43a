"""jsontext.dumps_with gives exactly json.dumps; the params digest's shortcut gives the full digest."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.chains import _canon_num, canonical_json, params_digest
from mrtr_inspect.core.jsontext import dumps_with
from tests.core.strategies import FUZZ

_KEYS = st.text(max_size=3) | st.integers() | st.booleans() | st.none() | st.floats()
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.binary(max_size=3),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(_KEYS, c, max_size=4), max_leaves=20)
_OPTIONS = [dict(ensure_ascii=False, default=str), dict(ensure_ascii=True, default=str), dict(),
            dict(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False),
            dict(sort_keys=True, separators=(",", ":"), ensure_ascii=False)]
_DUMPS = [(o, dumps_with(**o)) for o in _OPTIONS]


def _outcome(fn, value):
    try:
        return "ok", fn(value)
    except (TypeError, ValueError) as e:
        return "error", type(e).__name__


@FUZZ
@given(_VALUES)
def test_dumps_with_is_json_dumps(value):
    for options, dumps in _DUMPS:
        assert _outcome(dumps, value) == _outcome(lambda v: json.dumps(v, **options), value)


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
