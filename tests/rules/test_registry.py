"""The rule engine: plans per kind, method, direction and transport; each rule its own context."""

from __future__ import annotations

from mrtr_inspect.config import Config
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded, SessionOver
from mrtr_inspect.rules import registry
from mrtr_inspect.rules.registry import Rule, RuleEngine


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
