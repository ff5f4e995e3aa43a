"""Pairing responses with requests: by id and JSON type, per direction and scope."""

from __future__ import annotations

from mrtr_inspect.core.exchanges import ExchangeTracker, InFlight
from mrtr_inspect.core.messages import decode_message
from tests.traffic import Traffic, dumps


def pairs(r) -> list[tuple]:
    """For each response: (its index, the index of the request it answers, or None)."""
    return [(m.index, r.request_of(m).index if r.request_of(m) is not None else None) for m in r.messages
            if m.is_response]


def test_responses_pair_by_id_out_of_order():
    t = Traffic()
    a = t.call("tools/list")  # #0
    b = t.call("prompts/list")  # #1
    t.result(b, {"prompts": []})  # #2
    t.result(a, {"tools": []})  # #3
    r = t.run()
    assert pairs(r) == [(2, 1), (3, 0)]
    assert r.request_of(r.messages[3]).method == "tools/list"


def test_ids_pair_by_type_and_value():
    t = Traffic()
    t.call("tools/list", id=1)  # #0
    t.call("tools/list", id="1")  # #1
    t.result("1", {"tools": []})  # #2 answers the string id
    t.result(1, {"tools": []})  # #3 answers the number
    t.result(1.0, {"tools": []})  # #4 a float id answers nothing
    assert pairs(t.run()) == [(2, 1), (3, 0), (4, None)]


def test_a_second_response_to_the_same_id_answers_nothing():
    t = Traffic()
    a = t.call("tools/list")
    t.result(a, {"tools": []})
    t.result(a, {"tools": []})
    assert pairs(t.run()) == [(1, 0), (2, None)]


def test_server_requests_are_answered_by_the_client_in_their_own_scope():
    t = Traffic()
    t.call("tools/call", {"name": "x"}, id=1)  # #0 client request id 1
    t.server({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})  # #1 server request, also id 1
    t.client({"jsonrpc": "2.0", "id": 1, "result": {"roots": []}})  # #2 the client answers the server
    t.server({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})  # #3 the server answers the client
    r = t.run()
    assert pairs(r) == [(2, 1), (3, 0)]
    assert r.messages[2].direction == "c2s" and r.request_of(r.messages[2]).method == "roots/list"


def test_an_error_response_pairs_like_a_result():
    t = Traffic()
    a = t.call("tools/list")
    t.error(a, -32601)
    r = t.run()
    assert pairs(r) == [(1, 0)] and r.messages[1].kind == "error"


def test_sessions_do_not_pair_across():
    t = Traffic(session="a")
    t.call("tools/list", id=5)
    other = Traffic(session="b", start=2000.0)
    other.result(5, {"tools": []})
    t.frames += other.frames
    assert pairs(t.run()) == [(1, None)]


def test_batch_members_are_paired_one_by_one():
    t = Traffic()
    t.line("c2s", [t.request("tools/list", id=1), t.request("prompts/list", id=2)])  # #0 batch, #1 #2 members
    t.line("s2c", [{"jsonrpc": "2.0", "id": 2, "result": {}}, {"jsonrpc": "2.0", "id": 1, "result": {}}])  # #3, #4 #5
    r = t.run()
    assert [m.kind for m in r.messages] == ["batch", "request", "request", "batch", "result", "result"]
    assert pairs(r) == [(4, 2), (5, 1)]
    assert r.messages[1].batch == 0 and r.messages[4].batch == 3


def _req(i):
    return decode_message(dumps({"jsonrpc": "2.0", "id": i, "method": "x"}))


def test_in_flight_reuse_and_discard():
    f = InFlight()
    first, again, other = _req(1), _req(1), _req("1")
    assert f.add(first) is None
    assert f.add(other) is None
    assert f.add(again) is first  # the same id still unanswered
    assert len(f) == 2
    f.discard(first)  # no longer the one tracked under that id: kept
    assert f.get(again.idk) is again
    assert f.pop(again.idk) is again and f.pop(again.idk) is None
    assert f.add(decode_message(b'{"jsonrpc":"2.0","method":"n"}')) is None and len(f) == 1  # no id: not tracked
    assert list(f) == [other]


def test_dropping_a_scope_returns_what_was_left_unanswered():
    x = ExchangeTracker()
    req = _req(3)
    x.client_scope("s").add(req)
    x.server_scope("s").add(_req(4))
    assert x.drop_scope("s") == [req]
    assert len(x.client_scope("s")) == 0 and len(x.server_scope("s")) == 0
