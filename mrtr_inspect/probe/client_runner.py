"""Playing the client probes (RULES.md §14): for each mutation, the probe server (the recording's
server side as `replay serve` plays it, changed by `client_mutations.DIRECTORS[mutation]`) is
started, over HTTP in this process or over stdio as a command the client starts, then the client
command is run once against it, and its run is judged.

Each run's traffic is recorded (`--record DIR`: `DIR/NN-MUTATION.jsonl`, else a temporary folder)
and read back through the analysis, so the passive rules judge every exchange; the verdict comes
from that traffic, what the director did (its summary) and how the client ended (its exit, or
still running when the probe's time ran out).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import Config
from ..core.events import CLIENT_DISCONNECTED, Direction, HttpEnd
from ..core.findings import Finding
from ..core.messages import NOTIFICATION, REQUEST, Message, target_of
from ..recording.reader import ReadNotes, UnreadableRecording, read_frames
from ..replay.script import ReplayError, Script
from . import client_mutations as cm
from .mutations import FAIL, PASS, SKIPPED
from .runner import ProbeResult, _finding
from .stop import StopSignals

URL_FIELD, SERVER_FIELD = "{url}", "{server}"
STATE_RULES = ("request-state-altered", "request-state-dropped")
SHAPE_RULES = ("input-responses-missing-key", "input-responses-not-object", "elicit-result-action-invalid",
               "elicit-result-content-type", "elicit-result-url-content", "elicit-result-accept-missing-content",
               "elicit-result-schema-mismatch", "create-message-result-invalid", "list-roots-result-invalid",
               "root-uri-not-file", "input-response-error-shaped")
PARALLEL_RULES = ("request-state-unsolicited", "mrtr-fields-parallel-misuse", "request-state-altered",
                  "request-state-dropped")
SERVER_SECTIONS = frozenset({"4.1", "11", "12"})


@dataclass
class ClientOptions:
    only: tuple[str, ...] = ()  # mutation names (empty: all)
    transport: str | None = None  # http | stdio (None: from the command's fields, else the recording's)
    timeout: float = 60.0  # seconds the client may run per mutation (fault-delay holds its answer this long)
    window: float = 2.0  # parallel: seconds the first call's answer waits for a second call
    host: str = "127.0.0.1"  # where the HTTP probe server listens
    record: str | None = None  # a folder: each mutation's traffic, NN-MUTATION.jsonl


@dataclass
class ClientRun:
    """How the client command ended."""

    started: bool = True
    status: int | None = None  # its exit status (None: still running when the time ran out, then killed)
    error: str = ""  # why it could not start
    seconds: float = 0.0
    killed_at: float | None = None  # when the probe stopped it (epoch)
    stderr: list[str] = field(default_factory=list)  # its last lines

    @property
    def hung(self) -> bool:
        return self.started and self.status is None

    def ended(self) -> str:
        if not self.started:
            return f"the client command cannot start: {self.error}"
        if self.status is None:
            return f"the client was still running after {self.seconds:g} s"
        return f"the client exited with status {self.status}"

    def tail(self) -> str:
        return ("; its last stderr lines: " + " | ".join(self.stderr)) if self.stderr else "; it wrote nothing on stderr"


@dataclass
class ClientResult(ProbeResult):
    traffic: str | None = None
    limit: str = ""

    def to_json(self) -> dict:
        return {**super().to_json(), "traffic": self.traffic, "limit": self.limit}


@dataclass
class ClientProbeRun:
    probes: list[ClientResult]
    findings: list[Finding]
    messages: int
    record: str | None
    left_out: int = 0  # findings about the probe server's own answers, not reported
    interrupted: bool = False
    groups: list[tuple[str, list[Finding]]] = field(default_factory=list)  # (traffic, its findings): SARIF
    temp: str | None = None  # the traffic's temporary folder (no --record): the caller removes it
    undriven: str | None = None  # why the client could not be driven at all (every verdict skipped for it)


@dataclass
class Seen:
    """One mutation's run: its traffic, what the director did, how the client ended."""

    messages: list[Message]
    findings: list[Finding]
    ended: dict[int, tuple[str | None, float]]  # HTTP exchange -> (its end's error, time)
    director: dict
    client: ClientRun
    options: ClientOptions

    def requests(self) -> list[Message]:
        return [m for m in self.messages if m.kind == REQUEST and m.direction == Direction.C2S]

    def with_state(self, states) -> list[Message]:
        return [m for m in self.requests() if cm._params(m).get("requestState") in states]

    def rule(self, *rules: str) -> Finding | None:
        return next((f for f in self.findings if f.rule in rules), None)


