"""RULES.md §4.4, the chain rules of rules/chain.py judged on answers: each fires on the traffic it
describes and stays quiet on the nearest traffic that is fine. (The rules of the stitcher's events
are tested with it, tests/core/test_chains.py; `server-rejected-own-state` in test_chain_errors.py.)"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters.offline import replay_outputs
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.rules import load_rules
from mrtr_inspect.rules.registry import REGISTRY
from tests.captures import ROOT, capture_frames, capture_names
from tests.core.pipeline import analyse
from tests.traffic import Traffic

RULE = "tool-result-missing-structured-content"

# --- tool-result-missing-structured-content (RULES.md §10.5) -----------------------------------------------

WEATHER = {"name": "weather", "inputSchema": {"type": "object"},
           "outputSchema": {"type": "object", "properties": {"t": {"type": "number"}}}}
PLAIN = {"name": "plain", "inputSchema": {"type": "object"}}


def tool_call(tool: str, result: dict, listed_first: bool = True):
    t = Traffic()
    if listed_first:
        lid = t.call("tools/list")
        t.result(lid, {"tools": [WEATHER, PLAIN], "ttlMs": 0, "cacheScope": "public"})
    rid = t.tool(tool)
    t.result(rid, result)
    return t.run()


def test_tool_result_missing_structured_content():
    [f] = tool_call("weather", {"content": [{"type": "text", "text": "{\"t\": 20}"}]}).of(
        RULE)
    assert "'weather'" in f.message and f.severity == "error"


def test_tool_result_missing_structured_content_near_miss():
    text = {"content": [{"type": "text", "text": "20"}]}
    assert RULE not in tool_call("weather", {**text, "structuredContent": {"t": 20}}).rules()
    assert RULE not in tool_call("weather", {**text, "isError": True}).rules()
    assert RULE not in tool_call("plain", text).rules()
    assert RULE not in tool_call("weather", text, listed_first=False).rules()



# --- real traffic ------------------------------------------------------------------------------------------


def _found(outs: list) -> list:
    return [o for o in outs if type(o) is Finding and (o.rule == RULE and o.severity != "info" or o.rule == "inspector-error")]


@pytest.mark.skipif(not capture_names(), reason="fixtures/captures not present")
@pytest.mark.parametrize("name", capture_names())
def test_sdk_captures_give_no_missing_structured_content(name):
    """The official SDKs talking to each other: their results carry what their tools declare."""
    assert not _found(analyse(capture_frames(name)))


SDK_RECORDINGS = sorted(str(p) for p in (ROOT / "fixtures").glob("test_sdk_*/*.jsonl"))


@pytest.mark.skipif(not SDK_RECORDINGS, reason="fixtures/test_sdk_* not present")
@pytest.mark.parametrize("path", SDK_RECORDINGS)
def test_sdk_recordings_give_no_missing_structured_content(path):
    assert not _found(list(replay_outputs([path])))


def test_the_rule_is_in_its_section_with_its_documentation():
    load_rules()
    r = REGISTRY[RULE]
    assert r.section == "4.4" and r.check is not None and r.doc and r.spec
    assert r.check.__module__ == "mrtr_inspect.rules.chain"


# --- server-accepted-replayed-state (RULES.md §4.4, §10.9) --------------------------------------------------

ASK = {"confirm": {"method": "elicitation/create", "params": {"mode": "form", "message": "Deploy?", "requestedSchema": {
    "type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}}}
YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def _replayed(first_answer: str, replay_answer: str, state: str = "s1", replay_before_close: bool = False):
    """deploy → input_required (state s1) → retry id 2 answered `first_answer` (complete, error, irr);
    then the same state again on retry id 3, answered `replay_answer` (complete, irr, error)."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, ASK, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses=YES, requestState="s1")
    {"complete": lambda: t.result(b, {"content": []}), "error": lambda: t.error(b, -32603, "internal error"),
     "irr": lambda: t.irr(b, ASK, state="s2")}[first_answer]()
    c = t.tool("deploy", {"env": "prod"}, inputResponses=YES, requestState=state)
    {"complete": lambda: t.result(c, {"content": []}), "error": lambda: t.error(c, -32602, "state already used"),
     "irr": lambda: t.irr(c, ASK, state="s3")}[replay_answer]()
    return t.run()


