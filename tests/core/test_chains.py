"""Chain stitching scenarios (RULES.md §3, §10.3), through the whole pipeline."""

from __future__ import annotations

import json

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core.canonical import params_digest, state_hash
from mrtr_inspect.core.chains import Stitcher
from mrtr_inspect.core.messages import decode_message, target_of
from mrtr_inspect.core.observations import Linked, NotLinked
from tests.traffic import ACCEPT, ELICIT, ROOTS, ROOTS_ANSWER, SAMPLE, SAMPLED, Traffic

PROD = {"env": "prod"}


def retry(t: Traffic, answers: dict, state: str | None = None, arguments: dict = PROD, name: str = "deploy", **kw):
    """A tools/call retry of `name` with `answers` (and the state, when given)."""
    extra = {"inputResponses": answers, **kw}
    if state is not None:
        extra["requestState"] = state
    return t.tool(name, arguments, **extra)


def asked_and_retried(transport: str = "stdio") -> tuple[Traffic, object, object]:
    """A deploy call answered input_required (state s1), and its retry, not answered yet."""
    t = Traffic(transport)
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    return t, a, retry(t, {"confirm": ACCEPT}, "s1")


def events(r) -> list[tuple[str, str]]:
    return [(e.kind, e.chain.id) for e in r.events]


def shape(c: dict) -> tuple:
    return c["requests"], c["rounds"], c["outcome"], c["link"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_one_round(transport):
    t = Traffic(transport)
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(3.0)  # the user answers
    b = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(b, {"content": []})
    r = t.run()
    assert events(r) == [("opened", "c1"), ("round", "c1"), ("retry", "c1"), ("closed", "c1")]
    c = r.chain("c1")
    assert shape(c) == ([a, b], 1, "complete", "state")
    assert (c["method"], c["target"], c["era"]) == ("tools/call", "deploy", "modern")
    wait = c["timeline"][1]["wait_ms"]
    assert wait == pytest.approx((c["timeline"][1]["time"] - c["round_details"][0]["time"]) * 1000, abs=0.01)
    assert 3000 < wait < 3010
    assert c["timeline"][1]["link"] == "state"
    assert c["duration_ms"] == pytest.approx((c["end"] - c["start"]) * 1000, abs=0.01)
    assert c["duration_ms"] > 3000  # the user's answering time is part of the logical request
    assert "chain-linked" in r.rules()
    assert not r.errors()


def test_three_rounds_with_a_rotating_state():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="opaque-1")
    t.tick(1.0)
    b = retry(t, {"confirm": ACCEPT}, "opaque-1")
    t.irr(b, {"summary": SAMPLE}, state="opaque-2")
    t.tick(2.0)
    c = retry(t, {"summary": SAMPLED}, "opaque-2")
    t.irr(c, {"roots": ROOTS}, state="opaque-3")
    t.tick(4.0)
    d = retry(t, {"roots": ROOTS_ANSWER}, "opaque-3")
    t.result(d, {"content": []})
    r = t.run()
    assert len(r.chains) == 1
    ch = r.chain("c1")
    assert shape(ch) == ([a, b, c, d], 3, "complete", "state")
    assert [e.get("wait_ms") for e in ch["timeline"]] == [None, pytest.approx(1001.0), pytest.approx(2001.0),
                                                            pytest.approx(4001.0)]
    assert [e["response"] for e in ch["timeline"]] == ["input_required"] * 3 + ["result"]
    states = [rd["request_state"] for rd in ch["round_details"]]
    assert len(set(states)) == 3 and all(len(s) == 16 for s in states)  # hashes, never the state itself
    assert "opaque" not in str(ch)
    assert [list(rd["asked"]) for rd in ch["round_details"]] == [["confirm"], ["summary"], ["roots"]]
    assert ch["duration_ms"] > 7000
    assert not r.errors()


def test_interleaved_chains_of_the_same_tool_with_different_arguments():
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", {"env": "dev"})
    t.irr(a, {"confirm": ELICIT})
    t.irr(b, {"confirm": ELICIT})
    a2 = retry(t, {"confirm": ACCEPT})  # prod: the older round, though dev's is more recent
    b2 = retry(t, {"confirm": ACCEPT}, arguments={"env": "dev"})
    t.result(b2, {"content": []})
    t.result(a2, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, a2], 1, "complete", "keys")
    assert shape(r.chain("c2")) == ([b, b2], 1, "complete", "keys")
    assert "chain-ambiguous-link" not in r.rules()
    assert not r.errors()


