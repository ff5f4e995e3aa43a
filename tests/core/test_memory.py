"""Memory grows with open chains, not with traffic (docs/architecture.md), checked by counting what
the inspector holds after a long run of completed chains; no timing involved."""

from __future__ import annotations

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import StdioLine
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.analysis import Analysis
from tests.core.completed_chains import REMEMBERED, Clock, chain_messages, feed_all, http_frames, stdio_frames


def rule_memory(insp: Analysis) -> int:
    """Entries the rules keep in ctx.mem (one level down)."""
    return sum(len(v) + sum(len(x) for x in v.values() if hasattr(x, "__len__")) for v in insp.engine.ctx._mem.values())


def assert_nothing_kept(insp: Analysis) -> None:
    s = insp.inspector.stitcher
    assert s._open_chains == {} and s._open_by_peer == {}
    assert s.open_chains == []
    assert len(s._states.retired) <= REMEMBERED and len(s._states.rounds) <= REMEMBERED
    assert len(s._completed) <= REMEMBERED and len(s._stray_states) <= REMEMBERED
    assert insp.inspector._http == {}
    assert rule_memory(insp) < 1000


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