def test_server_accepted_replayed_state():
    """A state consumed by an answered retry, presented again and accepted (complete, or asked again),
    whether its chain closed (complete) or went on (another round)."""
    for first, replay in (("complete", "complete"), ("complete", "irr"), ("irr", "complete")):
        r = _replayed(first, replay)
        [f] = r.of("server-accepted-replayed-state")
        assert f.severity == "warning" and "accepted round 1's requestState" in f.message, (first, replay)
        assert [x.severity for x in r.of("request-state-replayed")] == ["error"]
        assert "server-accepted-altered-state" not in r.rules()  # the state is one the server issued (§10.9)
        assert len(f.messages) == 3


def _gate_on_answers(run) -> list:
    """What the gate of the four server-accepted-* state checks says of each Answered of `run()`."""
    from mrtr_inspect.core.observations import Answered
    from mrtr_inspect.rules import chain, registry

    seen = []
    dispatch = registry.RuleEngine.dispatch

    def keep(self, obs):
        if type(obs) is Answered:
            seen.append(bool(chain._state_in_question(obs)))
        return dispatch(self, obs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry.RuleEngine, "dispatch", keep)
        run()
    return seen


def test_the_state_gate_spares_the_answers_to_a_first_request_and_an_ordinary_retry():
    """The four server-accepted-* state checks share a gate (`_state_in_question`): the answers to a
    first request and to a retry echoing its state do not pass it, the answer to a replay does."""
    load_rules()
    from mrtr_inspect.rules import chain

    assert sorted(i for i, r in REGISTRY.items() if r.gate is chain._state_in_question) == [
        "server-accepted-altered-state", "server-accepted-replayed-state", "server-accepted-state-on-other-request",
        "server-accepted-state-other-principal"]

    def ordinary():
        t = Traffic()
        a = t.tool("deploy", {"env": "prod"})
        t.irr(a, ASK, state="s1")
        b = t.tool("deploy", {"env": "prod"}, inputResponses=YES, requestState="s1")
        t.result(b, {"content": []})
        assert not {i for i in t.run().rules() if i.startswith("server-accepted")}

    assert _gate_on_answers(ordinary) == [False, False]
    assert _gate_on_answers(lambda: _replayed("complete", "complete"))[-1] is True


def test_near_miss_a_replay_refused_or_a_re_issue_after_a_failure_or_an_altered_state():
    assert "server-accepted-replayed-state" not in _replayed("complete", "error").rules()  # refused: single use
    r = _replayed("error", "complete")  # re-issued after the first retry failed: what the changelog asks for
    assert "server-accepted-replayed-state" not in r.rules() and [x.severity for x in r.of("request-state-replayed")] == ["info"]
    r = _replayed("irr", "complete", state="s1-TAMPERED")  # not a replay: an altered state of round 2
    assert "server-accepted-replayed-state" not in r.rules() and "server-accepted-altered-state" in r.rules()


# --- chain-linked ------------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", [7, "r-7", 2.5])
def test_chain_linked_names_the_retry_by_its_label(rid):
    """chain-linked (every retry, on every run) writes its retry's label out (`Message.label`, its id
    by repr) and rounds the ms as round() does."""
    from tests.traffic import ACCEPT, ELICIT

    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"q": ELICIT}, state="s1")
    t.tick(1.2345678)
    b = t.tool("deploy", {"env": "prod"}, id=rid, requestState="s1", inputResponses={"q": ACCEPT})
    t.result(b, {"content": []})
    r = t.run()
    [f] = r.of("chain-linked")
    retry = r.messages[f.messages[1]]
    ms = (retry.time - r.messages[f.messages[0]].time) * 1000
    assert f.message == (f"{retry.label()} continues chain c1 (tools/call deploy) after round 1, linked via state, "
                         f"{ms:.0f} ms after the input_required")
    assert f.details == {"round": 1, "link_method": "state", "elapsed_ms": round(ms, 3)}


@settings(max_examples=300, deadline=None)
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                          | st.text(), lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8))
def test_format_id_is_repr_for_every_json_value(value):
    """What chain-linked relies on to write a label's id without a call."""
    from mrtr_inspect.core.messages import format_id

    assert format_id(value) == repr(value)


def test_a_retry_of_a_closed_chains_round_is_judged_without_failing():
    """A replayed retry links to a round its closed chain retired (`RetiredRound`, which keeps no
    text of what it asked): its answers are judged apart, no rule fails on it."""
    for first, replay in (("complete", "complete"), ("complete", "irr"), ("irr", "complete")):
        r = _replayed(first, replay)
        assert "inspector-error" not in r.rules() and r.of("request-state-replayed"), (first, replay)