def test_interleaved_chains_with_the_same_arguments_told_apart_by_state():
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="sa")
    t.irr(b, {"confirm": ELICIT}, state="sb")
    a2 = retry(t, {"confirm": ACCEPT}, "sa")
    b2 = retry(t, {"confirm": ACCEPT}, "sb")
    t.result(a2, {"content": []})
    t.result(b2, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, a2], 1, "complete", "state")
    assert shape(r.chain("c2")) == ([b, b2], 1, "complete", "state")
    assert not r.errors() and "chain-ambiguous-link" not in r.rules()


def test_interleaved_chains_with_the_same_arguments_and_no_state_go_to_the_most_recent_round():
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT})
    t.irr(b, {"confirm": ELICIT})
    x = retry(t, {"confirm": ACCEPT})  # could answer either: the most recent round (b's) takes it
    y = retry(t, {"confirm": ACCEPT})  # then a's is the only open one
    t.result(x, {"content": []})
    t.result(y, {"content": []})
    r = t.run()
    assert shape(r.chain("c2")) == ([b, x], 1, "complete", "keys")
    assert shape(r.chain("c1")) == ([a, y], 1, "complete", "keys")
    assert "chain-ambiguous-link" not in r.rules()  # recency decided


def test_rounds_opened_at_the_same_instant_are_ambiguous_and_the_lower_chain_wins():
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", PROD)
    irr = {"resultType": "input_required", "inputRequests": {"confirm": ELICIT}}
    t.line("s2c", [{"jsonrpc": "2.0", "id": a, "result": irr}, {"jsonrpc": "2.0", "id": b, "result": irr}])  # one batch
    x = retry(t, {"confirm": ACCEPT})
    t.result(x, {"content": []})
    r = t.run(close=False)
    assert shape(r.chain("c1")) == ([a, x], 1, "complete", "keys")
    assert [f.chain for f in r.of("chain-ambiguous-link")] == ["c1"]


def test_linked_by_input_response_keys_when_there_is_no_state():
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT})
    t.irr(b, {"roots": ROOTS})
    a2 = retry(t, {"confirm": ACCEPT})  # a's key, though b's round is more recent
    t.result(a2, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, a2], 1, "complete", "keys")
    assert shape(r.chain("c2")) == ([b], 1, "abandoned", None)
    assert r.chain("c1")["timeline"][1]["answered"] == {"confirm": {"action": "accept", "summary": '{"confirm": true}'}}


def test_linked_by_params_when_the_keys_match_no_round():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT})
    b = retry(t, {"something-else": ACCEPT})
    t.result(b, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "params")
    assert "input-responses-unknown-key" in r.rules() or "input-responses-missing-key" in r.rules()