# -------------------------------------------------------------------------------------------------
# judging


def n_retries(n: int) -> str:
    return f"{n} retr{'y' if n == 1 else 'ies'}"


def _answers(m: Message) -> dict:
    a = cm._params(m).get("inputResponses")
    return a if type(a) is dict else {}


def _v(verdict: str, rule: str | None, reason: str, messages: list[int] | None = None) -> tuple:
    return verdict, rule, reason, messages or []


def _finding_v(f: Finding, what: str) -> tuple:
    return _v(FAIL, f.rule, f"{what}: {f.message}", list(f.messages))


def _gave_up(s: Seen) -> str:
    """How the client ended the call it did not retry, when the traffic says."""
    for m in s.messages:
        if m.kind == NOTIFICATION and m.direction == Direction.C2S and m.method == "notifications/cancelled":
            why = cm._params(m).get("reason")
            return f"; it cancelled the request (notifications/cancelled{': ' + why if isinstance(why, str) else ''})"
    return ""


def judge_state_rotated(s: Seen) -> tuple:
    f = s.rule(*STATE_RULES)
    if f is not None:
        return _finding_v(f, "a retry did not echo the rotated requestState of its round")
    echoed = s.with_state(set(s.director["issued"]))
    if not echoed:
        return _v(SKIPPED, None, "the client did not retry a round whose requestState was rotated" + _gave_up(s))
    return _v(PASS, None, f"every retry echoed the rotated requestState of its round ({n_retries(len(echoed))})",
              [echoed[0].index])


def judge_state_only(s: Seen) -> tuple:
    state = s.director["issued"][0]
    echoed = s.with_state({state})
    if echoed:
        r = echoed[0]
        if _answers(r):
            return _v(FAIL, "input-responses-unsolicited", "the retry of the state-only result answered questions "
                      f"nobody asked ({', '.join(sorted(_answers(r)))})", [r.index])
        return _v(PASS, None, "the client retried with the requestState verbatim and no answers", [r.index])
    f = s.rule("request-state-dropped")
    if f is not None:
        return _finding_v(f, "the retry of the state-only result dropped its requestState")
    d = s.director
    again = [m for m in s.requests() if m.method == d.get("method") and target_of(m.method, m.params) == d.get("target")]
    if len(again) > 1:
        return _v(FAIL, "request-state-dropped", "the client sent the request again without the requestState of the "
                  "state-only result", [again[1].index])
    served = [m.index for m in s.messages if m.direction == Direction.S2C and type(m.result) is dict
              and m.result.get("requestState") == state]
    return _v(FAIL, "client-ignored-state-only", "the client did not retry the input_required result that carried only "
              f"a requestState (\"retry when ready\"): {s.client.ended()} ({_limit(s.options)})", served)


