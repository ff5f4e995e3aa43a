"""The Inspector on its own: frames in; messages and chain events out, with the frame's observations,
frozen, each carrying the facts of its moment that a judge reads. No rules run here."""

from __future__ import annotations

import dataclasses

import pytest

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpResponse
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Answered, Decoded, ExchangeDone, InspectorFailed, Linked
from tests.traffic import ACCEPT, ELICIT, Traffic


def _run(t: Traffic) -> tuple[list, list, Inspector]:
    seen: list = []
    insp = Inspector()
    outs: list = []
    for f in t.frames:
        out, observed = insp.step(f)
        outs += out
        seen += observed
    out, observed = insp.end()
    return outs + out, seen + observed, insp


def _one_round(t: Traffic) -> tuple:
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    return a, b


def test_outputs_are_messages_and_chain_events_and_the_observations_come_with_them():
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
    for o in seen:  # frozen: what a judge reads is what the core saw
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(o, dataclasses.fields(o)[0].name, None)


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


def test_an_observation_carries_the_requests_in_flight_as_they_were():
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    insp = Inspector()
    start, call = t.frames
    assert insp.step(start) == ([], [])
    (msg, _opened), [decoded] = insp.step(call)
    assert insp.now == call.time
    flight = decoded.flight
    assert len(flight) == 1 and list(flight) == [msg] and flight.get(msg.idk) is msg
    assert decoded.creq.chain.id == "c1" and decoded.request is None
    t.result(a, {"content": []})
    (resp, _closed), observed = insp.step(t.frames[-1])
    [answer] = [o for o in observed if type(o) is Decoded]
    assert answer.request is msg and answer.creq.chain.id == "c1" and len(answer.flight) == 0
    assert len(flight) == 1 and flight.get(msg.idk) is msg  # the first observation's, unchanged


def test_a_batch_member_sees_the_requests_in_flight_before_the_next_member():
    t = Traffic()
    t.line("c2s", b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]')
    insp = Inspector()
    seen = [o for f in t.frames for o in insp.step(f)[1]]
    members = [o for o in seen if type(o) is Decoded and o.msg.batch is not None]
    assert [[m.id for m in d.flight] for d in members] == [[1], [1, 2]]


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
    insp = Inspector()
    monkeypatch.setattr(insp, "_http_request", lambda f: 1 / 0)
    out, seen = insp.step(t.frames[1])
    assert out == []
    [failed] = [o for o in seen if type(o) is InspectorFailed]
    assert failed.frame == "HttpRequest" and type(failed.error) is ZeroDivisionError and failed.time == t.frames[1].time
    assert not [o for o in seen if type(o) is Finding]
    out = insp.feed(HttpResponse(t.tick(), t.session, x, 200, (("content-type", "application/json"),)))
    out += insp.feed(HttpBody(t.tick(), t.session, x, b'{"jsonrpc":"2.0","id":1,"result":{}}'))
    out += insp.feed(HttpEnd(t.tick(), t.session, x))
    assert [m.label() for m in out] == ["result id=1"]
