"""The rule engine: plans per kind, method, direction and transport; each rule its own context."""

from __future__ import annotations

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Answered, Decoded, SessionOver
from mrtr_inspect.rules import load_rules, registry
from mrtr_inspect.rules.registry import Rule, RuleEngine

load_rules()  # inspector-error, which the engine reports for a failing check, is a rule of rules/tool.py


def _msg(kind: str, transport: str) -> Message:
    m = Message()
    m.kind, m.method, m.direction, m.transport, m.index = kind, "tools/call", "c2s", transport, 1
    return m


def test_transports_narrow_decoded_and_answered_only(monkeypatch):
    seen: list = []

    def check(obs, ctx):
        seen.append((ctx._rule.id, type(obs).__name__))
        ctx.mem["n"] = ctx.mem.get("n", 0) + 1

    rules = {
        "any": Rule("any", "info", "s", on=(Decoded, SessionOver), check=check),
        "http-only": Rule("http-only", "info", "s", on=(Decoded, SessionOver), transports=frozenset({"http"}),
                          check=check),
    }
    monkeypatch.setattr(registry, "REGISTRY", rules)
    engine = RuleEngine(Config())
    engine.dispatch(Decoded(_msg("request", "stdio")))
    engine.dispatch(Decoded(_msg("request", "http"), object()))
    engine.dispatch(SessionOver("s", "stdio", 1.0, {}))
    assert seen == [("any", "Decoded"), ("any", "Decoded"), ("http-only", "Decoded"), ("any", "SessionOver"),
                    ("http-only", "SessionOver")]
    # each rule's memory is its own, and the engine's context sees all of them by rule id
    assert engine.ctx._mem == {"": {}, "any": {"n": 3}, "http-only": {"n": 2}}


def test_eras_narrow_decoded_and_answered_only(monkeypatch):
    """A rule naming eras is not called for messages of another era (a response's era is its
    request's); observations of other types reach it whatever the era."""
    from mrtr_inspect.core.era import LEGACY, MODERN

    seen: list = []

    def check(obs, ctx):
        seen.append((ctx._rule.id, type(obs).__name__, getattr(getattr(obs, "msg", None), "era", None)))

    rules = {
        "any": Rule("any", "info", "s", on=(Decoded, SessionOver), check=check),
        "legacy-only": Rule("legacy-only", "info", "s", on=(Decoded, SessionOver), eras=frozenset({LEGACY}),
                            check=check),
    }
    monkeypatch.setattr(registry, "REGISTRY", rules)
    engine = RuleEngine(Config())
    modern, legacy = _msg("request", "stdio"), _msg("request", "stdio")
    modern.era, legacy.era = MODERN, LEGACY
    engine.dispatch(Decoded(modern))
    engine.dispatch(Decoded(legacy))
    engine.dispatch(SessionOver("s", "stdio", 1.0, {}))
    assert seen == [("any", "Decoded", MODERN), ("any", "Decoded", LEGACY), ("legacy-only", "Decoded", LEGACY),
                    ("any", "SessionOver", None), ("legacy-only", "SessionOver", None)]


def test_a_failing_rule_becomes_an_inspector_error_naming_it(monkeypatch):
    def broken(obs, ctx):
        raise KeyError("x")

    rules = {"broken": Rule("broken", "error", "s", on=(Decoded,), check=broken),
             "inspector-error": registry.REGISTRY["inspector-error"]}
    monkeypatch.setattr(registry, "REGISTRY", rules)
    engine = RuleEngine(Config())
    engine.dispatch(Decoded(_msg("request", "stdio")))
    (f,) = engine.drain()
    assert f.rule == "inspector-error" and f.details == {"rule": "broken"} and "rule broken failed" in f.message


def _result(result) -> Answered:
    resp = _msg("result", "stdio")
    resp.direction, resp.result = "s2c", result
    return Answered(resp, _msg("request", "stdio"))


