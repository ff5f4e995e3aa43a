"""The filter language (mrtr_inspect/filter.py, docs/filter.md): the parser's precedence, wildcards
and errors, and the evaluator over a chain with its findings and over one finding."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from mrtr_inspect.filter import FilterError, parse

CHAIN = {
    "id": "c7", "method": "tools/call", "target": "wizard", "rounds": 2, "requests": [17, 18, "r-19"],
    "outcome": "complete", "duration_ms": 250.0, "hop": "front",
    "timeline": [{"id": 17}, {"id": 18, "wait_ms": 40.0}, {"id": "r-19", "wait_ms": 5.5}],
}
ERR = {"rule": "retry-reused-id", "severity": "error", "message": "retry id 18 repeats an earlier one", "chain": "c7"}
INFO = {"rule": "chain-linked", "severity": "info", "message": "tools/call id=18 continues chain c7", "chain": "c7"}


def chain_matches(expr: str, chain=CHAIN, findings=(ERR, INFO), session=None) -> bool:
    return parse(expr).matches(chain, list(findings), session)


# -- terms ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", [
    "", "   ", "tool:wizard", "tool:WIZARD", "tool:wiz*", "tool:*ard", "tool:w*z*d", "method:tools/call",
    "method:tools/*", "outcome:complete", "hop:front", "id:17", "id:18", "id:r-19", "id:r-*", "rounds>1",
    "rounds>=2", "rounds=2", "rounds:2", "rounds<3", "ms>249.5", "ms<=250", "waited>45", "waited<46",
    "rule:retry-reused-id", "rule:retry-*", "severity:error", "severity:info", "wizard", "izar", "repeats",
    "REPEATS", "rep*ts", "tool:wizard and rounds>1", "session:abc*",
])
def test_each_term_holds_for_the_chain(expr):
    assert chain_matches(expr, session="abc123")


@pytest.mark.parametrize("expr", [
    "tool:wiz", "tool:izard", "tool:wizard?", "method:prompts/get", "outcome:error", "hop:back", "id:1", "id:19",
    "id:7", "rounds>2", "rounds<2", "rounds=3", "ms>250", "waited>45.5", "rule:chain-linked-*", "severity:warning",
    "wizardry", "session:abd*", "tool:w.z*",
])
def test_near_miss_each_term_fails_for_the_chain(expr):
    assert not chain_matches(expr, session="abc123")


def test_tool_names_only_a_tool_call():
    prompt = dict(CHAIN, method="prompts/get")
    assert not chain_matches("tool:wizard", prompt) and chain_matches("wizard", prompt)


def test_the_session_comes_from_the_argument_or_the_chain():
    assert chain_matches("session:5e18d04b50bc", dict(CHAIN, session="5e18d04b50bc"))
    assert not chain_matches("session:5e18d04b50bc")  # the report's chains do not carry it


def test_a_chain_without_findings_has_no_rule_or_severity():
    assert not chain_matches("severity:error", findings=())
    assert chain_matches("not severity:error", findings=())


def test_finding_terms_are_any_finding_of_the_chain():
    """`rule:X severity:Y` on a chain: some finding has X and some has Y (not necessarily one)."""
    assert chain_matches("rule:chain-linked severity:error")
    # on the finding itself, both are its own
    f = parse("rule:chain-linked severity:error")
    assert not f.matches_finding(INFO, CHAIN) and not f.matches_finding(ERR, CHAIN)


def test_a_finding_answers_chain_terms_with_its_chain():
    f = parse("tool:wizard severity:error")
    assert f.matches_finding(ERR, CHAIN)
    assert not f.matches_finding(INFO, CHAIN)
    assert not f.matches_finding(ERR)  # about no chain: the chain terms do not hold
    assert parse("not tool:wizard").matches_finding(ERR)
    assert parse("id:18").matches_finding(INFO, CHAIN) and not parse("id:18").matches_finding(INFO)


def test_a_bare_word_is_the_findings_message_or_its_chains_target():
    assert parse("wizard").matches_finding(ERR, CHAIN)
    assert not parse("wizard").matches_finding(ERR)
    assert parse("continues").matches_finding(INFO) and not parse("continues").matches_finding(ERR, CHAIN)


def test_typed_objects_work_as_well_as_dicts():
    from mrtr_inspect.api import ChainSummary
    from mrtr_inspect.core.findings import Finding

    full = dict(CHAIN, link="state", era="modern", peer="stdio:x", start=0.0, end=0.25, error_code=None,
                round_details=[])
    full["timeline"] = [{"id": 17, "message": 1, "time": 0.0, "response": "input_required"},
                        {"id": 18, "message": 3, "time": 0.1, "retries_round": 1, "wait_ms": 40.0, "response": "result"}]
    chain = ChainSummary.from_dict(full)
    finding = Finding.from_json(ERR)
    assert parse("tool:wizard severity:error waited>39").matches(chain, [finding])
    assert parse("repeats").matches_finding(finding, chain)


def test_quotes_make_a_value_literal():
    chain = dict(CHAIN, target="my tool*")
    assert chain_matches('tool:"my tool*"', chain)
    assert not chain_matches('tool:"my tool*"', dict(CHAIN, target="my tool-x"))
    assert chain_matches('tool:"my "*', dict(CHAIN, target="my tool-x"))  # the quoted part literal, the star not
    assert chain_matches('"or"', dict(CHAIN, target="doorbell"))
    assert chain_matches('"tool:x"', findings=[dict(ERR, message="see tool:x")])
    assert chain_matches(r'"a \"b\""', dict(CHAIN, target='a "b"'))


def test_a_uri_is_a_bare_word():
    chain = dict(CHAIN, method="resources/read", target="file:///tmp/a.txt")
    assert chain_matches("file:///tmp/a.txt", chain)
    assert chain_matches("https://example.com", findings=[dict(ERR, message="see https://example.com/x")])


def test_keywords_are_any_case():
    assert chain_matches("tool:x OR tool:wizard") and not chain_matches("NOT tool:wizard")


def test_the_parse_keeps_the_text_and_what_it_reads():
    f = parse("tool:a (rule:chain-linked or waited>3) repeats")
    assert f.text == "tool:a (rule:chain-linked or waited>3) repeats"
    assert f.fields == {"tool", "rule", "waited", "word"} and f.needs_findings
    assert not parse("tool:a rounds>1").needs_findings
    assert parse("").empty and not parse("x").empty


# -- precedence: generated expressions against Python's own evaluation -------------------------------

WORDS = ("alpha", "bravo", "charlie", "delta")


def _tree(depth: int):
    leaf = st.sampled_from(WORDS)
    if depth == 0:
        return leaf
    sub = _tree(depth - 1)
    return st.one_of(leaf, st.tuples(st.just("not"), sub),
                     st.tuples(st.sampled_from(["and", "or"]), sub, sub))


PREC = {"or": 1, "and": 2, "not": 3}


def _render(t, parent: int, tight: bool, explicit_and: bool) -> str:
    """As few parentheses as precedence needs (`tight`), or around every operation."""
    if isinstance(t, str):
        return t
    op = t[0]
    if op == "not":
        text = "not " + _render(t[1], PREC["not"], tight, explicit_and)
    else:
        joint = " and " if op == "and" and explicit_and else " " if op == "and" else " or "
        # left-associative: the right operand of the same operator needs parentheses only to change grouping
        text = _render(t[1], PREC[op], tight, explicit_and) + joint + _render(t[2], PREC[op] + 1, tight, explicit_and)
    return text if tight and PREC[op] >= parent else f"({text})"


def _eval(t, true: set[str]) -> bool:
    if isinstance(t, str):
        return t in true
    if t[0] == "not":
        return not _eval(t[1], true)
    a, b = _eval(t[1], true), _eval(t[2], true)
    return (a and b) if t[0] == "and" else (a or b)


@settings(max_examples=300, deadline=None)
@given(_tree(4), st.sets(st.sampled_from(WORDS)), st.booleans(), st.booleans())
def test_precedence_not_then_and_then_or(tree, true, tight, explicit_and):
    text = _render(tree, 0, tight, explicit_and)
    chain = dict(CHAIN, target=" ".join(sorted(true)))
    assert parse(text).matches(chain, []) == _eval(tree, true), text


@pytest.mark.parametrize("expr, grouped", [
    ("alpha bravo or charlie", "(alpha bravo) or charlie"),
    ("alpha or bravo charlie", "alpha or (bravo charlie)"),
    ("not alpha bravo", "(not alpha) bravo"),
    ("not alpha or bravo", "(not alpha) or bravo"),
    ("not not alpha", "alpha"),
])
def test_precedence_examples(expr, grouped):
    for true in ({"alpha"}, {"bravo"}, {"charlie"}, {"alpha", "bravo"}, {"bravo", "charlie"}, set()):
        chain = dict(CHAIN, target=" ".join(true))
        assert parse(expr).matches(chain, []) == parse(grouped).matches(chain, []), (expr, true)


# -- wildcards ------------------------------------------------------------------------------------


@given(st.text(alphabet="ab.*+?[]^$\\", min_size=1, max_size=8), st.text(alphabet="ab.*+?[]^$\\", max_size=8))
def test_only_the_star_is_special_in_a_value(pattern, name):
    """`*` is any run of characters; every other character stands for itself; in quotes the star too."""
    want = re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), name, re.DOTALL) is not None
    assert parse(f"tool:{pattern}").matches(dict(CHAIN, target=name), []) == want
    quoted = '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse(f"tool:{quoted}").matches(dict(CHAIN, target=name), []) == (name == pattern)


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr, term", [
    ("tol:wizard", "tol:wizard"),
    ("tool>3", "tool>3"),
    ("rounds>many", "rounds>many"),
    ("ms>nan", "ms>nan"),
    ("waited:", "waited:"),
    ("tool:", "tool:"),
    ("severity:fatal", "severity:fatal"),
    ("outcome:done", "outcome:done"),
    ("rule:no-such-rule", "rule:no-such-rule"),
    ("(tool:a", "("),
    ("tool:a)", ")"),
    ("()", "()"),
    ("tool:a ()", "()"),
    ("or tool:a", "or"),
    ("tool:a or", "or"),
    ("tool:a or or tool:b", "or"),
    ("not", "not"),
    ("tool:a not", "not"),
    ("not or tool:a", "not"),
    ("and tool:a", "and"),
    ("tool:a and", "and"),
    ('tool:"abc', 'tool:"abc'),
    ('""', '""'),
    ("(" * 80 + "a" + ")" * 80, "("),
])
def test_a_bad_expression_names_its_term_on_one_line(expr, term):
    with pytest.raises(FilterError) as e:
        parse(expr)
    assert e.value.term == term
    assert "\n" not in str(e.value) and repr(term) in str(e.value)


def test_near_miss_wildcards_skip_the_value_checks():
    assert not chain_matches("severity:err*", findings=[INFO]) and chain_matches("severity:err*")
    assert chain_matches("outcome:comp*") and parse("rule:no-such-*")


def test_rule_ids_can_be_checked_against_another_list_or_not_at_all():
    assert parse("rule:custom-x", rules=None)
    with pytest.raises(FilterError):
        parse("rule:custom-x", rules=lambda r: r == "custom-y")


def test_a_very_long_expression_is_refused():
    with pytest.raises(FilterError):
        parse("a " * 5000)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='ab :<>=()"*\\-otnrd', max_size=30))
def test_any_text_parses_or_is_a_filter_error(text):
    try:
        f = parse(text, rules=None)
    except FilterError as e:
        assert "\n" not in str(e)
    else:
        f.matches(CHAIN, [ERR])
        f.matches_finding(ERR, CHAIN)
