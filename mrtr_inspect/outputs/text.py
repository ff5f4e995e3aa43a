"""Findings and chains as text: rich on a terminal, plain lines otherwise."""

from __future__ import annotations

import re
import sys
from typing import IO, TYPE_CHECKING, Any

from ..core.findings import RANK, Finding, Severity, plural, spec_url

SEV_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

# what must not reach a terminal or split a line: C0 and C1 controls, DEL, the Unicode line and
# paragraph separators, lone surrogates (which a strict UTF-8 stream cannot even encode), and the
# bidirectional controls, which make a line read in another order than it was sent (CVE-2021-42574)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    return repr(m.group())[1:-1]


def printable(text: object) -> str:
    """Text that came from the traffic (a tool name, an error message, an answer) as one line that
    shows it literally: each character above written as Python's repr would (`\\x1b`, `\\n`,
    `\\u2028`), everything else (é, 日本, a backslash) as it is. Every human-facing text output
    passes what it prints through this; applying it twice changes nothing."""
    return _UNPRINTABLE.sub(_escape, str(text))


def printable_lines(text: object) -> str:
    """`printable`, but the line breaks (LF) and tabs stay: for text laid out in lines of its own (an
    HTML <pre>, a JUnit failure's text)."""
    return _UNPRINTABLE.sub(_escape_but_layout, str(text))


def _escape_but_layout(m: re.Match) -> str:
    c = m.group()
    return c if c in "\n\t" else repr(c)[1:-1]


def json_printable(text: str) -> str:
    """JSON text (as json.dumps writes it with ensure_ascii=False) with each character `printable`
    escapes written as its JSON escape (`\\u009b`, `\\u202e`): the same JSON value, and nothing a
    terminal acts on when the file or the output is shown. Those characters only occur inside
    strings there, where an escape means the same character. ASCII text without DEL (nearly all of
    it) is returned as it is without a scan by the pattern: the report writes every item through this."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _UNPRINTABLE.sub(_json_escape, text)


def _json_escape(m: re.Match) -> str:
    """json.dumps escapes every C0 control inside a string: one outside is its layout (the line
    breaks of `indent`), kept; the rest (`printable`'s patterns, one compiled pattern for all three:
    a character class up to U+DFFF costs a startup's worth of compiling) as JSON escapes."""
    c = m.group()
    return c if c < " " else f"\\u{ord(c):04x}"


def tool_line(text: object) -> str:
    """One line of mrtr-inspect's own on stderr (a reason, a note, a summary): `mrtr-inspect: `, the
    text made `printable` (it may quote a file name or the traffic), a newline."""
    return f"mrtr-inspect: {printable(text)}\n"


def _where(f: Finding | dict) -> str:
    chain = f.chain if isinstance(f, Finding) else f.get("chain")
    msgs = f.messages if isinstance(f, Finding) else f.get("messages") or []
    parts = []
    if chain:
        parts.append(chain)
    if msgs:
        parts.append(",".join(f"#{m}" for m in msgs))
    return f"[{' '.join(parts)}] " if parts else ""


def _get(f: Finding | dict, name: str) -> Any:
    return getattr(f, name) if isinstance(f, Finding) else f.get(name)


def plain_finding(f: Finding | dict) -> str:
    url = spec_url(_get(f, "spec"))
    line = f"{_get(f, 'severity')} {_get(f, 'rule')} {_where(f)}{printable(_get(f, 'message'))}"
    if url:
        line += f" (spec: {url})"
    return line


if TYPE_CHECKING:
    from rich.text import Text


def rich_finding(f: Finding | dict) -> Text:
    from rich.text import Text  # rich only on a terminal: its import is a fifth of a short check

    sev = _get(f, "severity")
    t = Text()
    t.append(f"{sev:<7}", style=SEV_STYLE.get(sev, ""))
    t.append(f" {_get(f, 'rule')} ", style="bold")
    t.append(_where(f), style="dim")
    t.append(printable(_get(f, "message")))
    url = spec_url(_get(f, "spec"))
    if url:
        t.append(f"\n         {url}", style="dim underline")
    return t


class FindingPrinter:
    """Prints findings at or above a severity to a stream (stderr for live adapters)."""

    def __init__(self, stream: IO[str] | None = None, min_severity: str = Severity.WARNING, color: bool | None = None,
                 prefix: str = "") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.min_rank = RANK.get(min_severity, 0)
        self.color = self.stream.isatty() if color is None else color
        self.prefix = prefix
        self.console = None
        if self.color:
            from rich.console import Console

            self.console = Console(file=self.stream, force_terminal=self.color, highlight=False, soft_wrap=True)

    def finding(self, f: Finding | dict) -> None:
        if RANK.get(_get(f, "severity"), 0) < self.min_rank:
            return
        if self.console is not None:
            self.console.print(rich_finding(f))
        else:
            self.stream.write(self.prefix + plain_finding(f) + "\n")
            self.stream.flush()

    def line(self, text: str, style: str = "") -> None:
        text = printable(text)
        if self.console is not None:
            from rich.text import Text

            self.console.print(Text(text, style=style))
        else:
            self.stream.write(self.prefix + text + "\n")
            self.stream.flush()


def chain_line(c: dict) -> str:
    """One line per logical request: `c1 tools/call deploy  complete  2 rounds  5012 ms  (waited 5003 ms for input)`.
    The wait counts the rounds the retries answered and the round an abandoned chain left unanswered
    (a legacy chain: the time the client took to answer each question of the server, RULES.md §13)."""
    waits = (sum(e.get("wait_ms", 0) for e in c.get("timeline", []))
             + sum(r.get("unanswered_ms", 0) + r.get("wait_ms", 0) for r in c.get("round_details", [])))
    rounds = c.get("rounds", 0)
    s = (f"{c['id']} {c.get('method')} {c.get('target')}  {c.get('outcome')}  {plural(rounds, 'round')}"
         f"  {c.get('duration_ms', 0):.0f} ms")
    if waits:
        s += f" (waited {waits:.0f} ms for input)"
    if c.get("link"):
        s += f"  link: {c['link']}"
    return printable(s)


def summary_line(summary: dict) -> str:
    return (f"{plural(summary['messages'], 'message')}, {plural(summary['chains'], 'chain')}: "
            f"{plural(summary['errors'], 'error')}, {plural(summary['warnings'], 'warning')}, "
            f"{plural(summary['infos'], 'info')}")
