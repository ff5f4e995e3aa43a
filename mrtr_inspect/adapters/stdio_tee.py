"""The stdio tee: `mrtr-inspect stdio -- CMD [ARG...]`.

The client starts the tee instead of the server; the tee starts the server and sits on its pipes.

    client stdin ──▶ tee ──▶ child stdin          child stdout ──▶ tee ──▶ client stdout
                      └──────────── chunks, with their time ───────────┘
                                          ▼
                         analysis thread: frame → record → inspect → stderr

Forward first, analyse after: each chunk is written on before it is queued for analysis, bytes
unchanged, and the forwarding threads never wait for the analysis (the queue is unbounded; the
analysis may trail, it never slows the stream). The child's stderr is the tee's stderr. SIGINT and
SIGTERM are passed to the child; the tee's exit status is the child's. EOF on either side is passed
on to the other.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from ..config import Config
from ..core.findings import Finding
from ..core.framing import StdioFramer
from ..core.inspector import ChainEvent, Inspector
from ..outputs.report import ReportBuilder
from ..outputs.text import FindingPrinter, chain_line
from ..recording.writer import RecordingError, RecordingWriter, new_session_id

CHUNK = 1 << 16
_EOF = b""


class TeeAnalysis:
    """Consumes (time, direction, chunk) items: frames them, records them, analyses them.

    Recording comes before analysis and each is guarded on its own: a failing analysis never
    stops the recording, and nothing here can reach the forwarding threads.
    """

    def __init__(self, session: str, config: Config, writer: RecordingWriter | None,
                 printer: FindingPrinter | None, report: ReportBuilder | None) -> None:
        self.session = session
        self.framer = StdioFramer(session)
        self.writer = writer
        self.inspector = Inspector(config)
        self.printer = printer
        self.report = report
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name="mrtr-inspect-analysis", daemon=True)

    def start(self) -> None:
        self._thread.start()
        from ..core.events import SessionStart
        info: dict[str, Any] = {}
        if self.writer is not None:
            info = dict(self.writer.start.info)
        self.q.put(("start", SessionStart(time.time(), self.session, "stdio", info)))

    def put(self, t: float, direction: str, chunk: bytes) -> None:
        self.q.put((t, direction, chunk))

    def finish(self, info: dict, timeout: float | None = None) -> None:
        self.q.put(("end", info))
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self.q.get()
            if item[0] == "end":
                self._end(item[1])
                return
            if item[0] == "start":
                self._analyse([item[1]], record=False)
                continue
            t, direction, chunk = item
            try:
                frames = self.framer.close(t, direction) if chunk is _EOF else self.framer.data(t, direction, chunk)
            except Exception as e:  # pragma: no cover - the framer does not raise
                self._internal(e)
                continue
            self._analyse(frames)

    def _analyse(self, frames: list, record: bool = True) -> None:
        if record and self.writer is not None:
            try:
                for f in frames:
                    self.writer.write(f)
            except Exception as e:
                self._internal(e, "recording")
        for f in frames:
            try:
                outs = self.inspector.feed(f)
            except Exception as e:  # pragma: no cover - feed guards itself
                self._internal(e)
                continue
            self._handle(outs)

    def _handle(self, outs: list) -> None:
        for o in outs:
            try:
                if self.report is not None:
                    self.report.add(o)
                if self.printer is not None:
                    if type(o) is Finding:
                        self.printer.finding(o)
                    elif type(o) is ChainEvent and o.kind == "closed":
                        self.printer.line(chain_line(o.chain.summary()), style="bold")
            except Exception as e:
                self._internal(e, "output")

    def _end(self, info: dict) -> None:
        t = time.time()
        for direction in ("c2s", "s2c"):
            try:
                rest = self.framer.close(t, direction)
                self._analyse([f for f in rest if type(f).__name__ == "StdioLine"])
            except Exception as e:  # pragma: no cover
                self._internal(e)
        from ..core.events import SessionEnd
        end = SessionEnd(t, self.session, info)
        self._handle(self.inspector.feed(end))
        self._handle(self.inspector.close(t))
        if self.writer is not None:
            try:
                self.writer.close(info, t)
            except Exception as e:
                self._internal(e, "recording")

    def _internal(self, e: BaseException, what: str = "analysis") -> None:
        self.errors += 1
        if self.errors <= 3 and self.printer is not None:
            try:
                self.printer.line(f"internal {what} error (traffic unaffected): {type(e).__name__}: {e}", style="red")
            except Exception:
                pass


def _pump(src: int, dst: int | None, on_chunk: Callable[[float, bytes], None], on_eof: Callable[[], None]) -> None:
    """Copy src to dst until EOF or a broken destination; report each chunk after forwarding it."""
    try:
        while True:
            try:
                chunk = os.read(src, CHUNK)
            except OSError:
                chunk = b""
            t = time.time()
            if not chunk:
                break
            if dst is not None:
                try:
                    view = memoryview(chunk)
                    while view:
                        n = os.write(dst, view)
                        view = view[n:]
                except OSError:
                    dst = None  # the reader went away: keep draining so the other side is not blocked
            on_chunk(t, chunk)
    finally:
        on_eof()


def run_tee(cmd: list[str], *, record: str | None = None, report: str | None = None, quiet: bool = False,
            config: Config | None = None, stdin_fd: int | None = None, stdout_fd: int | None = None,
            stderr=None) -> int:
    config = config or Config()
    err = stderr if stderr is not None else sys.stderr
    in_fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
    out_fd = sys.stdout.fileno() if stdout_fd is None else stdout_fd
    session = new_session_id()
    writer = None
    if record:
        try:
            writer = RecordingWriter(record, "stdio", {"command": list(cmd)}, session=session)
        except RecordingError as e:
            err.write(f"mrtr-inspect: {e}\n")
            return 2
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, bufsize=0,
                                 process_group=0)
    except OSError as e:
        err.write(f"mrtr-inspect: cannot start {cmd[0]!r}: {e.strerror or e}\n")
        if writer is not None:
            writer.close({"error": f"cannot start: {e.strerror or e}"})
        return 127
    printer = None if quiet else FindingPrinter(err, min_severity="warning", prefix="mrtr-inspect: ")
    builder = ReportBuilder([record] if record else []) if report else None
    analysis = TeeAnalysis(session, config, writer, printer, builder)
    analysis.start()

    assert child.stdin is not None and child.stdout is not None
    child_in = child.stdin.fileno()
    child_out = child.stdout.fileno()

    def close_child_stdin() -> None:
        analysis.put(time.time(), "c2s", _EOF)
        try:
            child.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass

    def close_our_stdout() -> None:
        analysis.put(time.time(), "s2c", _EOF)
        try:
            os.close(out_fd)
        except OSError:
            pass

    up = threading.Thread(target=_pump, name="mrtr-inspect-c2s", daemon=True,
                          args=(in_fd, child_in, lambda t, c: analysis.put(t, "c2s", c), close_child_stdin))
    down = threading.Thread(target=_pump, name="mrtr-inspect-s2c", daemon=True,
                            args=(child_out, out_fd, lambda t, c: analysis.put(t, "s2c", c), close_our_stdout))

    def forward(signum, frame) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                old[s] = signal.signal(s, forward)
            except (ValueError, OSError):  # pragma: no cover
                pass
    up.start()
    down.start()
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover - the handler forwards instead
                continue
        down.join(10.0)  # a grandchild may hold the pipe open: do not wait for it forever
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    status = code if code >= 0 else 128 - code
    analysis.finish({"exit": code})
    if builder is not None and report:
        try:
            with open(report, "w", encoding="utf-8") as f:
                builder.write_json(f)
        except OSError as e:
            err.write(f"mrtr-inspect: cannot write report {report}: {e.strerror}\n")
        builder.close()
    return status
