"""Playing the probes: for each recorded chain and mutation, the chain is played against the live
server up to its round as `replay verify` plays it (fresh ids, the recorded answers, the live
server's own requestState: `replay.verify.play_session`), then the mutated request is sent and its
response judged (`mutations.py`).

The probe's own traffic goes through one `Analysis` (the core and the rules) and, with `record`,
into a recording of its own, one session per server process (a stdio server is started afresh for
each probe unless `reuse`; each HTTP probe is a new client). So the `messages` of a probe and of its
findings are indexes into that traffic, as `check` of that recording numbers them. What the rules
say of the probe's traffic is reported too, once per rule and chain, except what concerns a mutated
request or its response: the probe sent that on purpose, and the verdict judges the reaction.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import Config
from ..core.events import Direction, SessionEnd, SessionStart
from ..core.findings import Finding, Severity
from ..core.framing import HttpFramer
from ..core.messages import ERROR, REQUEST, RESULT, Message, decode_message
from ..core.observations import Decoded, LegacyAsked
from ..replay.live import LiveLog
from ..replay.script import Exchange, ReplayError, Script, Step
from ..replay.verify import Peer, Played, VerifyError, _live_request, play_session
from ..replay.wire import set_member
from ..recording.writer import RecordingError, RecordingWriter, new_session_id, redactor_for
from . import mutations as mu
from .mutations import FAIL, PASS, SKIPPED, Live, Plan, RecordedChain
from .stop import StopSignals


@dataclass
class ProbeOptions:
    only: tuple[str, ...] = ()  # mutation names (empty: all)
    timeout: float = 30.0  # seconds one probe may take, all its requests together
    max_rounds: int = 10  # rounds a probe plays before its mutated request
    reuse: bool = False  # stdio: one server process for every probe
    dry_run: bool = False


@dataclass
class ProbeResult:
    chain: str
    mutation: str
    verdict: str
    rule: str | None = None
    messages: list[int] = field(default_factory=list)
    reason: str = ""
    label: str = ""  # the recorded chain, `tools/call deploy`
    sent: list[bytes] = field(default_factory=list)  # what it sent (the last one is the mutated request)
    finding: Finding | None = None
    mutated: list[int] = field(default_factory=list)  # indexes of the mutated request and of its response
    pending: Any = None  # (Played, Live) of the mutated request once sent

    def to_json(self) -> dict:
        return {"chain": self.chain, "mutation": self.mutation, "verdict": self.verdict, "rule": self.rule,
                "messages": list(self.messages), "reason": self.reason}


@dataclass
class ProbeRun:
    probes: list[ProbeResult]
    findings: list[Finding]  # the failures, then what the rules said of the probe's traffic
    messages: int  # messages of the probe's traffic
    record: str | None
    interrupted: bool = False  # a stop signal ended the run: the probes not run are not reported


# -------------------------------------------------------------------------------------------------
# planning


def recorded_chains(script: Script) -> list[RecordedChain]:
    """The recorded chains with at least one input_required round, in the order they started."""
    by_id: dict[str, list[Exchange]] = {}
    for ex in script.exchanges:
        if ex.chain is not None:
            by_id.setdefault(ex.chain, []).append(ex)
    firsts = [exs[0] for exs in by_id.values()]
    out = []
    for cid, exs in by_id.items():
        c = RecordedChain(cid, exs, [f for f in firsts if f is not exs[0]])
        if c.rounds:
            out.append(c)
    return out


def plans(script: Script, options: ProbeOptions) -> list[Plan | ProbeResult]:
    """Every chain × mutation: a Plan to play, or a ProbeResult skipped with its reason."""
    names = options.only or tuple(mu.MUTATIONS)
    out: list[Plan | ProbeResult] = []
    for chain in recorded_chains(script):
        for name in names:
            p = mu.MUTATIONS[name].plan(chain, options.max_rounds)
            out.append(p if isinstance(p, Plan) else ProbeResult(chain.id, name, SKIPPED, reason=p, label=chain.label()))
    return out


def _prelude(script: Script, chain: RecordedChain) -> list[Step]:
    """What the recorded client sent in the chain's session before its first request, outside any
    chain: discovery or initialize, notifications/initialized, tools/list…"""
    first = chain.first
    out = []
    for s in script.steps:
        if s.session != first.session or s.time >= first.time:
            continue
        if s.kind == "request" and s.exchange is not None and s.exchange.chain is None:
            out.append(s)
        elif s.kind == "notification" and s.msg.method not in ("notifications/cancelled", "notifications/progress"):
            out.append(s)
    return out


def _steps_of(script: Script, exchanges: list[Exchange]) -> list[Step]:
    wanted = {id(ex) for ex in exchanges}
    return [s for s in script.steps if s.kind == "request" and id(s.exchange) in wanted]


# -------------------------------------------------------------------------------------------------
# the probe's traffic


class Traffic:
    """One analysis of every probe's traffic, and its recording (one session per server process)."""

    def __init__(self, config: Config | None, record: str | None, transport: str, source: str) -> None:
        from ..analysis import Analysis

        self.config = config
        self.analysis = Analysis(config, self._observe)
        self.record = record
        self.transport = transport
        self.source = source
        self.lock = threading.Lock()
        self.messages = 0
        self.index: dict[tuple, int] = {}  # (direction, id key) -> message index (ids are unique in a run)
        self.found: list[tuple[Finding, str | None, str | None]] = []  # (finding, recorded chain, mutation)
        self.live_chain: dict[str, str] = {}  # chain id in the probe's traffic -> recorded chain id
        self.current: tuple[str | None, str | None] = (None, None)  # the probe running: recorded chain, mutation

    def session(self, info: dict) -> "ProbeLog":
        return ProbeLog(self, info)

    def _observe(self, obs) -> None:
        """A request of a chain, seen while a probe runs: its chain is that probe's recorded chain."""
        t = type(obs)
        if t is Decoded and obs.msg.kind == REQUEST:
            creq = obs.creq
        elif t is LegacyAsked and obs.round is not None:
            creq = obs.round.request
        else:
            return
        if creq is not None and self.current[0] is not None:
            self.live_chain.setdefault(creq.chain.id, self.current[0])

    def take(self, outs: list) -> None:
        for o in outs:
            t = type(o)
            if t is Message:
                self.messages += 1
                if o.idk is not None and (o.kind == REQUEST and o.direction == Direction.C2S
                                          or o.kind in (RESULT, ERROR) and o.direction == Direction.S2C):
                    self.index.setdefault((o.direction, o.idk), o.index)
            elif t is Finding:
                self.found.append((o, self.current[0], self.current[1]))

    def close(self) -> None:
        with self.lock:
            self.take(self.analysis.close(time.time()))


