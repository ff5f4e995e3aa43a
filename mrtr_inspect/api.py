"""The public Python API (`import mrtr_inspect`; docs/api.md): `check` analyses recordings as the
`check` command does and returns a `Report`, whose chains and findings are typed objects and whose
`to_dict()` is exactly the JSON report (CONTRACTS.md, `mrtr-inspect.report/1`).

    report = mrtr_inspect.check(["session.jsonl"])
    for f in report.findings:
        print(f.rule, f.severity, f.message)

The typed objects are read from the report as `check --format json` writes it, and write it back
key for key: a key they do not name (a later addition to the format) is kept in `extra`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from .adapters.offline import analyze_all
from .config import Config
from .core.era import Era
from .core.findings import Finding
from .outputs.report import ReportBuilder
from .recording.reader import ReadNotes

__all__ = ["check", "Report", "Summary", "ChainSummary", "RequestSummary", "RoundSummary", "HopLink"]

PathLike = str | os.PathLike


def _extra(d: dict, known: tuple[str, ...]) -> dict:
    return {k: v for k, v in d.items() if k not in known}


def _put(d: dict, **optional: Any) -> dict:
    """`d` with the optional keys whose value is not None (the report leaves the others out)."""
    d.update((k, v) for k, v in optional.items() if v is not None)
    return d


@dataclass(frozen=True)
class RequestSummary:
    """One request of a chain (its first request, or a retry) and what answered it: an entry of
    `ChainSummary.timeline`. The retry fields are None for the first request."""

    id: Any  #: its JSON-RPC id
    message: int  #: its message index (the order of the recording)
    time: float  #: when it was sent (seconds since the epoch)
    #: what answered it: result, input_required, error, task, none (its HTTP exchange ended without a
    #: JSON-RPC response), cancelled; None while it is still in flight (chain outcome `open`)
    response: str | None
    retries_round: int | None = None  #: a retry: the round it answers
    wait_ms: float | None = None  #: a retry: how long after that round's input_required it came
    link: str | None = None  #: a retry: what tied it to the round (state, keys or params)
    answered: dict | None = None  #: a retry: its inputResponses, summarised per key
    response_message: int | None = None  #: the message index of the response
    response_time: float | None = None  #: when the response came
    error_code: Any = None  #: the JSON-RPC error code of an error response
    extra: dict = field(default_factory=dict)

    _KEYS = ("id", "message", "time", "retries_round", "wait_ms", "link", "answered", "response",
             "response_message", "response_time", "error_code")

    @classmethod
    def from_dict(cls, d: dict) -> RequestSummary:
        return cls(d["id"], d["message"], d["time"], d.get("response"), d.get("retries_round"), d.get("wait_ms"),
                   d.get("link"), d.get("answered"), d.get("response_message"), d.get("response_time"),
                   d.get("error_code"), _extra(d, cls._KEYS))

    def to_dict(self) -> dict:
        d = _put({"id": self.id, "message": self.message, "time": self.time}, retries_round=self.retries_round,
                 wait_ms=self.wait_ms, link=self.link, answered=self.answered)
        d["response"] = self.response
        return {**_put(d, response_message=self.response_message, response_time=self.response_time,
                       error_code=self.error_code), **self.extra}


@dataclass(frozen=True)
class RoundSummary:
    """One round of a chain: an `input_required` result and what it asked (`ChainSummary.round_details`).

    A legacy chain's round (RULES.md §13) is a question the server asked while the request was open:
    `message` and `time` are the server's request, `asked` is keyed by its id, and `extra` holds
    `link` (stream, related or time), `server_request` (its id), `response`, `response_message`,
    `response_time`, `answered` and `wait_ms` (the user's answering time) once the client answered."""

    round: int  #: 1 for the first input_required result of the chain
    message: int  #: the message index of the input_required result
    time: float
    asked: dict  #: its inputRequests, summarised per key (method, and for an elicitation mode, summary, fields)
    request_state: str | None  #: the first 16 hex digits of the SHA-256 of its requestState (None: none)
    unanswered_ms: float | None = None  #: an abandoned chain's last round that no retry answered: how long it waited
    extra: dict = field(default_factory=dict)

    _KEYS = ("round", "message", "time", "asked", "request_state", "unanswered_ms")

    @classmethod
    def from_dict(cls, d: dict) -> RoundSummary:
        return cls(d["round"], d["message"], d["time"], d["asked"], d.get("request_state"), d.get("unanswered_ms"),
                   _extra(d, cls._KEYS))

    def to_dict(self) -> dict:
        d = {"round": self.round, "message": self.message, "time": self.time, "asked": self.asked,
             "request_state": self.request_state}
        return {**_put(d, unanswered_ms=self.unanswered_ms), **self.extra}


@dataclass(frozen=True)
class ChainSummary:
    """One logical request (a chain): a tools/call, prompts/get or resources/read and its retries,
    one round per `input_required` result (RULES.md §3, §10; CONTRACTS.md "chains")."""

    id: str  #: `c1`, `c2`… in the order chains started
    method: str | None
    target: str | None  #: the tool or prompt name, or the resource URI
    rounds: int  #: input_required results in the chain, or a legacy chain's questions (0: it finished in one round)
    requests: list  #: the JSON-RPC ids of its requests, in order
    outcome: str  #: complete, error, abandoned, cancelled, open or task (RULES.md §10)
    link: str | None  #: how its retries were tied: state, keys, params (the weakest used); a legacy chain's questions: stream, related, time; or None
    duration_ms: float  #: from the first request to the end of the chain
    era: str  #: modern, legacy, malformed or unknown (RULES.md §2)
    peer: str  #: the client it belongs to, as the analysis told clients apart (RULES.md §10.4)
    start: float
    end: float
    error_code: Any  #: the JSON-RPC error code that ended it (outcome error), else None
    timeline: list[RequestSummary]  #: its requests, each with what answered it
    round_details: list[RoundSummary]  #: its rounds
    extra: dict = field(default_factory=dict)
    hop: str | None = None  #: the hop its session named (`--hop`; RULES.md §11), else None

    _KEYS = ("id", "method", "target", "rounds", "requests", "outcome", "link", "duration_ms", "era", "peer",
             "start", "end", "error_code", "timeline", "round_details", "hop")

    @classmethod
    def from_dict(cls, d: dict) -> ChainSummary:
        return cls(d["id"], d.get("method"), d.get("target"), d["rounds"], list(d["requests"]), d["outcome"],
                   d.get("link"), d["duration_ms"], d.get("era", Era.UNKNOWN), d.get("peer", ""), d.get("start", 0.0),
                   d.get("end", 0.0), d.get("error_code"),
                   [RequestSummary.from_dict(e) for e in d.get("timeline") or ()],
                   [RoundSummary.from_dict(r) for r in d.get("round_details") or ()], _extra(d, cls._KEYS), d.get("hop"))

    def to_dict(self) -> dict:
        hop = {"hop": self.hop} if self.hop is not None else {}
        return {"id": self.id, "method": self.method, "target": self.target, "rounds": self.rounds,
                "requests": list(self.requests), "outcome": self.outcome, "link": self.link,
                "duration_ms": self.duration_ms, "era": self.era, "peer": self.peer, "start": self.start,
                "end": self.end, "error_code": self.error_code, "timeline": [e.to_dict() for e in self.timeline],
                "round_details": [r.to_dict() for r in self.round_details], **hop, **self.extra}


@dataclass(frozen=True)
class HopLink:
    """A front chain and a back-hop chain it caused (RULES.md §11; the report's `hops`): the evidence that
    tied them (`target+args`, `args`, `time`), and the durations: the front chain's, the back chain's,
    and the gateway's share of the front one (neither the user answering nor the upstream working)."""

    front: str  #: the front chain's id
    back: str  #: the back chain's id
    link: str
    front_ms: float
    back_ms: float
    gateway_ms: float
    front_hop: str | None = None
    back_hop: str | None = None
    extra: dict = field(default_factory=dict)

    _KEYS = ("front", "back", "link", "front_ms", "back_ms", "gateway_ms", "front_hop", "back_hop")

    @classmethod
    def from_dict(cls, d: dict) -> HopLink:
        return cls(d["front"], d["back"], d["link"], d["front_ms"], d["back_ms"], d["gateway_ms"], d.get("front_hop"),
                   d.get("back_hop"), _extra(d, cls._KEYS))

    def to_dict(self) -> dict:
        return {"front": self.front, "back": self.back, "link": self.link, "front_ms": self.front_ms,
                "back_ms": self.back_ms, "gateway_ms": self.gateway_ms, "front_hop": self.front_hop,
                "back_hop": self.back_hop, **self.extra}


@dataclass(frozen=True)
class Summary:
    """The report's counts: messages read, chains, and findings per severity."""

    messages: int
    chains: int
    errors: int
    warnings: int
    infos: int
    extra: dict = field(default_factory=dict)

    _KEYS = ("messages", "chains", "errors", "warnings", "infos")

    @classmethod
    def from_dict(cls, d: dict) -> Summary:
        return cls(d["messages"], d["chains"], d["errors"], d["warnings"], d["infos"], _extra(d, cls._KEYS))

    def to_dict(self) -> dict:
        return {"messages": self.messages, "chains": self.chains, "errors": self.errors, "warnings": self.warnings,
                "infos": self.infos, **self.extra}


@dataclass(frozen=True)
class Report:
    """What `check` computes over recordings: the JSON report (`mrtr-inspect.report/1`) as objects.

    `chains` are listed in the order they ended; `findings` in the order they were made (`Finding`:
    rule, severity, message, time, chain, messages, spec, conformance, details). `notes` say what the
    reader met in the inputs (a torn last line, a session renamed apart)."""

    format: str
    tool: dict  #: {"name": "mrtr-inspect", "version": …}
    inputs: list[str]
    summary: Summary
    chains: list[ChainSummary]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    #: the linked pairs of two hops (RULES.md §11), when some session named its hop (`--hop`); else None
    hops: list[HopLink] | None = None

    _KEYS = ("format", "tool", "inputs", "summary", "notes", "chains", "findings", "hops")

    @classmethod
    def from_dict(cls, d: dict) -> Report:
        """A report from its JSON form (what `check --format json` writes, parsed)."""
        return cls(d["format"], dict(d["tool"]), list(d["inputs"]), Summary.from_dict(d["summary"]),
                   [ChainSummary.from_dict(c) for c in d["chains"]], [Finding.from_json(f) for f in d["findings"]],
                   list(d.get("notes") or ()), _extra(d, cls._KEYS),
                   [HopLink.from_dict(h) for h in d["hops"]] if d.get("hops") is not None else None)

    def to_dict(self) -> dict:
        """The JSON report, exactly as `check --format json` writes it (parsed)."""
        d: dict[str, Any] = {"format": self.format, "tool": dict(self.tool), "inputs": list(self.inputs),
                             "summary": self.summary.to_dict()}
        if self.notes:
            d["notes"] = list(self.notes)
        d["chains"] = [c.to_dict() for c in self.chains]
        d["findings"] = [f.to_json() for f in self.findings]
        if self.hops is not None:
            d["hops"] = [h.to_dict() for h in self.hops]
        return {**d, **self.extra}

    def of(self, rule: str) -> list[Finding]:
        """The findings of one rule (an id of RULES.md)."""
        return [f for f in self.findings if f.rule == rule]


def analysed(paths: Iterable[PathLike], config: Config | None = None, watch: Any = None,
             sessions: bool = False, observe: Any = None) -> ReportBuilder:
    """The report builder of the recordings, analysed as one capture, with the reader's notes; the
    caller closes it. Raises `UnreadableRecording` for an input that is not a recording. `watch`:
    a function of the builder returning a context manager held around the analysis (the command
    line's progress bar). `sessions`: keep each chain's session id (`builder.sessions`). `observe`:
    sees every observation (`Analysis`), as `offered.Offered` does."""
    inputs = [os.fspath(p) for p in paths]
    builder = ReportBuilder(inputs, sessions)
    notes: dict[str, ReadNotes] = {}
    # the builder reads a chain once it closes (`ReportBuilder.add_all`): no other chain events are made
    try:
        if watch is None:
            analyze_all(inputs, builder.add_all, config, notes, observe, chain_events=False)
        else:
            with watch(builder):
                analyze_all(inputs, builder.add_all, config, notes, observe, chain_events=False)
    except BaseException:
        builder.close()
        raise
    for path, n in notes.items():
        builder.notes.extend(n.lines(path))
    return builder


def judged(paths: Iterable[PathLike], config: Config, watch: Any = None, sessions: bool = False,
           observe: Any = None) -> ReportBuilder:
    """`analysed`, then what `check` judges besides the rules: the servers' definitions against
    `config.baseline` (definition-* findings) and the run against `config.contract` (contract-*
    findings), each added to the report after the analysis' findings, with their notes. A bad
    baseline file raises `BadBaseline` (a UserError) before anything is read."""
    if config.baseline is None and config.contract is None:
        return analysed(paths, config, watch, sessions, observe)
    from . import baseline
    from .offered import Offered

    doc = baseline.load(config.baseline) if config.baseline is not None else None
    offered = Offered()

    def both(obs: Any) -> None:
        offered.observe(obs)
        if observe is not None:
            observe(obs)

    builder = analysed(paths, config, watch, sessions, both)
    servers = offered.servers()
    if doc is not None:
        found, notes = baseline.compare(doc, servers, config, config.baseline)
        builder.notes.extend(notes)
        for f in found:
            builder.add_finding(f)
    if config.contract is not None:
        from .contract import evaluate

        for f in evaluate(config.contract, builder, servers, config):
            builder.add_finding(f)
    return builder


def check(paths: PathLike | Iterable[PathLike], *, config: Config | None = None) -> Report:
    """Analyse recordings offline, as `mrtr-inspect check PATH...` does: several paths are one
    capture, in the order given. `config` changes what is reported (severities, disabled rules,
    limits, `baseline` and `contract`); None is the defaults (no settings file is read;
    `mrtr_inspect.settings.load` reads one).

    Raises `UnreadableRecording` (the command's exit status 2) for an input that is not a recording."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    builder = judged(paths, config or Config())
    try:
        return Report.from_dict(builder.to_dict())
    finally:
        builder.close()
