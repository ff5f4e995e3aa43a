"""A progress bar for long work (`check`, `import`, `replay verify`), on a terminal only.

    with Progress("check", total=total_bytes(paths), done=lambda: read_bytes(paths),
                  count=lambda: builder.chain_count, unit="chains"):
        ...  # the work; it calls nothing of this per item

Shown when stderr is a terminal and `CI` is not set (nor `MRTR_INSPECT_NO_PROGRESS`, nor
`TERM=dumb`): nothing in a pipe, a file or a CI log. The work does not report to the bar: a thread
of the bar asks (`done`, `count`) ten times a second and redraws, so the work costs nothing more
with the bar than without it. The bar goes away when the work ends (rich's transient display).

Bytes read are the position of the open input files as the operating system sees them
(/proc/self/fdinfo, Linux); elsewhere the bar has no total and counts only.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import IO, Callable, Iterable

REFRESH = 0.1  # seconds between two redraws


def wanted(stream: IO[str] | None = None) -> bool:
    """Whether to show a bar on `stream` (stderr): a terminal, and not CI."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("CI") or os.environ.get("MRTR_INSPECT_NO_PROGRESS") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def total_bytes(paths: Iterable[str]) -> int | None:
    try:
        return sum(os.path.getsize(p) for p in paths)
    except OSError:
        return None


def _positions() -> dict[str, int]:
    """The read position of each file this process has open, by its real path (Linux)."""
    out: dict[str, int] = {}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not target.startswith("/"):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                pos = int(f.readline().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[target] = max(out.get(target, 0), pos)
    return out


def bytes_read(paths: Iterable[str]) -> Callable[[], int | None]:
    """How far the inputs were read, in order: those before the one open are read whole, those
    after it not at all (for the bar, a reading of /proc/self/fdinfo each time it redraws)."""
    files = [(os.path.realpath(p), os.path.getsize(p) if os.path.exists(p) else 0) for p in paths]
    state = {"reached": 0}  # the furthest input seen open: the ones before it are done

    def done() -> int | None:
        if not os.path.isdir("/proc/self/fdinfo"):
            return None
        pos = _positions()
        for i, (p, _) in enumerate(files):
            if p in pos:
                state["reached"] = max(state["reached"], i)
        total = sum(size for _, size in files[: state["reached"]])
        p, size = files[state["reached"]] if files else ("", 0)
        return total + min(pos.get(p, 0), size)

    return done


class Tally:
    """A count the work keeps for the bar to read (`tally.n += 1`): no call, no lock."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        return self.n


class Progress:
    """A transient rich bar on stderr: `description`, the bytes done of `total` (when known), and
    `count()` `unit` so far, redrawn by its own thread; a no-op when `enabled` is false (the
    default: `wanted()`)."""

    def __init__(self, description: str, total: int | None = None, done: Callable[[], int | None] | None = None,
                 count: Callable[[], int] | None = None, unit: str = "chains", enabled: bool | None = None,
                 in_bytes: bool = True, stream: IO[str] | None = None) -> None:
        self.enabled = wanted(stream) if enabled is None else enabled
        self.description, self.total, self.unit, self.in_bytes = description, total, unit, in_bytes
        self._done, self._count = done, count
        self._stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._task = None

    def __enter__(self) -> "Progress":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        amount = DownloadColumn() if self.in_bytes else MofNCompleteColumn()
        self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(), amount,
                                 TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                                 console=Console(file=self._stream, force_terminal=True), transient=True,
                                 auto_refresh=False)
        self._task = self._bar.add_task(self.description, total=self.total, count=self._said())
        self._bar.start()
        self._redraw()
        self._thread = threading.Thread(target=self._run, name="mrtr-inspect-progress", daemon=True)
        self._thread.start()
        return self

    def _said(self) -> str:
        if self._count is None:
            return self.unit
        n = self._count()
        return f"{n} {self.unit}"

    def _redraw(self, final: bool = False) -> None:
        done = self._done() if self._done is not None and not final else None
        if self._bar is None or self._task is None:
            return
        if final and self.total is not None:
            self._bar.update(self._task, completed=self.total)
        elif done is not None:
            self._bar.update(self._task, completed=done)
        self._bar.update(self._task, count=self._said())
        self._bar.refresh()

    def _run(self) -> None:
        while not self._stop.wait(REFRESH):
            try:
                self._redraw()
            except Exception:  # the bar never stops the work
                return

    def __exit__(self, *exc) -> None:
        if self._bar is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc[0] is None:
            try:
                self._redraw(final=True)  # the final figures, drawn once before the bar goes
            except Exception:
                pass
        self._bar.stop()
