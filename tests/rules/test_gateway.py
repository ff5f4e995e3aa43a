"""RULES.md §11: two hops. A 2026-07-28 front (HTTP, `hop: front`) and a legacy stdio back hop (`hop:
back`) built frame by frame on one clock, as the proxy and the tee record a gateway; each §11 rule on
its bug, and silent on the same traffic without it."""

from __future__ import annotations

import pytest

from mrtr_inspect.config import Config
from tests.traffic import ACCEPT, Traffic, dumps

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.events import HttpEnd, HttpResponse, SseEvent
from mrtr_inspect.core.hops import HopsCorrelated, hop_problem
from mrtr_inspect.outputs.report import ReportBuilder

SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
QUESTION = {"mode": "form", "message": "Create issue 'x'?", "requestedSchema": SCHEMA}
STRUCTURED = {"content": [{"type": "text", "text": "created #7"}], "structuredContent": {"number": 7}}
GATEWAY_RULES = {"gateway-answer-not-delivered", "gateway-rounds-inflated", "gateway-result-collapsed",
                 "gateway-error-masked", "gateway-question-altered", "gateway-legacy-field-passthrough",
                 "gateway-state-binding", "hop-link-ambiguous"}


class TwoHops:
    """Both hops of a gateway on one clock: `front` is what the proxy in front of it records, `back`
    what the tee between it and its legacy upstream records."""

    def __init__(self, front_hop: str = "front", back_hop: str = "back") -> None:
        self.front = Traffic("http", "f1", info={"hop": front_hop, "upstream": "http://gw/mcp", "live": True})
        self.back = Traffic("stdio", "b1", start=self.front.t, info={"hop": back_hop, "command": ["up"], "live": True})
        self.up_ids = iter(range(100, 1000))
        self.asks = iter(range(0, 1000))
        self.on(self.back).call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                               "clientInfo": {"name": "gw", "version": "1"}}, with_meta=False)
        self.on(self.back).server({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
                                   "capabilities": {"tools": {}}, "serverInfo": {"name": "up", "version": "1"}}})

    def on(self, t: Traffic) -> Traffic:
        now = max(self.front.t, self.back.t)
        self.front.t = self.back.t = now
        return t

    # the front hop (the host and the gateway)
    def call(self, tool="create_issue", args=None, headers=None, **params):
        return self.on(self.front).call("tools/call", {"name": tool, "arguments": args or {"title": "x"}, **params},
                                        headers=headers)

    def irr(self, rid, params=None, state="st1"):
        self.on(self.front).irr(rid, {"q1": {"method": "elicitation/create", "params": params or QUESTION}}, state=state)

    def retry(self, state="st1", tool="create_issue", args=None, headers=None):
        return self.call(tool, args, headers=headers, inputResponses={"q1": ACCEPT}, requestState=state)

    def done(self, rid, result=None):
        self.on(self.front).result(rid, dict(result or STRUCTURED))

    def fail(self, rid, code=-32603, message="tools/call was still asking for input after 8 rounds"):
        self.on(self.front).error(rid, code, message)

    # the back hop (the gateway and its upstream, 2025-11-25)
    def up_call(self, tool="create_issue", args=None):
        rid = next(self.up_ids)
        self.on(self.back).client({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                   "params": {"name": tool, "arguments": args or {"title": "x"}}})
        return rid

    def up_ask(self, params=None):
        qid = next(self.asks)
        self.on(self.back).server({"jsonrpc": "2.0", "id": qid, "method": "elicitation/create",
                                   "params": params or QUESTION})
        return qid

    def up_answer(self, qid):
        self.on(self.back).client({"jsonrpc": "2.0", "id": qid, "result": ACCEPT})

    def up_done(self, rid, result=None):
        self.on(self.back).server({"jsonrpc": "2.0", "id": rid, "result": dict(result or STRUCTURED)})

    def up_error(self, rid):
        self.on(self.back).server({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "upstream failed"}})

    def frames(self):
        return sorted(self.front.frames + self.back.frames, key=lambda f: f.time)

    def run(self, config: Config | None = None, frames=None):
        a = Analysis(config)
        outs = []
        for f in frames if frames is not None else self.frames():
            outs += a.feed(f)
        outs += a.close()
        report = ReportBuilder()
        report.add_all(outs)
        d = report.to_dict()
        d["correlated"] = next((o for o in outs if type(o) is HopsCorrelated), None)
        return d