def judge_extra_round(s: Seen) -> tuple:
    key = cm.PREFIX + "extra"
    retries = s.with_state(set(s.director["issued"]))
    if not retries:
        return _v(SKIPPED, None, "the client did not retry the extra round (a client that caps its rounds: see "
                  "many-rounds)")
    r = retries[0]
    f = s.rule("retry-reused-id")
    if f is not None or r.id == s.director.get("retried_id"):
        return _v(FAIL, "retry-reused-id", f"the retry of the extra round reused the id {r.id!r} of the request it "
                  "retries", [r.index])
    if key not in _answers(r):
        return _v(FAIL, "input-responses-missing-key", f"the retry of the extra round did not answer its key {key}",
                  [r.index])
    return _v(PASS, None, f"the retry answered the extra round's key with a new id ({r.id!r})", [r.index])


def judge_many_rounds(s: Seen) -> tuple:
    retries = s.with_state(set(s.director["issued"]))
    n = len(retries)
    if n > cm.STORM:
        return _v(FAIL, "client-retry-storm", f"the client retried {n} rounds of a server that kept asking (past "
                  f"{cm.STORM}; the probe stops asking after {cm.MANY_ROUNDS})", [retries[cm.STORM].index])
    return _v(PASS, None, f"the client stopped on its own after {n_retries(n)} ({s.client.ended()})",
              [retries[-1].index] if retries else [])


def judge_all_kinds(s: Seen) -> tuple:
    retries = s.with_state(set(s.director["issued"]))
    if not retries:
        return _v(SKIPPED, None, "the client did not retry the round that asked every kind it declared")
    f = s.rule(*SHAPE_RULES)
    if f is not None:
        return _finding_v(f, "an answer to the round of every kind")
    missing = [k for k in s.director["keys"] if k not in _answers(retries[0])]
    if missing:
        return _v(FAIL, "input-responses-missing-key", f"the retry left out {', '.join(missing)}", [retries[0].index])
    return _v(PASS, None, f"each of {', '.join(s.director['keys'])} answered with the kind of its request",
              [retries[0].index])


def judge_undeclared_kind(s: Seen) -> tuple:
    key = cm.PREFIX + "undeclared"
    kind = s.director.get("kind", "")
    retries = s.with_state(set(s.director["issued"]))
    if not retries:
        return _v(PASS, None, f"the client gave up on a round asking {kind}, which it had not declared")
    if key in _answers(retries[0]):
        return _v(FAIL, "client-answered-undeclared", f"the client answered {kind} under {key}, a kind its request "
                  "did not declare", [retries[0].index])
    return _v(PASS, None, f"the retry left out the key asking {kind}, which the request had not declared",
              [retries[0].index])


def judge_state_kept(s: Seen) -> tuple:
    state = s.director["issued"][0]
    f = s.rule("request-state-altered")
    echoed = s.with_state({state})
    if f is not None:
        return _finding_v(f, "the retry did not echo the requestState")
    if echoed:
        return _v(PASS, None, f"the retry echoed the {len(state)}-character requestState as the same string",
                  [echoed[0].index])
    others = [m for m in s.requests() if _answers(m) and "requestState" in cm._params(m)]
    if others:
        got = cm._params(others[0]).get("requestState")
        how = "truncated" if type(got) is str and state.startswith(got) else "changed"
        return _v(FAIL, "request-state-altered", f"the retry's requestState is not the one served ({how}: "
                  f"{len(got) if type(got) is str else 0} of {len(state)} characters)", [others[0].index])
    f = s.rule("request-state-dropped")
    if f is not None:
        return _finding_v(f, "the retry dropped the requestState")
    return _v(SKIPPED, None, "the client did not retry the round")


def judge_missing_capability(s: Seen) -> tuple:
    n = int(s.director.get("resends", 0))
    if n > 1:
        same = [m for m in s.requests() if m.method == s.director.get("method")]
        return _v(FAIL, "client-retried-after-32021", f"the client resent the same request unchanged {n} times after "
                  "-32021 (missing required client capability)", [same[-1].index] if same else [])
    said = "did not resend the refused request unchanged" if n == 0 else "resent the refused request unchanged once"
    return _v(PASS, None, f"the client {said}" + (" (it then sent it changed)" if s.director.get("changed") else ""))