def test_a_state_only_round_links_its_retry_by_state():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, None, state="busy")  # load shedding: no inputRequests
    b = t.tool("deploy", PROD, requestState="busy")
    t.result(b, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")


def test_the_weakest_evidence_names_the_link():
    t, a, b = asked_and_retried()
    t.irr(b, {"summary": SAMPLE})
    c = retry(t, {"summary": SAMPLED})
    t.result(c, {"content": []})
    assert t.run().chain("c1")["link"] == "keys"


def test_abandoned_at_the_end_of_the_capture():
    """The round waited unanswered until the capture ended: the duration and the wait run to it."""
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    irr_time = t.t
    t.tick(100.0)
    t.end()
    r = t.run()
    c = r.chain("c1")
    assert shape(c) == ([a], 1, "abandoned", None)
    assert c["end"] == t.t  # the session's end
    assert c["duration_ms"] == pytest.approx((t.t - c["start"]) * 1000.0)
    assert c["round_details"][-1]["unanswered_ms"] == pytest.approx((t.t - irr_time) * 1000.0)
    assert c["round_details"][-1]["unanswered_ms"] > 100_000
    f = r.of("chain-abandoned")
    assert len(f) == 1 and f[0].time == t.t  # known at the end of the capture


def test_abandoned_when_the_capture_stops_at_the_input_required():
    """No frame after the input_required: the capture ended there, nothing was waited."""
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    c = t.run().chain("c1")
    assert c["duration_ms"] == pytest.approx(1.0)
    assert c["round_details"][-1]["unanswered_ms"] == 0.0


def test_abandoned_by_the_timeout_runs_to_the_timeout():
    """abandon_after: the chain was given up on `abandon_after` after its input_required, whenever the
    check came (here with traffic 30 s later) and however long the capture went on."""
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    irr_time = t.t
    t.tick(30.0)
    t.result(t.call("tools/list"), {"tools": []})
    t.tick(100.0)
    t.end()
    c = t.run(Config(abandon_after=10.0)).chain("c1")
    assert c["outcome"] == "abandoned"
    assert c["end"] == pytest.approx(irr_time + 10.0)
    assert c["round_details"][-1]["unanswered_ms"] == pytest.approx(10_000.0)


def test_abandoned_after_a_retry_with_no_response_has_no_unanswered_wait():
    """Near miss: the last round was answered (its retry's stream ended empty): the chain ends with
    that stream, and its wait is the retry's, not an open one."""
    t = Traffic("http")
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(2.0)
    b = retry(t, {"confirm": ACCEPT}, "s1")
    t.respond_sse(t._x_of_id.pop(json.dumps(b)), [])
    stream_end = t.t
    t.tick(50.0)
    t.end()
    c = t.run().chain("c1")
    assert c["outcome"] == "abandoned"
    assert c["end"] == stream_end
    assert "unanswered_ms" not in c["round_details"][-1]
    assert c["timeline"][1]["wait_ms"] == pytest.approx(2000.0, abs=5.0)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_open_at_the_end_runs_to_the_end_of_the_capture(transport):
    """A request still in flight when the capture ended (a proxy stopped while a tool streams
    progress): it had been waiting until then."""
    t = Traffic(transport)
    a = t.tool("slow", {})
    start = t.t
    progress = [{"jsonrpc": "2.0", "method": "notifications/progress",
                 "params": {"progressToken": 1, "progress": n}} for n in range(5)]
    if transport == "http":
        t.tick(0.8)
        t.respond_sse(t._x_of_id.pop(json.dumps(a)), progress, end_error="capture-ended")
    else:
        for p in progress:
            t.tick(0.16)
            t.server(p)
    t.end()
    c = t.run().chain("c1")
    assert (c["outcome"], c["rounds"]) == ("open", 0)
    assert c["end"] == t.t
    assert c["duration_ms"] == pytest.approx((t.t - start) * 1000.0)
    assert c["duration_ms"] > 800
    assert "unanswered_ms" not in str(c)


def test_open_at_the_close_of_a_capture_without_its_end():
    """A torn recording (no session end): the capture ended with its last frame."""
    t = Traffic()
    t.tool("slow", {})
    t.tick(3.0)
    t.result(t.call("tools/list"), {"tools": []})
    c = t.run().chain("c1")
    assert c["outcome"] == "open" and c["end"] == t.t and c["duration_ms"] > 3000


def test_ended_chains_keep_their_duration_when_the_capture_goes_on():
    """Near misses: complete, error and cancelled chains end with their last message, not the capture."""
    t, a, b = asked_and_retried()
    t.result(b, {"content": []})
    done = t.t
    e = t.tool("broken", {})
    t.error(e, -32603)
    failed = t.t
    g = t.tool("gone", {})
    t.notify("notifications/cancelled", {"requestId": g})
    cancelled = t.t
    t.tick(60.0)
    t.end()
    r = t.run()
    assert [(c["outcome"], c["end"]) for c in r.chains] == [
        ("complete", done), ("error", failed), ("cancelled", cancelled)]
    assert all("unanswered_ms" not in rd for c in r.chains for rd in c["round_details"])


def test_open_at_the_end_when_a_request_is_in_flight():
    t, a, b = asked_and_retried()
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "open", "state")
    assert r.chain("c1")["timeline"][1]["response"] is None
    assert "chain-abandoned" not in r.rules()


def test_cancelled_by_notifications_cancelled():
    t, a, b = asked_and_retried()
    t.notify("notifications/cancelled", {"requestId": b, "reason": "user"})
    t.result(b, {"content": []})  # a late answer does not move the closed chain
    r = t.run()
    c = r.chain("c1")
    assert shape(c) == ([a, b], 1, "cancelled", "state")
    assert c["timeline"][1]["response"] == "cancelled"
    assert "chain-cancelled" in r.rules()
    assert [e for e in events(r) if e[0] == "closed"] == [("closed", "c1")]


def test_cancelling_another_id_does_not_cancel_the_chain():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.notify("notifications/cancelled", {"requestId": str(a)})  # "1" is not 1
    t.result(a, {"content": []})
    assert t.run().chain("c1")["outcome"] == "complete"


def test_cancelled_on_http_by_the_client_closing_the_response():
    h, a, b = asked_and_retried("http")
    h.respond_sse(h._x_of_id.pop(str(b)), [], end_error="client-disconnected")
    r = h.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "cancelled", "state")


