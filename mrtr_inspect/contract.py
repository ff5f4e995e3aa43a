"""Contracts: what a run is expected to do, judged by `check` (docs/contracts.md).

    [tool.mrtr-inspect.contract]          # pyproject.toml; [contract] in .mrtr-inspect.toml;
    offered = ["deploy", "search"]        # or the keys at the top of the file `check --contract FILE`
    called = ["deploy"]
    forbidden = ["delete_*"]
    max_rounds = 3
    outcomes = ["complete"]
    max_findings = {error = 0, warning = 5}

    [tool.mrtr-inspect.contract.tools.deploy]
    p95_ms = 2000
    server_max_ms = 500

Each breach is a `contract-*` finding (rules/contracts.py) that names the figure and the budget,
added after the analysis' findings; exit codes are `check`'s. Latency percentiles are nearest-rank,
as `stats` computes them, over the tool's chains (the whole chain: `duration_ms`; the server's
time: each request to its response, summed over the chain).
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .config import Config
from .core.findings import SEVERITIES, Finding, plural
from .core.vocabulary import OUTCOMES
from .errors import UserError

LATENCY = {  # key -> (what it measures, the percentile)
    "p50_ms": ("duration", 50), "p95_ms": ("duration", 95), "max_ms": ("duration", 100),
    "server_p50_ms": ("server", 50), "server_p95_ms": ("server", 95), "server_max_ms": ("server", 100),
}
TOOL_KEYS = ("max_rounds", *LATENCY)
KEYS = ("offered", "called", "forbidden", "max_rounds", "outcomes", "max_findings", "tools")
SHOWN = 5  # chain ids a finding names; the rest are counted


class ContractError(UserError):
    """A contract that cannot be used: one line naming the file, the key and what is wrong."""


@dataclass
class Budget:
    """A tool's budgets (a table of `tools`; `*` wildcards in its name)."""

    max_rounds: int | None = None
    latency: dict[str, float] = field(default_factory=dict)  # LATENCY key -> milliseconds


@dataclass
class Contract:
    source: str  # where it was read (the file, the settings table), for its findings' messages
    offered: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    max_rounds: int | None = None
    outcomes: list[str] | None = None
    max_findings: dict[str, int] = field(default_factory=dict)
    tools: dict[str, Budget] = field(default_factory=dict)

    def budget(self, tool: str) -> Budget:
        """The budget of a tool: its own table, else the first pattern that matches it, else none;
        `max_rounds` falls back to the contract's."""
        b = self.tools.get(tool) or next((b for p, b in self.tools.items() if fnmatch.fnmatchcase(tool, p)), None)
        return b or Budget()


def _unknown(key: str, known: Iterable[str]) -> str:
    known = list(known)
    close = difflib.get_close_matches(key.replace("-", "_"), known, n=1)
    return "unknown key" + (f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(known)}")


def _strings(v: Any) -> bool:
    return type(v) is list and all(type(x) is str and x for x in v)


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _ms(v: Any) -> bool:
    return type(v) in (int, float) and v >= 0 and math.isfinite(v)


def parse_contract(table: Any, where: str) -> Contract:
    """A contract from its TOML table; `where` names it in errors and findings (`FILE: contract`)."""
    def bad(key: str, what: str) -> ContractError:
        return ContractError(f"{where}.{key}: {what}" if key else f"{where}: {what}")

    if type(table) is not dict:
        raise bad("", "must be a table")
    c = Contract(where)
    for key, v in table.items():
        if key not in KEYS:
            raise bad(key, _unknown(key, KEYS))
        if key in ("offered", "called", "forbidden"):
            if not _strings(v):
                raise bad(key, f"must be a list of tool names, not {v!r}")
            setattr(c, key, list(v))
        elif key == "max_rounds":
            if not _count(v):
                raise bad(key, f"must be a whole number of rounds (0 or more), not {v!r}")
            c.max_rounds = v
        elif key == "outcomes":
            if not _strings(v) or not set(v) <= set(OUTCOMES):
                wrong = [x for x in v if x not in OUTCOMES] if type(v) is list else v
                raise bad(key, f"must be a list of {', '.join(OUTCOMES)}, not {wrong!r}")
            c.outcomes = list(v)
        elif key == "max_findings":
            if type(v) is not dict:
                raise bad(key, "must be a table of error|warning|info = a whole number")
            for sev, n in v.items():
                if sev not in SEVERITIES:
                    raise bad(f"{key}.{sev}", _unknown(sev, (s.value for s in SEVERITIES)))
                if not _count(n):
                    raise bad(f"{key}.{sev}", f"must be a whole number (0 or more), not {n!r}")
            c.max_findings = dict(v)
        else:  # tools
            if type(v) is not dict:
                raise bad(key, "must be a table of tool name = its budgets")
            for tool, budgets in v.items():
                if type(budgets) is not dict:
                    raise bad(f"tools.{tool}", f"must be a table of {', '.join(TOOL_KEYS)}")
                b = Budget()
                for k, x in budgets.items():
                    if k not in TOOL_KEYS:
                        raise bad(f"tools.{tool}.{k}", _unknown(k, TOOL_KEYS))
                    if k == "max_rounds":
                        if not _count(x):
                            raise bad(f"tools.{tool}.{k}", f"must be a whole number of rounds (0 or more), not {x!r}")
                        b.max_rounds = x
                    elif not _ms(x):
                        raise bad(f"tools.{tool}.{k}", f"must be a number of milliseconds (0 or more), not {x!r}")
                    else:
                        b.latency[k] = float(x)
                c.tools[tool] = b
    return c


