"""The report's finding items written from the `Finding` (`outputs/report._finding_line`): byte for
byte what the C encoder writes of its report form (`_line(f.to_json())`), whatever its members hold."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.core.findings import Finding, Severity
from mrtr_inspect.core.vocabulary import Outcome
from mrtr_inspect.outputs import report
from mrtr_inspect.outputs.report import ReportBuilder, _finding_line, _line

# the characters that matter here (quotes, escapes, separators, controls, DEL, what json_printable
# escapes, lone surrogates) drawn often, and any other
_TEXT = st.text(st.one_of(st.sampled_from(list(' ,:"\\\n\t\x00\x1f\x7f\x85\u2028\u202e\ud800\udfff{}[]e-0.')),
                          st.characters()), max_size=12)
_FLOAT = st.one_of(st.floats(), st.floats(1e15, 1e17), st.floats(1.7e9, 1.8e9),
                   st.sampled_from([0.0, -0.0, 1e-4, 9.999e-5, 1e-5, 1e-7, 1e16, 1e22, 1796000004.464037]))
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _FLOAT, _TEXT,
                  st.sampled_from([*Outcome, *Severity]))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
                                                     st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=12)


@settings(max_examples=2000, deadline=None)
@given(rule=st.one_of(st.sampled_from(["chain-linked", "irr-empty"]), _TEXT, _LEAF),
       severity=st.one_of(st.sampled_from([*Severity, "info"]), _LEAF),
       message=st.one_of(_TEXT, _LEAF), time=st.one_of(_FLOAT, _LEAF),
       chain=st.one_of(st.none(), st.sampled_from(["c1", "c20"]), _TEXT, _LEAF),
       messages=st.one_of(st.lists(st.integers(0, 10**6), max_size=3), st.lists(_VALUE, max_size=3),
                          st.lists(_VALUE, max_size=3).map(tuple)),
       spec=st.one_of(st.none(), st.sampled_from(["basic/patterns/mrtr.mdx"]), _TEXT, _LEAF),
       conformance=st.one_of(st.none(), _TEXT, _LEAF),
       details=st.one_of(st.none(), st.dictionaries(_TEXT, _VALUE, max_size=3), _VALUE))
def test_any_finding_is_written_as_the_c_encoder_writes_its_report_form(rule, severity, message, time, chain,
                                                                         messages, spec, conformance, details):
    f = Finding(rule, severity, message, time, chain, messages, spec, conformance, details)
    assert _finding_line(f) == _line(f.to_json())


def _chain_linked(i: int) -> Finding:
    return Finding("chain-linked", Severity.INFO,
                   f"tools/call id={i} continues chain c{i} (tools/call release) after round 1, linked via state, "
                   f"3318 ms after the input_required", 1796000004.464037 + i, f"c{i}", [i, i + 1],
                   "basic/patterns/mrtr.mdx", None, {"round": 1, "link_method": "state", "elapsed_ms": 3317.821})


def test_a_rules_finding_is_written_without_its_report_form(monkeypatch):
    """The way that matters: a rule's finding (string members, a time of today) does not take the C
    encoder's whole-finding way, and its line is that way's bytes."""
    expected = [_line(_chain_linked(i).to_json()) for i in range(50)]

    def whole(obj):
        raise AssertionError("written by the C encoder whole")

    monkeypatch.setattr(report, "_line", whole)
    assert [_finding_line(_chain_linked(i)) for i in range(50)] == expected


@pytest.mark.parametrize("change", [
    {"time": math.nan}, {"time": 5e-5}, {"time": 1e16}, {"time": 3}, {"chain": 7}, {"message": None},
    {"severity": None}, {"rule": ["x"]}, {"messages": (1, 2)}, {"details": {}}, {"message": "a \ud800 b"},
    {"message": "\x7f\u202e"},
])
def test_near_misses_are_written_as_before(change):
    f = _chain_linked(1)
    for k, v in change.items():
        setattr(f, k, v)
    assert _finding_line(f) == _line(f.to_json())


def test_the_builder_counts_and_writes_a_finding_added_either_way():
    a, b = ReportBuilder(), ReportBuilder()
    try:
        for i in range(3):
            a.add_all([_chain_linked(i)])
            b.add_finding(_chain_linked(i))
        b.add_finding_json(_chain_linked(3).to_json())
        a.add_finding(_chain_linked(3))
        assert a.to_dict() == b.to_dict()
        assert a.severity_counts == b.severity_counts == {"error": 0, "warning": 0, "info": 4}
        assert a.rule_counts == b.rule_counts == {"chain-linked": 4}
        assert list(a._findings.lines()) == list(b._findings.lines())
    finally:
        a.close()
        b.close()


@settings(max_examples=1500, deadline=None)
@given(message=st.one_of(_TEXT, _LEAF), time=st.one_of(_FLOAT, _LEAF), chain=st.one_of(st.none(), _TEXT, _LEAF),
       messages=st.one_of(st.lists(st.integers(0, 10**6), min_size=2, max_size=2), st.lists(_VALUE, max_size=2)),
       details=st.one_of(st.fixed_dictionaries({"round": _VALUE, "link_method": _VALUE, "elapsed_ms": _VALUE}),
                         st.none(), _VALUE))
def test_findings_of_one_rule_share_its_template_and_are_written_as_before(message, time, chain, messages, details):
    """The members a template's key holds (the rule, severity, spec, conformance id) fixed, the others
    of any value: most examples take the template the first made (`_FINDING_TEMPLATES`)."""
    f = _chain_linked(1)
    f.message, f.time, f.chain, f.messages, f.details = message, time, chain, messages, details
    assert _finding_line(f) == _line(f.to_json())


def test_a_rules_finding_takes_its_template(monkeypatch):
    """Once its key's template is made, a rule's finding is written by it alone."""
    expected = [_line(_chain_linked(i).to_json()) for i in range(50)]
    _finding_line(_chain_linked(0))

    def refused(*args):
        raise AssertionError("written the way of before")

    monkeypatch.setattr(report, "_finding_line_parts", refused)
    monkeypatch.setattr(report, "_line", refused)
    assert [_finding_line(_chain_linked(i)) for i in range(50)] == expected
    key = ("chain-linked", "info", "basic/patterns/mrtr.mdx", None, 2, "round", "link_method", "elapsed_ms")
    assert report._FINDING_TEMPLATES[key]