def test_error_outcome_with_its_code():
    t, a, b = asked_and_retried()
    t.error(b, -32602, "Invalid or expired requestState")
    r = t.run()
    c = r.chain("c1")
    assert shape(c) == ([a, b], 1, "error", "state")
    assert c["error_code"] == -32602 and c["timeline"][1]["error_code"] == -32602
    assert "chain-ended-error" in r.rules()


def test_task_outcome():
    t, a, b = asked_and_retried()
    t.result(b, {"task": {"taskId": "t-1", "status": "working"}}, result_type="task")
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "task", "state")
    assert "chain-task-handoff" in r.rules()


def test_a_call_complete_at_once_is_a_chain_of_no_round():
    t = Traffic()
    a = t.call("prompts/get", {"name": "greet", "arguments": {}})
    t.result(a, {"messages": []})
    b = t.call("resources/read", {"uri": "file:///a"})
    t.result(b, {"contents": []}, result_type=None)  # no resultType: complete
    t.call("tools/list")  # not an MRTR method: no chain
    r = t.run()
    assert [(c["method"], c["target"], c["rounds"], c["outcome"], c["link"]) for c in r.chains] == [
        ("prompts/get", "greet", 0, "complete", None), ("resources/read", "file:///a", 0, "complete", None)]
    assert [c["id"] for c in r.chains] == ["c1", "c2"]


def test_chain_ids_and_requests_keep_json_rpc_ids_in_order_and_type():
    t = Traffic()
    a = t.tool("deploy", PROD, id="first")
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = retry(t, {"confirm": ACCEPT}, "s1", id=2)
    t.irr(b, {"k": ELICIT}, state="s2")
    c = retry(t, {"k": ACCEPT}, "s2", id="2")
    t.result(c, {"content": []})
    d = t.tool("other", {})
    t.result(d, {"content": []})
    r = t.run()
    assert r.chain("c1")["requests"] == ["first", 2, "2"]
    assert r.chain("c2")["requests"] == [d]
    assert "retry-id-stringly-equal" in r.rules() and "retry-reused-id" not in r.rules()