def rules_of(report) -> set[str]:
    return {f["rule"] for f in report["findings"]}


def one_round(g: TwoHops, *, front_question=None, front_result=None, back_question=None, back_result=None,
              back_error=False, args=None):
    """A call that asks one question on the way: the gateway relays it, delivers the answer, returns."""
    rid = g.call(args=args)
    up = g.up_call(args=args)
    q = g.up_ask(back_question)
    g.irr(rid, front_question)
    rid2 = g.retry(args=args)
    g.up_answer(q)
    if back_error:
        g.up_error(up)
    else:
        g.up_done(up, back_result)
    g.done(rid2, front_result)


def test_a_correct_gateway_links_its_pair_and_says_nothing():
    g = TwoHops()
    one_round(g)
    r = g.run()
    assert not rules_of(r) & GATEWAY_RULES
    (pair,) = r["hops"]
    assert pair["link"] == "target+args"
    front = next(c for c in r["chains"] if c["id"] == pair["front"])
    back = next(c for c in r["chains"] if c["id"] == pair["back"])
    assert (front["hop"], front["era"], back["hop"], back["era"]) == ("front", "modern", "back", "legacy")
    assert front["rounds"] == back["rounds"] == 1
    # the user's answering time is no one's: it is taken off both durations
    assert pair["front_ms"] == front["duration_ms"] and pair["back_ms"] == back["duration_ms"]
    waited_front = front["timeline"][1]["wait_ms"]
    waited_back = back["round_details"][0]["wait_ms"]
    assert pair["gateway_ms"] == pytest.approx((front["duration_ms"] - waited_front) - (back["duration_ms"] - waited_back), abs=1e-6)


def test_without_hop_names_there_is_no_hops_list_and_no_hop_member():
    g = TwoHops()
    one_round(g)
    frames = [f if type(f).__name__ != "SessionStart" else type(f)(f.time, f.session, f.transport, {"live": True})
              for f in g.frames()]
    r = g.run(frames=frames)
    assert "hops" not in r and r["correlated"] is None
    assert all("hop" not in c for c in r["chains"])


def test_answer_not_delivered_eight_rounds_then_an_error():
    g = TwoHops()
    rid = g.call()
    g.up_call()
    g.up_ask()  # the upstream asks once; the answer never reaches it
    g.irr(rid, state="st0")
    for n in range(1, 8):
        rid = g.retry(state=f"st{n - 1}")
        g.irr(rid, state=f"st{n}")
    rid = g.retry(state="st7")
    g.fail(rid)
    r = g.run()
    assert {"gateway-answer-not-delivered", "gateway-rounds-inflated"} <= rules_of(r)
    f = next(f for f in r["findings"] if f["rule"] == "gateway-answer-not-delivered")
    assert f["severity"] == "error" and f["details"]["front_rounds"] == 8 and f["details"]["back_unanswered"] == 1
    inflated = next(f for f in r["findings"] if f["rule"] == "gateway-rounds-inflated")
    assert inflated["details"] == {"front_rounds": 8, "back_questions": 1, "back": [r["hops"][0]["back"]]}
    (pair,) = r["hops"]
    assert 0 <= pair["gateway_ms"] <= pair["front_ms"]


def test_answers_delivered_over_two_rounds_are_not_lost_nor_inflated():
    g = TwoHops()
    rid = g.call()
    up = g.up_call()
    q = g.up_ask()
    g.irr(rid, state="a")
    rid = g.retry(state="a")
    g.up_answer(q)
    q = g.up_ask({**QUESTION, "message": "Really?"})
    g.irr(rid, {**QUESTION, "message": "Really?"}, state="b")
    rid = g.retry(state="b")
    g.up_answer(q)
    g.up_done(up)
    g.done(rid)
    r = g.run()
    assert not rules_of(r) & GATEWAY_RULES


