"""What a closed chain keeps for replays of its states, and how the rest is let go (core/retired.py):
no message in what the state index keeps, nothing left for the garbage collector; counted, no timing."""

from __future__ import annotations

import enum
import gc
import json
import sys
import types

from mrtr_inspect.config import Config
from mrtr_inspect.core.canonical import state_hash
from mrtr_inspect.core.chains import Chain, ChainRequest, Round
from mrtr_inspect.core.events import StdioLine
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded, Linked
from mrtr_inspect.core.retired import RetiredChain, RetiredRound
from tests.core.completed_chains import ASK, REMEMBERED, Clock, chain_messages, feed_all, stdio_frames


def _reachable(root) -> list:
    """The objects reachable from `root` (classes, modules, functions and the members of the closed sets,
    shared constants, left out)."""
    seen, stack, out = set(), list(gc.get_referents(root)), []
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, (type, types.ModuleType, types.FunctionType, enum.Enum)):
            continue
        seen.add(id(x))
        out.append(x)
        stack.extend(gc.get_referents(x))
    return out


def test_what_closed_chains_keep_for_replays_holds_no_message_and_no_parsed_input_requests():
    insp = Analysis(Config(remembered_states=REMEMBERED))
    clock = Clock()
    feed_all(insp, stdio_frames(range(20), clock))
    index = insp.inspector.stitcher._states.rounds
    kept = [rd for rounds in index.values() for rd in rounds]
    assert len(kept) == 20
    held = _reachable(index)
    # no message, link, live chain or round, and no parsed JSON (inputRequests, summaries): the
    # retired rounds keep their inputRequests serialised
    assert not [o for o in held if isinstance(o, (Message, Linked, Chain, Round, ChainRequest, dict))]
    assert sum(sys.getsizeof(o) for o in held) / len(kept) < 2500  # whole rounds and chains took 4,400 B
    rd = index[state_hash("state-3")][0]
    assert rd.chain.closed and (rd.chain.id, rd.n) == ("c4", 1)
    assert rd.input_requests == json.loads(ASK) and rd.keys == {"ok"}
    assert rd.state == "state-3" and rd.state_token == '"state-3"'
    assert [r.response_kind for r in rd.retries] == ["result"] and not rd.retries[0].in_flight

    # what the checks read of it is there: a replay is recognised, its answers judged against what
    # the round asked
    _, retry = chain_messages(3)[2]
    found = []
    for n, raw in enumerate((
        retry,
        retry.replace(b'"content":{"ok":true}', b'"content":{"ok":"yes"}'),
        retry.replace(b'"inputResponses":{"ok":{"action":"accept","content":{"ok":true}}},', b""),
    )):
        raw = raw.replace(b'"id":8,', f'"id":{1000 + n},'.encode())
        found.append({o.rule for o in insp.feed(StdioLine(clock(), "s", "c2s", raw))  # type: ignore[arg-type]
                      if type(o) is Finding and o.severity != "info"})
    assert found == [{"request-state-replayed"}, {"request-state-replayed", "elicit-result-schema-mismatch"},
                     {"request-state-replayed", "retry-without-input-responses"}]
    assert [type(r).__name__ for r in rd.retries] == ["KeptRequest", "ChainRequest", "ChainRequest", "ChainRequest"]


def test_what_the_state_index_forgets_is_freed_at_once_not_by_the_garbage_collector():
    # retired rounds live long enough to reach the collector's oldest generation, collected rarely:
    # the records of a forgotten state must hold no reference cycle
    clock = Clock()
    gc.collect()
    gc.disable()
    try:
        insp = Analysis(Config(remembered_states=REMEMBERED))
        for i in range(4 * REMEMBERED):
            msgs = chain_messages(i, f"gone-{i}")
            for d, raw in msgs:
                insp.feed(StdioLine(clock(), "s", d, raw))  # type: ignore[arg-type]
            # its state replayed (answered): the retired rounds are made from the chain's record
            for d, raw in msgs[2:]:
                insp.feed(StdioLine(clock(), "s", d, raw.replace(f'"id":{2 * i + 2},'.encode(), b'"id":"r",')))  # type: ignore[arg-type]
        insp.inspector.stitcher._states.rounds  # the remembered states' rounds made
        objects = gc.get_objects()
        rounds = [o for o in objects if type(o) is RetiredRound and o.state.startswith("gone-")]
        orphans = [o for o in objects if type(o) is RetiredChain and not o.rounds]
    finally:
        gc.enable()
    assert len(insp.inspector.stitcher._states.rounds) == REMEMBERED
    assert sorted(rd.state for rd in rounds) == sorted(f"gone-{i}" for i in range(3 * REMEMBERED, 4 * REMEMBERED))
    assert orphans == []


