"""The rule registry and the engine that runs the rules.

A rule is a small documented unit, like a mitmproxy addon: one id (RULES.md spelling), one default
severity, one specification reference, the conformance-suite check id where one exists, and a check
that subscribes to one kind of observation (`core/observations.py`). Its docstring says what it
detects; `why`, `example` and `quote` feed `docs/rules.md` and the text of each finding.

    @rule("retry-reused-id", ERROR, on=Linked, section="4.2",
          spec="basic/patterns/mrtr.mdx#client-requirements-basic-workflow",
          conformance="sep-2322-client-jsonrpc-id-different",
          quote="The JSON-RPC id MUST be different between the initial request and the retry",
          summary="A retry reuses the JSON-RPC id of an earlier request of its chain.")
    def retry_reused_id(obs, ctx):
        ...
        ctx.emit("retry id 3 repeats …", messages=[...], chain=obs.chain.id)

The engine dispatches each observation to the rules that subscribe to its type, narrowed by the
message kinds and methods a rule names, so a message costs only the rules that can apply to it. A
rule that raises becomes an `inspector-error` finding; the pipeline goes on.
"""

from __future__ import annotations

import traceback
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..config import Config
from ..core.findings import ERROR, INFO, SEVERITIES, WARNING, Finding
from ..core.observations import Answered, Decoded

__all__ = ["Rule", "rule", "declare", "REGISTRY", "RuleEngine", "Context", "ERROR", "WARNING", "INFO"]

RESULT = "result"
INPUT_REQUIRED = "input_required"  # an `Answered` kind: a result whose resultType is "input_required"
TASK = "task"  # an `Answered` kind: a result whose resultType is "task" (a CreateTaskResult)
OTHER_RESULT = "other_result"  # an `Answered` kind: any other result (resultType "complete", absent, unknown…)


_RESULT_KINDS = (INPUT_REQUIRED, TASK)  # results a rule naming "result" gets besides the other results


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    summary: str
    section: str = ""
    spec: str | None = None
    quote: str | None = None
    conformance: str | None = None
    why: str = ""
    example: str = ""
    doc: str = ""
    on: tuple[type, ...] = ()
    kinds: frozenset[str] | None = None
    methods: frozenset[str] | None = None
    methods_by_kind: tuple[tuple[str, frozenset[str]], ...] = ()  # (kind, methods): methods= given per kind
    directions: frozenset[str] | None = None
    transports: frozenset[str] | None = None
    check: Callable[[Any, "Context"], None] | None = None
    gate: Callable[[Any], Any] | None = None  # a precondition shared with other rules: the check runs when it holds
    where: tuple[tuple[str, frozenset], ...] = ()  # (attribute, values): observations of other types it reaches
    observable: bool = True  # False: documented, but a passive observer cannot see it (✗)
    emitted_by: str | None = None  # a rule whose check emits this id (one check, several ids)

    @property
    def detects(self) -> str:
        return self.doc or self.summary


REGISTRY: dict[str, Rule] = {}


def _register(r: Rule) -> Rule:
    if r.severity not in SEVERITIES:
        raise ValueError(f"{r.id}: bad severity {r.severity!r}")
    if r.id in REGISTRY:
        raise ValueError(f"rule {r.id} registered twice")
    REGISTRY[r.id] = r
    return r