def test_result_collapsed_to_one_text_block():
    g = TwoHops()
    one_round(g, front_result={"content": [{"type": "text", "text": "created #7"}]})
    r = g.run()
    assert "gateway-result-collapsed" in rules_of(r)


def test_a_text_result_passed_on_as_text_is_no_collapse():
    g = TwoHops()
    text = {"content": [{"type": "text", "text": "created #7"}]}
    one_round(g, back_result=text, front_result=text)
    assert "gateway-result-collapsed" not in rules_of(g.run())


def test_error_masked_as_success_and_success_reported_as_error():
    g = TwoHops()
    one_round(g, back_error=True, front_result={"content": [{"type": "text", "text": "ok"}]})
    assert "gateway-error-masked" in rules_of(g.run())
    g = TwoHops()
    one_round(g, front_result={"content": [{"type": "text", "text": "failed"}], "isError": True})
    assert "gateway-error-masked" in rules_of(g.run())


def test_an_error_passed_on_as_an_error_is_not_masked():
    g = TwoHops()
    one_round(g, back_error=True, front_result={"content": [{"type": "text", "text": "failed"}], "isError": True})
    assert "gateway-error-masked" not in rules_of(g.run())


def test_question_altered_schema_is_a_warning_message_an_info():
    g = TwoHops()
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    one_round(g, front_question={**QUESTION, "requestedSchema": schema})
    (f,) = [f for f in g.run()["findings"] if f["rule"] == "gateway-question-altered"]
    assert f["severity"] == "warning" and f["details"]["changed"] == ["requestedSchema"]
    g = TwoHops()
    one_round(g, front_question={**QUESTION, "message": "Go on?"})
    (f,) = [f for f in g.run()["findings"] if f["rule"] == "gateway-question-altered"]
    assert f["severity"] == "info" and f["details"]["changed"] == ["message"]


def test_legacy_field_passthrough_and_its_near_miss():
    url_q = {"mode": "url", "message": "Sign in", "url": "https://example.test/login", "elicitationId": "el-1"}
    g = TwoHops()
    one_round(g, back_question=url_q, front_question=url_q)
    r = g.run()
    assert "gateway-legacy-field-passthrough" in rules_of(r)
    assert "url-elicitation-has-elicitation-id" in rules_of(r)  # the front hop alone says it too
    assert "gateway-question-altered" not in rules_of(r)
    g = TwoHops()
    stripped = {k: v for k, v in url_q.items() if k != "elicitationId"}
    one_round(g, back_question=url_q, front_question=stripped)
    r = g.run()
    assert not rules_of(r) & GATEWAY_RULES  # dropping what the front era cannot carry is no alteration


WITH_SID = (("content-type", "application/json"), ("mcp-session-id", "sess-1"))


def refused_retry(retry_headers, message: str) -> dict:
    """A call made with an Mcp-Session-Id whose retry (with `retry_headers`) is refused with -32602."""
    g = TwoHops()
    rid = g.call(headers=WITH_SID)
    g.up_call()
    g.up_ask()
    g.irr(rid)
    g.fail(g.retry(headers=retry_headers), -32602, message)
    return g.run()


def test_state_binding_refused_without_the_session_header():
    r = refused_retry(None, "this requestState belongs to another session")  # a conformant client: no header
    (f,) = [f for f in r["findings"] if f["rule"] == "gateway-state-binding"]
    assert f["details"] == {"session": None, "accepted_session": "sess-1"}
    assert r["hops"][0]["front_hop"] == "front"  # the back call left open outlives the front chain
    assert r["hops"][0]["gateway_ms"] >= 0


def test_a_refusal_with_the_same_session_header_is_no_binding():
    assert "gateway-state-binding" not in rules_of(refused_retry(WITH_SID, "invalid requestState"))