def read_contract(path: str) -> Contract:
    """The contract of `check --contract FILE`: a pyproject.toml's [tool.mrtr-inspect.contract], a
    file's [contract] table, or the whole file."""
    from .tomlfile import read_toml

    p = Path(path)
    doc = read_toml(p, ContractError)
    if p.name == "pyproject.toml":
        tool = doc.get("tool")
        table = tool.get("mrtr-inspect", {}).get("contract") if type(tool) is dict and type(tool.get("mrtr-inspect")) is dict else None
        if table is None:
            raise ContractError(f"{path}: no [tool.mrtr-inspect.contract] table")
        return parse_contract(table, f"{path}: [tool.mrtr-inspect.contract]")
    if set(doc) == {"contract"} or (p.name == ".mrtr-inspect.toml" and "contract" in doc):
        return parse_contract(doc["contract"], f"{path}: [contract]")
    return parse_contract(doc, path)


# --- judging -----------------------------------------------------------------------------------------


def nearest_rank(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[max(math.ceil(p / 100 * len(v)) - 1, 0)]


def _ids(chains: list[dict]) -> str:
    ids = [c["id"] for c in chains]
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def _num(ms: float) -> str:
    return f"{ms:,.1f}".removesuffix(".0")


def evaluate(contract: Contract, builder, servers: list, config: Config) -> list[Finding]:
    """The contract-* findings of a run: `builder` holds its chains and findings so far, `servers`
    what each server offered (offered.Offered.servers())."""
    from .baseline import finding
    from .outputs.exporters.otlp_spans import server_ms

    out: list[Finding] = []
    src = contract.source

    def add(rule_id: str, message: str, chain: str | None = None, time: float = 0.0, **details: Any) -> None:
        f = finding(rule_id, config, f"{message} (contract: {src})", time=time, details=details or None)
        if f is not None:
            f.chain = chain
            out.append(f)

    counts = dict(builder.severity_counts)
    chains = sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    calls: dict[str, list[dict]] = {}
    for c in chains:
        if c.get("method") == "tools/call" and type(c.get("target")) is str:
            calls.setdefault(c["target"], []).append(c)
    offered = {name for s in servers for name in s.definitions.get("tools", {})}
    listed = any(s.listed("tools") for s in servers)
    for tool in contract.offered:
        if tool not in offered:
            add("contract-tool-not-offered", f"tool {tool!r} is not offered" + (
                "" if listed else ": the recordings hold no tools/list result"), tool=tool, figure="offered",
                budget="offered")
    for tool in contract.called:
        if tool not in calls:
            add("contract-tool-not-called", f"tool {tool!r} was never called", tool=tool, figure=0, budget=">= 1 call")
    for pattern in contract.forbidden:
        for tool in sorted(t for t in calls if fnmatch.fnmatchcase(t, pattern)):
            cs = calls[tool]
            add("contract-tool-forbidden", f"tool {tool!r} was called {plural(len(cs), 'time')} ({_ids(cs)}), "
                f"forbidden by {pattern!r}", chain=cs[0]["id"], time=cs[0].get("start", 0.0), tool=tool,
                figure=len(cs), budget=0)
    for c in chains:
        target = c.get("target")
        budget = contract.budget(target) if c.get("method") == "tools/call" and type(target) is str else Budget()
        limit = budget.max_rounds if budget.max_rounds is not None else contract.max_rounds
        if limit is not None and (c.get("rounds") or 0) > limit:
            add("contract-rounds-exceeded", f"{c.get('method')} {target}: chain {c['id']} took {plural(c['rounds'], 'round')}, "
                f"more than the {limit} allowed", chain=c["id"], time=c.get("start", 0.0), figure=c["rounds"],
                budget=limit)
    if contract.outcomes is not None:
        wrong: dict[tuple, list[dict]] = {}
        for c in chains:
            if c.get("outcome") not in contract.outcomes:
                wrong.setdefault((c.get("method"), c.get("target"), c.get("outcome")), []).append(c)
        for (method, target, outcome), cs in wrong.items():
            add("contract-outcome-not-allowed", f"{method} {target}: {plural(len(cs), 'chain')} ended {outcome} "
                f"({_ids(cs)}); allowed: {', '.join(contract.outcomes)}", chain=cs[0]["id"],
                time=cs[0].get("start", 0.0), figure=outcome, budget=list(contract.outcomes), chains=len(cs))
    for tool, cs in sorted(calls.items()):
        budget = contract.budget(tool)
        for key, limit in budget.latency.items():
            what, p = LATENCY[key]
            values = [c.get("duration_ms") or 0.0 for c in cs] if what == "duration" else \
                [server_ms(c) for c in cs if any(e.get("response_time") is not None for e in c.get("timeline") or ())]
            if not values:
                continue
            figure = nearest_rank(values, p)
            if figure > limit:
                name = "max" if p == 100 else f"p{p}"
                of = "the whole chain" if what == "duration" else "the server's time"
                worst = max(cs, key=lambda c: c.get("duration_ms") or 0.0)
                add("contract-latency-exceeded", f"tools/call {tool}: {name} of {of} is {_num(figure)} ms, over its "
                    f"budget of {_num(limit)} ms ({plural(len(values), 'chain')})", chain=worst["id"],
                    time=worst.get("start", 0.0), tool=tool, figure=round(figure, 3), budget=limit, key=key,
                    chains=len(values))
    for sev, limit in contract.max_findings.items():
        n = counts.get(sev, 0)
        if n > limit:
            add("contract-findings-exceeded", f"{plural(n, sev)}, more than the {limit} allowed", figure=n,
                budget=limit, severity=sev)
    return out
