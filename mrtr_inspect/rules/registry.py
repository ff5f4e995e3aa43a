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
message kinds and methods a rule names: the plan of a `Decoded` or `Answered` observation is made
once per (type, kind, method, direction, transport, era), so a message costs only the rules that can
apply to it. A rule that raises becomes an `inspector-error` finding; the pipeline goes on. The
findings of an observation about a 2025-11-25 exchange link that revision's page (`dispatch`).

Passes
------

Per-message rules that share what they remember about a session (which requests were cancelled,
which servers have shown themselves modern…) are the checks of a named `Pass`. Each check is still
one function with its own id, severity, spec and docstring, beside its registration, and emits its
own id; the engine makes one dispatch per observation into the pass:

1. `update(obs, state)`, the pass's one explicit step, brings the state up to date with the
   observation (every change to the state that a check reads is made here) and returns what the
   checks read: the state, or what the observation means for them (None: no check runs);
2. then the checks that apply to the observation run, `fn(obs, ctx, what update returned)`. They
   read; none depends on another having run before it. A check may keep what it alone reads (the
   keys it reported once, its last value, a finding deferred until evidence arrives).

    MESSAGES = Pass("messages", state=_State, update=_update, update_on=(Decoded, Cancelled, ExchangeDone))

    @MESSAGES.check("request-id-null", ERROR, kinds=["request"], section="4.5", spec=spec.BASE_REQUESTS,
                    quote="Unlike base JSON-RPC, the ID MUST NOT be null.",
                    summary="A request whose id is null.",
                    why="null is what an error carries when the request's id could not be read …",
                    example='{"jsonrpc":"2.0","id":null,"method":"tools/list"}')
    def request_id_null(obs: Decoded, ctx, st: _State) -> None:
        \"\"\"A request whose `id` is JSON null, from either side, in any era (docs/rules.md).\"\"\"
        msg = obs.msg
        if msg.id is None and not (msg.method or "").startswith("notifications/"):
            ctx.emit(f"{at(msg)} from the {side(msg)} has id null; …", messages=[msg.index])

and in tests/rules one test that triggers it and one near miss that must not.

- The checks run, and so a message's findings are reported, in registration order (which is also
  the order of docs/rules.md), or in the order `Pass.order(fn, …)` gives where the report needs
  another; a pass sits in the engine's order where its first check is registered.
  `@PASS.also(id, …)` runs a rule's check at a second place of the pass (another kind of message,
  another place in the report).
