"""The Inspector on its own: frames in, messages and chain events out, every observation to the sink
it is given, and the few facts a judge reads besides them in its view. No rules run here."""

from __future__ import annotations

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpResponse
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Answered, Decoded, ExchangeDone, InspectorFailed, Linked
from tests.traffic import ACCEPT, ELICIT, Traffic


def _run(t: Traffic) -> tuple[list, list, Inspector]:
    seen: list = []
    insp = Inspector(sink=seen.append)
    outs: list = []
    for f in t.frames:
        outs += insp.feed(f)
    outs += insp.close()
    return outs, seen, insp


def _one_round(t: Traffic) -> tuple:
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    return a, b


def test_outputs_are_messages_and_chain_events_and_the_observations_go_to_the_sink():
    t = Traffic()
    a, b = _one_round(t)
    t.result(b, {"content": []})
    outs, seen, _ = _run(t)
    assert {type(o) for o in outs} == {Message, ChainEvent}  # judging is not the core's: no Finding
    assert [e.kind for e in outs if type(e) is ChainEvent] == ["opened", "round", "retry", "closed"]
    decoded = [o for o in seen if type(o) is Decoded]
    assert [d.msg for d in decoded] == [o for o in outs if type(o) is Message]
    first, irr, retry, final = decoded
    # a message points at nothing the pipeline made of it: its observation carries the pairing
    assert not hasattr(first.msg, "request") and not hasattr(first.msg, "creq")
    assert first.request is None and first.creq.chain.id == "c1" and first.creq.round is None
    assert irr.request is first.msg and irr.creq is first.creq
    assert retry.creq.round.n == 1 and final.request is retry.msg and final.creq is retry.creq
    [link] = [o for o in seen if type(o) is Linked]
    assert link.creq is retry.creq
    answered = [o for o in seen if type(o) is Answered]
    assert [(x.response, x.request, x.creq) for x in answered] == [(irr.msg, first.msg, first.creq),
                                                                    (final.msg, retry.msg, retry.creq)]


def test_a_retrys_place_ends_with_its_chain_a_first_requests_stays():
    # both cancelled (their chains close), both answered late: the late answer to the retry answers
    # no chain any more (closed chains keep no messages), the one to the first request still its own
    t = Traffic()
    a, b = _one_round(t)
    t.notify("notifications/cancelled", {"requestId": b})
    c = t.tool("deploy", {"env": "dev"})
    t.notify("notifications/cancelled", {"requestId": c})
    t.result(b, {"content": []})
    t.result(c, {"content": []})
    outs, seen, _ = _run(t)
    late = {d.request.id: d for d in seen if type(d) is Decoded and d.request is not None and d.msg.kind == "result"}
    assert late[b].creq is None and late[c].creq is not None and late[c].creq.chain.id == "c2"
    assert [e.chain.outcome for e in outs if type(e) is ChainEvent and e.kind == "closed"] == ["cancelled", "cancelled"]


def test_the_view_offers_what_a_judge_needs_besides_the_observations():
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    insp = Inspector()
    view = insp.view
    start, call = t.frames
    assert insp.feed(start) == []
    [msg, _opened] = insp.feed(call)
    assert view.now == t.frames[-1].time
    flight = view.in_flight(msg.session)
    assert len(flight) == 1 and list(flight) == [msg] and flight.get(msg.idk) is msg
    assert view.chain_request(msg).chain.id == "c1" and view.request_of(msg) is None
    t.result(a, {"content": []})
    [resp, _closed] = insp.feed(t.frames[-1])
    assert view.request_of(resp) is msg and view.chain_request(resp).chain.id == "c1" and len(flight) == 0
    assert view.request_of(msg) is None  # the view pairs the messages of the frame just analysed
    assert view.knowledge is insp.knowledge and not view.legacy_session("no-such-session")


def test_the_exchange_done_names_the_chain_of_its_request():
    t = Traffic("http")
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    _, seen, _ = _run(t)
    [done] = [o for o in seen if type(o) is ExchangeDone]
    assert done.exchange.request.method == "tools/call" and done.creq.chain.id == "c1"


def test_a_failure_is_an_observation_and_the_next_frame_is_analysed(monkeypatch):
    t = Traffic("http")
    x = t.post(t.request("tools/list"))
    insp = Inspector(sink=(seen := []).append)
    monkeypatch.setattr(insp, "_http_request", lambda f: 1 / 0)
    assert insp.feed(t.frames[1]) == []
    [failed] = [o for o in seen if type(o) is InspectorFailed]
    assert failed.frame == "HttpRequest" and type(failed.error) is ZeroDivisionError and failed.time == t.frames[1].time
    assert not [o for o in seen if type(o) is Finding]
    out = insp.feed(HttpResponse(t.tick(), t.session, x, 200, (("content-type", "application/json"),)))
    out += insp.feed(HttpBody(t.tick(), t.session, x, b'{"jsonrpc":"2.0","id":1,"result":{}}'))
    out += insp.feed(HttpEnd(t.tick(), t.session, x))
    assert [m.label() for m in out] == ["result id=1"]
