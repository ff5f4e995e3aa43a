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