def test_results_reach_the_rules_of_their_result_type(monkeypatch):
    seen: list = []

    def check(obs, ctx):
        seen.append(ctx._rule.id)

    kinds = {"result": ["result"], "irr": ["input_required"], "task": ["task"], "other": ["other_result"],
             "other-or-task": ["other_result", "task"]}
    monkeypatch.setattr(registry, "REGISTRY", {
        name: Rule(name, "info", "s", on=(Answered,), kinds=frozenset(k), check=check) for name, k in kinds.items()})
    engine = RuleEngine(Config())
    expected = {"input_required": ["result", "irr"], "task": ["result", "task", "other-or-task"],
                "complete": ["result", "other", "other-or-task"], None: ["result", "other", "other-or-task"],
                7: ["result", "other", "other-or-task"]}
    for rt, rules in expected.items():
        seen.clear()
        engine.dispatch(_result({"resultType": rt} if rt is not None else {}))
        assert seen == rules, rt


def test_a_gate_is_tested_once_for_its_run_of_rules_and_skips_them_when_false(monkeypatch):
    seen: list = []
    gate_calls: list = []
    state = {"open": False}

    def gate(obs):
        gate_calls.append(1)
        if state["open"] is None:
            raise ValueError("broken gate")
        return state["open"]

    def check(obs, ctx):
        seen.append(ctx._rule.id)
        if ctx._rule.id == "g2" and state["open"] is None:
            raise ValueError("broken check")

    def rule(name, g=None):
        return Rule(name, "info", "s", on=(SessionOver,), check=check, gate=g)

    monkeypatch.setattr(registry, "REGISTRY", {
        "a": rule("a"), "g1": rule("g1", gate), "g2": rule("g2", gate), "b": rule("b"), "g3": rule("g3", gate),
        "inspector-error": registry.REGISTRY["inspector-error"]})
    engine = RuleEngine(Config())
    over = SessionOver("s", "stdio", 1.0, {})
    engine.dispatch(over)
    assert seen == ["a", "b"] and len(gate_calls) == 2  # one test per run of consecutive gated rules
    state["open"], seen[:], gate_calls[:] = True, [], []
    engine.dispatch(over)
    assert seen == ["a", "g1", "g2", "b", "g3"] and len(gate_calls) == 2
    # a gate that raises lets its rules run (and fail) as they would without it
    state["open"], seen[:] = None, []
    engine.dispatch(over)
    assert seen == ["a", "g1", "g2", "b", "g3"]
    assert [f.details for f in engine.drain()] == [{"rule": "g2"}]


def test_where_narrows_other_observations_by_their_attributes(monkeypatch):
    from dataclasses import dataclass

    @dataclass
    class Seen:
        state: object
        flag: bool = False

    seen: list = []

    def check(obs, ctx):
        seen.append(ctx._rule.id)

    monkeypatch.setattr(registry, "REGISTRY", {
        "all": Rule("all", "info", "s", on=(Seen,), check=check),
        "dropped": Rule("dropped", "info", "s", on=(Seen,), where=(("state", frozenset({"dropped"})),), check=check),
        "flag": Rule("flag", "info", "s", on=(Seen,), where=(("flag", frozenset({True})),), check=check),
    })
    engine = RuleEngine(Config())
    for obs, rules in [(Seen("echoed"), ["all"]), (Seen("dropped"), ["all", "dropped"]),
                       (Seen("dropped", True), ["all", "dropped", "flag"]), (Seen("echoed", True), ["all", "flag"]),
                       (Seen(["unhashable"]), ["all", "dropped", "flag"])]:  # then every rule decides for itself
        seen.clear()
        engine.dispatch(obs)
        assert seen == rules, obs
    with pytest.raises(ValueError):
        registry.rule("x", "info", summary="s", on=Decoded, where={"kind": ["request"]})


def test_where_reads_an_attribute_of_an_attribute(monkeypatch):
    from dataclasses import dataclass

    @dataclass
    class Chain:
        outcome: object

    @dataclass
    class Closed:
        chain: Chain

    seen: list = []

    def check(obs, ctx):
        seen.append(ctx._rule.id)

    monkeypatch.setattr(registry, "REGISTRY", {
        "error": Rule("error", "info", "s", on=(Closed,), where=(("chain.outcome", frozenset({"error"})),),
                      check=check),
        "any": Rule("any", "info", "s", on=(Closed,), check=check),
    })
    engine = RuleEngine(Config())
    for outcome, rules in [("error", ["error", "any"]), ("complete", ["any"]), (["unhashable"], ["error", "any"])]:
        seen.clear()
        engine.dispatch(Closed(Chain(outcome)))
        assert seen == rules, outcome


