"""Memory grows with open chains, not with traffic (docs/architecture.md), checked by counting what
the inspector holds after a long run of completed chains; no timing involved."""

from __future__ import annotations

import gc
import json
import sys
import types
from collections.abc import Iterator

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.config import Config
from mrtr_inspect.core.chains import Chain, ChainRequest, RetiredChain, RetiredRound, Round, state_hash
from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, StdioLine
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded, Linked

REMEMBERED = 50
META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":'
        '{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}')
ASK = ('{"ok":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object",'
       '"properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}}')
SERVER = '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}'
DONE = '{"resultType":"complete","content":[],' + SERVER + '}'


def chain_messages(i: int, state: str | None = None) -> list[tuple[str, bytes]]:
    """Chain i: a tools/call, an input_required with its own state, the retry, the final result."""
    a, b = 2 * i + 1, 2 * i + 2
    st = state or f"state-{i}"
    call = f'"method":"tools/call","params":{{"name":"deploy","arguments":{{"n":{i}}},'
    msgs = [
        ("c2s", f'{{"jsonrpc":"2.0","id":{a},{call}{META}}}}}'),
        ("s2c", f'{{"jsonrpc":"2.0","id":{a},"result":{{"resultType":"input_required","inputRequests":{ASK},'
                f'"requestState":"{st}",{SERVER}}}}}'),
        ("c2s", f'{{"jsonrpc":"2.0","id":{b},{call}"inputResponses":{{"ok":{{"action":"accept","content":{{"ok":true}}}}}},'
                f'"requestState":"{st}",{META}}}}}'),
        ("s2c", f'{{"jsonrpc":"2.0","id":{b},"result":{DONE}}}'),
    ]
    return [(d, m.encode()) for d, m in msgs]


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def stdio_frames(chains: range, clock: Clock) -> Iterator[StdioLine]:
    for i in chains:
        for d, raw in chain_messages(i):
            yield StdioLine(clock(), "s", d, raw)  # type: ignore[arg-type]


REQUEST_HEADERS = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
                   ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "deploy"))


def http_frames(chains: range, clock: Clock) -> Iterator:
    x = 0
    for i in chains:
        msgs = chain_messages(i)
        for (_, req), (_, resp) in (msgs[0:2], msgs[2:4]):
            x += 1
            yield HttpRequest(clock(), "h", x, "POST", "/mcp", REQUEST_HEADERS, req, "10.0.0.1")
            yield HttpResponse(clock(), "h", x, 200, (("content-type", "application/json"),))
            yield HttpBody(clock(), "h", x, resp)
            yield HttpEnd(clock(), "h", x)


def rule_memory(insp: Analysis) -> int:
    """Entries the rules keep in ctx.mem (one level down)."""
    return sum(len(v) + sum(len(x) for x in v.values() if hasattr(x, "__len__")) for v in insp.engine.ctx._mem.values())


def assert_nothing_kept(insp: Analysis) -> None:
    s = insp.inspector.stitcher
    assert s._open_chains == {} and s._open_by_peer == {}
    assert s.open_chains == []
    assert len(s._retired) <= REMEMBERED and len(s._state_index) <= REMEMBERED
    assert len(s._completed) <= REMEMBERED and len(s._stray_states) <= REMEMBERED
    assert insp.inspector._http == {}
    assert rule_memory(insp) < 1000


def feed_all(insp: Analysis, frames) -> tuple[int, set[str]]:
    """Feed; returns how many chains closed and the rules that reported more than info."""
    closed, rules = 0, set()
    for f in frames:
        for o in insp.feed(f):
            if type(o) is ChainEvent and o.kind == "closed":
                closed += 1
                assert len(insp.inspector.stitcher._open_chains) == 0  # the chain just closed is already forgotten
            elif type(o) is Finding and o.severity != "info":
                rules.add(o.rule)
    return closed, rules


def test_200k_stdio_messages_of_completed_chains_leave_nothing_but_a_bounded_state_index():
    insp = Analysis(Config(remembered_states=REMEMBERED))
    clock = Clock()
    n = 50_000  # 4 messages each
    closed, rules = feed_all(insp, stdio_frames(range(n), clock))
    assert insp.inspector.messages == 4 * n == 200_000
    assert closed == n
    assert rules == set()  # clean traffic: what is measured is the chains, not findings
    assert_nothing_kept(insp)
    assert len(insp.inspector.exchanges.client_scope("s")) == 0

    # the bound is the remembered states: a recent state is still recognised when replayed, an old one
    # is forgotten
    insp.config.disabled.add("chain-linked")
    outs = []
    for i, st in ((n, f"state-{n - 1}"), (n + 1, "state-0")):
        d, raw = chain_messages(i, st)[2]
        outs += insp.feed(StdioLine(clock(), "s", d, raw))  # type: ignore[arg-type]
    found = [(o.rule, o.messages[-1]) for o in outs if type(o) is Finding]
    assert ("request-state-replayed", 200_000) in found
    assert ("request-state-unsolicited", 200_001) in found


def test_http_exchanges_of_completed_chains_are_forgotten():
    insp = Analysis(Config(remembered_states=REMEMBERED))
    n = 2_000
    closed, rules = feed_all(insp, http_frames(range(n), Clock()))
    assert insp.inspector.messages == 4 * n and closed == n and rules == set()
    assert_nothing_kept(insp)
    assert all(len(scope) == 0 for scope in insp.inspector.exchanges._client.values())


def _reachable(root) -> list:
    """The objects reachable from `root` (classes, modules and functions left out)."""
    seen, stack, out = set(), list(gc.get_referents(root)), []
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(x))
        out.append(x)
        stack.extend(gc.get_referents(x))
    return out


def test_what_closed_chains_keep_for_replays_holds_no_message_and_no_parsed_input_requests():
    insp = Analysis(Config(remembered_states=REMEMBERED))
    clock = Clock()
    feed_all(insp, stdio_frames(range(20), clock))
    index = insp.inspector.stitcher._state_index
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
            for d, raw in chain_messages(i, f"gone-{i}"):
                insp.feed(StdioLine(clock(), "s", d, raw))  # type: ignore[arg-type]
        objects = gc.get_objects()
        rounds = [o for o in objects if type(o) is RetiredRound and o.state.startswith("gone-")]
        orphans = [o for o in objects if type(o) is RetiredChain and not o.rounds]
    finally:
        gc.enable()
    assert len(insp.inspector.stitcher._state_index) == REMEMBERED
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
