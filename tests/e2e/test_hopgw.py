"""The two-hop test gateway itself (tests/e2e/hopgw/), no mrtr-inspect in the way: the correct gateway
turns the legacy upstream's elicitation/create into 2026-07-28 input_required rounds and back, and
each --bug switch shows on the wire the behaviour the first seed describes.

Where the test must see the back hop, the upstream runs behind `capture` (tests/e2e/__init__.py), a
transparent pipe recorder, and the test reads what crossed it once the gateway has stopped.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from tests.replay.conftest import Running

from . import helper
from .hopgw.client import CONFIRM, HopClient
from .hopgw.gateway import ASK_ROUNDS
from .hopgw.upstream import CONFIRM_SCHEMA, ISSUE
from .servers import command

UPSTREAM = [sys.executable, "-m", "tests.e2e.hopgw.upstream"]
ISSUE_QUESTION = {"message": "Create issue 'Crash on start'?", "requestedSchema": CONFIRM_SCHEMA}


@pytest.fixture
def gateway():
    """`gateway(*options, upstream=CMD)` starts the gateway and gives its URL; stopped at teardown."""
    started: list[Running] = []

    def start(*options: str, upstream: list[str] | None = None) -> Running:
        r = Running(command("tests.e2e.hopgw.gateway", *options, *(["--", *upstream] if upstream else [])))
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def captured(gw: Running, folder: Path) -> tuple[list[dict], list[dict]]:
    """Stop the gateway; the messages the upstream got and sent, as `capture` kept them."""
    gw.stop()
    read = lambda name: [json.loads(line) for line in (folder / name).read_bytes().splitlines() if line.strip()]
    return read("c2s"), read("s2c")


def plain(result: dict) -> dict:
    """A result without its _meta (the gateway names itself in every result)."""
    assert result["_meta"] == {"io.modelcontextprotocol/serverInfo": {"name": "hopgw", "version": "0.0.1"}}
    return {k: v for k, v in result.items() if k != "_meta"}


def only_question(t, round_: int = 0) -> dict:
    requests = t.questions[round_]
    assert list(requests) == ["q1"], requests
    assert requests["q1"]["method"] == "elicitation/create"
    return requests["q1"]["params"]


# -- the correct gateway --------------------------------------------------------------------------------------


def test_the_correct_gateway_completes_create_issue_in_one_round(gateway, tmp_path):
    gw = gateway(upstream=helper("capture", str(tmp_path), "--", *UPSTREAM))
    c = HopClient(gw.url)
    assert c.discover()["result"]["supportedVersions"] == ["2026-07-28"]
    assert [t["name"] for t in c.tools()] == ["create_issue", "connect", "echo", "fail"]
    t = c.call("create_issue", {"title": "Crash on start"})
    assert t.rounds == 1
    assert only_question(t) == ISSUE_QUESTION  # the upstream's question, unchanged
    assert plain(t.result) == {"resultType": "complete", "content": [{"type": "text", "text": "created #7"}],
                        "structuredContent": ISSUE}
    c2s, s2c = captured(gw, tmp_path)
    asked = next(m for m in s2c if m.get("method") == "elicitation/create")
    assert {"jsonrpc": "2.0", "id": asked["id"], "result": CONFIRM} in c2s  # the answer, delivered verbatim
    assert not any(m.get("method") == "notifications/cancelled" for m in c2s)


def test_the_correct_gateway_drops_elicitation_id_and_passes_errors(gateway):
    c = HopClient(gateway().url)
    t = c.call("connect", {}, answer={"action": "accept"})
    assert only_question(t) == {"mode": "url", "message": "Sign in", "url": "https://example.test/login"}
    assert t.result["content"] == [{"type": "text", "text": "connected"}]
    declined = c.call("create_issue", {"title": "Crash on start"}, answer={"action": "decline"})
    assert declined.result["isError"] is True and declined.result["content"][0]["text"] == "cancelled"
    assert c.call("echo", {"text": "hi"}).result["content"] == [{"type": "text", "text": "hi"}]
    failed = c.call("fail", {})
    assert failed.rounds == 0 and failed.error == {"code": -32000, "message": "upstream failed"}


def test_the_correct_gateway_checks_its_request_state(gateway):
    c = HopClient(gateway().url)
    first = c.call("create_issue", {"title": "Crash on start"}, max_rounds=0)
    state = first.final["result"]["requestState"]
    forged = state[:-1] + ("0" if state[-1] != "0" else "1")
    retry = {"name": "create_issue", "arguments": {"title": "Crash on start"}, "inputResponses": {"q1": CONFIRM}}
    assert c.request("tools/call", {**retry, "requestState": forged})["error"]["code"] == -32602
    moved = c.request("tools/call", {**retry, "arguments": {"title": "Delete it"}, "requestState": state})
    assert moved["error"]["message"] == "this requestState was issued to another request"
    assert c.request("tools/call", {**retry, "requestState": state})["result"]["structuredContent"] == ISSUE
    again = c.request("tools/call", {**retry, "requestState": state})
    assert again["error"]["code"] == -32602  # used once, finished


def test_a_retry_without_the_answer_is_asked_again(gateway):
    c = HopClient(gateway().url)
    t = c.call("create_issue", {"title": "Crash on start"}, answer=None, max_rounds=2)
    assert t.rounds == 3 and all(q == t.questions[0] for q in t.questions)


def test_two_clients_at_once_each_get_their_own_call(gateway, tmp_path):
    """Both calls are open upstream at the same time, their questions interleaved; each client is
    asked its own question and gets its own result (one accepts, one declines)."""
    gw = gateway(upstream=helper("capture", str(tmp_path), "--", *UPSTREAM))
    together = threading.Barrier(2, timeout=60)
    out: dict[str, object] = {}

    def run(title: str, answer: dict) -> None:
        def answered(key, request):
            together.wait()  # both questions are out; both retries go together
            return answer
        try:
            together.wait()
            client = HopClient(gw.url, name=f"client {title}")
            out[title] = client.call("create_issue", {"title": title}, answer=answered)
        except BaseException as e:  # reported by the main thread
            out[title] = e
            together.abort()

    threads = [threading.Thread(target=run, args=("Yes please", CONFIRM)),
               threading.Thread(target=run, args=("No thanks", {"action": "decline"}))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(90)
    yes, no = out["Yes please"], out["No thanks"]
    assert not isinstance(yes, BaseException) and not isinstance(no, BaseException), out
    assert only_question(yes)["message"] == "Create issue 'Yes please'?"
    assert only_question(no)["message"] == "Create issue 'No thanks'?"
    assert yes.result["structuredContent"] == ISSUE
    assert no.result["isError"] is True and "structuredContent" not in no.result
    c2s, s2c = captured(gw, tmp_path)
    assert sum(1 for m in s2c if m.get("method") == "elicitation/create") == 2  # both asked upstream
    kinds = ["call" if m.get("method") == "tools/call" else "answer" for m in c2s
             if m.get("method") == "tools/call" or "result" in m and "action" in m["result"]]
    assert kinds == ["call", "call", "answer", "answer"]  # both open upstream at once


def test_wrap_fronts_one_tool_that_calls_the_upstream_ones(gateway):
    c = HopClient(gateway("--wrap").url)
    assert [t["name"] for t in c.tools()] == ["gw_call"]
    t = c.call("gw_call", {"tool": "create_issue", "arguments": {"title": "Crash on start"}})
    assert t.rounds == 1 and only_question(t) == ISSUE_QUESTION
    assert t.result["structuredContent"] == ISSUE
    assert c.call("gw_call", {"tool": "echo", "arguments": {"text": "hi"}}).result["content"][0]["text"] == "hi"
    assert c.call("create_issue", {"title": "x"}).error["code"] == -32602  # only gw_call is fronted


def test_a_modern_upstream_s_rounds_are_passed_through(gateway):
    c = HopClient(gateway("--era", "modern").url)
    t = c.call("create_issue", {"title": "Crash on start"})
    assert t.rounds == 1 and t.questions[0]["confirm"]["params"] == ISSUE_QUESTION
    assert t.result["structuredContent"] == ISSUE
    connect = c.call("connect", {}, answer={"action": "accept"})
    assert "elicitationId" not in connect.questions[0]["confirm"]["params"]
    assert connect.result["content"][0]["text"] == "connected"


# -- the bugs ---------------------------------------------------------------------------------------------------


def test_answer_not_delivered_asks_8_rounds_then_fails(gateway, tmp_path):
    gw = gateway("--bug", "answer-not-delivered", upstream=helper("capture", str(tmp_path), "--", *UPSTREAM))
    c = HopClient(gw.url)
    t = c.call("create_issue", {"title": "Crash on start"})
    assert t.rounds == ASK_ROUNDS == 8
    assert all(q == t.questions[0] for q in t.questions)  # the same question each round
    states = [r["result"]["requestState"] for _, r in t.exchanges[:-1]]
    assert len(set(states)) == ASK_ROUNDS  # a new requestState each round
    assert all(req["inputResponses"] == {"q1": CONFIRM} for req, _ in t.exchanges[1:])  # every round answered
    assert t.error == {"code": -32603, "message": "tools/call was still asking for input after 8 rounds"}
    c2s, s2c = captured(gw, tmp_path)
    asked = next(m for m in s2c if m.get("method") == "elicitation/create")
    call = next(m for m in c2s if m.get("method") == "tools/call")
    assert not any("result" in m and m.get("id") == asked["id"] for m in c2s)  # never answered
    assert {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": call["id"], "reason": "the client stopped answering"}} in c2s
    assert not any(m.get("id") == call["id"] and "method" not in m for m in s2c)  # the call never finished


def test_result_collapsed_drops_structured_content(gateway):
    c = HopClient(gateway("--bug", "result-collapsed").url)
    t = c.call("create_issue", {"title": "Crash on start"})
    assert plain(t.result) == {"resultType": "complete", "content": [{"type": "text", "text": "created #7"}]}


def test_legacy_field_passthrough_keeps_elicitation_id(gateway):
    c = HopClient(gateway("--bug", "legacy-field-passthrough").url)
    t = c.call("connect", {}, answer={"action": "accept"})
    assert only_question(t) == {"mode": "url", "message": "Sign in", "url": "https://example.test/login",
                                "elicitationId": "el-1"}
    assert t.result["content"][0]["text"] == "connected"


def test_question_altered_changes_the_message_and_schema(gateway):
    c = HopClient(gateway("--bug", "question-altered").url)
    t = c.call("create_issue", {"title": "Crash on start"})
    asked = only_question(t)
    assert asked["message"] != ISSUE_QUESTION["message"]
    assert asked["requestedSchema"] != CONFIRM_SCHEMA and "required" not in asked["requestedSchema"]
    assert t.result["structuredContent"] == ISSUE  # the answer still gets through


def test_error_masked_turns_failures_into_ok(gateway):
    c = HopClient(gateway("--bug", "error-masked").url)
    assert plain(c.call("fail", {}).result) == {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
    declined = c.call("create_issue", {"title": "Crash on start"}, answer={"action": "decline"})
    assert plain(declined.result) == {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}


def test_state_binding_refuses_a_retry_without_the_session(gateway):
    url = gateway("--bug", "state-binding").url
    c = HopClient(url, keep_session=True)
    c.discover()
    assert c.session  # minted on server/discover
    refused = c.call("create_issue", {"title": "Crash on start"}, retry_session=False)
    assert refused.rounds == 1
    assert refused.error == {"code": -32602, "message": "this requestState belongs to another session"}
    kept = c.call("create_issue", {"title": "Crash on start"})
    assert kept.result["structuredContent"] == ISSUE
    conformant = HopClient(url)  # no session at all: nothing to bind, nothing refused
    assert conformant.call("create_issue", {"title": "Crash on start"}).result["structuredContent"] == ISSUE


def test_the_bugs_behave_alike_in_front_of_a_modern_upstream(gateway):
    c = HopClient(gateway("--era", "modern", "--bug", "answer-not-delivered").url)
    t = c.call("create_issue", {"title": "Crash on start"})
    assert t.rounds == ASK_ROUNDS and t.error["code"] == -32603
    c = HopClient(gateway("--era", "modern", "--bug", "result-collapsed").url)
    assert "structuredContent" not in c.call("create_issue", {"title": "Crash on start"}).result