def test_replaying_a_consumed_state_after_the_chain_closed():
    t, a, b = asked_and_retried()
    t.result(b, {"content": []})
    c = retry(t, {"confirm": ACCEPT}, "s1")  # the same state again: a second deployment
    t.result(c, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")
    # its own logical request (c1 is reported already), tied to c1's round by the state, as its link says
    assert shape(r.chain("c2")) == ([c], 0, "complete", "state")
    replayed = r.of("request-state-replayed")
    assert [(f.severity, f.chain) for f in replayed] == [("error", "c2")]
    # the replay echoes the state the server issued, verbatim: not an altered one (RULES.md §10.6)
    assert "server-accepted-altered-state" not in r.rules()


def test_replaying_a_state_whose_retry_failed_is_only_info():
    t, a, b = asked_and_retried()
    t.error(b, -32603, "internal error")
    c = retry(t, {"confirm": ACCEPT}, "s1")  # re-issued with a new id after a failure: allowed
    t.result(c, {"content": []})
    r = t.run()
    assert [f.severity for f in r.of("request-state-replayed")] == ["info"]


def refused(transport: str = "stdio", state: str = "s1-TAMPERED") -> tuple[Traffic, object, object]:
    """A deploy call answered input_required (state s1), and a retry with `state` that the server refuses."""
    t = Traffic(transport)
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = retry(t, {"confirm": ACCEPT}, state)
    t.error(b, -32602, "Invalid or expired requestState")
    return t, a, b


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_verbatim_retry_after_a_refused_tampered_retry_continues_the_chain(transport):
    """RULES.md decision 13 (issue 25 item 18): round 1 issues state s1; the client retries with an
    altered state, the server refuses it (-32602); the client retries with s1 verbatim. One logical
    request, one chain: its requests grow, its outcome is what the last response says, and the
    refused retry's own finding stands."""
    t, a, b = refused(transport)
    c = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(c, {"content": []})
    r = t.run()
    assert len(r.chains) == 1
    ch = r.chain("c1")
    assert (ch["requests"], ch["rounds"], ch["outcome"], ch["error_code"]) == ([a, b, c], 1, "complete", None)
    assert [(e["id"], e.get("error_code")) for e in ch["timeline"]] == [(a, None), (b, -32602), (c, None)]
    assert [(f.chain, f.messages[-1]) for f in r.of("request-state-altered")] == [("c1", 2)]
    assert [f.chain for f in r.of("chain-linked")] == ["c1", "c1"]
    # the verbatim state was never presented before: no replay, and nothing unsolicited
    assert not {"request-state-replayed", "request-state-unsolicited", "chain-ended-error"} & r.rules()
    assert events(r) == [("opened", "c1"), ("round", "c1"), ("retry", "c1"), ("refused", "c1"), ("retry", "c1"),
                         ("closed", "c1")]


def test_a_verbatim_retry_after_a_refused_retry_ends_as_its_last_response_says():
    """The continued chain's outcome is the last response's: a second refusal ends it in error."""
    t, a, b = refused(state="forged")
    c = retry(t, {"confirm": ACCEPT}, "s1")
    t.error(c, -32603, "internal error")
    r = t.run()
    assert len(r.chains) == 1
    ch = r.chain("c1")
    assert (ch["requests"], ch["outcome"], ch["error_code"]) == ([a, b, c], "error", -32603)
    assert [f.chain for f in r.of("chain-ended-error")] == ["c1"]


def test_near_miss_a_refused_retry_nobody_retries_ends_the_chain_in_error_at_the_end():
    t, a, b = refused()
    t.tick(5.0)
    r = t.run()
    ch = r.chain("c1")
    assert (ch["requests"], ch["rounds"], ch["outcome"], ch["error_code"]) == ([a, b], 1, "error", -32602)
    assert ch["duration_ms"] < 100  # it ended with the refusal, not when the capture did
    assert [f.chain for f in r.of("chain-ended-error")] == ["c1"]


def test_a_refused_retry_waits_for_its_correction_no_longer_than_the_abandon_timeout():
    t, a, b = refused()
    t.tick(20.0)
    t.tool("other", {})  # traffic after the timeout: the refused chain is over
    c = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(c, {"content": []})
    r = t.run(Config(abandon_after=10.0))
    assert shape(r.chain("c1"))[:3] == ([a, b], 1, "error")
    assert shape(r.chain("c3"))[:3] == ([c], 0, "complete")  # a late state after the end: its own chain, as before


def test_parallel_identical_calls_given_one_state_each_get_their_retry():
    """A server that derives the state from the request alone gives three identical calls in flight
    the same state: each retry answers a round still open, the latest first, and no chain forks."""
    t = Traffic()
    calls = [t.tool("deploy", PROD) for _ in range(3)]
    for a in calls:
        t.irr(a, {"confirm": ELICIT}, state="same-state")
    retries = [retry(t, {"confirm": ACCEPT}, "same-state") for _ in calls]
    for b in retries:
        t.result(b, {"content": []})
    r = t.run()
    assert len(r.chains) == 3 and "chain-forked" not in r.rules() and "request-state-replayed" not in r.rules()
    assert sorted(shape(r.chain(c))[1:] for c in ("c1", "c2", "c3")) == [(1, "complete", "state")] * 3
    assert {r.chain(c)["requests"][1] for c in ("c1", "c2", "c3")} == set(retries)
    assert r.chain("c3")["requests"] == [calls[2], retries[0]]  # most recent open round first


def test_a_fork_two_retries_in_flight_for_one_round():
    t, a, b = asked_and_retried()
    c = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(b, {"content": []})
    t.result(c, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b, c], 1, "complete", "state")
    assert len(r.chains) == 1
    assert [f.chain for f in r.of("chain-forked")] == ["c1"]
    assert "request-state-replayed" not in r.rules()


def test_parallel_misuse_of_a_state_on_another_request():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    p = t.call("prompts/get", {"name": "greet", "arguments": {}, "requestState": "s1"})  # another chain's state
    t.result(p, {"messages": []})
    t.call("tools/list", {"requestState": "s1"})  # on a method that takes none
    t.call("tools/list", {"requestState": "unknown"})
    b = retry(t, {"confirm": ACCEPT}, "s1")  # the real retry still links
    t.result(b, {"content": []})
    r = t.run()
    misuse = r.of("mrtr-fields-parallel-misuse")
    assert [(f.chain, f.messages[-1]) for f in misuse] == [("c1", 2), ("c1", 4)]
    assert len(r.of("mrtr-fields-on-unsupported-method")) == 1
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")
    assert shape(r.chain("c2")) == ([p], 0, "complete", None)
    (accepted,) = r.of("server-accepted-state-on-other-request")  # the prompt's result
    assert "issued for tools/call deploy (round 1" in accepted.message  # another tool: no "other arguments"