def _chain_objects() -> list:
    return [o for o in gc.get_objects() if type(o) in (Chain, ChainRequest, Round, Linked)]


def _chains_without_collector(n: int, keep) -> list:
    """Feed n chains with the garbage collector off, `keep(i, output)` called on every output and
    every observation; returns the chain objects (chains, requests, rounds, links) they left alive."""
    clock = Clock()
    gc.collect()
    before = {id(o) for o in _chain_objects()}
    gc.disable()
    i = 0
    try:
        insp = Analysis(Config(remembered_states=REMEMBERED), lambda obs: keep(i, obs))
        for i in range(n):
            for d, raw in chain_messages(i):
                for o in insp.feed(StdioLine(clock(), "s", d, raw)):  # type: ignore[arg-type]
                    keep(i, o)
        return [o for o in _chain_objects() if id(o) not in before]
    finally:
        gc.enable()


def test_closed_chains_nothing_holds_are_freed_by_reference_counting_not_by_the_garbage_collector():
    # a chain, its requests, rounds and links refer to one another: once its outputs are consumed
    # and nothing else holds any of them, the stitcher cuts those references, so they are freed at
    # once (the collector would otherwise find some 35 objects per chain, a tenth of check's time)
    closed = []
    left = _chains_without_collector(200, lambda i, o: type(o) is ChainEvent and o.kind == "closed"
                                     and closed.append(o.chain.id))
    chains = [o for o in left if type(o) is Chain]
    assert len(closed) == 200
    # only the last few closed chains wait for their release (each 2 requests, a round, a link)
    assert 0 < len(chains) <= 20 and len(left) == 5 * len(chains)


def test_closed_chains_still_held_by_an_output_or_an_observation_are_left_whole():
    kept_chains, summaries, kept_requests = [], [], []

    def keep(i: int, o) -> None:
        if type(o) is ChainEvent and o.kind == "closed" and i % 2 == 0:
            kept_chains.append(o.chain)
            summaries.append(o.chain.summary())
        elif type(o) is Decoded and o.msg.kind == "request" and o.creq is not None and o.creq.round is None and i % 2:
            kept_requests.append(o)  # a first request's observation holds its place in its chain

    left = _chains_without_collector(100, keep)
    assert len(kept_chains) == len(kept_requests) == 50
    assert len(left) == 100 * 5  # nothing was freed: the even chains are held, the odd ones by an observation
    assert [c.summary() for c in kept_chains] == summaries
    for obs in kept_requests:
        first = obs.creq
        chain = first.chain
        rd = chain.rounds[0]
        retry = chain.requests[1]
        assert chain.closed and chain.requests == [first, retry] and rd.request is first and rd.chain is chain
        assert retry.chain is chain and retry.round is rd and rd.retries == [retry]
        assert retry.link.creq is retry and retry.link.chain is chain and retry.link.round is rd


def test_the_state_index_keeps_the_states_of_closed_chains_up_to_its_bound_the_oldest_forgotten_first():
    insp = Analysis(Config(remembered_states=2))
    clock = Clock()
    feed_all(insp, stdio_frames(range(3), clock))
    index = insp.inspector.stitcher._states
    assert list(index.rounds) == list(index.retired) == [state_hash("state-1"), state_hash("state-2")]
    assert [type(rd) for rds in index.rounds.values() for rd in rds] == [RetiredRound, RetiredRound]
    # a round of an open chain is indexed as it is, and not counted against the bound
    for d, raw in chain_messages(3, "open")[:2]:
        insp.feed(StdioLine(clock(), "s", d, raw))  # type: ignore[arg-type]
    assert [type(rd) for rd in index.rounds[state_hash("open")]] == [Round] and len(index.retired) == 2


