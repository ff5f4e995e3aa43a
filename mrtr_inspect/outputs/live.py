"""The live view: one line per logical request, updated as its rounds arrive; findings as they come.

On a terminal (rich) the open chains stay at the bottom of the screen, one line each that keeps
changing: in flight, waiting for the user's input (and for how long), retried. A chain that ends is
printed above them for good, its outcome in colour, and so is every finding. Anywhere else (a pipe,
a log file, mitmproxy's event log) each step is one plain line.

`add()` takes the inspector's outputs (Message, ChainEvent, Finding) from the analysis thread; the
terminal display redraws from its own thread, from a snapshot kept under a lock.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Callable

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ..core.findings import RANK, SEVERITIES, Finding, Severity
from ..core.inspector import ChainEvent
from ..core.messages import Message, format_id
from ..core.vocabulary import Outcome
from .text import chain_line, plain_finding, printable, rich_finding, summary_line

OUTCOME_STYLE = {Outcome.COMPLETE: "green", Outcome.ERROR: "red", Outcome.CANCELLED: "yellow", Outcome.ABANDONED: "yellow",
                 Outcome.TASK: "cyan", Outcome.OPEN: "dim"}
MAX_ROWS = 12


@dataclass
class _Row:
    """What the screen shows of one open chain."""

    label: str
    request: str  # the id in flight, or the last one answered
    rounds: int = 0
    waiting: bool = False  # an input_required is waiting for its retry
    since: float = 0.0  # when the current state began
    waited: float = 0.0  # seconds spent waiting for input in earlier rounds
    asked: str = ""


def _asked(chain) -> str:
    rd = chain.rounds[-1] if chain.rounds else chain.asks[-1] if chain.asks else None
    if rd is None or not rd.asked:
        return ""
    return printable(", ".join(rd.asked) if chain.rounds else ", ".join(a.get("method") or "?" for a in rd.asked.values()))


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


class LiveView:
    """Shows chains and findings on `stream` (stderr by default), or through `write(text, severity)`.

    `color=None` decides by `stream.isatty()`. Findings below `min_severity` are counted, not shown.
    """

    def __init__(self, stream: IO[str] | None = None, *, color: bool | None = None, min_severity: str = Severity.WARNING,
                 write: Callable[[str, str | None], None] | None = None, prefix: str = "mrtr-inspect: ",
                 clock: Callable[[], float] = time.time) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.color = (write is None and self.stream.isatty()) if color is None else color
        self.min_rank = RANK.get(min_severity, 0)
        self.prefix = prefix
        self._write = write or self._write_stream
        self._clock = clock
        self._lock = threading.Lock()
        self._rows: dict[str, _Row] = {}
        self.counts = {"messages": 0, "chains": 0, **{s: 0 for s in SEVERITIES}}
        self.console = Console(file=self.stream, force_terminal=True, highlight=False) if self.color else None
        self._live: Live | None = None
        self.started = False

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """The view takes the screen (a live area on a terminal); until then it only counts."""
        self.started = True
        if self.console is not None and self._live is None:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def stop(self) -> None:
        """Remove the live area and print the session's totals (a view never started prints nothing)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if not self.started:
            return
        c = self.counts
        self._say(summary_line({"messages": c["messages"], "chains": c["chains"], "errors": c[Severity.ERROR],
                                "warnings": c[Severity.WARNING], "infos": c[Severity.INFO]}), "bold")

    # -- input ------------------------------------------------------------------------------------
    def add(self, out) -> None:
        t = type(out)
        if t is Message:
            self.counts["messages"] += 1
        elif t is Finding:
            self._finding(out)
        elif t is ChainEvent:
            self._chain(out)

    def _finding(self, f: Finding) -> None:
        self.counts[f.severity] = self.counts.get(f.severity, 0) + 1
        if RANK.get(f.severity, 0) < self.min_rank:
            return
        if self.console is not None:
            self.console.print(rich_finding(f))
        else:
            self._write(plain_finding(f), f.severity)

    def _chain(self, e: ChainEvent) -> None:
        c = e.chain
        with self._lock:
            row = self._rows.get(c.id)
            if e.kind == "closed":
                self._rows.pop(c.id, None)
            elif row is None:
                row = self._rows[c.id] = _Row(printable(f"{c.id} {c.method} {c.target}"),
                                              format_id(c.requests[-1].id), since=e.time)
        if e.kind == "closed":
            self.counts["chains"] += 1
            s = c.summary()
            self._say(chain_line(s), OUTCOME_STYLE.get(s["outcome"], ""))
            return
        assert row is not None
        last = c.requests[-1]
        if e.kind == "round":
            row.waiting, row.since, row.rounds, row.asked = True, e.time, len(c.rounds) + len(c.asks), _asked(c)
            how = "input_required" if c.rounds else "the server asks"
            self._step(f"{row.label}: round {row.rounds} {how}, asks {row.asked or 'nothing'}")
        elif e.kind == "answered":  # the client answered a legacy question: the request is in flight again
            q = c.asks[-1]
            wait = (q.answer_time or e.time) - q.time
            row.waiting, row.since = False, e.time
            row.waited += wait
            self._step(f"{row.label}: answered round {q.n} after {_seconds(wait)} waiting for input (link: {q.via})")
        elif e.kind == "refused":  # the round's question stands: the client may retry it (RULES.md decision 13)
            row.waiting, row.since = True, e.time
            self._step(f"{row.label}: retry id={row.request} refused with error {format_id(c.error_code)}; "
                       "waiting for a retry")
        elif e.kind == "retry":
            rd = last.round
            wait = e.time - rd.irr_time if rd is not None else 0.0
            row.waiting, row.since, row.request = False, e.time, format_id(last.id)
            row.waited += wait
            via = f" (link: {last.link.via})" if last.link is not None else ""
            self._step(f"{row.label}: retry id={row.request} after {_seconds(wait)} waiting for input{via}")
        else:
            self._step(f"{row.label}: request id={row.request}")

    # -- output -----------------------------------------------------------------------------------
    def _step(self, text: str) -> None:
        """A chain's progress: a plain line where there is no live area (the row shows it otherwise)."""
        if self.console is None:
            self._write(printable(text), None)

    def _say(self, text: str, style: str = "") -> None:
        text = printable(text)
        if self.console is not None:
            self.console.print(Text(text, style=style))
        else:
            self._write(text, None)

    def _write_stream(self, text: str, severity: str | None) -> None:
        self.stream.write(self.prefix + text + "\n")
        self.stream.flush()

    def __rich__(self) -> Group:
        """The live area: the open chains, most recent last."""
        now = self._clock()
        with self._lock:
            rows = list(self._rows.values())
        lines = []
        if len(rows) > MAX_ROWS:
            lines.append(Text(f"… {len(rows) - MAX_ROWS} more open chains", style="dim"))
            rows = rows[-MAX_ROWS:]
        for r in rows:
            t = Text(r.label, style="bold")
            if r.waiting:
                t.append(f"  round {r.rounds}: waiting for input {_seconds(now - r.since)}", style="magenta")
                if r.asked:
                    t.append(f" ({r.asked})", style="dim")
            else:
                t.append(f"  id={r.request} in flight {_seconds(now - r.since)}", style="cyan")
            if r.waited:
                t.append(f"  waited {_seconds(r.waited)} in all", style="dim")
            lines.append(t)
        return Group(*lines)