def test_methods_per_kind_narrow_each_kind_to_its_own_methods(monkeypatch):
    seen: list = []

    def check(obs, ctx):
        seen.append(ctx._rule.id)

    monkeypatch.setattr(registry, "REGISTRY", {})
    registry.rule("per-kind", "info", summary="s", on=(Decoded, Answered),
                  methods={"request": ["tasks/update"], "result": ["tasks/get"], "task": ["tools/call"]})(check)

    def request(method: str) -> Decoded:
        m = _msg("request", "stdio")
        m.method = method
        return Decoded(m)

    def answered(method: str, result: dict) -> Answered:
        a = _result(result)
        a.request.method = method
        return a

    engine = RuleEngine(Config())
    cases = [(request("tasks/update"), True), (request("tools/call"), False), (request("tasks/get"), False),
             (answered("tools/call", {"resultType": "task"}), True),  # "task" results of tools/call
             (answered("tools/call", {"resultType": "complete"}), False),
             (answered("tools/call", {"resultType": "input_required"}), False),
             (answered("tasks/get", {"resultType": "complete"}), True),  # "result": every result kind
             (answered("tasks/get", {"resultType": "task"}), True),
             (answered("tasks/update", {"resultType": "task"}), False)]
    for obs, reached in cases:
        seen.clear()
        engine.dispatch(obs)
        assert seen == (["per-kind"] if reached else []), obs
    assert registry.REGISTRY["per-kind"].kinds == {"request", "result", "task"}
    with pytest.raises(ValueError):  # a kind with methods that kinds= leaves out
        registry.rule("y", "info", summary="s", on=Decoded, kinds=["request"], methods={"notification": ["x"]})


# --- passes ------------------------------------------------------------------------------------------------------


def _pass_registry(monkeypatch) -> None:
    """An empty registry (but for inspector-error), so that a test declares its own rules and passes."""
    monkeypatch.setattr(registry, "REGISTRY", {"inspector-error": registry.REGISTRY["inspector-error"]})


def _decoded(kind: str, session: str = "s1") -> Decoded:
    m = _msg(kind, "stdio")
    m.session = session
    return Decoded(m)


def test_a_pass_runs_each_check_once_per_message_of_its_kinds_and_each_emits_its_own_id(monkeypatch):
    _pass_registry(monkeypatch)
    calls: list = []
    states: list = []

    def emit(obs, ctx, *st):
        calls.append(ctx.rule.id)
        ctx.emit(f"{ctx.rule.id} on {obs.msg.kind}")

    registry.rule("before", "info", summary="s", on=Decoded)(emit)
    p = registry.Pass("p", state=lambda ctx: states.append(ctx) or {"n": 0})
    p.check("on-requests", "error", summary="s", kinds=["request"])(emit)
    p.check("on-results", "warning", summary="s", kinds=["result"])(emit)
    p.check("on-both", "info", summary="s", kinds=["request", "result"])(emit)
    registry.rule("after", "info", summary="s", on=Decoded)(emit)
    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    assert calls == ["before", "on-requests", "on-both", "after"]  # the pass where its first check is registered
    calls.clear()
    engine.dispatch(_decoded("result"))
    assert calls == ["before", "on-results", "on-both", "after"]
    calls.clear()
    engine.dispatch(_decoded("notification"))
    assert calls == ["before", "after"]
    # one dispatch into the pass per message: the engine's plan holds the pass once, with only its checks
    # that can apply to the key
    plan = engine._cache[(Decoded, "request", None, "c2s", "stdio", Message().era)]
    assert len(plan) == 3 and [ctx.rule.id for _, ctx in plan[1][1].checks] == ["on-requests", "on-both"]
    assert [(f.rule, f.severity, f.message) for f in engine.drain()] == [
        ("before", "info", "before on request"), ("on-requests", "error", "on-requests on request"),
        ("on-both", "info", "on-both on request"), ("after", "info", "after on request"),
        ("before", "info", "before on result"), ("on-results", "warning", "on-results on result"),
        ("on-both", "info", "on-both on result"), ("after", "info", "after on result"),
        ("before", "info", "before on notification"), ("after", "info", "after on notification")]
    assert len(states) == 1  # one state for the session, kept across its messages