def test_two_calls_at_once_link_by_their_arguments():
    g = TwoHops()
    a = g.call(args={"title": "a"})
    b = g.call(args={"title": "b"})
    up_b = g.up_call(args={"title": "b"})
    qb = g.up_ask({**QUESTION, "message": "Create issue 'b'?"})
    g.irr(b, {**QUESTION, "message": "Create issue 'b'?"}, state="sb")
    up_a = g.up_call(args={"title": "a"})
    qa = g.up_ask({**QUESTION, "message": "Create issue 'a'?"})
    g.irr(a, {**QUESTION, "message": "Create issue 'a'?"}, state="sa")
    b2 = g.retry(state="sb", args={"title": "b"})
    a2 = g.retry(state="sa", args={"title": "a"})
    g.up_answer(qb)
    g.up_answer(qa)
    g.up_done(up_b)
    g.up_done(up_a)
    g.done(b2)
    g.done(a2)
    r = g.run()
    assert not rules_of(r) & GATEWAY_RULES
    chains = {c["id"]: c for c in r["chains"]}
    pairs = {(chains[p["front"]]["timeline"][0]["message"], chains[p["back"]]["timeline"][0]["message"]) for p in r["hops"]}
    assert len(r["hops"]) == 2 and all(p["link"] == "target+args" for p in r["hops"])
    # each front chain to the back chain with its own arguments, though b's back call came first
    assert len(pairs) == 2
    for p in r["correlated"].pairs:
        assert p.front.args == p.back.args
    # the second question came while both back calls were in flight (nothing on stdio ties it): its
    # text, the one the front chain asked, gives it to its call, so no round counts as inflated
    assert all(len(p.back.questions) == 1 for p in r["correlated"].pairs)


def test_identical_calls_at_once_are_ambiguous_not_guessed():
    g = TwoHops()
    a = g.call()
    b = g.call()
    up_a = g.up_call()
    up_b = g.up_call()
    g.up_done(up_a, {"content": [{"type": "text", "text": "x"}]})
    g.up_done(up_b, {"content": [{"type": "text", "text": "x"}]})
    g.done(a, {"content": [{"type": "text", "text": "x"}]})
    g.done(b, {"content": [{"type": "text", "text": "x"}]})
    r = g.run()
    assert r["hops"] == [] or len(r["hops"]) < 2
    assert "hop-link-ambiguous" in rules_of(r)


def test_hop_map_links_a_wrapping_gateway():
    cfg = Config(hop_map=[{"target": "gw_call", "tool": "tool", "arguments": "arguments"}])
    g = TwoHops()
    rid = g.call("gw_call", {"tool": "create_issue", "arguments": {"title": "x"}})
    up = g.up_call()
    g.up_done(up)
    g.done(rid)
    r = g.run(cfg)
    assert [p["link"] for p in r["hops"]] == ["target+args"]
    r = g.run()  # without the map: the same arguments nowhere, only the time and the method
    assert [p["link"] for p in r["hops"]] == ["time"]


def test_the_hops_are_told_apart_by_time_whatever_their_names():
    g = TwoHops("outer", "inner")
    one_round(g)
    r = g.run()
    (pair,) = r["hops"]
    assert (pair["front_hop"], pair["back_hop"]) == ("outer", "inner")


def test_two_recordings_on_two_clocks_are_aligned_by_their_first_exchanges():
    g = TwoHops()
    one_round(g)
    import dataclasses
    frames = [dataclasses.replace(f, time=f.time + 3600.0) if f.session == "b1" else f for f in g.frames()]
    frames.sort(key=lambda f: f.session != "f1")  # one recording after the other, as `check A B` reads them
    r = g.run(frames=frames)
    assert [p["link"] for p in r["hops"]] == ["target+args"]


@pytest.mark.parametrize("name,ok", [("front", True), ("back-2", True), ("a.b_c", True), ("", False),
                                     ("x" * 33, False), ("sp ace", False), ("é", False)])
def test_hop_names(name, ok):
    assert (hop_problem(name) is None) is ok


