"""The rule reference, from the registry: `docs/rules.md` and the `mrtr-inspect rules` listing.

    python -m mrtr_inspect.docs            rewrite docs/rules.md (`make docs`)
    python -m mrtr_inspect.docs --check    exit 1 when docs/rules.md is stale

Rules are grouped by their RULES.md section (`Rule.section`), sections in catalog order (§0, §4.1 …
§4.9, §10.x, then the tool's own findings), rules in registration order (catalog order) within a
section. Nothing here depends on time or on the machine, so the same registry always gives the same
file.
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import groupby
from pathlib import Path
from typing import Iterable, TextIO

import click

from .config import Config
from .core.findings import SEVERITIES, Severity, spec_url
from .rules.registry import Rule

RULES_MD = Path(__file__).resolve().parent.parent / "docs" / "rules.md"

SECTION_TITLES = {
    "0": "Conventions: capture completeness",
    "3": "Chain stitching",
    "4.1": "MRTR: the server side",
    "4.2": "MRTR: the client side",
    "4.3": "InputResponse shape per request kind",
    "4.4": "Chain semantics",
    "4.5": "Base protocol 2026-07-28",
    "4.6": "Streamable HTTP",
    "4.7": "stdio",
    "4.8": "Legacy era and era mixing",
    "4.9": "Tasks extension interplay",
    "10": "Decisions taken after review",
    "13": "Legacy chains: the 2025-11-25 way of asking",
    "11": "Two hops: a gateway in the middle",
    "12": "Active probes",
    "14": "Client probes",
    "tool": "The tool's own findings",
    "definitions": "Definitions: changes since a baseline (check --baseline), tool poisoning",
    "contracts": "Contracts (check --contract)",
}

NOT_OBSERVABLE = "not observable passively"


def registered() -> list[Rule]:
    """Every registered rule, once all rule modules are loaded."""
    from .rules import load_rules
    from .rules.registry import REGISTRY

    load_rules()
    return list(REGISTRY.values())


def _section_key(section: str) -> tuple:
    try:
        return (0, tuple(int(p) for p in section.split(".")))
    except ValueError:  # "tool", then what check judges besides the traffic, or a rule with no section
        after = ("tool", "definitions", "contracts")
        return (1, (after.index(section) if section in after else len(after), section))


def section_title(section: str) -> str:
    title = SECTION_TITLES.get(section) or SECTION_TITLES.get(section.split(".")[0], "")
    if section[:1].isdigit():
        return f"§{section} {title}".rstrip()
    return title or section or "Rules without a section"


def grouped(rules: Iterable[Rule]) -> list[tuple[str, list[Rule]]]:
    """(section, its rules) in catalog order; rules keep their order within a section."""
    groups: dict[str, list[Rule]] = {}
    for r in rules:
        groups.setdefault(r.section, []).append(r)
    return sorted(groups.items(), key=lambda kv: _section_key(kv[0]))


# --- docs/rules.md ------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _fence(text: str) -> str:
    run, longest = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _rule_md(r: Rule) -> list[str]:
    url = spec_url(r.spec)
    facts = [f"- Severity (default): **{r.severity}**"]
    facts.append(f"- Specification: [{r.spec}]({url})" if url else "- Specification: none")
    facts.append(f"- Conformance check: `{r.conformance}`" if r.conformance else "- Conformance check: none")
    if not r.observable:
        facts.append(f"- **Not observable passively**: documented for completeness; mrtr-inspect never reports it "
                     "from traffic alone.")
    if r.emitted_by:
        facts.append(f"- Reported by the check of [`{r.emitted_by}`](#{r.emitted_by}).")
    out = [f"### `{r.id}`", "", r.summary, "", *facts, ""]
    if r.doc:
        out += [f"**What it detects.** {r.doc}", ""]
    if r.why:
        out += [f"**Why it matters.** {r.why}", ""]
    if r.quote:
        out += [f"> {_cell(r.quote)}", ">", f"> — [the specification]({url})" if url else "> — the specification", ""]
    if r.example:
        out += ["**Example.**", "", _fence(r.example), ""]
    return out


def render(rules: Iterable[Rule]) -> str:
    """docs/rules.md for these rules."""
    rules = list(rules)
    groups = grouped(rules)
    counts = ", ".join(f"{sum(r.severity == s for r in rules)} {s}" for s in SEVERITIES)
    out = [
        "<!-- Generated from the rule registry by `python -m mrtr_inspect.docs` (`make docs`). Do not edit by hand:",
        "     change the rule (its summary, docstring, why, example, quote) and regenerate. -->",
        "",
        "# Rule reference",
        "",
        f"{len(rules)} rules ({counts} by default). Each finding's `rule` field carries one of these ids; the ids,",
        "default severities and specification references follow the catalog (RULES.md). Change a rule's severity",
        "or turn it off with `--severity ID=LEVEL` and `--disable ID`, or in a configuration file",
        "(see [configuration.md](configuration.md)); `mrtr-inspect rules` lists them with the configuration applied.",
        "",
        "## Contents",
        "",
    ]
    out += [f"- [{section_title(s)}](#section-{s or 'none'}) ({len(rs)})" for s, rs in groups]
    for s, rs in groups:
        if out[-1] == "":
            out.pop()
        out += ["", f'<a id="section-{s or "none"}"></a>', "", f"## {section_title(s)}", "",
                "| rule | severity | summary |", "|---|---|---|"]
        out += [f"| [`{r.id}`](#{r.id}) | {r.severity} | {_cell(r.summary)} |" for r in rs]
        out.append("")
        for r in rs:
            out += _rule_md(r)
    while out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


# --- mrtr-inspect rules ----------------------------------------------------------------------------


def listing(rules: Iterable[Rule], config: Config) -> list[dict]:
    """One object per rule, with the configuration applied (the `rules --format json` output)."""
    return [
        {
            "id": r.id,
            "severity": config.severity.get(r.id, r.severity),
            "default_severity": r.severity,
            "disabled": r.id in config.disabled,
            "section": r.section,
            "summary": r.summary,
            "spec": spec_url(r.spec),
            "conformance": r.conformance,
            "observable": r.observable,
            "emitted_by": r.emitted_by,
        }
        for _, rs in grouped(rules)
        for r in rs
    ]


_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _shown(row: dict) -> str:
    if row["disabled"]:
        return "disabled"
    if row["severity"] != row["default_severity"]:
        return f"{row['severity']} (default {row['default_severity']})"
    return row["severity"]


def write_listing(fmt: str, rules: Iterable[Rule], config: Config, out: TextIO) -> None:
    """`mrtr-inspect rules`: json (the `listing`), or text: id, severity and summary by section."""
    rows = listing(rules, config)
    if fmt == "json":
        json.dump(rows, out, indent=2, ensure_ascii=False)
        out.write("\n")
        return
    idw = max((len(r["id"]) for r in rows), default=0)
    sevw = max((len(_shown(r)) for r in rows), default=0)
    for n, (section, group) in enumerate(groupby(rows, key=lambda r: r["section"])):
        click.echo(("\n" if n else "") + click.style(section_title(section), bold=True), file=out)
        for row in group:
            sev = click.style(_shown(row).ljust(sevw), fg=_STYLE.get(row["severity"]) if not row["disabled"] else None,
                              dim=row["disabled"])
            summary = row["summary"] + ("" if row["observable"] else f" ({NOT_OBSERVABLE})")
            click.echo(f"  {row['id'].ljust(idw)}  {sev}  {summary}", file=out)
    disabled = sum(r["disabled"] for r in rows)
    changed = sum(not r["disabled"] and r["severity"] != r["default_severity"] for r in rows)
    click.echo(f"\n{len(rows)} rules, {disabled} disabled, {changed} with a changed severity", file=out)


# --- python -m mrtr_inspect.docs -------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrtr_inspect.docs", description="Regenerate docs/rules.md.")
    ap.add_argument("path", nargs="?", type=Path, default=RULES_MD, help="the file (default: docs/rules.md)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is not what the registry gives")
    args = ap.parse_args(argv)
    rules = registered()
    text = render(rules)
    if args.check:
        try:
            current = args.path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            print(f"{args.path} is stale: regenerate it with `make docs` (python -m mrtr_inspect.docs)", file=sys.stderr)
            return 1
        return 0
    args.path.parent.mkdir(parents=True, exist_ok=True)
    with open(args.path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {args.path} ({len(rules)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