def test_a_failing_check_becomes_an_inspector_error_naming_it_and_the_others_still_run(monkeypatch):
    _pass_registry(monkeypatch)
    p = registry.Pass("p", state=lambda ctx: {})

    @p.check("broken", "error", summary="s")
    def broken(obs, ctx, st):
        raise KeyError("x")

    @p.check("fine", "error", summary="s")
    def fine(obs, ctx, st):
        ctx.emit("still checked")

    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    err, ok = engine.drain()
    assert err.rule == "inspector-error" and err.details == {"rule": "broken"} and "rule broken failed" in err.message
    assert ok.rule == "fine" and ok.message == "still checked"


def test_a_pass_keeps_its_state_per_session_and_drops_it_when_the_session_ends(monkeypatch):
    _pass_registry(monkeypatch)
    p = registry.Pass("p", state=lambda ctx: [])

    @p.check("count", "info", summary="s")
    def count(obs, ctx, seen):
        seen.append(obs.msg.kind)
        ctx.emit(f"{len(seen)}")

    engine = RuleEngine(Config())
    for obs in (_decoded("request"), _decoded("result"), _decoded("request", "s2"), SessionOver("s1", "stdio", 1.0, {}),
                _decoded("request")):
        engine.dispatch(obs)
    assert [f.message for f in engine.drain()] == ["1", "2", "1", "1"]  # s1, s1, s2, then s1 anew
    assert list(engine._passes[p].states) == ["s2", "s1"]


def test_update_runs_once_before_the_checks_and_what_it_returns_is_what_they_read(monkeypatch):
    _pass_registry(monkeypatch)
    seen: list = []
    updates: list = []

    def update(obs, st):
        updates.append(type(obs).__name__)
        if type(obs) is Decoded:
            st["marks"].append(obs.msg.kind)
        return None if type(obs) is Decoded and obs.msg.method == "skip" else st

    # update sees requests, results and SessionOver (which no check sees); the checks see requests
    p = registry.Pass("p", state=lambda ctx: {"marks": []}, update=update, update_on=(Decoded, SessionOver),
                      kinds=["request", "result"])

    @p.check("a", "info", summary="s", kinds=["request"])
    def a(obs, ctx, st):
        seen.append(("a", list(st["marks"])))
        ctx.emit("a")

    @p.check("b", "info", summary="s", kinds=["request", "notification"])
    def b(obs, ctx, st):
        seen.append(("b", list(st["marks"])))
        ctx.emit("b")

    @p.also("a", kinds=["result"])
    def a_on_results(obs, ctx, st):
        ctx.emit("a, on a result")

    p.order(b, a)  # the report order; then the others (a_on_results) in registration order
    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    engine.dispatch(_decoded("result"))
    engine.dispatch(_decoded("notification"))  # not seen by update: b reads the state itself
    skipped = _decoded("request")
    skipped.msg.method = "skip"
    engine.dispatch(skipped)
    engine.dispatch(SessionOver("s1", "stdio", 1.0, {}))
    # the request's own mark is there for both checks, whichever runs first
    assert seen == [("b", ["request"]), ("a", ["request"]), ("b", ["request", "result"])]
    assert updates == ["Decoded", "Decoded", "Decoded", "SessionOver"]
    assert [(f.rule, f.message) for f in engine.drain()] == [("b", "b"), ("a", "a"), ("a", "a, on a result"),
                                                             ("b", "b")]
    with pytest.raises(ValueError):  # a function named more often than it is placed
        p.order(a, a)
        p.ordered()


def test_a_failing_update_is_an_inspector_error_naming_the_pass_and_its_checks_do_not_run(monkeypatch):
    _pass_registry(monkeypatch)
    ran: list = []

    def update(obs, st):
        raise ValueError("broken step")

    p = registry.Pass("p", state=lambda ctx: {}, update=update)
    p.check("a", "info", summary="s")(lambda obs, ctx, st: ran.append(1))
    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    (f,) = engine.drain()
    assert ran == [] and f.rule == "inspector-error" and f.details == {"rule": "p"} and "the p pass failed" in f.message