def test_a_retired_round_gives_back_its_input_requests_exactly_whichever_form_kept_them():
    """A round of a canonical message keeps its inputRequests in orjson's form, any other in marshal's
    (a value orjson would not write back: an integer past 64 bits, a float written `1E5`): both read
    back equal, with the same types."""
    from mrtr_inspect.core.messages import decode_message
    from mrtr_inspect.core.retired import retire

    chain = Chain(1, decode_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}'), "p", "d")
    first = ChainRequest(chain, decode_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}'),
                         None)
    chain.requests.append(first)
    asks = {"a": {"method": "elicitation/create", "params": {"message": "é\u2028\\\"", "n": -0.0, "f": 0.1, "i": 2**63}}}
    canonical = decode_message(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "input_required", "inputRequests": asks, "requestState": "s"}}, ensure_ascii=False,
        separators=(",", ":")).encode())
    other = decode_message(b'{"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": '
                           b'{"a": {"n": 1E5, "i": 123456789012345678901234567890}}, "requestState": "s"}}')
    assert canonical.canonical and not other.canonical
    for irr in (canonical, other):
        chain.rounds = [Round(chain, 1, first, irr)]
        (kept,) = retire(chain)
        assert isinstance(kept._asked, str) == irr.canonical  # orjson's form; marshal's in a tuple
        got = kept.input_requests
        assert got == irr.result["inputRequests"] and json.dumps(got) == json.dumps(irr.result["inputRequests"])


def _counted_by_id(chain) -> int:
    """The references a chain's objects hold to one another, each looked up among their ids (the
    count `release` made before it counted them from the stitcher's structure)."""
    reqs, rounds = chain.requests, chain.rounds
    objs: list = [chain, reqs, rounds]
    refs: list = [reqs, rounds, *reqs, *rounds]
    for r in reqs:
        objs.append(r)
        link = r.link
        refs += (r.chain, r.round, link)
        if link is not None:
            objs += (link, link.earlier)
            refs += (link.chain, link.round, link.creq, link.earlier, *link.earlier)
    for rd in rounds:
        objs += (rd, rd.retries)
        refs += (rd.chain, rd.request, rd.retries, *rd.retries)
    if chain.asks:
        objs.append(chain.asks)
        refs.append(chain.asks)
        for q in chain.asks:
            objs.append(q)
            refs += (q, q.chain, q.request)
    ids = {id(o) for o in objs}
    assert len(ids) == len(objs)  # each object listed once
    return sum(id(x) in ids for x in refs)


def test_the_references_a_closed_chain_holds_to_itself_are_counted_exactly(monkeypatch):
    """`release` counts a chain's references to itself from the stitcher's structure: on every chain of
    the fixture recordings (stdio and HTTP, legacy chains, refused and abandoned ones) and on replays
    of closed chains' states (links to retired rounds), the count is the one every reference looked up
    by id gives, and the chains are released."""
    from pathlib import Path

    from mrtr_inspect.adapters.offline import frames_of
    from mrtr_inspect.core import chains, retired
    from tests.captures import capture_frames, capture_names

    seen: list[tuple[int, int]] = []
    replays, legacy = [0], [0]
    real = retired.release

    def checking(chain) -> None:
        seen.append((retired._parts(chain)[1], _counted_by_id(chain)))
        replays[0] += any(r.link is not None and r.link.round.chain is not chain for r in chain.requests)
        legacy[0] += bool(chain.asks)
        box = [chain]
        del chain
        real(box.pop())

    monkeypatch.setattr(chains, "release", checking)

    def flush(insp: Analysis) -> None:  # the last chains closed, released as if as many closed after them
        closed = insp.inspector.stitcher._closed
        while closed:
            checking(closed.popleft())

    root = Path(__file__).resolve().parents[2] / "fixtures"
    recordings = sorted(str(p) for p in root.rglob("*.jsonl") if p.parent.name != "captures")
    assert len(recordings) >= 10
    for rec in recordings:
        insp = Analysis()
        for frame in frames_of([rec]):
            insp.feed(frame)
        insp.close()
        flush(insp)
    for name in capture_names():  # the SDK captures, in their own format
        insp = Analysis()
        for frame in capture_frames(name):
            insp.feed(frame)
        insp.close()
        flush(insp)
    # replays of the states of closed chains: each starts a chain of its own, linked to a retired round
    insp = Analysis(Config(remembered_states=REMEMBERED))
    clock = Clock()
    feed_all(insp, stdio_frames(range(40), clock))
    for n in range(40):
        _, retry = chain_messages(n)[2]
        for k in range(2):
            rid = f'"id":{1000 + 2 * n + k},'.encode()
            insp.feed(StdioLine(clock(), "s", "c2s", retry.replace(f'"id":{2 * n + 2},'.encode(), rid)))  # type: ignore[arg-type]
            insp.feed(StdioLine(clock(), "s", "s2c", chain_messages(n)[3][1].replace(  # type: ignore[arg-type]
                f'"id":{2 * n + 2},'.encode(), rid)))
    insp.close()
    flush(insp)
    assert len(seen) > 150 and replays[0] >= 80 and legacy[0] >= 5
    assert [a for a, _ in seen] == [b for _, b in seen]


