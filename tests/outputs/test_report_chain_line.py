"""The report's chain items written from the `Chain` (`outputs/report.chain_line`): byte for byte what
the report wrote of its summary (`_chain_line(chain.summary())`), whatever its members hold, and
without the summary for a chain as the analysis makes them."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters.offline import analyze_all
from mrtr_inspect.core.chains import Chain, ChainRequest, Round
from mrtr_inspect.core.findings import Severity
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.vocabulary import Outcome
from mrtr_inspect.outputs import report
from mrtr_inspect.outputs.report import ReportBuilder, _chain_line, chain_line

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

_TEXT = st.text(st.one_of(st.sampled_from(list(' ,:"\\\n\t\x00\x1f\x7f\x85\u2028\u202e\ud800\udfff{}[]e-0.%')),
                          st.characters()), max_size=10)
_FLOAT = st.one_of(st.floats(), st.floats(1e15, 1e17), st.floats(1.7e9, 1.8e9),
                   st.sampled_from([0.0, -0.0, 1e-4, 9.999e-5, 1e-5, 1e-7, 1e16, 1e22, 1796000004.464037]))
_TIME = st.one_of(st.floats(1.7e9, 1.8e9), st.floats(1.7e9, 1.8e9), _FLOAT, st.integers(0, 2**40))
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _FLOAT, _TEXT,
                  st.sampled_from([*Outcome, *Severity]))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=8)
_SUMMARY = st.one_of(st.none(), st.just({}), st.dictionaries(_TEXT, _VALUE, max_size=3),
                     st.just({"tag": {"method": "elicitation/create", "mode": "form", "summary": "Tag?",
                                      "fields": ["tag"]}}), _LEAF)  # (core/summary's: a dict; any here)


def _new(cls, **attrs):
    obj = object.__new__(cls)
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


@st.composite
def chains(draw) -> Chain:
    """A closed chain (no legacy rounds), its objects made without the stitcher: what comes from the
    wire any value (ids, error codes, the method, the hop, strings of any characters), what the
    analysis makes of its own type (the indices, the round numbers, the era, the outcome, the links,
    the response kinds); times of any value."""
    chain = _new(Chain, id=draw(st.one_of(st.sampled_from(["c1", "c20"]), _TEXT)),
                 method=draw(st.one_of(st.just("tools/call"), _LEAF)), target=draw(st.one_of(st.none(), _TEXT)),
                 peer=draw(st.one_of(st.just("stdio:000000000000"), _TEXT)),
                 era=draw(st.sampled_from(["modern", "legacy", None])), start=draw(_TIME),
                 end=draw(_TIME), error_code=draw(st.one_of(st.none(), st.none(), _LEAF)),
                 outcome=draw(st.one_of(st.sampled_from([*Outcome]), st.none())),
                 vias=draw(st.lists(st.sampled_from(["state", "keys", "params"]), max_size=2)), asks=[],
                 hop=draw(st.one_of(st.none(), st.none(), _TEXT, _LEAF)), closed=True)
    shared = draw(_SUMMARY)  # a summary object shared by rounds or retries, as core/summary shares them
    chain.rounds = [_new(Round, chain=chain, n=draw(st.integers(1, 9)),
                         irr_index=draw(st.integers(0, 10**6)), irr_time=draw(_TIME),
                         asked=shared if draw(st.booleans()) else draw(_SUMMARY),
                         state_hash=draw(st.one_of(st.none(), st.just(""), st.just("03babb06e24a9c6e" * 4), _TEXT)),
                         retries=[]) for _ in range(draw(st.integers(0, 3)))]
    chain.requests = []
    for n in range(draw(st.integers(1, 4))):
        rd = draw(st.sampled_from(chain.rounds)) if n and chain.rounds else None
        answered = index = None
        if draw(st.booleans()):
            index = draw(st.integers(0, 10**6))
        if rd is not None and draw(st.booleans()):
            answered = shared if draw(st.booleans()) else draw(_SUMMARY)
        r = _new(ChainRequest, chain=chain, id=draw(st.one_of(st.integers(0, 99), _LEAF)),
                 index=draw(st.integers(0, 10**6)), time=draw(_TIME), round=rd,
                 link=SimpleNamespace(via=draw(st.sampled_from(["state", "keys"]))) if draw(st.booleans()) else None,
                 answered_summary=answered, response_kind=draw(st.sampled_from([None, "result", "input_required"])),
                 cancelled=draw(st.booleans()), response_index=index,
                 response_time=draw(st.one_of(_TIME, st.none())), error_code=draw(st.one_of(st.none(), _LEAF)))
        if rd is not None and draw(st.booleans()):
            rd.retries.append(r)
        chain.requests.append(r)
    return chain


@settings(max_examples=3000, deadline=None)
@given(chain=chains())
def test_any_chain_is_written_as_its_summary_was(chain):
    """Its shapes repeat across the examples, so most take a template made from another chain."""
    assert chain_line(chain) == _chain_line(chain.summary())


def test_no_template_was_found_wrong():
    """No shape's template gave another line than the summary's (which would keep it the way of before)."""
    test_any_chain_is_written_as_its_summary_was()
    assert report._TEMPLATES and False not in report._TEMPLATES.values()


def test_the_analysis_chains_take_the_template_and_match():
    """Every chain of the fixtures' recordings: the same line, and most by a template (the way that
    matters: `check` writes one such line per chain)."""
    seen = fast = 0

    def keep(outs):
        nonlocal seen, fast
        for o in outs:
            if type(o) is ChainEvent and o.kind == "closed":
                c = o.chain
                assert chain_line(c) == _chain_line(c.summary())
                seen += 1
                walked = report._walk(c)
                fast += walked is not None and bool(report._TEMPLATES.get(walked[0]))

    for p in sorted(FIXTURES.rglob("*.jsonl")):
        if p.read_bytes().startswith(b'{"mrtr-inspect":"recording"'):  # (captures/ holds the SDKs' own formats)
            analyze_all([str(p)], keep, chain_events=False)
    assert seen > 20 and fast > seen // 2


@pytest.mark.parametrize("change", [
    {"start": math.nan}, {"end": math.inf}, {"start": 5e-5}, {"end": 1e16}, {"error_code": 1.5},
    {"error_code": {"a": 1}}, {"error_code": 2**64}, {"method": "a \ud800 b"}, {"target": "\x7f\u202e"},
    {"hop": 0.5}, {"hop": "h"}, {"outcome": Outcome.ABANDONED}, {"id": "100%s%%"},
])
def test_near_misses_are_written_as_before(change):
    chain = _bench_chain()
    for k, v in change.items():
        setattr(chain, k, v)
    assert chain_line(chain) == _chain_line(chain.summary())


def _bench_chain() -> Chain:
    chain = _new(Chain, id="c1", method="tools/call", target="release", peer="stdio:000000000000", era="modern",
                 start=1796000001.145516, end=1796000010.101799, error_code=None, outcome=Outcome.COMPLETE,
                 vias=["state"], asks=[], hop=None, closed=True)
    asked = {"tag": {"method": "elicitation/create", "mode": "form", "summary": "Tag for release 1.1.1?",
                     "fields": ["tag"]}}
    rd = _new(Round, chain=chain, n=1, irr_index=5, irr_time=1796000001.146216, asked=asked,
              state_hash="03babb06e24a9c6e" * 4, retries=[])
    first = _new(ChainRequest, chain=chain, id=3, index=4, time=1796000001.145516, round=None, link=None,
                 answered_summary=None, response_kind="input_required", cancelled=False, response_index=5,
                 response_time=1796000001.146216, error_code=None)
    retry = _new(ChainRequest, chain=chain, id=4, index=6, time=1796000004.464037, round=rd,
                 link=SimpleNamespace(via="state"), answered_summary={"tag": {"action": "accept", "summary": "v"}},
                 response_kind="result", cancelled=False, response_index=7, response_time=1796000010.101799,
                 error_code=None)
    rd.retries.append(retry)
    chain.rounds, chain.requests = [rd], [first, retry]
    return chain


def test_a_chain_of_today_is_written_without_its_summary(monkeypatch):
    """Once its shape's template is made, a chain's line needs neither its summary nor the way of before."""
    expected = [_chain_line(_bench_chain().summary()) for _ in range(3)]
    chain_line(_bench_chain())  # its shape's template

    def refused(*args):
        raise AssertionError("written the way of before")

    monkeypatch.setattr(Chain, "summary", refused)
    monkeypatch.setattr(report, "_chain_line", refused)
    assert [chain_line(_bench_chain()) for _ in range(3)] == expected


def test_a_kept_summary_text_is_the_objects_own():
    """The asked summaries' texts are kept by object: another object of other contents, even at the
    same address once the first is gone, gets its own text (the kept text holds its object)."""
    a, b = _bench_chain(), _bench_chain()
    line_a = chain_line(a)
    b.rounds[0].asked = {"other": {"method": "sampling/createMessage", "summary": "x"}}
    del a
    assert chain_line(b) == _chain_line(b.summary()) != line_a