class ProbeLog(LiveLog):
    """A `LiveLog` (what the peers of `replay verify` report to) whose frames go to the run's one
    analysis, and to a session of its own in the run's recording."""

    def __init__(self, traffic: Traffic, info: dict) -> None:  # noqa: D107 - LiveLog's fields, shared analysis
        self.traffic = traffic
        self.session = new_session_id()
        self.insp = traffic.analysis
        self.printer = None
        self.findings: list[Finding] = []
        self.own: set[int] = set()
        self.left_out = 0
        self.lock = traffic.lock
        redactor = redactor_for(traffic.config)
        self.redact = redactor.frame
        try:
            self.writer = (RecordingWriter(traffic.record, traffic.transport, info, redactor, session=self.session)
                           if traffic.record else None)
        except RecordingError as e:
            raise ReplayError(str(e)) from None
        self.http = HttpFramer(self.session)
        self._feed([SessionStart(time.time(), self.session, traffic.transport, dict(info))], record=False)

    def _outs(self, outs: list) -> None:
        self.traffic.take(outs)

    def close(self, info: dict | None = None) -> list[Finding]:
        with self.lock:
            self.traffic.take(self.insp.feed(SessionEnd(time.time(), self.session, info or {})))
            if self.writer is not None:
                self.writer.close(info, time.time())
                self.writer = None
        return []


# -------------------------------------------------------------------------------------------------
# playing one probe


