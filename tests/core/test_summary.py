"""What a round asked and a retry answered, in short (core/summary.py): the report's `asked` and
`answered`, read by `show`, the live view and the chain rules."""

from __future__ import annotations

from mrtr_inspect.core.summary import _short, summarize_requests, summarize_responses
from tests.traffic import ACCEPT, ELICIT, ROOTS, ROOTS_ANSWER, SAMPLE, SAMPLED


def test_asked_names_each_request_by_method_with_what_it_asks():
    url = {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://x.example/a"}}
    assert summarize_requests({"confirm": ELICIT, "login": url, "s": SAMPLE, "r": ROOTS,
                               "p": {"method": "ping", "params": {"a": 1}}, "odd": [1, 2]}) == {
        "confirm": {"method": "elicitation/create", "mode": "form", "summary": "Proceed?", "fields": ["confirm"]},
        "login": {"method": "elicitation/create", "mode": "url", "summary": "Sign in", "url": "https://x.example/a"},
        "s": {"method": "sampling/createMessage", "summary": "Summarize", "maxTokens": 50},
        "r": {"method": "roots/list", "summary": "the client's roots"},
        "p": {"method": "ping", "summary": '{"a": 1}'},
        "odd": {"method": None, "summary": "[1, 2]"},
    }
    assert summarize_requests(None) == {} and summarize_requests({}) == {}


def test_answered_says_the_action_the_roots_or_the_model_of_each_response():
    two = {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}
    assert summarize_responses({"confirm": ACCEPT, "r": ROOTS_ANSWER, "two": two, "none": {"roots": []},
                                "s": SAMPLED, "x": {"other": 1}, "odd": "text"}) == {
        "confirm": {"action": "accept", "summary": '{"confirm": true}'},
        "r": {"summary": "1 root: file:///work"},
        "two": {"summary": "2 roots: file:///a …"},
        "none": {"summary": "0 roots"},
        "s": {"model": "m", "summary": "short"},
        "x": {"summary": '{"other": 1}'},
        "odd": {"summary": "text"},
    }
    assert summarize_responses({"d": {"action": "decline"}}) == {"d": {"action": "decline"}}
    assert summarize_responses(None) is None and summarize_responses(["confirm"]) is None


def test_a_summary_is_one_line_of_72_characters_at_most():
    assert _short("a\n  b\tc") == "a b c"
    long = _short("x" * 100)
    assert len(long) == 72 and long.endswith("…") and long.startswith("x" * 71)
    assert _short({"é": b"1"}) == '{"é": "b\'1\'"}'  # not ASCII-escaped; what JSON cannot take, by str


def test_summaries_of_equal_values_are_made_once_and_shared():
    from mrtr_inspect.core import summary

    asked = {"confirm": {**ELICIT, "params": {**ELICIT["params"], "message": "Shared once?"}}}
    first = summarize_requests(asked)
    again = summarize_requests({"confirm": {**asked["confirm"]}})  # an equal value, other objects
    assert again is first and again == summary._summarize_requests(asked)
    answered = {"confirm": {"action": "accept", "content": {"shared": "once"}}}
    assert summarize_responses(dict(answered)) is summarize_responses(answered)
    # the order of the members is the value's too: another order, another summary
    two = {"b": {"action": "decline"}, "a": {"action": "accept"}}
    assert list(summarize_responses(two)) == ["b", "a"]
    assert list(summarize_responses({"a": {"action": "accept"}, "b": {"action": "decline"}})) == ["a", "b"]


def test_values_orjson_writes_alike_are_summarised_apart():
    """orjson writes an infinity and a NaN as `null`, and does not write an integer past 64 bits:
    their summaries are their own, whichever came first."""
    none, inf = {"x": {"action": "accept", "content": None}}, {"x": {"action": "accept", "content": float("inf")}}
    for order in ((none, inf), (inf, none)):
        assert [summarize_responses(v)["x"]["summary"] for v in order] == [_summary_of(v) for v in order]
    assert _summary_of(none) == "null" and _summary_of(inf) == "Infinity"
    assert summarize_responses({"x": {"action": "accept", "content": 2**70}})["x"]["summary"] == str(2**70)


def _summary_of(value: dict) -> str:
    from mrtr_inspect.core import summary

    return summary._summarize_responses(value)["x"]["summary"]


def test_the_kept_summaries_are_bounded():
    from mrtr_inspect.core import summary

    for i in range(summary._KEPT + 50):
        summarize_responses({"k": {"action": "accept", "content": {"n": i}}})
    assert len(summary._ANSWERED) <= summary._KEPT
    big = {"k": {"action": "accept", "content": {"text": "y" * summary._KEY_CHARS}}}
    summarize_responses(big)
    assert all(len(k) <= summary._KEY_CHARS for k in summary._ANSWERED)


def test_a_summary_is_made_while_another_thread_changes_the_kept_ones(monkeypatch):
    """Analyses in threads share the kept summaries: one that finds the oldest gone, or the dict
    changing under its look, still gives its summary (the eviction waits for the next one)."""
    from mrtr_inspect.core import summary

    class Changing(dict):
        def __iter__(self):
            raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(summary, "_KEPT", 1)
    monkeypatch.setattr(summary, "_ANSWERED", Changing())
    for i in range(3):
        value = {"k": {"action": "accept", "content": {"n": i}}}
        assert summarize_responses(value) == summary._summarize_responses(value)


def test_a_chain_summary_holds_the_vocabulary_as_plain_strings_and_none_as_none():
    """Outcome, link and era (and a retry's link) as the JSON report gives them back: exact strings
    for the members, anything else as it is (an era not known yet stays None, not "None")."""
    from types import SimpleNamespace

    from mrtr_inspect.core.chains import Chain, ChainRequest, Round
    from mrtr_inspect.core.era import Era
    from mrtr_inspect.core.summary import chain_summary
    from mrtr_inspect.core.vocabulary import Link, Outcome

    def new(cls, **attrs):
        obj = object.__new__(cls)
        for k, v in attrs.items():
            setattr(obj, k, v)
        return obj

    for era, vias, outcome, via in ((Era.MODERN, [Link.STATE], Outcome.COMPLETE, Link.KEYS), (None, [], None, None)):
        chain = new(Chain, id="c1", method="tools/call", target="t", peer="p", era=era, start=1.0, end=2.0,
                    error_code=None, outcome=outcome, vias=vias, asks=[], hop=None, closed=True)
        rd = new(Round, chain=chain, n=1, irr_index=1, irr_time=1.5, asked=None, state_hash=None, retries=[])
        chain.rounds = [rd]
        first = new(ChainRequest, chain=chain, id=1, index=0, time=1.0, round=None, link=None,
                    answered_summary=None, response_kind="input_required", cancelled=False, response_index=1,
                    response_time=1.5, error_code=None)
        retry = new(ChainRequest, chain=chain, id=2, index=2, time=1.75, round=rd,
                    link=SimpleNamespace(via=via) if via is not None else None, answered_summary=None,
                    response_kind="result", cancelled=False, response_index=3, response_time=2.0, error_code=None)
        chain.requests = [first, retry]
        s = chain_summary(chain)
        if era is None:
            assert s["era"] is None and s["link"] is None and s["outcome"] == "open"
            assert "link" not in s["timeline"][1]
        else:
            assert (s["era"], s["link"], s["outcome"], s["timeline"][1]["link"]) == ("modern", "state", "complete", "keys")
            assert all(type(v) is str for v in (s["era"], s["link"], s["outcome"], s["timeline"][1]["link"]))
