"""`check --format markdown`: the report as GitHub-flavoured Markdown, for a job summary
(`$GITHUB_STEP_SUMMARY`) or a pull-request comment (docs/ci.md).

Errors first, then warnings (infos with `--verbose`), each finding linked to its specification
section; then one table of the chains. Everything that came from the traffic or a file (tool names,
messages, paths) is shown literally and inert: made `printable`, then HTML-escaped and with
Markdown's punctuation escaped, `@` written as an entity (no one is mentioned by a tool's name), and
table cells kept on one line. A summary stays far below GitHub's 1 MiB for a step summary: each
severity lists its first `SHOWN` findings and counts the rest.
"""

from __future__ import annotations

import re
from typing import IO

from ..core.findings import RANK, Severity, plural, spec_url
from .text import printable

SHOWN = 100
CHAINS_SHOWN = 200
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def md(text: object) -> str:
    """Text from the traffic as inert Markdown inline text (one line)."""
    t = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", t).replace("@", "&#64;")


def _finding_row(f: dict) -> str:
    url = spec_url(f.get("spec"))
    where = " ".join(x for x in (f.get("chain") or "", ", ".join(f"#{m}" for m in f.get("messages") or ())) if x)
    rule = f"`{f['rule']}`"
    return (f"| {rule} | {md(f['message'])} | {md(where) or '–'} | "
            + (f"[spec]({url})" if url else "–") + " |")


def render(builder, fail_on: str = Severity.ERROR, verbose: bool = False) -> str:
    s = builder.summary()
    findings = list(builder.findings())
    bar = RANK.get(fail_on, 99)
    failing = sum(1 for f in findings if RANK.get(f["severity"], 0) >= bar)
    mark = "❌" if failing else "✅"
    lines = [f"## {mark} mrtr-inspect: {plural(s['errors'], 'error')}, {plural(s['warnings'], 'warning')}, "
             f"{plural(s['infos'], 'info')}", "",
             f"{plural(s['messages'], 'message')}, {plural(s['chains'], 'chain')} in "
             + ", ".join(md(p) for p in builder.inputs) + "."
             + (f" Fails on {fail_on}: {plural(failing, 'finding')} at or above it." if fail_on != "never" else ""), ""]
    for note in builder.notes:
        lines.append(f"> note: {md(note)}")
    if builder.notes:
        lines.append("")
    for severity, title in ((Severity.ERROR, "Errors"), (Severity.WARNING, "Warnings"), (Severity.INFO, "Infos")):
        these = [f for f in findings if f["severity"] == severity]
        if not these:
            continue
        if severity == Severity.INFO and not verbose:
            lines += [f"{plural(len(these), 'info')} not listed (`--verbose` lists them).", ""]
            continue
        lines += [f"### {title} ({len(these)})", "", "| rule | finding | chain, messages | specification |",
                  "|---|---|---|---|"]
        lines += [_finding_row(f) for f in these[:SHOWN]]
        if len(these) > SHOWN:
            lines.append(f"| … | and {len(these) - SHOWN} more (`--format json` has them all) | | |")
        lines.append("")
    chains = sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    if chains:
        lines += [f"### Chains ({len(chains)})", "", "| chain | method | target | rounds | outcome | duration |",
                  "|---|---|---|---:|---|---:|"]
        for c in chains[:CHAINS_SHOWN]:
            hop = f" ({md(c['hop'])})" if c.get("hop") else ""
            lines.append(f"| {c['id']}{hop} | {md(c.get('method') or '–')} | {md(c.get('target') or '–')} | "
                         f"{c.get('rounds') or 0} | {md(c.get('outcome') or 'open')} | {c.get('duration_ms') or 0:,.0f} ms |")
        if len(chains) > CHAINS_SHOWN:
            lines.append(f"| … | and {len(chains) - CHAINS_SHOWN} more | | | | |")
        lines.append("")
    return "\n".join(lines)


def write(builder, out: IO[str], fail_on: str = Severity.ERROR, verbose: bool = False) -> None:
    out.write(render(builder, fail_on, verbose))
