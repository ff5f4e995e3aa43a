"""`server-rejected-own-state` (RULES.md §10.5): the server turns away the state it issued, echoed
verbatim on the matching retry; a backend failure after the answer, or an error about the answers,
is not that."""

from __future__ import annotations

import pytest

from tests.traffic import ACCEPT, ELICIT, Traffic

RULE = "server-rejected-own-state"


def _retry_answered_with(code: int, message: str, key: str = "elc-1") -> list:
    t = Traffic()
    a = t.tool("create_issue", {"title": "Crash"})
    t.irr(a, {key: ELICIT}, state="sealed-state-1")
    b = t.tool("create_issue", {"title": "Crash"}, inputResponses={key: ACCEPT}, requestState="sealed-state-1")
    t.error(b, code, message)
    return t.run().of(RULE)


@pytest.mark.parametrize("code, message", [
    (-32602, "this requestState belongs to another session"),  # the seed's gateway
    (-32602, "invalid params"),  # the params are those of the round: what is left to be invalid is the state
    (-32603, "requestState expired"),
    (-32000, "signature verification failed"),
])
def test_the_server_turns_its_own_state_away(code, message):
    [f] = _retry_answered_with(code, message)
    assert f.severity == "warning" and f.chain == "c1" and "echoed round 1's requestState verbatim" in f.message


def test_a_one_letter_key_does_not_hide_the_rejection():
    """The key "s" is in nearly every message as a letter; only as a word would it name the answer."""
    assert _retry_answered_with(-32602, "this requestState belongs to another session", key="s")


@pytest.mark.parametrize("code, message", [
    (-32603, "upstream failed"),  # the backend failed after the answer: chain-ended-error tells it
    (-32603, "payment gateway timed out"),
    (-32602, "elc-1: a boolean is required"),  # about the answer to key elc-1
    (-32602, "the answer was declined"),
])
def test_near_miss_an_error_that_is_not_about_the_state(code, message):
    assert _retry_answered_with(code, message) == []


def test_a_chain_whose_exchange_ended_without_a_response_says_so_not_error_none():
    """On HTTP the upstream can fail before any JSON-RPC response (the proxy's 502): the chain ends
    `error` with no code, and chain-ended-error says there was no response, naming the request (it
    said "ended in error None", with no message). Near miss: a JSON-RPC error keeps its code."""
    t = Traffic("http")
    a = t.tool("deploy", {"env": "prod"})
    t.respond(t._x_of_id.pop(str(a)), 502, b"Bad Gateway", (("content-type", "text/plain"),),
              end_error="upstream-error: connection refused")
    b = t.tool("deploy", {"env": "prod"})
    t.error(b, -32602, "invalid params")
    r = t.run()
    first, second = r.of("chain-ended-error")
    assert "no JSON-RPC response" in first.message and "None" not in first.message and first.messages == [0]
    assert "ended in error -32602" in second.message and first.chain == "c1" and second.chain == "c2"
