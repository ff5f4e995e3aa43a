"""A finding about a request that starts a chain of its own names that chain (a consumer that
groups findings by chain lost them: `chain` was null)."""

from __future__ import annotations

from tests.traffic import ACCEPT, ELICIT, Traffic


def test_unsolicited_fields_name_the_chain_the_request_starts():
    t = Traffic()
    t.result(t.tool("deploy", {"env": "prod"}, requestState="never-issued"), {"content": []})
    t.result(t.tool("deploy", {"env": "qa"}, inputResponses={"confirm": ACCEPT}), {"content": []})
    r = t.run()
    [state] = r.of("request-state-unsolicited")
    [answers] = r.of("input-responses-unsolicited")
    assert (state.chain, answers.chain) == ("c1", "c2")
    assert [c["requests"] for c in r.chains] == [[1], [2]]


def test_capture_incomplete_names_the_chain_too():
    """On HTTP a peer first seen with a retry: the capture began after its chain did (info)."""
    t = Traffic("http")
    t.result(t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1"),
             {"content": []})
    [f] = t.run().of("capture-incomplete")
    assert f.chain == "c1"


def test_near_miss_a_request_of_no_chain_names_none():
    t = Traffic()
    i = t.call("tools/list", {"requestState": "s"})
    t.result(i, {"tools": []})
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s2")
    [f] = t.run().of("mrtr-fields-on-unsupported-method")
    assert f.chain is None
