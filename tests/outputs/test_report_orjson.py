"""The report's chain items written by orjson (`outputs/report._spaced`): byte for byte what the C
encoder writes (`_line`), or refused and left to it."""

from __future__ import annotations

import math
import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.core.vocabulary import Outcome
from mrtr_inspect.outputs.report import _chain_line, _line, _spaced

# every character, with the ones that matter here (separators, quotes, escapes, spaces, controls,
# DEL, what json_printable escapes, lone surrogates) drawn often
_TEXT = st.text(st.one_of(st.sampled_from(list(' ,:"\\\n\t\x00\x1f\x7f\x85\u2028\u202e\ud800\udfff{}[]e-0.nul')),
                          st.characters()), max_size=12)
_FLOAT = st.one_of(st.floats(), st.floats(-1e-3, 1e-3), st.floats(1e15, 1e17),
                   st.sampled_from([0.0, -0.0, 1e-4, 9.999e-5, 1e-5, 1e-7, 1e-9, 1e-10, 1e16, 1e22, 5e-324]))
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _FLOAT, _TEXT,
                  st.sampled_from(list(Outcome)))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.lists(inner, max_size=3).map(tuple),
                                                     st.dictionaries(_TEXT, inner, max_size=4)), max_leaves=25)


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(_TEXT, _VALUE, max_size=8))
def test_any_item_is_written_as_the_c_encoder_writes_it(item):
    assert _chain_line(item) == _line(item)


def _chain(i: int) -> dict:
    """A chain summary as core/summary.py writes it (the report's fields and nesting)."""
    t = 1796000000.0 + i * 1.000731
    return {"id": f"c{i}", "method": "tools/call", "target": "release, notes: v1", "rounds": 1, "requests": [i, i + 1],
            "outcome": Outcome.COMPLETE, "link": "state", "duration_ms": 1234.567, "era": "modern",
            "peer": "stdio:000000000000", "start": t, "end": t + 1.234567, "error_code": None,
            "timeline": [{"id": i, "message": 4, "time": t, "response": "input_required", "response_message": 5,
                          "response_time": t + 0.0007},
                         {"id": i + 1, "message": 6, "time": t + 1.2, "retries_round": 1, "wait_ms": 1199.3,
                          "link": "state", "answered": {"tag": {"action": "accept", "summary": '{"tag": "v1.1.1"}'}},
                          "response": "result", "response_message": 7, "response_time": t + 1.234567}],
            "round_details": [{"round": 1, "message": 5, "time": t + 0.0007, "asked": {"tag": {
                "method": "elicitation/create", "mode": "form", "summary": "Tag, for release 1.1.1?", "fields": ["tag"]}},
                "request_state": "03babb06e24a9c6e"}]}


def test_a_chain_summary_takes_orjson_and_comes_out_the_same():
    for i in range(200):
        c = _chain(i)
        assert _spaced(c) is not None and _chain_line(c) == _line(c), i


def test_what_orjson_writes_otherwise_is_refused_and_left_to_the_c_encoder():
    base = _chain(1)
    near = [("a NaN under a None", ["timeline", 0, "time"], math.nan), ("an infinity", ["end"], math.inf),
            ("a float below 1e-4", ["duration_ms"], 1.5e-05), ("a float written 1e-7 by orjson", ["start"], 1e-7),
            ("two spaces in a string", ["target"], "a  b"), ("a key with two spaces", ["asked"], None),
            ("an int past 64 bits", ["rounds"], 2**64), ("a lone surrogate", ["peer"], "\ud800"),
            ("a bytes value", ["link"], b"state"), ("a set", ["requests"], {1})]
    for why, path, value in near:
        item = _chain(1)
        if why == "a key with two spaces":
            item["round_details"][0]["asked"] = {"t  g": 1}
        else:
            at = item
            for k in path[:-1]:
                at = at[k]
            at[path[-1]] = value
        assert _spaced(item) is None, why
        assert _chain_line(item) == _line(item), why
    assert _spaced(base) is not None  # the near misses above are refused for their change, not for the chain


def test_floats_of_every_magnitude_are_written_as_float_repr():
    rng = random.Random(27)
    for _ in range(50_000):
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if rng.random() < 0.5 and math.isfinite(x):  # half of them near the magnitudes the report holds
            x = math.ldexp(math.frexp(x)[0], rng.randint(-40, 60))
        item = {"x": x, "y": [x, {"z": -x}]}
        assert _chain_line(item) == _line(item), repr(x)
