"""`--filter EXPR` on the outputs (docs/filter.md): a report, or an export's capture, narrowed to the
chains and findings the filter keeps (`mrtr_inspect.filter`).

A chain is judged with the findings about it, so it takes a pass over the findings first
(`Narrowing`: only their rule, severity and message, only when the filter reads them), then one over
the chains, then one over the findings, each judged with its chain. Two hops' pairs stay when both
their chains do.

    n = Narrowing(flt, builder.findings())
    kept = [c for c in builder.chains() if n.chain(c, session_of(c))]
    findings = [f for f in builder.findings() if n.finding(f)]
"""

from __future__ import annotations

from typing import Iterable

from ..filter import Filter
from .report import ReportBuilder


class Narrowing:
    """The three passes of a filter over chains and findings (above)."""

    def __init__(self, flt: Filter, findings: Iterable[dict]) -> None:
        self.filter = flt
        self.about: dict[str, list[dict]] = {}  # chain id -> what the filter reads of its findings
        self._sessions: dict[str, str | None] = {}
        self._chains: dict[str, dict] = {}  # the chains findings are about (their finding pass needs them)
        self.kept: set[str] = set()
        keep_all = flt.needs_findings
        for f in findings:
            cid = f.get("chain")
            if cid is None:
                continue
            facts = self.about.setdefault(cid, [])
            if keep_all:
                facts.append({"rule": f.get("rule"), "severity": f.get("severity"), "message": f.get("message")})

    def chain(self, c: dict, session: str | None = None) -> bool:
        """Whether the chain stays; remembered for its findings' pass."""
        cid = c["id"]
        if cid in self.about:
            self._chains[cid] = c
            self._sessions[cid] = session
        keep = self.filter.matches(c, self.about.get(cid, ()), session)
        if keep:
            self.kept.add(cid)
        return keep

    def finding(self, f: dict) -> bool:
        """Whether the finding stays (after every chain's pass)."""
        cid = f.get("chain")
        return self.filter.matches_finding(f, self._chains.get(cid), self._sessions.get(cid))

    def hops(self, hops: list[dict] | None) -> list[dict] | None:
        if hops is None:
            return None
        return [h for h in hops if h.get("front") in self.kept and h.get("back") in self.kept]


def narrow_report(builder: ReportBuilder, flt: Filter, sessions: dict[str, str] | None = None) -> ReportBuilder:
    """A report builder holding what the filter keeps of `builder`'s (which stays as it is): its
    summary counts the chains and findings kept (`messages` still counts every message read) and it
    names the filter (`filter` in the JSON report). `sessions`: chain id -> session id
    (`ReportBuilder(sessions=…)`), for `session:` terms."""
    out = ReportBuilder(builder.inputs)
    out.messages = builder.messages
    out.notes = list(builder.notes)
    out.filter = flt.text
    sessions = sessions or {}
    n = Narrowing(flt, builder.findings())
    for c in builder.chains():
        if n.chain(c, sessions.get(c["id"])):
            out.add_chain(c)
    for f in builder.findings():
        if n.finding(f):
            out.add_finding_json(f)
    out.hops = n.hops(builder.hops)
    return out


def narrow_capture(cap, flt: Filter) -> set[int]:
    """An export's capture (exporters/capture.py) narrowed in place to the chains, findings and
    hops' pairs the filter keeps; returns the indexes of the messages they name (each kept chain's
    requests, responses, questions and answers, and each kept finding's messages)."""
    n = Narrowing(flt, cap.findings)
    cap.chains = [c for c in cap.chains if n.chain(c, cap.session_of_chain(c))]
    cap.findings = [f for f in cap.findings if n.finding(f)]
    cap.hops = n.hops(cap.hops)
    wanted: set[int] = set()
    for c in cap.chains:
        for e in (*(c.get("timeline") or ()), *(c.get("round_details") or ())):
            wanted.update(i for i in (e.get("message"), e.get("response_message")) if i is not None)
    for f in cap.findings:
        wanted.update(f.get("messages") or ())
    return wanted
