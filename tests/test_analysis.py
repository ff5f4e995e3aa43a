"""analysis.py: the Inspector, then the rule engine. Per frame, what the Inspector returns, then the
findings its observations led to, judged after the frame."""

from __future__ import annotations

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded
from tests.traffic import ACCEPT, ELICIT, Traffic


def _reused_id() -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, id=a, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.result(b, {"content": []})
    return t


def test_each_frame_gives_the_inspectors_outputs_then_its_findings():
    t = _reused_id()
    a, insp = Analysis(), Inspector()
    found = []
    for f in t.frames:
        outs, core = a.feed(f), insp.feed(f)
        kinds = [type(o) for o in outs]
        n = len(core)
        assert [(type(o), getattr(o, "index", None), getattr(o, "kind", None)) for o in outs[:n]] == \
            [(type(o), getattr(o, "index", None), getattr(o, "kind", None)) for o in core]
        assert set(kinds[n:]) <= {Finding} and {Message, ChainEvent} >= set(kinds[:n])
        found += outs[n:]
    assert a.close() == [] and insp.close() == []
    assert "retry-reused-id" in {f.rule for f in found}
    [f] = [f for f in found if f.rule == "retry-reused-id"]
    assert f.chain == "c1" and f.time == t.frames[3].time  # the time of the frame


def test_the_observer_sees_every_observation_before_the_rules():
    seen = []
    a = Analysis(observe=seen.append)
    for f in _reused_id().frames:
        a.feed(f)
    assert [type(o) for o in seen].count(Decoded) == 4


def test_an_observer_that_fails_leaves_the_rules_the_observation_and_is_an_inspector_error():
    def broken(obs):
        if type(obs) is Decoded and obs.msg.index == 0:
            raise KeyError("observer")

    t = Traffic()
    t.line("c2s", b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}')
    t.line("c2s", b'{"jsonrpc":"1.0","id":2,"method":"tools/list"}')
    a = Analysis(observe=broken)
    outs = [o for f in t.frames for o in a.feed(f)]
    found = [(o.rule, o.messages) for o in outs if type(o) is Finding]
    # the rules judged the message the observer failed on; the failure stopped that frame, not the next
    assert found == [("jsonrpc-envelope-invalid", [0]), ("inspector-error", []), ("jsonrpc-envelope-invalid", [1])]
    [err] = [o for o in outs if type(o) is Finding and o.rule == "inspector-error"]
    assert err.message.startswith("could not analyse a StdioLine frame: KeyError: 'observer'")