def rule(
    id: str,
    severity: str,
    *,
    summary: str,
    on: type | tuple[type, ...],
    section: str = "",
    spec: str | None = None,
    quote: str | None = None,
    conformance: str | None = None,
    why: str = "",
    example: str = "",
    kinds: Iterable[str] | None = None,
    methods: Iterable[str] | dict[str, Iterable[str]] | None = None,
    directions: Iterable[str] | None = None,
    transports: Iterable[str] | None = None,
    gate: Callable[[Any], Any] | None = None,
    where: dict[str, Iterable] | None = None,
) -> Callable:
    """Register the decorated function as the check of rule `id`.

    For `Answered`, `kinds` may name "input_required" (a result whose resultType is input_required),
    "task" (resultType task) and "other_result" (any other result); a rule naming "result" gets all
    three. `methods` may be given per kind, `{"request": ["tasks/update"], "task": ["tools/call"]}`: an
    observation of a kind then reaches the check only for the methods of the names its kind matches
    (`kinds` defaults to the names). `directions` is the direction of the response.
    `transports` ("stdio", "http") narrows the `Decoded` and `Answered` observations that reach the
    check to messages of those transports (name them only for a check that does nothing on the others);
    observations of other types are not narrowed by it.

    `gate` is a precondition that several rules share, a function of the observation: a check that
    can find nothing when it is false names it, and the gate is then computed once for a run of
    consecutive rules that name it (not per rule), which skips them all when it is false. It must be
    exactly what the check would find first (a gate that raises lets the checks run, and fail, as
    they would without it).

    `where` narrows the observations of the other types (`Linked`, `NotLinked`…) by the values of
    their attributes, `{"state": ["dropped"]}`: name it for a check that does nothing on the others."""
    if where and {Decoded, Answered} & set(on if isinstance(on, tuple) else (on,)):
        raise ValueError(f"{id}: where= narrows observations other than Decoded and Answered")
    by_kind: tuple[tuple[str, frozenset[str]], ...] = ()
    if isinstance(methods, dict):
        by_kind = tuple((k, frozenset(m)) for k, m in sorted(methods.items()))
        if kinds is None:
            kinds = methods
        elif not set(kinds) >= set(methods):
            raise ValueError(f"{id}: methods= names kinds that kinds= leaves out")
        methods = {m for _, ms in by_kind for m in ms}

    def deco(fn: Callable[[Any, "Context"], None]) -> Callable:
        _register(
            Rule(
                id=id, severity=severity, summary=summary, section=section, spec=spec, quote=quote,
                conformance=conformance, why=why, example=example, doc=_doc(fn),
                on=on if isinstance(on, tuple) else (on,),
                kinds=frozenset(kinds) if kinds is not None else None,
                methods=frozenset(methods) if methods is not None else None, methods_by_kind=by_kind,
                directions=frozenset(directions) if directions is not None else None,
                transports=frozenset(transports) if transports is not None else None,
                check=fn, gate=gate,
                where=tuple((a, frozenset(v)) for a, v in sorted(where.items())) if where else (),
            )
        )
        return fn

    return deco


def declare(id: str, severity: str, *, summary: str, section: str = "", spec: str | None = None,
            quote: str | None = None, conformance: str | None = None, why: str = "", example: str = "",
            doc: str = "", observable: bool = True, emitted_by: str | None = None) -> Rule:
    """Register a rule that has no check of its own: one emitted by another rule's check
    (`emitted_by`), or one a passive observer cannot see (`observable=False`)."""
    return _register(Rule(id=id, severity=severity, summary=summary, section=section, spec=spec, quote=quote,
                          conformance=conformance, why=why, example=example, doc=doc, observable=observable,
                          emitted_by=emitted_by))


def _key_of(attrs: list[str]) -> Callable[[Any], tuple]:
    """The values of these attributes of an observation, as a tuple."""
    get = attrgetter(*attrs)
    return get if len(attrs) > 1 else lambda obs: (get(obs),)


def _where(rules: list[Rule], values: dict[str, Any]) -> list[Rule]:
    """The rules whose `where` the attribute values satisfy."""
    return [r for r in rules if all(values[a] in allowed for a, allowed in r.where)]


def _kind_matches(name: str, kind: str | None, t: type) -> bool:
    """Whether a kind named by a rule (`kinds=`) takes an observation of type `t` and this kind."""
    return name == kind or (kind in _RESULT_KINDS and name == RESULT) or (
        kind == RESULT and t is Answered and name == OTHER_RESULT)


def _methods_ok(r: Rule, t: type, kind: str | None, method: str | None) -> bool:
    """Whether the rule's methods (all of them, or those of the names that match the kind) take this method."""
    if r.methods is None:
        return True
    if not r.methods_by_kind:
        return method in r.methods
    return any(method in ms for name, ms in r.methods_by_kind if _kind_matches(name, kind, t))


def _doc(fn: Callable) -> str:
    d = (fn.__doc__ or "").strip()
    return " ".join(d.split())