def test_a_modern_back_hop_counts_its_own_rounds_as_the_questions():
    """The upstream speaks 2026-07-28 too: its input_required rounds are the back questions."""
    front = Traffic("http", "f1", info={"hop": "front", "upstream": "http://gw/mcp", "live": True})
    back = Traffic("http", "b1", info={"hop": "back", "upstream": "http://up/mcp", "live": True})
    q = {"method": "elicitation/create", "params": QUESTION}

    def both(t: Traffic) -> Traffic:
        front.t = back.t = max(front.t, back.t)
        return t

    rid = both(front).tool("create_issue", {"title": "x"})
    up = both(back).tool("create_issue", {"title": "x"})
    both(back).irr(up, {"confirm": q}, state="u1")
    both(front).irr(rid, {"q1": q}, state="g1")
    rid2 = both(front).tool("create_issue", {"title": "x"}, inputResponses={"q1": ACCEPT}, requestState="g1")
    up2 = both(back).tool("create_issue", {"title": "x"}, inputResponses={"confirm": ACCEPT}, requestState="u1")
    both(back).result(up2, STRUCTURED)
    both(front).result(rid2, {"content": [{"type": "text", "text": "created #7"}]})  # collapsed
    frames = sorted(front.frames + back.frames, key=lambda f: f.time)
    r = TwoHops().run(frames=frames)
    (pair,) = r["hops"]
    assert pair["link"] == "target+args"
    assert rules_of(r) & GATEWAY_RULES == {"gateway-result-collapsed"}
    pair_facts = r["correlated"].pairs[0]
    assert [q.key for q in pair_facts.back.questions] == ["confirm"] and pair_facts.back.questions[0].answered


def test_a_legacy_back_hop_over_http_asks_on_the_post_event_stream():
    """A 2025-11-25 HTTP upstream asks with elicitation/create on the tools/call POST's event stream."""
    g = TwoHops()
    back = Traffic("http", "b2", start=g.front.t, info={"hop": "back", "upstream": "http://up/mcp", "live": True})
    g.back = back  # the stdio back hop of TwoHops is left with its initialize only
    legacy = (("content-type", "application/json"), ("mcp-protocol-version", "2025-11-25"))
    init = g.on(back).call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "gw", "version": "1"}}, with_meta=False, headers=legacy)
    g.on(back).result(init, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                             "serverInfo": {"name": "up", "version": "1"}}, with_meta=False, result_type=None,
                      headers=(("content-type", "application/json"), ("mcp-session-id", "L1")))
    with_sid = legacy + (("mcp-session-id", "L1"),)
    rid = g.call()
    x = g.on(back).post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": "create_issue", "arguments": {"title": "x"}}}, headers=with_sid)
    back.frames.append(HttpResponse(g.on(back).tick(), "b2", x, 200, (("content-type", "text/event-stream"),)))

    def event(msg) -> None:
        back.frames.append(SseEvent(g.on(back).tick(), "b2", x, b"event: message\ndata: " + dumps(msg) + b"\n\n"))

    event({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": QUESTION})
    g.irr(rid)
    rid2 = g.retry()
    g.on(back).post({"jsonrpc": "2.0", "id": 0, "result": ACCEPT}, headers=with_sid)
    back.respond(back._x, 202, b"")
    event({"jsonrpc": "2.0", "id": 7, "result": STRUCTURED})
    back.frames.append(HttpEnd(g.on(back).tick(), "b2", x, None))
    g.done(rid2)
    r = g.run(frames=sorted(g.front.frames + back.frames, key=lambda f: f.time))
    (pair,) = r["hops"]
    chain = next(c for c in r["chains"] if c["id"] == pair["back"])
    assert chain["era"] == "legacy" and chain["round_details"][0]["link"] == "stream"
    assert not rules_of(r) & GATEWAY_RULES


def test_the_api_report_reads_and_writes_the_hops():
    from mrtr_inspect.api import HopLink, Report

    g = TwoHops()
    one_round(g)
    d = g.run()
    del d["correlated"]
    report = Report.from_dict(d)
    assert report.to_dict() == d
    (h,) = report.hops
    assert isinstance(h, HopLink) and (h.front_hop, h.back_hop, h.link) == ("front", "back", "target+args")
    assert {c.id: c.hop for c in report.chains} == {h.front: "front", h.back: "back"}
    assert not any("hop" in c.extra for c in report.chains)


def test_past_the_limit_chains_are_left_out_and_the_report_says_so(monkeypatch):
    from mrtr_inspect.core import hops

    monkeypatch.setattr(hops, "LIMIT", 1)
    g = TwoHops()
    one_round(g)
    r = g.run()
    assert r["hops"] == [] and r["correlated"].left_out == 1
    assert any("1 chains of named hops past the first 1 were not kept" in n for n in r["notes"])