def test_state_accepted_on_the_same_tool_with_other_arguments_says_so():
    t = Traffic()
    a = t.tool("deploy", {"env": "staging"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = retry(t, {"confirm": ACCEPT}, "s1")  # prod, with staging's state
    t.result(b, {"content": []})
    r = t.run()
    (accepted,) = r.of("server-accepted-state-on-other-request")
    assert "issued for tools/call deploy with other arguments" in accepted.message


def test_legacy_era_tools_call_is_not_stitched():
    t = Traffic()
    i = t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
               with_meta=False)
    t.result(i, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
             with_meta=False, result_type=None)
    a = t.call("tools/call", {"name": "deploy", "arguments": PROD}, with_meta=False)
    t.irr(a, {"confirm": ELICIT}, state="s1")  # looks like MRTR, but legacy MRTR does not exist
    b = t.call("tools/call", {"name": "deploy", "arguments": PROD, "inputResponses": {"confirm": ACCEPT},
                              "requestState": "s1"}, with_meta=False)
    t.result(b, {"content": []}, result_type=None)
    r = t.run()
    assert [(c["requests"], c["rounds"], c["outcome"], c["link"], c["era"]) for c in r.chains] == [
        ([a], 0, "complete", None, "legacy"), ([b], 0, "complete", None, "legacy")]
    assert not {"chain-linked", "request-state-unsolicited", "request-state-replayed"} & r.rules()


def test_abandon_after_closes_a_waiting_chain_while_traffic_flows():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(61.0)
    t.call("tools/list")  # any later frame moves the clock
    r = t.run(Config(abandon_after=60.0), close=False)
    assert shape(r.chain("c1")) == ([a], 1, "abandoned", None)
    assert "chain-abandoned" in r.rules()


def test_a_retry_within_abandon_after_still_links():
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(50.0)
    t.call("tools/list")
    t.tick(9.0)
    b = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(b, {"content": []})
    r = t.run(Config(abandon_after=60.0))
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")


@pytest.mark.parametrize("traffic_between", [True, False])
def test_a_retry_after_abandon_after_is_late_not_unsolicited(traffic_between):
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(3600.0)  # the user answered an hour later, after the chain counts as abandoned
    if traffic_between:
        t.call("tools/list")
    b = retry(t, {"confirm": ACCEPT}, "s1")
    t.result(b, {"content": []})
    r = t.run(Config(abandon_after=60.0))
    # the same outcome whether or not other traffic moved the clock before the retry came
    assert shape(r.chain("c1")) == ([a], 1, "abandoned", None)
    assert shape(r.chain("c2")) == ([b], 0, "complete", "state")  # tied to c1's round by the state
    assert not r.errors(), [f.message for f in r.errors()]  # the server did issue that state


# ---------------------------------------------------------------------------------------------
# the linkers, each on its own: a retry is tied by state, then keys, then params (RULES.md §3)


def message(index: int, body: dict):
    msg = decode_message(json.dumps({"jsonrpc": "2.0", **body}).encode())
    msg.index, msg.time, msg.era = index, 1000.0 + index, "modern"
    return msg


def call(index: int, name: str = "deploy", **extra):
    return message(index, {"id": index, "method": "tools/call", "params": {"name": name, "arguments": PROD, **extra}})


def one_round(state: str | None = "s1") -> tuple[Stitcher, object]:
    """A stitcher with one open round: a deploy call answered input_required (asking `confirm`)."""
    s = Stitcher()
    first, _ = s.on_request(call(0), "p", True)
    result = {"resultType": "input_required", "inputRequests": {"confirm": ELICIT}}
    if state is not None:
        result["requestState"] = state
    s.on_response(first, message(1, {"id": 0, "result": result}))
    return s, first.chain.rounds[0]


def ask(s: Stitcher, linker, msg, peer: str = "p"):
    """What one linker says of `msg`, given what on_request gives each linker."""
    p = msg.params
    st = p.get("requestState")  # the states here are strings
    key = (msg.method, target_of(msg.method, p), params_digest(msg.method, p))
    rounds = s._states.rounds.get(state_hash(st)) if st is not None else None
    cand = None if rounds else s._open_rounds(peer, key)
    return linker(s, msg, peer, key, st, p.get("inputResponses"), rounds, cand)


def untouched(rd) -> bool:
    return rd.retries == [] and len(rd.chain.requests) == 1 and rd.chain.vias == []


def test_the_state_linker_ties_a_retry_to_the_round_that_issued_its_state():
    s, rd = one_round()
    o = ask(s, Stitcher._link_by_state, call(2, inputResponses={"other": ACCEPT}, requestState="s1"))
    assert type(o) is Linked and o.round is rd and (o.via, o.state, o.ambiguous) == ("state", "echoed", False)
    assert rd.retries == [o.creq] and o.creq.chain is rd.chain and o.creq.link is o  # keys need not match


def test_the_state_linker_declines_a_state_no_round_issued():
    s, rd = one_round()
    assert ask(s, Stitcher._link_by_state, call(2, inputResponses={"confirm": ACCEPT}, requestState="s2")) is None
    assert untouched(rd)


def test_the_state_linker_refuses_a_state_of_another_tool():
    s, rd = one_round()
    o = ask(s, Stitcher._link_by_state, call(2, name="other", requestState="s1"))
    assert type(o) is NotLinked and (o.reason, o.round) == ("parallel-misuse", rd)
    assert untouched(rd)


def test_the_keys_linker_ties_answers_to_the_round_that_asked_their_keys():
    s, rd = one_round(state=None)
    o = ask(s, Stitcher._link_by_keys, call(2, inputResponses={"confirm": ACCEPT}))
    assert type(o) is Linked and o.round is rd and (o.via, o.state) == ("keys", "none")
    assert rd.retries == [o.creq]


def test_the_keys_linker_declines_answers_to_no_asked_key_and_a_retry_with_a_state():
    s, rd = one_round(state=None)
    assert ask(s, Stitcher._link_by_keys, call(2, inputResponses={"other": ACCEPT})) is None
    assert ask(s, Stitcher._link_by_keys, call(3, inputResponses={"confirm": ACCEPT}, requestState="x")) is None
    assert untouched(rd)


def test_the_params_linker_ties_a_retry_to_the_most_recent_round_of_its_key():
    s, rd = one_round(state=None)
    o = ask(s, Stitcher._link_by_params, call(2, inputResponses={"other": ACCEPT}))
    assert type(o) is Linked and o.round is rd and (o.via, o.state) == ("params", "none")
    s, rd = one_round()
    o = ask(s, Stitcher._link_by_params, call(2, inputResponses={"confirm": ACCEPT}, requestState="x"))
    assert type(o) is Linked and o.round is rd and (o.via, o.state) == ("params", "altered")


def test_the_params_linker_declines_a_fresh_call_and_another_arguments_retry():
    s, rd = one_round(state=None)
    assert ask(s, Stitcher._link_by_params, call(2)) is None  # neither state nor answers: not a retry
    other = message(3, {"id": 3, "method": "tools/call", "params": {
        "name": "deploy", "arguments": {"env": "dev"}, "inputResponses": {"confirm": ACCEPT}}})
    assert ask(s, Stitcher._link_by_params, other) is None
    assert untouched(rd)


# ---------------------------------------------------------------------------------------------
# HTTP peers (RULES.md §10.4)


def authed(token: str) -> tuple:
    return (("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"), ("authorization", f"Bearer {token}"))


def test_http_rounds_belong_to_their_principal():
    h = Traffic("http")
    a = h.call("tools/call", {"name": "deploy", "arguments": PROD}, headers=authed("alice"))
    b = h.call("tools/call", {"name": "deploy", "arguments": PROD}, headers=authed("bob"))
    h.irr(a, {"confirm": ELICIT})
    h.irr(b, {"confirm": ELICIT})  # bob's round is the most recent
    a2 = h.call("tools/call", {"name": "deploy", "arguments": PROD, "inputResponses": {"confirm": ACCEPT}},
                headers=authed("alice"))  # but alice answers hers
    h.result(a2, {"content": []})
    r = h.run()
    assert shape(r.chain("c1")) == ([a, a2], 1, "complete", "keys")
    assert shape(r.chain("c2")) == ([b], 1, "abandoned", None)
    assert r.chain("c1")["peer"] != r.chain("c2")["peer"]


def test_http_peer_header_overrides_authorization():
    h = Traffic("http")
    hdr = lambda user, tok: authed(tok) + (("x-user", user),)  # noqa: E731
    a = h.call("tools/call", {"name": "deploy", "arguments": PROD}, headers=hdr("ann", "t1"))
    h.irr(a, {"confirm": ELICIT})
    a2 = h.call("tools/call", {"name": "deploy", "arguments": PROD, "inputResponses": {"confirm": ACCEPT}},
                headers=hdr("ann", "t2"))  # a refreshed token, the same user
    h.result(a2, {"content": []})
    assert shape(h.run(Config(peer_header="X-User")).chain("c1")) == ([a, a2], 1, "complete", "keys")
    r = h.run()  # by Authorization: another principal, so no round of its own to answer
    assert shape(r.chain("c1")) == ([a], 1, "abandoned", None)
    assert shape(r.chain("c2")) == ([a2], 0, "complete", None)


def test_http_state_presented_by_another_principal_still_links():
    h = Traffic("http")
    a = h.call("tools/call", {"name": "deploy", "arguments": PROD}, headers=authed("alice"))
    h.irr(a, {"confirm": ELICIT}, state="s1")
    b = h.call("tools/call", {"name": "deploy", "arguments": PROD, "inputResponses": {"confirm": ACCEPT},
                              "requestState": "s1"}, headers=authed("mallory"))
    h.result(b, {"content": []})  # and the server accepted it
    r = h.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")
    assert "server-accepted-state-other-principal" in r.rules()


def test_http_chain_answered_on_event_streams():
    h = Traffic("http")
    a = h.tool("deploy", PROD)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    irr = {"jsonrpc": "2.0", "id": a, "result": {"resultType": "input_required", "inputRequests": {"confirm": ELICIT},
                                                 "requestState": "s1"}}
    h.respond_sse(h._x_of_id.pop(str(a)), [progress, irr], raw_events=[b": keep-alive\n\n"])
    b = retry(h, {"confirm": ACCEPT}, "s1")
    h.result(b, {"content": []}, sse=True)
    r = h.run()
    assert shape(r.chain("c1")) == ([a, b], 1, "complete", "state")
    assert [m.kind for m in r.messages] == ["request", "notification", "result", "request", "result"]


def test_a_state_issued_again_each_round_is_no_ambiguity():
    """A server may hand out the same requestState round after round: each retry still has one
    open round to continue, so no chain-ambiguous-link (the consumed rounds are no candidates)."""
    t = Traffic()
    a = t.tool("deploy", PROD)
    t.irr(a, {"confirm": ELICIT}, state="same")
    b = retry(t, {"confirm": ACCEPT}, "same")
    t.irr(b, {"again": ELICIT}, state="same")
    c = retry(t, {"again": ACCEPT}, "same")
    t.irr(c, {"last": ELICIT}, state="same")
    d = retry(t, {"last": ACCEPT}, "same")
    t.result(d, {"content": []})
    r = t.run()
    assert shape(r.chain("c1")) == ([a, b, c, d], 3, "complete", "state")
    assert "chain-ambiguous-link" not in r.rules()
    assert not r.errors()


def test_two_chains_holding_the_same_state_at_the_same_instant_are_ambiguous():
    """The near miss: the same state on two rounds opened in one batch, both open."""
    t = Traffic()
    a = t.tool("deploy", PROD)
    b = t.tool("deploy", PROD)
    irr = {"resultType": "input_required", "inputRequests": {"confirm": ELICIT}, "requestState": "same"}
    t.line("s2c", [{"jsonrpc": "2.0", "id": a, "result": irr}, {"jsonrpc": "2.0", "id": b, "result": irr}])
    x = retry(t, {"confirm": ACCEPT}, "same")
    t.result(x, {"content": []})
    r = t.run(close=False)
    assert shape(r.chain("c1")) == ([a, x], 1, "complete", "state")
    assert [f.chain for f in r.of("chain-ambiguous-link")] == ["c1"]


def test_a_session_without_its_end_ends_at_its_own_last_frame_not_at_later_traffic():
    """A recorder killed (or a file cut) leaves a session without `session-end`; checked with a later
    session (an appended one, or another input), its open and abandoned chains ran to the other's
    last frame, a day later. Near miss: alone, the same session ends at its last frame as before."""
    a = Traffic(session="a")
    a.tool("deploy", PROD)  # never answered: open
    asked = a.tool("release", {"version": "1"})
    a.irr(asked, {"confirm": ELICIT}, state="s1")  # never answered: abandoned
    a_last = a.t
    b = Traffic(session="b", start=a_last + 86400.0)
    b.result(b.tool("ping_tool", {}), {"content": []})
    b.end()
    both = Traffic(session="x", with_session_start=False)
    both.frames = a.frames + b.frames
    for r in (both.run(), a.run()):
        ends = {c["target"]: (c["outcome"], c["end"]) for c in r.chains}
        assert ends["deploy"] == ("open", a_last) and ends["release"] == ("abandoned", a_last), ends


def test_a_refused_retry_nobody_corrects_ends_in_error_when_its_peer_calls_anything_else():
    """A client that retries after a refusal does so before it calls anything else: a new logical
    request of the same peer closes the waiting chain in error at once (the live view shows it then)."""
    t, a, b = refused()
    d = t.tool("other", {})
    t.result(d, {"content": []})
    r = t.run()
    assert shape(r.chain("c1"))[:3] == ([a, b], 1, "error")
    ev = events(r)
    assert ev[:4] == [("opened", "c1"), ("round", "c1"), ("retry", "c1"), ("refused", "c1")]
    assert ev.index(("closed", "c1")) < ev.index(("closed", "c2"))  # with the new call, not at the end