def test_findings_of_a_legacy_exchange_link_the_2025_11_25_page(monkeypatch):
    def check(obs, ctx):
        ctx.emit("x")

    monkeypatch.setattr(registry, "REGISTRY", {
        "r": Rule("r", "info", "s", on=(Decoded,), spec="basic/index.mdx#requests", conformance="c", check=check)})
    engine = RuleEngine(Config())
    for era in ("modern", "legacy"):
        obs = _decoded("request")
        obs.msg.era = era
        engine.dispatch(obs)
    modern, legacy = engine.drain()
    assert (modern.spec, modern.conformance) == ("basic/index.mdx#requests", "c")
    assert legacy.spec != modern.spec and legacy.spec is not None and legacy.conformance is None


def test_over_goes_item_by_item_through_a_run_of_checks(monkeypatch):
    _pass_registry(monkeypatch)
    p = registry.Pass("p", state=lambda ctx: {})

    def items(obs, st):
        return [1, 2]

    for name in ("x", "y"):
        p.check(name, "info", summary="s", over=items)(lambda obs, ctx, item: ctx.emit(f"{ctx.rule.id}{item}"))

    @p.check("z", "info", summary="s")
    def z(obs, ctx, st):
        ctx.emit("z")

    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    assert [f.message for f in engine.drain()] == ["x1", "y1", "x2", "y2", "z"]


def test_a_pass_runs_while_one_of_its_rules_is_enabled(monkeypatch):
    _pass_registry(monkeypatch)
    calls: list = []
    p = registry.Pass("p", state=lambda ctx: {})
    for name in ("a", "b"):
        p.check(name, "info", summary="s")(lambda obs, ctx, st: calls.append(ctx.rule.id) or ctx.emit("x"))
    engine = RuleEngine(Config(disabled={"a"}))
    engine.dispatch(_decoded("request"))
    assert calls == ["a", "b"]  # a disabled check still runs (its state may feed the others) ...
    assert [f.rule for f in engine.drain()] == ["b"]  # ... and its findings are dropped
    calls.clear()
    engine = RuleEngine(Config(disabled={"a", "b"}))
    engine.dispatch(_decoded("request"))
    assert calls == [] and p not in engine._passes


def test_a_gate_of_a_pass_is_tested_once_per_observation_and_skips_its_checks_when_false(monkeypatch):
    _pass_registry(monkeypatch)
    tested: list = []
    ran: list = []
    state = {"open": False}

    def gate(obs):
        tested.append(1)
        if state["open"] is None:
            raise ValueError("broken gate")
        return state["open"]

    p = registry.Pass("p", state=lambda ctx: {})
    for name, g in (("g1", gate), ("plain", None), ("g2", gate)):
        p.check(name, "info", summary="s", gate=g)(lambda obs, ctx, st: ran.append(ctx.rule.id))
    engine = RuleEngine(Config())
    engine.dispatch(_decoded("request"))
    assert ran == ["plain"] and len(tested) == 1  # the gated checks need not be consecutive
    state["open"], ran[:], tested[:] = True, [], []
    engine.dispatch(_decoded("request"))
    assert ran == ["g1", "plain", "g2"] and len(tested) == 1
    state["open"], ran[:] = None, []  # a gate that raises lets its checks run
    engine.dispatch(_decoded("request"))
    assert ran == ["g1", "plain", "g2"]
    with pytest.raises(ValueError):
        p.check("both", "info", summary="s", gate=gate, over=lambda obs, st: [])(lambda obs, ctx, st: None)


def test_a_pass_whose_gates_read_the_state_tests_them_after_update(monkeypatch):
    """With `gates_read_state`, a gate gets what `update` returned for the message: a check reading
    only that can be gated by it (skipped when the update found nothing for it)."""
    _pass_registry(monkeypatch)
    calls: list = []

    def update(obs, st):
        st["pending"] = obs.msg.index % 2 == 0
        return st

    p = registry.Pass("p", state=lambda ctx: {}, update=update, gates_read_state=True)
    p.check("pending-only", "info", summary="s", gate=lambda obs, st: st["pending"])(
        lambda obs, ctx, st: calls.append(obs.msg.index))
    engine = RuleEngine(Config())
    for i in range(4):
        d = _decoded("request")
        d.msg.index = i
        engine.dispatch(d)
    assert calls == [0, 2]