def test_a_closed_chains_rounds_are_made_when_a_state_of_it_is_looked_up_as_they_were_at_its_close():
    """The state index keeps a record of a closed chain and makes its retired rounds when one of its
    states is looked up (most never are): the rounds are those of its close (its requests answered
    then, as KeptRequests; a request still in flight, the request itself, which a late answer still
    reaches), and a round keeps those before it even when their states are forgotten."""
    from mrtr_inspect.core.chains import Stitcher
    from mrtr_inspect.core.messages import decode_message

    def msg(i: int, raw: str, t: float):
        m = decode_message(raw.encode())
        m.index, m.time, m.era = i, t, "modern"
        return m

    s = Stitcher(retired_states=2)
    call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{}%s}}'
    irr = ('{"jsonrpc":"2.0","id":%d,"result":{"resultType":"input_required","inputRequests":{"k%d":{"method":'
           '"roots/list"}},"requestState":"%s"}}')
    first, _ = s.on_request(msg(0, call % (1, ""), 1.0), "p", True)
    s.on_response(first, msg(1, irr % (1, 1, "s1"), 2.0))
    retry, _ = s.on_request(msg(2, call % (2, ',"inputResponses":{"k1":{"roots":[]}},"requestState":"s1"'), 3.0), "p", True)
    s.on_response(retry, msg(3, irr % (2, 2, "s2"), 4.0))
    last, _ = s.on_request(msg(4, call % (3, ',"inputResponses":{"k2":{"roots":[]}},"requestState":"s2"'), 5.0), "p", True)
    s.close_all(6.0)  # the last retry still in flight: the chain closes open
    index = s._states
    assert all(type(x) is tuple for rounds in index._rounds.values() for x in rounds)  # nothing made yet
    # another chain's state: the first state of the chain is forgotten (2 remembered)
    other, _ = s.on_request(msg(10, call % (10, ""), 7.0), "p", True)
    s.on_response(other, msg(11, irr % (10, 9, "other"), 7.5))
    s.close_all(8.5)  # (abandoned)
    assert index.get(state_hash("s1")) is None
    (rd2,) = index.get(state_hash("s2"))
    assert type(rd2) is RetiredRound and rd2.n == 2 and rd2.state == "s2" and rd2.input_requests == {"k2": {"method": "roots/list"}}
    assert [rd.n for rd in rd2.chain.rounds] == [1, 2] and rd2.chain.outcome == "open" and rd2.chain.id == "c1"
    rd1 = rd2.chain.rounds[0]
    assert [type(r).__name__ for r in rd2.chain.requests] == ["KeptRequest", "KeptRequest", "ChainRequest"]
    assert rd1.request is rd2.chain.requests[0] and rd1.retries == [rd2.chain.requests[1]] and rd2.retries[0] is last
    assert rd2.request is rd2.chain.requests[1] and rd2.chain.requests[1].response_kind == "input_required"
    assert last.in_flight and index.get(state_hash("s2")) == [rd2]  # made once
    s.on_response(last, msg(20, '{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[]}}', 9.0))
    assert not rd2.retries[0].in_flight and rd2.retries[0].response_kind == "result"  # the late answer reached it


def test_a_rounds_request_of_no_other_chain_is_kept_as_it_is():
    """A round's request and retries are requests of its chain by construction; one that is not (a
    chain put together by hand) is kept as it is in the retired round, as it was before the record."""
    from mrtr_inspect.core.messages import decode_message
    from mrtr_inspect.core.retired import KeptRequest, retire

    def req(i: int):
        m = decode_message(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t"}}' % i)
        return m

    chain = Chain(1, req(1), "p", "d")
    first = ChainRequest(chain, req(1), None)
    first.answer("input_required")
    chain.requests.append(first)
    irr = decode_message(b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}')
    rd = Round(chain, 1, first, irr)
    chain.rounds = [rd]
    stranger = ChainRequest(Chain(2, req(2), "p", "d"), req(2), rd)
    stranger.answer("result")
    rd.retries.append(stranger)
    (kept,) = retire(chain)
    assert type(kept.request) is KeptRequest and kept.request is kept.chain.requests[0]
    assert kept.retries == [stranger]
