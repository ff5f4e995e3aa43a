"""Findings: what the rules report; `plural`, how they and the outputs count (`1 round`, `0 rounds`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """How bad a finding is. Equal to its value as a string (the report's `severity`)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


ERROR = Severity.ERROR
WARNING = Severity.WARNING
INFO = Severity.INFO
SEVERITIES = (ERROR, WARNING, INFO)
RANK = {ERROR: 3, WARNING: 2, INFO: 1}

SPEC_SITE = "https://modelcontextprotocol.io/specification/2026-07-28/"


def plural(count: Any, noun: str) -> str:
    """`1 round`, `0 rounds`, `3 infos`: a count and its noun, in the plural unless it is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def spec_url(spec: str | None) -> str | None:
    """`basic/patterns/mrtr.mdx#x` → the page on the specification site."""
    if not spec:
        return None
    if spec.startswith("http"):
        return spec
    path, _, anchor = spec.partition("#")
    if path.endswith(".mdx"):
        path = path[:-4]
    if path.endswith("/index"):
        path = path[: -len("/index")]
    return SPEC_SITE + path + (f"#{anchor}" if anchor else "")


@dataclass(slots=True)
class Finding:
    """One finding: a rule (an id of RULES.md) reporting something it saw in the traffic."""

    rule: str
    severity: str  #: error, warning or info (the rule's default, or the configured one)
    message: str  #: what was seen, naming the messages (`tools/call id=2 (message #4)`)
    time: float = 0.0  #: when (the time of the message or frame it was seen in)
    chain: str | None = None  #: the chain it is about (`c1`), if any
    messages: list[int] = field(default_factory=list)  #: the indexes of the messages involved
    spec: str | None = None  #: the specification page and anchor (`spec_url` makes it a URL)
    conformance: str | None = None  #: the official conformance-suite check id, where one exists
    details: dict[str, Any] | None = None  #: what a machine may want besides the message (per rule)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        """A finding from its report form (`to_json`)."""
        return cls(d["rule"], d["severity"], d["message"], d.get("time", 0.0), d.get("chain"),
                   list(d.get("messages") or ()), d.get("spec"), d.get("conformance"), d.get("details"))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "chain": self.chain,
            "messages": list(self.messages),
            "spec": self.spec,
            "conformance": self.conformance,
            "time": self.time,
        }
        if self.details:
            d["details"] = self.details
        return d
