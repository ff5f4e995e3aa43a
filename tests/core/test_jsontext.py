"""jsontext.dumps_with gives exactly json.dumps."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

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