- `state`: a factory `state(ctx)` of what the pass remembers, one per capture session (created at
  the session's first observation, dropped at `SessionOver`), or one for the engine's lifetime
  with `per_session=False`. `update` sees the observations of the types `update_on` (default: the
  pass's `on`, the types its checks see unless they say otherwise) that its narrowing (`kinds=`,
  `methods=`, `directions=`, `transports=` of `Pass`) lets through; a check of an observation
  `update` does not see gets the state itself.
- `gate=`: a precondition of the observation that checks share (they can find nothing when it is
  false); the pass tests each gate once per observation and runs the checks of its outcome.
  With `gates_read_state=True` a gate is `(obs, what update returned)`, so a check that reads only
  what `update` set for the message can name it too.
  `over=`: a function `(obs, arg)` of the items a run of consecutive checks naming it judges one
  by one (each item goes through every check of the run before the next item); the checks get the
  item as their third argument.
- Every check of a pass runs while any rule of the pass is enabled; findings of disabled rules
  are dropped. A check that raises becomes an `inspector-error` naming its rule, and the other
  checks of the pass still run.
"""

from __future__ import annotations

import traceback
from operator import attrgetter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..config import Config
from ..core.findings import ERROR, INFO, SEVERITIES, WARNING, Finding
from ..core.era import LEGACY
from ..core.observations import Answered, Decoded, Linked, SessionOver
from ..core.events import S2C
from .spec import legacy as legacy_spec

__all__ = ["Rule", "rule", "declare", "Pass", "REGISTRY", "RuleEngine", "Context", "Knowledge", "ERROR", "WARNING",
           "INFO"]

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
    eras: frozenset[str] | None = None
    check: Callable[[Any, "Context"], None] | None = None
    gate: Callable[[Any], Any] | None = None  # a precondition shared with other rules: the check runs when it holds
    where: tuple[tuple[str, frozenset], ...] = ()  # (attribute, values): observations of other types it reaches
    observable: bool = True  # False: documented, but a passive observer cannot see it (✗)
    emitted_by: str | None = None  # a rule whose check emits this id (one check, several ids)
    in_pass: "Pass | None" = None  # the pass that runs `check` (the engine dispatches to the pass)

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


def _reach(id: str, on: type | tuple[type, ...], kinds: Iterable[str] | None,
           methods: Iterable[str] | dict[str, Iterable[str]] | None, directions: Iterable[str] | None,
           transports: Iterable[str] | None, eras: Iterable[str] | None = None) -> dict:
    """The fields that narrow which observations reach a check, normalised (`methods` per kind too)."""
    by_kind: tuple[tuple[str, frozenset[str]], ...] = ()
    if isinstance(methods, dict):
        by_kind = tuple((k, frozenset(m)) for k, m in sorted(methods.items()))
        if kinds is None:
            kinds = methods
        elif not set(kinds) >= set(methods):
            raise ValueError(f"{id}: methods= names kinds that kinds= leaves out")
        methods = {m for _, ms in by_kind for m in ms}
    return dict(
        on=on if isinstance(on, tuple) else (on,),
        kinds=frozenset(kinds) if kinds is not None else None,
        methods=frozenset(methods) if methods is not None else None, methods_by_kind=by_kind,
        directions=frozenset(directions) if directions is not None else None,
        transports=frozenset(transports) if transports is not None else None,
        eras=frozenset(eras) if eras is not None else None,
    )


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
    eras: Iterable[str] | None = None,
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
    observations of other types are not narrowed by it. `eras` narrows them the same way by their
    message's era (`Message.era`: a response's is its request's, RULES.md §2), so a check of one era's
    traffic is not called for the other's (name it only for a check that does nothing on the others).

    `gate` is a precondition that several rules share, a function of the observation: a check that
    can find nothing when it is false names it, and the gate is then computed once for a run of
    consecutive rules that name it (not per rule), which skips them all when it is false. It must be
    exactly what the check would find first (a gate that raises lets the checks run, and fail, as
    they would without it).

    `where` narrows the observations of the other types (`Linked`, `NotLinked`…) by the values of
    their attributes, `{"state": ["dropped"]}`, or of an attribute's attribute, `{"chain.outcome":
    ["error"]}`: name it for a check that does nothing on the others."""
    if where and {Decoded, Answered} & set(on if isinstance(on, tuple) else (on,)):
        raise ValueError(f"{id}: where= narrows observations other than Decoded and Answered")
    reach = _reach(id, on, kinds, methods, directions, transports, eras)

    def deco(fn: Callable[[Any, "Context"], None]) -> Callable:
        _register(
            Rule(
                id=id, severity=severity, summary=summary, section=section, spec=spec, quote=quote,
                conformance=conformance, why=why, example=example, doc=_doc(fn), **reach, check=fn, gate=gate,
                where=tuple((a, frozenset(v)) for a, v in sorted(where.items())) if where else (),
            )
        )
        return fn

    return deco


def declare(id: str, severity: str, *, summary: str, section: str = "", spec: str | None = None,
            quote: str | None = None, conformance: str | None = None, why: str = "", example: str = "",
            doc: str = "", observable: bool = True, emitted_by: str | None = None) -> Rule:
    """Register a rule that has no check of its own: one a passive observer cannot see
    (`observable=False`), or the variant of another rule's finding that its check reports under
    this id (`emitted_by`; only where one condition yields two ids)."""
    return _register(Rule(id=id, severity=severity, summary=summary, section=section, spec=spec, quote=quote,
                          conformance=conformance, why=why, example=example, doc=doc, observable=observable,
                          emitted_by=emitted_by))


# --- passes -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Check:
    """One place of a pass where a function runs: the check of rule `rule_id`, or (rule_id None) the
    pass's `update`. The other fields narrow what reaches it, as a rule's do."""

    rule_id: str | None
    fn: Callable[[Any, "Context", Any], None]
    on: tuple[type, ...]
    kinds: frozenset[str] | None = None
    methods: frozenset[str] | None = None
    methods_by_kind: tuple[tuple[str, frozenset[str]], ...] = ()
    directions: frozenset[str] | None = None
    transports: frozenset[str] | None = None
    eras: frozenset[str] | None = None
    over: Callable[[Any, Any], Iterable] | None = None
    gate: Callable[[Any], Any] | None = None


class Pass:
    """A named pass of checks that share state (see the module docstring): one dispatch per
    observation, its `update` first, then the checks that apply to it (chosen once per kind, method,
    direction and transport)."""

    where: tuple = ()  # (the engine narrows passes by kind and method, never by attributes)

    def __init__(self, name: str, *, on: type | tuple[type, ...] = Decoded,
                 state: Callable[["Context"], Any] | None = None, per_session: bool = True,
                 update: Callable[[Any, Any], Any] | None = None, update_on: type | tuple[type, ...] | None = None,
                 kinds: Iterable[str] | None = None,
                 methods: Iterable[str] | dict[str, Iterable[str]] | None = None,
                 directions: Iterable[str] | None = None, transports: Iterable[str] | None = None,
                 gates_read_state: bool = False) -> None:
        self.name = name
        #: the gates of its checks are `gate(obs, what update returned)`: a check that reads only what
        #: `update` set can be gated by it too
        self.gates_read_state = gates_read_state
        self.on = on if isinstance(on, tuple) else (on,)  # what a check reaches unless it says otherwise
        self.state = state
        self.per_session = per_session
        #: the pass's one step: `update(obs, state)`, what the checks read (None: no check runs)
        self.update = None if update is None else Check(
            None, update, **_reach(name, self.on if update_on is None else update_on, kinds, methods, directions,
                                   transports))
        self.checks: list[Check] = []
        self._order: tuple[Callable, ...] = ()
        #: names the pass in an inspector-error (its `update` failed) and owns its context
        self.unit = Rule(id=name, severity=INFO, summary=f"the {name} pass", section="pass")

    def __repr__(self) -> str:
        return f"<Pass {self.name}>"

    def check(self, id: str, severity: str, *, summary: str, section: str = "", spec: str | None = None,
              quote: str | None = None, conformance: str | None = None, why: str = "", example: str = "",
              on: type | tuple[type, ...] | None = None, kinds: Iterable[str] | None = None,
              methods: Iterable[str] | dict[str, Iterable[str]] | None = None,
              directions: Iterable[str] | None = None, transports: Iterable[str] | None = None,
              eras: Iterable[str] | None = None,
              over: Callable[[Any, Any], Iterable] | None = None, gate: Callable[[Any], Any] | None = None) -> Callable:
        """Register the decorated function `fn(obs, ctx, state)` as the check of rule `id`, run by
        this pass; the arguments are those of `rule()` (the observation types default to the pass's)."""
        self._one_of(gate, over)
        reach = _reach(id, self.on if on is None else on, kinds, methods, directions, transports, eras)

        def deco(fn: Callable) -> Callable:
            _register(Rule(id=id, severity=severity, summary=summary, section=section, spec=spec, quote=quote,
                           conformance=conformance, why=why, example=example, doc=_doc(fn), **reach, check=fn,
                           in_pass=self))
            self.checks.append(Check(id, fn, **reach, over=over, gate=gate))
            return fn

        return deco

    def also(self, id: str, *, on: type | tuple[type, ...] | None = None, kinds: Iterable[str] | None = None,
             methods: Iterable[str] | dict[str, Iterable[str]] | None = None, directions: Iterable[str] | None = None,
             transports: Iterable[str] | None = None, eras: Iterable[str] | None = None,
             over: Callable[[Any, Any], Iterable] | None = None, gate: Callable[[Any], Any] | None = None) -> Callable:
        """Run the decorated function as rule `id`'s check at a second place of the pass (the rule is
        declared, with its documentation, by its `check`): findings it emits are `id`'s."""
        self._one_of(gate, over)
        reach = _reach(id, self.on if on is None else on, kinds, methods, directions, transports, eras)

        def deco(fn: Callable) -> Callable:
            self.checks.append(Check(id, fn, **reach, over=over, gate=gate))
            return fn

        return deco

    def _one_of(self, gate, over) -> None:
        if gate is not None and over is not None:
            raise ValueError(f"pass {self.name}: a check names a gate or over=, not both")

    def order(self, *fns: Callable) -> None:
        """The order of a message's findings in the report, where it is not the registration order:
        these checks first, in this order (a function placed at several places is named once for
        each, in the order it was placed), then the others in registration order. Only the report
        depends on it: every check reads what `update` made, whatever ran before it."""
        self._order = fns

    def ordered(self) -> list[Check]:
        """The checks in the order they run."""
        rank: dict[int, int] = {}
        seen: dict[Callable, int] = {}
        for n, fn in enumerate(self._order):
            k = seen[fn] = seen.get(fn, -1) + 1
            placed = [i for i, c in enumerate(self.checks) if c.fn is fn]
            if k >= len(placed):
                raise ValueError(f"pass {self.name}: order() names {fn.__name__} more often than it is placed")
            rank[placed[k]] = n
        return [c for _, c in sorted(enumerate(self.checks), key=lambda ic: (rank.get(ic[0], len(rank)), ic[0]))]


def _session_of(obs: Any) -> str:
    """The capture session an observation belongs to."""
    t = type(obs)
    if t is Decoded:
        return obs.msg.session
    if t is Answered:
        return obs.response.session
    for attr in ("msg", "notification", "exchange", "request"):
        o = getattr(obs, attr, None)
        if o is not None:
            return o.session
    return getattr(obs, "session", "")


class _PassPlan:
    """What a plan entry of a pass holds for one kind of observation: whether `update` runs, and the
    (function, context) pairs of its checks; when some of them name gates, the pairs of each outcome
    of the gates (made when an outcome is first met), `checks` being those of all gates holding."""

    __slots__ = ("update", "checks", "_rule", "gates", "variants", "_made_of")

    def __init__(self, update: bool, made_of: list[Check], run: "_PassRun") -> None:
        self.update = update
        self._made_of = (made_of, run)
        self._rule = run.p.unit
        self.gates = tuple(dict.fromkeys(c.gate for c in made_of if c.gate is not None))
        self.variants: dict = {}
        self.checks = run.entries(made_of)

    def pick(self, held: Any) -> tuple:
        """The checks for this outcome of the gates (a bool for one gate, a tuple of them for more)."""
        try:
            return self.variants[held]
        except KeyError:
            made_of, run = self._made_of
            on = {g for g, h in zip(self.gates, held if type(held) is tuple else (held,)) if h}
            out = self.variants[held] = run.entries([c for c in made_of if c.gate is None or c.gate in on])
            return out


class _PassRun:
    """A pass inside one engine: its contexts, its state, its plans."""

    def __init__(self, engine: "RuleEngine", p: Pass) -> None:
        self.p = p
        self.ctx = Context(engine, p.unit, engine.ctx._mem)
        self.checks = [c for c in p.ordered() if c.rule_id in REGISTRY]
        self.contexts = {c.rule_id: Context(engine, REGISTRY[c.rule_id], engine.ctx._mem) for c in self.checks}
        self.keeps_sessions = p.state is not None and p.per_session
        u = p.update
        self.on = ({t for c in self.checks for t in c.on} | set(u.on if u is not None else ())
                   | ({SessionOver} if self.keeps_sessions else set()))
        self.methods = {m for c in self.checks + ([u] if u is not None else []) if c.methods for m in c.methods}
        self.internal_error = engine._internal_error
        self.shared = p.state(self.ctx) if p.state is not None and not p.per_session else None
        # the state of each session, when the pass keeps one per session
        self.states: dict | None = self.ctx.mem if self.keeps_sessions else None
        self.run = self._runner()

    def plan(self, t: type, key: tuple | None = None) -> _PassPlan | None:
        """The plan of an observation of type `t` (for `Decoded` and `Answered`, of this (kind, method,
        direction, transport, era)); None when neither `update` nor a check sees it."""
        def sees(c: Check) -> bool:
            return t in c.on and (key is None or _reaches(c, t, *key))

        checks = [c for c in self.checks if sees(c)]
        update = self.p.update is not None and sees(self.p.update)
        if checks or update or (t is SessionOver and self.keeps_sessions):
            return _PassPlan(update, checks, self)
        return None

    def entries(self, checks: list[Check]) -> tuple:
        """The (function, context) pairs of these checks; a run of consecutive checks naming the same
        `over` becomes one entry that goes through the items."""
        out: list = []
        i = 0
        while i < len(checks):
            over = checks[i].over
            j = i + 1
            while over is not None and j < len(checks) and checks[j].over is over:
                j += 1
            runs = tuple((c.fn, self.contexts[c.rule_id]) for c in checks[i:j])
            out.append(runs[0] if over is None else (self._each(over, runs), self.ctx))
            i = j
        return tuple(out)

    def _each(self, over: Callable, runs: tuple) -> Callable:
        internal_error = self.internal_error

        def each(obs: Any, _ctx: Context, arg: Any) -> None:
            for item in over(obs, arg):
                for fn, ctx in runs:
                    try:
                        fn(obs, ctx, item)
                    except Exception as e:
                        internal_error(ctx._rule, e)

        return each

    def _runner(self) -> Callable[[Any, _PassPlan], None]:
        """What the engine's plans call for this pass: the observation's state, `update`, the checks
        its gates choose, then each check in turn. One function per pass, with what it needs bound to
        locals (it runs for every message)."""
        states, shared, make, ctx0 = self.states, self.shared, self.p.state, self.ctx
        update = self.p.update.fn if self.p.update is not None else None
        internal_error, unit = self.internal_error, self.p.unit
        with_state = self.p.gates_read_state

        def run(obs: Any, plan: _PassPlan) -> None:
            try:
                if states is None:
                    st = shared
                else:
                    t = type(obs)
                    if t is SessionOver:  # the session is over: its state goes (its checks, if any, see it last)
                        st = states.pop(obs.session, None)
                        if st is None:
                            return
                    else:
                        session = obs.msg.session if t is Decoded else _session_of(obs)
                        st = states.get(session)
                        if st is None:
                            st = states[session] = make(ctx0)
                if plan.update:
                    st = update(obs, st)
                    if st is None:
                        return
                gates = plan.gates
                if not gates:
                    checks = plan.checks
                else:
                    try:
                        if with_state:  # (one gate: the passes that read the state have one)
                            held = tuple(True if g(obs, st) else False for g in gates) if len(gates) > 1 else (
                                True if gates[0](obs, st) else False)
                        elif len(gates) == 1:
                            held = True if gates[0](obs) else False
                        elif len(gates) == 2:
                            held = (True if gates[0](obs) else False, True if gates[1](obs) else False)
                        else:
                            held = tuple(True if g(obs) else False for g in gates)
                        checks = plan.variants.get(held)
                        if checks is None:
                            checks = plan.pick(held)
                    except Exception:  # a gate that raises: the checks run (and fail) as they would without it
                        checks = plan.checks
            except Exception as e:
                internal_error(unit, e)
                return
            for fn, ctx in checks:
                try:
                    fn(obs, ctx, st)
                except Exception as e:
                    internal_error(ctx._rule, e)

        return run


def _key_of(attrs: list[str]) -> Callable[[Any], tuple]:
    """The values of these attributes of an observation, as a tuple."""
    get = attrgetter(*attrs)
    return get if len(attrs) > 1 else lambda obs: (get(obs),)


def _where(rules: list, values: dict[str, Any]) -> list:
    """The rules whose `where` the attribute values satisfy (passes have none)."""
    return [r for r in rules if all(values[a] in allowed for a, allowed in r.where)]


def _kind_matches(name: str, kind: str | None, t: type) -> bool:
    """Whether a kind named by a rule (`kinds=`) takes an observation of type `t` and this kind."""
    return name == kind or (kind in _RESULT_KINDS and name == RESULT) or (
        kind == RESULT and t is Answered and name == OTHER_RESULT)


def _methods_ok(r: Rule | Check, t: type, kind: str | None, method: str | None) -> bool:
    """Whether the rule's methods (all of them, or those of the names that match the kind) take this method."""
    if r.methods is None:
        return True
    if not r.methods_by_kind:
        return method in r.methods
    return any(method in ms for name, ms in r.methods_by_kind if _kind_matches(name, kind, t))


def _reaches(r: Rule | Check, t: type, kind: str | None, method: str | None, direction: str | None,
             transport: str | None, era: str | None = None) -> bool:
    """Whether a `Decoded` or `Answered` observation of this kind, method, direction, transport and era
    reaches a rule's check (or a check of a pass)."""
    return ((r.kinds is None or any(_kind_matches(name, kind, t) for name in r.kinds))
            and _methods_ok(r, t, kind, method)
            and (r.directions is None or direction in r.directions)
            and (r.transports is None or transport in r.transports)
            and (r.eras is None or era in r.eras))


def _doc(fn: Callable) -> str:
    d = (fn.__doc__ or "").strip()
    return " ".join(d.split())


class Context:
    """What a check sees besides its observation: where to report, what the servers said, memory.

    Each rule has its own context (its `mem`, its id for `emit`); `RuleEngine.ctx` is the context of
    no rule, whose `_mem` holds every rule's memory by rule id."""

    __slots__ = ("engine", "_rule", "_mem", "mem")

    def __init__(self, engine: "RuleEngine", rule: "Rule | None" = None, mems: dict[str, dict] | None = None) -> None:
        self.engine = engine
        self._rule: Rule | None = rule
        self._mem: dict[str, dict] = mems if mems is not None else {}
        #: a dict private to the rule, kept across observations (keep it bounded)
        self.mem: dict = self._mem.setdefault(rule.id if rule is not None else "", {})

    @property
    def rule(self) -> "Rule | None":
        """The rule whose check this context is (None: the engine's own)."""
        return self._rule

    @property
    def config(self) -> Config:
        return self.engine.config

    @property
    def knowledge(self) -> "Knowledge":
        """What each server said about itself (`Knowledge`: tools, discover results)."""
        return self.engine.knowledge

    def emit(self, message: str, *, messages: Iterable[int] = (), chain: str | None = None,
             time: float | None = None, details: dict | None = None, severity: str | None = None,
             rule_id: str | None = None) -> None:
        """Report a finding of the running rule (or of `rule_id`, a rule declared as emitted by it).
        `severity` replaces the default for this one finding (a documented downgrade)."""
        r = self._rule if rule_id is None else REGISTRY[rule_id]
        assert r is not None
        # RuleEngine.report, written out (a finding of every retry linked, on every run)
        engine = self.engine
        config = engine.config
        rid = r.id
        if rid in config.disabled:
            return
        engine.findings.append(Finding(rid, config.severity.get(rid) or severity or r.severity, message,
                                       engine.now if time is None else time, chain, list(messages), r.spec,
                                       r.conformance, details))


def _era_of(obs: Any) -> str | None:
    """The era of the exchange an observation is about: its message's (a response inherits its
    request's), else its HTTP exchange's, else its chain's; None for a session's end or a failure."""
    t = type(obs)
    if t is Decoded:
        return obs.msg.era
    if t is Answered:
        return obs.response.era
    if t is Linked and obs.request is not None:  # (every retry has a finding, chain-linked)
        return obs.request.era
    names = _ERA_NAMES.get(t)
    if names is None:
        names = _ERA_NAMES[t] = _era_names(t, obs)
    messages, others = names
    for name in messages:
        m = getattr(obs, name, None)
        if m is not None:
            return m.era
    for name in others:
        o = getattr(obs, name, None)
        if o is not None:
            return o.era
    return None


_ERA_NAMES: dict[type, tuple] = {}  # observation type -> the attributes `_era_of` reads, in its order


def _era_names(t: type, obs: Any) -> tuple:
    """The attributes of ("msg", "notification", "request") and of ("exchange", "chain") that
    observations of type `t` have: those its slots define (a name it lacks would be looked up in
    vain, at the cost of an exception, for every finding), or all of them when its instances have a
    `__dict__`."""
    messages, others = ("msg", "notification", "request"), ("exchange", "chain")
    if hasattr(obs, "__dict__"):
        return messages, others
    return tuple(n for n in messages if hasattr(t, n)), tuple(n for n in others if hasattr(t, n))


class Knowledge:
    """What the servers told about themselves, for the rules that need it (per capture session),
    learnt from their answers to `tools/list` and `server/discover` before any rule judges them."""

    __slots__ = ("tools", "discover")

    def __init__(self) -> None:
        self.tools: dict[str, dict[str, dict]] = {}  # session -> tool name -> tool definition
        self.discover: dict[str, dict] = {}  # session -> last DiscoverResult

    def tool(self, session: str, name: Any) -> dict | None:
        if type(name) is not str:
            return None
        return self.tools.get(session, {}).get(name)

    def learn(self, obs: Decoded) -> None:
        """A server's result to a request of no chain: a tools/list's tools, a discover result."""
        msg, req = obs.msg, obs.request
        if obs.creq is not None or msg.kind != RESULT or type(msg.result) is not dict or msg.direction != S2C:
            return
        if req.method == "tools/list":
            tools = msg.result.get("tools")
            if type(tools) is list:
                known = self.tools.setdefault(msg.session, {})
                for t in tools:
                    if type(t) is dict and type(t.get("name")) is str:
                        known[t["name"]] = t
        else:
            self.discover[msg.session] = msg.result


_LEARNT = frozenset({"tools/list", "server/discover"})  # the requests whose answers `Knowledge` learns from


class RuleEngine:
    """Judges the observations of a frame (`judge`) by the registered rules, after the frame, and
    returns their findings. `now` is the time of the frame judged: a finding without a time of its
    own gets it."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.now = 0.0
        self.knowledge = Knowledge()
        self.ctx = Context(self)
        self.findings: list[Finding] = []  # what `judge` returns
        disabled = self.config.disabled
        # a check runs while its own id or an id it emits (`emitted_by`) is enabled; report() drops disabled ids
        needed = {r.emitted_by for r in REGISTRY.values() if r.emitted_by and r.id not in disabled}
        # what runs, in registration order: rules with a check, and each pass where its first check is
        # registered (a pass runs while any of its rules is enabled)
        units: list = []
        passes: dict[Pass, list[Rule]] = {}
        for r in REGISTRY.values():
            if r.check is None:
                continue
            if r.in_pass is not None:
                if r.in_pass not in passes:
                    passes[r.in_pass] = []
                    units.append(r.in_pass)
                passes[r.in_pass].append(r)
            elif r.id not in disabled or r.id in needed:
                units.append(r)
        self._passes = {p: _PassRun(self, p) for p, rules in passes.items()
                        if any(r.id not in disabled or r.id in needed for r in rules)}
        self._active = [u for u in units if type(u) is Rule or u in self._passes]
        # each active rule as (check, its context): what a plan holds
        self._runs = {r.id: (r.check, Context(self, r, self.ctx._mem))
                      for r in self._active if type(r) is Rule}
        self._by_type: dict[type, list] = {}
        for u in self._active:
            for t in (u.on if type(u) is Rule else self._passes[u].on):
                self._by_type.setdefault(t, []).append(u)
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
                self._plain[t] = self._compile(rules, t)
        self._method_filtered = {m for r in self._active if type(r) is Rule and r.methods for m in r.methods}
        self._method_filtered |= {m for run in self._passes.values() for m in run.methods}
        self._cache: dict[tuple, tuple] = {}

    def _select(self, t: type, kind: str | None, method: str | None, direction: str | None,
                transport: str | None = None, era: str | None = None) -> list:
        """The rules a `Decoded` or `Answered` observation of this kind, method, direction, transport
        and era reaches, and (pass, its checks) for each pass some check of which it reaches."""
        if method not in self._method_filtered:
            method = None
        out: list = []
        for u in self._by_type.get(t, ()):
            if type(u) is Rule:
                if _reaches(u, t, kind, method, direction, transport, era):
                    out.append(u)
            else:
                plan = self._passes[u].plan(t, (kind, method, direction, transport, era))
                if plan is not None:
                    out.append((u, plan))
        return out

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
            return self._compile(rules, t)
        plan = plans[key] = self._compile(_where(rules, dict(zip(attrs, key))), t)
        return plan

    def _compile(self, rules: list, t: type | None = None) -> tuple:
        """The (check, context) pairs of a plan, in the rules' order; a run of consecutive rules
        that name the same gate becomes one entry that tests the gate once and runs them. A pass
        (given as itself for the types other than `Decoded` and `Answered`, or as (pass, its plan))
        becomes one entry that runs its update and checks."""
        plan: list = []
        i = 0
        while i < len(rules):
            u = rules[i]
            if type(u) is not Rule:
                p, pp = u if type(u) is tuple else (u, self._passes[u].plan(t))
                if pp is not None:
                    plan.append((self._passes[p].run, pp))
                i += 1
                continue
            gate = u.gate
            j = i + 1
            while gate is not None and j < len(rules) and type(rules[j]) is Rule and rules[j].gate is gate:
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

    def judge(self, observations: Iterable, now: float) -> list[Finding]:
        """The findings of a frame's observations (`Inspector.step`), judged in order; `now`: the
        frame's time."""
        self.now = now
        dispatch = self.dispatch
        for obs in observations:
            dispatch(obs)
        findings = self.findings
        if not findings:
            return []
        self.findings = []
        return findings

    def dispatch(self, obs: Any) -> None:
        """Judge one observation; its findings are added to `findings`."""
        findings = self.findings
        found = len(findings)
        t = type(obs)
        if t is Decoded:
            m = obs.msg
            if m.kind == RESULT:
                req = obs.request
                if req is not None and req.method in _LEARNT:
                    self.knowledge.learn(obs)
            method = m.method
            key = (t, m.kind, method if method in self._method_filtered else None, m.direction, m.transport, m.era)
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
            key = (t, kind, method if method in self._method_filtered else None, resp.direction, resp.transport,
                   resp.era)
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
        if len(findings) > found and _era_of(obs) == LEGACY:
            # RULES.md §13: these findings concern a 2025-11-25 exchange, so they link that revision's
            # page, and no check of the 2026-07-28 conformance suite. A rule whose sentence that
            # revision does not have (the era probe, a fallback from a modern error) judges the
            # crossing by 2026-07-28's text, and keeps its link and check.
            for f in findings[found:]:
                legacy = legacy_spec(f.spec)
                if legacy is not None:
                    f.spec, f.conformance = legacy, None

    def _internal_error(self, r: Rule, e: BaseException) -> None:
        tb = traceback.extract_tb(e.__traceback__)
        where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
        what = r.summary if r.section == "pass" and r.check is None else f"rule {r.id}"
        self.report(REGISTRY["inspector-error"], f"{what} failed on this input: {type(e).__name__}: {e} ({where}); "
                    "the traffic was not affected, analysis goes on", [], None, None, {"rule": r.id}, None)

    def report(self, r: Rule, message: str, messages: list[int], chain: str | None, time: float | None,
               details: dict | None, severity: str | None) -> None:
        """Add a finding of rule `r` (as `Context.emit` does, which has this written out)."""
        if r.id in self.config.disabled:
            return
        sev = self.config.severity.get(r.id) or severity or r.severity
        if time is None:
            time = self.now
        self.findings.append(Finding(r.id, sev, message, time, chain, messages, r.spec, r.conformance, details))

    def drain(self) -> list[Finding]:
        out = self.findings[:]
        self.findings.clear()
        return out

