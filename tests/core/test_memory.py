"""Memory grows with open chains, not with traffic (docs/architecture.md), checked by counting what
the inspector holds after a long run of completed chains; no timing involved."""

from __future__ import annotations

from collections.abc import Iterator

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, StdioLine
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector

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


def rule_memory(insp: Inspector) -> int:
    """Entries the rules keep in ctx.mem (one level down)."""
    return sum(len(v) + sum(len(x) for x in v.values() if hasattr(x, "__len__")) for v in insp.engine.ctx._mem.values())


def assert_nothing_kept(insp: Inspector) -> None:
    s = insp.stitcher
    assert s._open_chains == {} and s._open_by_peer == {}
    assert s.open_chains == []
    assert len(s._retired) <= REMEMBERED and len(s._state_index) <= REMEMBERED
    assert len(s._completed) <= REMEMBERED and len(s._stray_states) <= REMEMBERED
    assert insp._http == {}
    assert rule_memory(insp) < 1000


def feed_all(insp: Inspector, frames) -> tuple[int, set[str]]:
    """Feed; returns how many chains closed and the rules that reported more than info."""
    closed, rules = 0, set()
    for f in frames:
        for o in insp.feed(f):
            if type(o) is ChainEvent and o.kind == "closed":
                closed += 1
                assert len(insp.stitcher._open_chains) == 0  # the chain just closed is already forgotten
            elif type(o) is Finding and o.severity != "info":
                rules.add(o.rule)
    return closed, rules


def test_200k_stdio_messages_of_completed_chains_leave_nothing_but_a_bounded_state_index():
    insp = Inspector(Config(remembered_states=REMEMBERED))
    clock = Clock()
    n = 50_000  # 4 messages each
    closed, rules = feed_all(insp, stdio_frames(range(n), clock))
    assert insp.messages == 4 * n == 200_000
    assert closed == n
    assert rules == set()  # clean traffic: what is measured is the chains, not findings
    assert_nothing_kept(insp)
    assert len(insp.exchanges.client_scope("s")) == 0

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
    insp = Inspector(Config(remembered_states=REMEMBERED))
    n = 2_000
    closed, rules = feed_all(insp, http_frames(range(n), Clock()))
    assert insp.messages == 4 * n and closed == n and rules == set()
    assert_nothing_kept(insp)
    assert all(len(scope) == 0 for scope in insp.exchanges._client.values())


def test_what_closed_chains_keep_for_replays_holds_no_message():
    insp = Inspector(Config(remembered_states=REMEMBERED))
    feed_all(insp, stdio_frames(range(20), Clock()))
    kept = [rd for rounds in insp.stitcher._state_index.values() for rd in rounds]
    assert len(kept) == 20
    for rd in kept:
        assert rd.chain.closed
        for r in rd.chain.requests:
            assert r.msg is None and (r.link is None or (r.link.request is None and r.link.earlier == []))