def judge_parallel(s: Seen) -> tuple:
    f = s.rule(*PARALLEL_RULES)
    if f is not None:
        return _finding_v(f, "two calls answered in the opposite order")
    retries = s.with_state(set(s.director["issued"]))
    if not retries:
        return _v(SKIPPED, None, "the client retried neither of the two calls")
    return _v(PASS, None, f"each retry carried its own chain's requestState ({n_retries(len(retries))})",
              [r.index for r in retries])


def judge_fault(s: Seen) -> tuple:
    rid = s.director.get("request_id")
    c = s.client
    if not c.hung:
        return _v(PASS, None, f"{c.ended()} after {c.seconds:.1f} s")
    cut = c.killed_at if c.killed_at is not None else float("inf")
    for m in s.messages:
        if m.kind == NOTIFICATION and m.direction == Direction.C2S and m.method == "notifications/cancelled" \
                and cm._params(m).get("requestId") == rid and m.time < cut:
            return _v(PASS, None, "the client cancelled the request (notifications/cancelled)", [m.index])
    asked = next((m for m in s.requests() if m.id == rid), None)
    if asked is not None and asked.exchange is not None:
        err, t = s.ended.get(asked.exchange, (None, 0.0))
        if err == CLIENT_DISCONNECTED and t < cut:
            return _v(PASS, None, "the client closed the request's response stream (on HTTP, a cancellation)",
                      [asked.index])
    return _v(FAIL, "client-hung", f"the client neither finished nor cancelled the request within {_limit(s.options)}",
              [asked.index] if asked is not None else [])


JUDGES: dict[str, Callable[[Seen], tuple]] = {
    "state-rotated": judge_state_rotated, "state-only": judge_state_only, "extra-round": judge_extra_round,
    "many-rounds": judge_many_rounds, "all-kinds": judge_all_kinds, "undeclared-kind": judge_undeclared_kind,
    "large-state": judge_state_kept, "unicode-state": judge_state_kept,
    "missing-capability": judge_missing_capability, "parallel": judge_parallel,
    "fault-delay": judge_fault, "fault-disconnect": judge_fault, "fault-malformed": judge_fault,
}


def _limit(options: ClientOptions) -> str:
    return f"--timeout {options.timeout:g} s"


def limit_of(mutation: str, options: ClientOptions) -> str:
    if mutation == "parallel":
        return f"--timeout {options.timeout:g} s, --window {options.window:g} s"
    return _limit(options)


# -------------------------------------------------------------------------------------------------
# the client


def expand(cmd: list[str], url: str | None, server: list[str] | None) -> list[str]:
    """`{url}` in any argument becomes the URL; `{server}` as a whole argument the command line's
    arguments, inside a longer argument that command line shell-quoted."""
    out: list[str] = []
    for a in cmd:
        if server is not None and a == SERVER_FIELD:
            out += server
            continue
        if server is not None:
            a = a.replace(SERVER_FIELD, shlex.join(server))
        if url is not None:
            a = a.replace(URL_FIELD, url)
        out.append(a)
    return out


def run_client(argv: list[str], env: dict, timeout: float, work: str, stop: StopSignals | None = None) -> ClientRun:
    """Run the client command (its own process group) until it exits or `timeout` runs out; on a
    stop signal (KeyboardInterrupt) it is stopped too, then the KeyboardInterrupt goes on."""
    stop = stop or StopSignals()
    err_path = os.path.join(work, "client-stderr")
    started = time.monotonic()
    run = ClientRun()
    p: subprocess.Popen | None = None
    interrupted = False
    with open(err_path, "w+b") as err, open(os.devnull, "wb") as null:
        try:
            with stop.held():  # a signal while it starts is taken once its process group is known
                try:
                    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=null, stderr=err, env=env,
                                         start_new_session=True)
                except (OSError, ValueError) as e:
                    return ClientRun(False, None, f"{argv[0] if argv else '(empty)'}: "
                                     f"{getattr(e, 'strerror', None) or e}")
            stop.check()
            run.status = p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:
            interrupted = True
        with stop.held():  # the clean-up is bounded: a second signal does not cut it short
            if p is not None and run.status is None:
                run.killed_at = time.time()
                _stop(p)
            run.seconds = time.monotonic() - started
            if p is not None:
                _reap(p.pid)  # what it started (a stdio probe server) ends too, its recording and summary written
            err.seek(0)
            run.stderr = _last_lines(err.read())
    if interrupted:
        raise KeyboardInterrupt
    return run