class DryPeer(Peer):
    """`--dry-run`: nothing is sent; each request is answered with its recorded response, so the
    probe shows what it would send (with the recorded requestState standing for the live one)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, p: Played, data: bytes, side) -> None:
        self.sent.append(data)
        if p.exchange.response is not None and not getattr(p, "mutated", False):
            p.answered(decode_message(set_member(p.exchange.response.raw, ("id",), p.live_id)))
        else:
            p.done.set()

    def notify(self, data: bytes, side) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


@dataclass
class _Env:
    script: Script
    make_peer: Callable[[str, "ProbeLog"], Peer]
    traffic: Traffic
    options: ProbeOptions
    counter: Any
    shared: "tuple[Peer, ProbeLog] | None" = None  # --reuse: the one server process


def _play(plan: Plan, env: _Env, res: ProbeResult, peer: Peer, prelude: bool) -> tuple[Played, Live] | None:
    """The chain up to its round, then the mutated request; None when it was skipped (reason set)."""
    timeout = env.options.timeout
    script = env.script
    steps = (_prelude(script, plan.chain) if prelude else []) + _steps_of(script, plan.prefix)
    played = play_session(steps, peer, timeout, env.counter)
    for p in played:
        if p.sent is not None:
            res.sent.append(p.sent.raw)
        if p.error:
            raise _ServerFailed(f"{p.exchange.label()}: {p.error}")
    by_index = {p.exchange.request.index: p for p in played}
    if plan.resend:
        last = by_index.get(plan.target.request.index)
        if last is None or last.sent is None:
            res.verdict, res.reason = SKIPPED, f"the live server did not take the chain to its last retry ({last.skipped if last else 'not sent'})"
            return None
        live = Live(last.sent.raw, last.response)
    else:
        opened = by_index.get(plan.target.round_of.request.index) if plan.target.round_of is not None else None
        p = Played(plan.target, _new_id(plan.target, env.counter))
        base = _live_request(plan.target, by_index, p)
        if base is None:
            res.verdict, res.reason = SKIPPED, p.skipped or "the live server did not open the round"
            return None
        live = Live(base, opened.response if opened is not None else None)
    data = plan.build(live)
    if isinstance(data, str):
        res.verdict, res.reason = SKIPPED, data
        return None
    p = Played(plan.target, _new_id(plan.target, env.counter))
    p.mutated = True  # type: ignore[attr-defined]
    data = set_member(data, ("id",), p.live_id)
    p.sent = decode_message(data)
    res.sent.append(data)
    res.pending = (p, live)  # what a server that hangs or dies was sent
    side = None if plan.other_headers else plan.target.http
    peer.send(p, data, side)
    if not p.done.wait(timeout):
        p.fail(f"no response within {timeout:g} s")
    return p, live


def _new_id(ex: Exchange, counter) -> Any:
    n = next(counter)
    return f"probe-{n}" if type(ex.request.id) is str else n


class _ServerFailed(Exception):
    """The live server failed the probe: it hung, died, or could not be reached."""


def run_one(plan: Plan, env: _Env) -> ProbeResult:
    res = ProbeResult(plan.chain.id, plan.mutation, FAIL, label=plan.chain.label())
    traffic = env.traffic
    traffic.current = (plan.chain.id, plan.mutation)
    reuse = env.options.reuse and not env.options.dry_run
    fresh = True
    log: ProbeLog | None = None
    if env.options.dry_run:
        peer: Peer = DryPeer()
    elif env.shared is not None:
        peer, log = env.shared
        fresh = False
    else:
        log = traffic.session({"probe": plan.mutation, "chain": plan.chain.id, "source": traffic.source})
        peer = env.make_peer(plan.chain.first.session, log)
        if reuse:
            env.shared = (peer, log)
    outcome: list = []
    failure: list[str] = []

    def body() -> None:
        try:
            outcome.append(_play(plan, env, res, peer, fresh))
        except _ServerFailed as e:
            failure.append(str(e))
        except Exception as e:  # the probe's own failure: said, and the next probe runs
            failure.append(f"the probe failed: {type(e).__name__}: {e}")

    worker = threading.Thread(target=body, name="mrtr-inspect-probe", daemon=True)
    worker.start()
    try:
        worker.join(env.options.timeout + 5.0)
    except KeyboardInterrupt:  # a stop signal: this probe's server stops, the probe is not reported
        _close(peer, log)
        env.shared = None
        worker.join(10.0)
        raise
    hung = worker.is_alive()
    if hung or failure or not reuse or env.options.dry_run:
        _close(peer, log)
        if reuse:
            env.shared = None
        worker.join(10.0)
    if env.options.dry_run:
        res.verdict, res.reason = SKIPPED, res.reason or "dry run: nothing was sent"
        return res
    if hung or failure:
        res.verdict, res.rule = FAIL, "upstream-error"
        res.reason = f"the probe did not finish within {env.options.timeout:g} s (the server hangs)" if hung \
            else failure[0]
        if res.pending is not None:
            res.messages, res.mutated = _indexes(traffic, res.pending[1], res.pending[0])
    elif outcome and outcome[0] is not None:
        p, live = outcome[0]
        if p.response is None or p.error:  # an answer after the time ran out (the SDK's -32000 "Connection
            # closed" for what was in flight once the probe closed the server) is not the server's verdict
            res.verdict, res.rule = FAIL, "upstream-error"
            res.reason = f"the mutated request got no response: {p.error or 'none came'}"
        else:
            v = plan.judge(p.response, live)
            res.verdict, res.rule, res.reason = v.verdict, v.rule, v.reason
        res.messages, res.mutated = _indexes(traffic, live, p)
    return res


def _close(peer: Peer, log: ProbeLog | None) -> None:
    try:
        peer.close()
    finally:
        if log is not None:
            log.close()


def _indexes(traffic: Traffic, live: Live, p: Played) -> tuple[list[int], list[int]]:
    """The probe's exchanges that show its verdict: the response that opened the round, the mutated
    request and what answered it (message indexes of the probe's traffic); and the last two alone."""
    opened = [(Direction.S2C, live.opened.idk)] if live.opened is not None and live.opened.idk is not None else []
    mine = [(Direction.C2S, p.sent.idk), (Direction.S2C, p.sent.idk)] if p.sent is not None and p.sent.idk is not None else []
    with traffic.lock:
        o = [traffic.index[k] for k in opened if k in traffic.index]
        m = [traffic.index[k] for k in mine if k in traffic.index]
    return o + [i for i in m if i not in o], m


# -------------------------------------------------------------------------------------------------
# the run


def _finding(res: ProbeResult, config: Config | None) -> Finding | None:
    from ..rules import load_rules
    from ..rules import spec
    from ..rules.registry import REGISTRY

    load_rules()
    assert res.rule is not None
    rule = REGISTRY.get(res.rule)
    # every rule a probe reports is registered (rules/probes.py, and the passive rules it shares)
    severity, conformance, page = (rule.severity, rule.conformance, rule.spec) if rule is not None else \
        (Severity.WARNING, None, spec.MRTR_SERVER)
    if config is not None:
        if res.rule in config.disabled:
            return None
        severity = config.severity.get(res.rule, severity)
    return Finding(res.rule, severity, f"probe {res.mutation} of chain {res.chain} ({res.label}): {res.reason}",
                   time.time(), res.chain, list(res.messages), page, conformance,
                   {"probe": res.mutation, "verdict": res.verdict})


def run_probes(script: Script, make_peer: Callable[[str, ProbeLog], Peer], options: ProbeOptions | None = None,
               transport: str = "stdio", config: Config | None = None, record: str | None = None,
               progress: Callable[[ProbeResult], None] | None = None, stop: StopSignals | None = None) -> ProbeRun:
    """Every probe in turn. With `stop` (entered by the caller), a stop signal ends the run: the probe
    under way stops with its server, unreported; what was judged before is (`interrupted`). Without
    it, a KeyboardInterrupt goes on (the pytest plugin: the test session stops)."""
    options = options or ProbeOptions()
    unknown = [m for m in options.only if m not in mu.MUTATIONS]
    if unknown:
        raise ReplayError(f"--only: unknown mutation {', '.join(unknown)} (known: {', '.join(mu.MUTATIONS)})")
    traffic = Traffic(config, None if options.dry_run else record, transport, script.path)
    env = _Env(script, make_peer, traffic, options, itertools.count(1))
    results: list[ProbeResult] = []
    mutated: set[int] = set()
    interrupted = False
    try:
        for item in plans(script, options):
            if stop is not None:
                stop.check()
            res = item if isinstance(item, ProbeResult) else run_one(item, env)
            mutated.update(res.mutated)
            results.append(res)
            if progress is not None:
                progress(res)
    except KeyboardInterrupt:
        if stop is None:
            raise
        interrupted = True
    finally:
        with stop.held() if stop is not None else contextlib.nullcontext():  # the clean-up is bounded
            if env.shared is not None:
                _close(*env.shared)
            traffic.close()
    played = [r for r in results if r.verdict != SKIPPED or r.sent]
    if not options.dry_run and not interrupted and played and all(r.rule == "upstream-error" and not r.messages for r in played) \
            and all(_unreachable(r.reason) for r in played):
        raise VerifyError(played[0].reason)
    findings = []
    for r in results:
        if r.verdict == FAIL and r.rule is not None:
            r.finding = _finding(r, config)
            if r.finding is not None:
                findings.append(r.finding)
    findings += _passive(traffic, mutated)
    return ProbeRun(results, findings, traffic.messages, traffic.record, interrupted)


def _unreachable(reason: str) -> bool:
    return "cannot reach" in reason or "before answering any request" in reason or "cannot start" in reason


def _passive(traffic: Traffic, mutated: set[int]) -> list[Finding]:
    """What the rules said of the probe's traffic: once per rule and recorded chain, the chain named
    as the recording names it, and nothing about a mutated request or its response."""
    seen: set[tuple] = set()
    out = []
    for f, chain, mutation in traffic.found:
        if mutated.intersection(f.messages):
            continue
        recorded = traffic.live_chain.get(f.chain) if f.chain is not None else None
        key = (f.rule, recorded)
        if key in seen:
            continue
        seen.add(key)
        f.chain = recorded
        out.append(f)
    return out


def describe(res: ProbeResult) -> str:
    """One line: `pass     tampered-state  c1 tools/call deploy: …`."""
    return f"{res.verdict:<8} {res.mutation:<23} {res.chain} {res.label}: {res.reason}"


__all__ = ["ProbeOptions", "ProbeResult", "ProbeRun", "run_probes", "plans", "recorded_chains", "describe",
           "PASS", "FAIL", "SKIPPED"]