class Context:
    """What a check sees besides its observation: where to report, the pipeline's view, memory.

    Each rule has its own context (its `mem`, its id for `emit`); `RuleEngine.ctx` is the context of
    no rule, whose `_mem` holds every rule's memory by rule id."""

    __slots__ = ("engine", "view", "_rule", "_mem", "mem")

    def __init__(self, engine: "RuleEngine", rule: "Rule | None" = None, mems: dict[str, dict] | None = None) -> None:
        self.engine = engine
        #: what the rules may read of the pipeline besides their observations
        #: (`core.inspector.InspectorView`: in-flight requests, legacy sessions, each message's chain
        #: place, the time)
        self.view: Any = engine.view
        self._rule: Rule | None = rule
        self._mem: dict[str, dict] = mems if mems is not None else {}
        #: a dict private to the rule, kept across observations (keep it bounded)
        self.mem: dict = self._mem.setdefault(rule.id if rule is not None else "", {})

    @property
    def config(self) -> Config:
        return self.engine.config

    @property
    def knowledge(self) -> Any:
        """What each server said about itself (`core.inspector.Knowledge`: tools, discover results)."""
        return self.view.knowledge

    def emit(self, message: str, *, messages: Iterable[int] = (), chain: str | None = None,
             time: float | None = None, details: dict | None = None, severity: str | None = None,
             rule_id: str | None = None) -> None:
        """Report a finding of the running rule (or of `rule_id`, a rule declared as emitted by it).
        `severity` replaces the default for this one finding (a documented downgrade)."""
        r = self._rule if rule_id is None else REGISTRY[rule_id]
        assert r is not None
        self.engine.report(r, message, list(messages), chain, time, details, severity)