def _stop(p: subprocess.Popen) -> None:
    """The client and what it started (its own process group)."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _reap(pgid: int, grace: float = 10.0) -> None:
    """Wait for the client's process group to end (a stdio probe server reads its closed stdin and
    exits); what is left after `grace` seconds is stopped."""
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 5.0
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)


def _last_lines(data: bytes, n: int = 3, width: int = 200) -> list[str]:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return [ln if len(ln) <= width else ln[: width - 1] + "…" for ln in lines[-n:]]


# -------------------------------------------------------------------------------------------------
# one mutation


def _server_stdio(script: Script, mutation: str, traffic: str, summary: str, options: ClientOptions) -> list[str]:
    return [sys.executable, "-m", "mrtr_inspect.probe.clientserve", "--mutation", mutation, "--record", traffic,
            "--summary", summary, "--window", f"{options.window:g}", script.path]


def _read(traffic: str, config: Config | None) -> tuple[list[Message], list[Finding], dict]:
    from ..analysis import Analysis

    a = Analysis(config)
    msgs: list[Message] = []
    found: list[Finding] = []
    ended: dict[int, tuple[str | None, float]] = {}

    def take(outs: list) -> None:
        for o in outs:
            if type(o) is Message:
                msgs.append(o)
            elif type(o) is Finding:
                found.append(o)

    if os.path.exists(traffic):
        try:
            for frame in read_frames(traffic, ReadNotes()):
                if type(frame) is HttpEnd:
                    ended[frame.exchange] = (frame.error, frame.time)
                take(a.feed(frame))
        except UnreadableRecording:
            pass
    take(a.close(time.time()))
    return msgs, found, ended


def _summaries(folder: str) -> dict:
    out: dict = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("summary-") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    probe = json.load(f).get("probe") or {}
            except (OSError, ValueError):
                continue
            if probe.get("applied") or not out:
                out = probe
    return out


def _keep(f: Finding, msgs: dict[int, Message], director: dict) -> bool:
    """Whether a finding of the run's traffic is the client's: not about the probe server's answers
    (recorded, or changed on purpose), nor the key undeclared-kind asked for on purpose."""
    from ..rules.registry import REGISTRY

    rule = REGISTRY.get(f.rule)
    if f.rule.startswith(("server-", "upstream-")) or (rule is not None and rule.section in SERVER_SECTIONS):
        return False
    if f.messages and all(msgs[i].direction == Direction.S2C for i in f.messages if i in msgs):
        return False
    if f.rule == "input-responses-missing-key" and cm.PREFIX + "undeclared" in f.message \
            and director.get("mutation") == "undeclared-kind":
        return False
    return True


class ProbeServer:
    """One mutation's probe server: over HTTP in this process (`url`), or over stdio as the command
    line the client starts (`command`); its traffic recorded to `traffic`. `hold`: fault-delay sends
    its answer after this many seconds (None: never; the CLI stops the client instead)."""

    def __init__(self, script: Script, mutation: str, transport: str, options: ClientOptions, traffic: str, work: str,
                 config: Config | None, hold: float | None = None) -> None:
        self.script, self.mutation, self.transport = script, mutation, transport
        self.options, self.traffic, self.work, self.config = options, traffic, work, config
        self.url = ""
        self.command: list[str] = []
        self.director: cm.Director | None = None
        self._http: Any = None
        self.hold = hold

    def start(self) -> None:
        from ..replay.serve import BackgroundHttpServer, ServeOptions, ServeSession

        if self.transport == "http":
            self.director = cm.DIRECTORS[self.mutation](self.script, self.options.window)
            self.director.hold = self.hold
            session = ServeSession(self.script, ServeOptions(), "http", self.config, self.traffic,
                                   director=self.director, info={"probe": self.mutation})
            self._http = BackgroundHttpServer(session, self.options.host, 0)
            self.url = self._http.start()
        else:
            self.command = [sys.executable, "-m", "mrtr_inspect.probe.clientserve", "--mutation", self.mutation,
                            "--record", self.traffic, "--summary", os.path.join(self.work, "summary-{pid}.json"),
                            "--window", f"{self.options.window:g}", *(["--hold", f"{self.hold:g}"] if self.hold else []),
                            self.script.path]

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None

    def seen(self, client: ClientRun) -> Seen:
        summary = self.director.summary() if self.director is not None else _summaries(self.work)
        msgs, found, ended = _read(self.traffic, self.config)
        return Seen(msgs, found, ended, summary, client, self.options)


def run_mutation(script: Script, mutation: str, cmd: list[str], transport: str, options: ClientOptions,
                 traffic: str, work: str, config: Config | None,
                 stop: StopSignals | None = None) -> tuple[Seen, list[str]]:
    stop = stop or StopSignals()
    env = dict(os.environ)
    server = ProbeServer(script, mutation, transport, options, traffic, work, config)
    try:
        server.start()
        if server.url:
            argv = expand(cmd, server.url, None)
            env["MRTR_PROBE_URL"] = server.url
        else:
            argv = expand(cmd, None, server.command)
            env["MRTR_PROBE_SERVER"] = shlex.join(server.command)
        client = run_client(argv, env, options.timeout, work, stop)
    finally:
        with stop.held():
            server.stop()
    return server.seen(client), argv


def judge_run(server: ProbeServer, client: ClientRun) -> tuple[ClientResult, list[Finding]]:
    """The verdict of one mutation's run, and the findings to report (the failure's, then the
    passive rules' of its traffic, once per rule; not those about the probe server's answers)."""
    seen = server.seen(client)
    name = server.mutation
    res = ClientResult("-", name, SKIPPED, limit=limit_of(name, server.options), traffic=server.traffic)
    res.verdict, res.rule, res.reason, res.messages = verdict(name, seen)
    res.chain = seen.director.get("chain") or "-"
    res.label = seen.director.get("label") or ""
    return res, _findings(res, seen, server.config)[0]


def _findings(res: ClientResult, seen: Seen, config: Config | None) -> tuple[list[Finding], int]:
    by_index = {m.index: m for m in seen.messages}
    mine: list[Finding] = []
    left_out = 0
    if res.verdict == FAIL and res.rule is not None:
        res.finding = _finding(res, config)
        if res.finding is not None:
            res.finding.message = f"probe-client {res.mutation}" + res.finding.message[len(f"probe {res.mutation}"):]
            res.finding.details = {"probe": res.mutation, "verdict": FAIL, "traffic": res.traffic}
            mine.append(res.finding)
    seen_rules: set[str] = set()
    for f in seen.findings:
        if not _keep(f, by_index, seen.director):
            left_out += 1
            continue
        if f.rule in seen_rules or (res.finding is not None and f.rule == res.rule):
            continue
        seen_rules.add(f.rule)
        f.details = {**(f.details or {}), "probe": res.mutation, "traffic": res.traffic}
        mine.append(f)
    return mine, left_out


def verdict(mutation: str, seen: Seen) -> tuple:
    if not any(m.direction == Direction.C2S for m in seen.messages):
        return _v(SKIPPED, None, _not_driven(seen.client, seen.options))
    d = seen.director
    if not d.get("applied"):
        if d.get("chains") == 0:
            return _v(SKIPPED, None, "the recording has no chain with an input_required round: there is nothing "
                      "to change")
        if d.get("skip"):
            return _v(SKIPPED, None, d["skip"])
        if mutation == "parallel":
            return _v(SKIPPED, None, "the client made no two calls of recorded chains at once (the first call's "
                      f"answer waited {seen.options.window:g} s for a second)")
        need = cm.DIRECTORS[mutation].needs
        return _v(SKIPPED, None, f"the client never made the call this mutation needs ({need}); {seen.client.ended()}")
    return JUDGES[mutation](seen)


def _not_driven(c: ClientRun, options: ClientOptions) -> str:
    if not c.started:
        return c.ended()
    if c.status is None:
        return f"the client made no request within {_limit(options)}" + c.tail()
    return f"the client exited with status {c.status} before calling anything" + c.tail()


# -------------------------------------------------------------------------------------------------
# the run


def mutation_names(only: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [m for m in only if m not in cm.DIRECTORS]
    if unknown:
        raise ReplayError(f"--mutation: unknown mutation {', '.join(unknown)} (known: {', '.join(cm.DIRECTORS)})")
    return only or tuple(cm.DIRECTORS)


def run_client_probes(script: Script, cmd: list[str], options: ClientOptions, config: Config | None = None,
                      progress: Callable[[ClientResult], None] | None = None,
                      stop: StopSignals | None = None) -> ClientProbeRun:
    """Every mutation in turn. A KeyboardInterrupt (a stop signal: `stop`, entered by the caller)
    stops the mutation under way, unreported, and the run: `interrupted`, the mutations judged
    before it kept."""
    stop = stop or StopSignals()
    names = mutation_names(options.only)
    transport = options.transport or ("stdio" if any(SERVER_FIELD in a for a in cmd) else
                                      "http" if any(URL_FIELD in a for a in cmd) else script.transport)
    folder = options.record
    temp = None
    if folder is None:
        temp = tempfile.mkdtemp(prefix="mrtr-probe-client-")
        folder = temp
    else:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    results: list[ClientResult] = []
    findings: list[Finding] = []
    groups: list[tuple[str, list[Finding]]] = []
    left_out = messages = 0
    undriven: str | None = None
    interrupted = False
    try:
        for n, name in enumerate(names, 1):
            traffic = os.path.join(folder, f"{n:02d}-{name}.jsonl")
            res = ClientResult("-", name, SKIPPED, limit=limit_of(name, options),
                               traffic=None if temp else traffic)
            try:
                stop.check()  # a signal held back while the last mutation's client was stopped or judged
                if undriven is not None:
                    res.reason = undriven
                    seen = None
                else:
                    with tempfile.TemporaryDirectory(prefix="mrtr-probe-run-") as work:
                        seen, _ = run_mutation(script, name, cmd, transport, options, traffic, work, config, stop)
                    res.verdict, res.rule, res.reason, res.messages = verdict(name, seen)
                    res.chain = seen.director.get("chain") or "-"
                    res.label = seen.director.get("label") or ""
                    mine, dropped = _findings(res, seen, config)
            except KeyboardInterrupt:
                interrupted = True
                break
            with stop.held():  # a judged mutation is reported whole
                if seen is not None:
                    messages += len(seen.messages)
                    if res.verdict == SKIPPED and not any(m.direction == Direction.C2S for m in seen.messages):
                        undriven = res.reason  # a client that cannot be driven: the same for every mutation
                    left_out += dropped
                    findings += mine
                    groups.append((traffic, mine))
                results.append(res)
                if progress:
                    progress(res)
    except BaseException:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    return ClientProbeRun(results, findings, messages, options.record, left_out, interrupted or bool(stop.signum),
                          groups, temp, undriven if results and all(r.reason == undriven for r in results) else None)
