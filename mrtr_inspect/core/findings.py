"""Findings: what the rules report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
RANK = {ERROR: 3, WARNING: 2, INFO: 1}

SPEC_SITE = "https://modelcontextprotocol.io/specification/2026-07-28/"


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
    rule: str
    severity: str
    message: str
    time: float = 0.0
    chain: str | None = None
    messages: list[int] = field(default_factory=list)
    spec: str | None = None
    conformance: str | None = None
    details: dict[str, Any] | None = None

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
