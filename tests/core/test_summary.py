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