class RuleEngine:
    """Judges observations (`dispatch`) by the registered rules; their findings wait in `findings`
    (one list, emptied by `drain`) until taken. `view` is what the checks read of the pipeline
    besides the observations (an `InspectorView`, given here or by `set_view`; it also gives a
    finding without a time of its own the time of the frame)."""

    def __init__(self, config: Config | None = None, view: Any = None) -> None:
        self.config = config or Config()
        self.view = view
        self.ctx = Context(self)
        self.findings: list[Finding] = []  # drained after each frame (analysis.py)
        # a check runs while its own id or an id it emits (`emitted_by`) is enabled; report() drops disabled ids
        needed = {r.emitted_by for r in REGISTRY.values() if r.emitted_by and r.id not in self.config.disabled}
        self._active = [r for r in REGISTRY.values()
                        if r.check is not None and (r.id not in self.config.disabled or r.id in needed)]
        # each active rule as (check, its context): what a plan holds
        self._runs = {r.id: (r.check, Context(self, r, self.ctx._mem)) for r in self._active}
        self._by_type: dict[type, list[Rule]] = {}
        for r in self._active:
            for t in r.on:
                self._by_type.setdefault(t, []).append(r)
        self._plain: dict[type, tuple] = {}
        # types some rule narrows by attributes: (the attributes as a key, plans by key, the rules)
        self._keyed: dict[type, tuple] = {}
        for t, rules in self._by_type.items():
            if t is Decoded or t is Answered:
                continue
            attrs = sorted({a for r in rules for a, _ in r.where})
            if attrs:
                self._keyed[t] = (_key_of(attrs), attrs, {}, rules)
            else:
                self._plain[t] = self._compile(rules)
        self._method_filtered = {m for r in self._active if r.methods for m in r.methods}
        self._cache: dict[tuple, tuple] = {}

    def _select(self, t: type, kind: str | None, method: str | None, direction: str | None,
                transport: str | None = None) -> list[Rule]:
        """The rules a `Decoded` or `Answered` observation of this kind, method, direction and
        transport reaches."""
        if method not in self._method_filtered:
            method = None
        return [
            r for r in self._by_type.get(t, ())
            if (r.kinds is None or any(_kind_matches(name, kind, t) for name in r.kinds))
            and _methods_ok(r, t, kind, method)
            and (r.directions is None or direction in r.directions)
            and (r.transports is None or transport in r.transports)
        ]

    def _plan(self, key: tuple) -> tuple:
        plan = self._cache[key] = self._compile(self._select(*key))
        return plan

    def _keyed_plan(self, t: type, obs: Any) -> tuple:
        """The plan of an observation of a type some rules narrow by attributes (`where`)."""
        keyed = self._keyed.get(t)
        if keyed is None:
            return ()
        key_of, attrs, plans, rules = keyed
        key = key_of(obs)
        try:
            return plans[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable attribute value: every rule of the type (each check decides)
            return self._compile(rules)
        plan = plans[key] = self._compile(_where(rules, dict(zip(attrs, key))))
        return plan

    def _compile(self, rules: list[Rule]) -> tuple:
        """The (check, context) pairs of a plan, in the rules' order; a run of consecutive rules
        that name the same gate becomes one entry that tests the gate once and runs them."""
        plan: list = []
        i = 0
        while i < len(rules):
            gate = rules[i].gate
            j = i + 1
            while gate is not None and j < len(rules) and rules[j].gate is gate:
                j += 1
            runs = tuple(self._runs[r.id] for r in rules[i:j])
            plan.append(runs[0] if gate is None else (self._gated(gate, runs), runs[0][1]))
            i = j
        return tuple(plan)

    def _gated(self, gate: Callable[[Any], Any], runs: tuple) -> Callable[[Any, Context], None]:
        internal_error = self._internal_error

        def run(obs: Any, _ctx: Context) -> None:
            try:
                holds = gate(obs)
            except Exception:  # the checks fail as they would without the gate
                holds = True
            if holds:
                for check, ctx in runs:
                    try:
                        check(obs, ctx)
                    except Exception as e:
                        internal_error(ctx._rule, e)

        return run

    def dispatch(self, obs: Any) -> None:
        t = type(obs)
        if t is Decoded:
            m = obs.msg
            method = m.method
            key = (t, m.kind, method if method in self._method_filtered else None, m.direction, m.transport)
            plan = self._cache.get(key)
            if plan is None:
                plan = self._plan(key)
        elif t is Answered:
            req, resp = obs.request, obs.response
            kind = resp.kind
            if kind == RESULT and type(resp.result) is dict:
                rt = resp.result.get("resultType")
                # rules naming "result" get these too; rules naming only "input_required" (or "task") get only these
                if rt == INPUT_REQUIRED:
                    kind = INPUT_REQUIRED
                elif rt == TASK:
                    kind = TASK
            method = req.method if req is not None else None
            key = (t, kind, method if method in self._method_filtered else None, resp.direction, resp.transport)
            plan = self._cache.get(key)
            if plan is None:
                plan = self._plan(key)
        else:
            plan = self._plain.get(t)
            if plan is None:
                plan = self._keyed_plan(t, obs)
        for check, ctx in plan:
            try:
                check(obs, ctx)
            except Exception as e:  # a broken rule must not break the pipeline
                self._internal_error(ctx._rule, e)

    def _internal_error(self, r: Rule, e: BaseException) -> None:
        tb = traceback.extract_tb(e.__traceback__)
        where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
        self.report(REGISTRY["inspector-error"], f"rule {r.id} failed on this input: {type(e).__name__}: {e} ({where}); "
                    "the traffic was not affected, analysis goes on", [], None, None, {"rule": r.id}, None)

    def report(self, r: Rule, message: str, messages: list[int], chain: str | None, time: float | None,
               details: dict | None, severity: str | None) -> None:
        if r.id in self.config.disabled:
            return
        sev = self.config.severity.get(r.id) or severity or r.severity
        if time is None:
            time = self.view.now if self.view is not None else 0.0
        self.findings.append(Finding(r.id, sev, message, time, chain, messages, r.spec, r.conformance, details))

    def set_view(self, view: Any) -> None:
        """The view the checks read (a pipeline made after the engine, to which it is the sink)."""
        self.view = view
        for ctx in (self.ctx, *(c for _, c in self._runs.values())):
            ctx.view = view

    def drain(self) -> list[Finding]:
        out = self.findings[:]
        self.findings.clear()
        return out

