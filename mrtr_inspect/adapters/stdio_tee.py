"""The stdio tee: `mrtr-inspect stdio -- CMD [ARG...]`.

The client starts the tee instead of the server; the tee starts the server and sits on its pipes.

    client stdin ──▶ tee ──▶ child stdin          child stdout ──▶ tee ──▶ client stdout
                      └──── chunks, with their time ────┘
                                     ├──▶ recording (the chunk's lines, one write: recorder.py) ─┐
                                     ▼                                                  read back │
                        spooler thread ──pipe──▶ analysis process: frame → inspect → stderr ◀────┘
                        (with a recording: "the writes reached offset N"; without: the chunks)

Forwarding never waits for the analysis. With `--record` on a regular file the analysis reads the
recording itself as it grows (live_inputs.RecordedInput: whole records only, decoded as `check`
decodes them, so the live report is `check`'s of the recording), and the forwarding threads hand
it no copy of the bytes: each chunk's `Tap.put` records the chunk, then only wakes the spooler
(`Spooler.wake`: a flag test while a notice already waits), whose thread sends the offset the
writes reached (UPTO); past `max_backlog_bytes` of the file behind, the follower skips ahead (it
counts the messages it skips, said live and in the report). Without a recording (or with one on
standard output, a FIFO, a device, or one that stops because it cannot be written) the chunks
are handed over. The two directions are forwarded by one thread when standard output is a pipe
or a socket, else by a thread each (forwarding.py). In detail: just before a chunk is written on (bytes
unchanged), the Tap appends the lines the chunk completes to the recording (one `write()`, so a kill of
any process, or of all, loses no line that crossed) and hands the chunk (to a follower: the
notice) to a queue (a reference, never blocking; of a line past max_message_bytes only its
length: `Tap`); both under one lock, so
the recording and the analysis see the chunks in one order, and the analysis sees a message before
anything the peer answers to it. A spooler thread moves the queue into a pipe to the analysis
process, which a reader thread there drains up to 16 MiB ahead of the analysis: framing and rules
run in another process and never hold this one's GIL. The analysis may trail the stream; it never
slows it. It trails by `max_backlog_bytes` at most: past that many bytes held for it, the Tap hands
it whole lines only, no new one until it is back to half, counts the lines it skipped, and the
analysis says so live and in the report (the recording keeps every line).

The analysis process (`analysis_process.py`, shared with the HTTP proxy) is forked before the
child starts, in a session of its own: terminal and process-group signals (an MCP client's
SIGTERM/SIGKILL to the tee's group) do not reach it, and it ends when its pipe does, after writing the report (and the end of the recording, if the tee
was killed before it wrote it). The tee waits for
it, unless a signal comes once the child has exited: the tee then exits at once and the analysis
finishes on its own.

The child's stderr is the tee's stderr; the tee's own lines go to stderr too, never stdout. SIGINT,
SIGTERM and SIGHUP are passed to the child (in a process group of its own); the tee's exit status
is the child's (128+N when a signal N ended it). End of file, or a reader that went away, on
either side is passed on to the other, as a direct pipe would. A `--record` or `--report` path that
cannot be written is one line and exit status 2 before the child starts; a report that cannot be
written at the end after all is one line, and the status stays the child's.

What the analysis process does with the chunks (frame, redact, inspect, print, report) is
live_analysis.py's `LiveAnalysis`, as for the proxy and the addon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from ..config import Config
from ..core.findings import Severity
from ..core.hops import hop_problem
from ..outputs.text import FindingPrinter, tool_line
from ..recording.files import STDOUT, unwritable
from ..recording.writer import RecordingError, RecordingWriter, redactor_for
from .analysis_process import (BEHIND, C2S, C2S_CUT, C2S_EOF, DIRECTION, END, S2C, S2C_CUT, S2C_EOF, SKIPPED, UPTO,
                               Spooler, fork_analysis, to_devnull)
from .exports import Exports
from .forwarding import start_forwarding
from .live_analysis import LiveAnalysis, new_analysis, session_start
from .recorder import StdioRecorder



# -- forwarding ---------------------------------------------------------------------------------


class Tap:
    """Where the forwarding threads hand each chunk before passing it on: the recording (durable at
    once) and the spooler (the analysis), in one order, under one lock.

    Once the line being read in a direction is past `limit` bytes (max_message_bytes: the analysis
    keeps none of it then), the analysis gets no more of its bytes, only their number (a CUT item
    per chunk) and then the rest from its LF on: it is handed at most `limit` bytes and one chunk of
    a line, so a huge line waits neither in this process' queue nor in the analysis process. The
    cost per chunk: a chunk that ends a line, after one that did, is one comparison; another is
    one `rfind` (two for the chunk that ends a line past the limit)."""

    def __init__(self, spool: Spooler, recorder: StdioRecorder | None, limit: int | None = None,
                 backlog: int | None = None, follow: bool = False) -> None:
        self.spool = spool
        self.recorder = recorder
        #: the analysis reads the recording (`follow`): it is handed no chunk, only a notice (`Spooler.wake`)
        self.following = follow and recorder is not None
        self.lock = threading.Lock()
        self.limit = limit if limit is not None else sys.maxsize
        self._open = [0, 0]  # bytes of the line being read (its LF not yet seen), by C2S, S2C
        #: bytes the analysis may fall behind (max_backlog_bytes): past them it skips ahead, to half of it
        self.backlog = backlog if backlog is not None else sys.maxsize
        self.behind = False  # skipping ahead: the analysis is more than `backlog` behind
        self._dropping = [False, False]  # the line being read began while skipping: the analysis gets none of it
        self.skipped = 0  # lines (messages) the analysis did not get

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        with self.lock:
            if self.following:
                rec = self.recorder
                if kind == C2S or kind == S2C:
                    rec.chunk(t, DIRECTION[kind], data)  # type: ignore[union-attr]
                else:
                    rec.close(t, DIRECTION[kind])  # type: ignore[union-attr]
                if rec.writer is not None:  # type: ignore[union-attr]
                    self.spool.wake()
                    return
                self._unfollow(kind, t, data)
                return
            if kind == C2S or kind == S2C:
                handed = data
                if self.behind or self._dropping[kind] or self.spool.queued - self.spool.written > self.backlog:
                    handed = self._shed(kind, t, data)
                if not handed:
                    pass
                elif self._open[kind] or not handed.endswith(b"\n"):  # a line left open: follow its length
                    self._follow(kind, t, handed)
                else:
                    self.spool.put(kind, t, handed)
                if self.recorder is not None:
                    self.recorder.chunk(t, DIRECTION[kind], data)
            else:
                if (kind == C2S_EOF or kind == S2C_EOF) and self._dropping[kind - C2S_EOF]:
                    self._dropping[kind - C2S_EOF] = False  # the stream ended in a line the analysis did not get
                    self.skipped += 1
                self.spool.put(kind, t, data)
                if self.recorder is not None:
                    self.recorder.close(t, DIRECTION[kind])

    def _unfollow(self, kind: int, t: float, data: bytes) -> None:
        """The recording stopped (it could not be written): the analysis reads it to where it stopped,
        then is handed chunks. The lines the failed write held, and the rest of a line open then, it
        does not get (counted as skipped: it cannot be told which of them reached the file)."""
        rec, self.recorder, self.following = self.recorder, None, False
        self.spool.put(UPTO, t)
        for k in (C2S, S2C):
            self._dropping[k] = rec.open(DIRECTION[k])  # type: ignore[union-attr]
        if kind == C2S or kind == S2C:
            self.skipped += data.count(b"\n")
        else:  # the end of that stream: the analysis closes it
            self._dropping[kind - C2S_EOF] = False
            self.spool.put(kind, t)

    def _shed(self, kind: int, t: float, data: bytes) -> bytes:
        """The part of `data` the analysis gets now that it may be behind: whole lines only. While it
        is more than `backlog` bytes behind (until it is back to half), it gets the end of the line it
        holds and no line that begins; a line that began while skipping is skipped to its end."""
        held = self.spool.held()
        if not self.behind and held > self.backlog:
            self.behind = True
            self.spool.put(BEHIND, t, SKIPPED.pack(self.skipped))  # the live line: skipping begins
        elif self.behind and held <= self.backlog // 2:
            self.behind = False
        keep = b""
        if self._dropping[kind]:  # the rest of a line skipped
            i = data.find(b"\n")
            if i < 0:
                return b""
            self._dropping[kind] = False
            self.skipped += 1
            data = data[i + 1:]
            if not self.behind:
                return data
        elif self._open[kind]:  # the analysis holds the beginning of this line: it gets its end
            i = data.find(b"\n")
            if i < 0:
                return data
            keep, data = data[:i + 1], data[i + 1:]
        self.skipped += data.count(b"\n")
        if data and not data.endswith(b"\n"):
            self._dropping[kind] = True
        return keep

    def _follow(self, kind: int, t: float, data: bytes) -> None:
        """The chunk to the analysis, the length of the open line followed; of a line past the
        limit, its number of bytes only."""
        n = self._open[kind]
        if n > self.limit:
            i = data.find(b"\n")
            if i < 0:
                self._open[kind] = n + len(data)
                self.spool.put(C2S_CUT if kind == C2S else S2C_CUT, t, SKIPPED.pack(len(data)))
                return
            if i:
                self.spool.put(C2S_CUT if kind == C2S else S2C_CUT, t, SKIPPED.pack(i))
                data = data[i:]  # from the LF that ends the line
            n = 0
        i = data.rfind(b"\n")
        self._open[kind] = n + len(data) if i < 0 else len(data) - i - 1
        self.spool.put(kind, t, data)

    def finish(self, info: dict, t: float) -> None:
        """The session is over: the recording ends (the tee writes its end), then, to a follower, the
        offset its writes reached; then the analysis' END."""
        with self.lock:
            rec, self.recorder = self.recorder, None
            if rec is not None:
                rec.finish(info, t)
                if self.following:
                    self.spool.put(UPTO, t)  # the final offset (its session's end is the analysis' own)
            self.following = False  # (a late end of file, from a thread still closing, is put as without it)
            if self.skipped:
                self.spool.put(BEHIND, t, SKIPPED.pack(self.skipped))
            self.spool.put(END, t, json.dumps(info).encode())


def _say(text: str) -> None:
    try:
        sys.stderr.write(tool_line(text))
        sys.stderr.flush()
    except Exception:
        pass


class _Interrupted(Exception):
    """A signal came after the child exited: stop waiting for the analysis."""


def _exited(child: subprocess.Popen) -> bool:
    """Whether the child has exited, its status taken or not: a signal handler runs in the main
    thread, which may be inside `child.wait()` with the child already gone (`returncode` still None,
    and `Popen.poll` cannot look while `wait` holds its lock); WNOWAIT leaves the status to `wait`."""
    if child.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # taken by wait() in the meantime
        return True


def run_tee(cmd: list[str], *, record: str | None = None, report: str | None = None, quiet: bool = False,
            config: Config | None = None, exports: Exports | None = None, hop: str | None = None) -> int:
    """Run the tee around `cmd` on this process' stdin and stdout; returns the exit status."""
    config = config or Config()
    writer = None
    info: dict = {"command": list(cmd), "live": True}
    if hop is not None:
        if reason := hop_problem(hop):
            sys.stderr.write(tool_line(f"--hop: {reason}"))
            return 2
        info["hop"] = hop
    try:
        if STDOUT in (record, report):
            raise RecordingError(f"--{'record' if record == STDOUT else 'report'} -: standard output carries the "
                                 "server's messages to the client; name a file")
        if report and (reason := unwritable(report, "report")):
            raise RecordingError(reason)
        if record:
            writer = RecordingWriter(record, "stdio", dict(info), redactor_for(config))
    except RecordingError as e:
        sys.stderr.write(tool_line(e))
        return 2
    start = session_start(writer, "stdio", info)
    # with a recording the analysis process reads it as it grows: no second copy of the bytes
    follow = writer.reader() if writer is not None else None

    def make() -> LiveAnalysis:
        printer = None if quiet else FindingPrinter(sys.stderr, min_severity=Severity.WARNING, prefix="mrtr-inspect: ")
        return new_analysis(start, config, writer, report, record=record, printer=printer, forwarder_records=True,
                            exports=exports, follow=follow)

    analysis_pid, spool = fork_analysis(make)
    if follow is not None and writer is not None:
        spool.follow(writer.fileno())
        follow[0].close()  # the analysis process' copy is the one read
    tap = Tap(spool, StdioRecorder(writer, failed=_say, limit=config.max_message_bytes) if writer is not None else None,
              config.max_message_bytes, config.max_backlog_bytes, follow=follow is not None)
    if exports is not None:
        exports.forked()

    def finish(info: dict, wait: bool = True) -> None:
        tap.finish(info, time.time())
        if not wait:  # the analysis process finishes the recording and report on its own
            spool.thread.join(1.0)
            return
        spool.thread.join()
        os.waitpid(analysis_pid, 0)

    try:
        child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, bufsize=0,
                                 process_group=0)
    except (OSError, ValueError) as e:
        why = f"cannot start {cmd[0]!r}: {getattr(e, 'strerror', None) or e}"
        sys.stderr.write(tool_line(why))
        finish({"error": why})
        return 127
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin, child.stdout

    def c2s_done() -> None:
        tap.put(C2S_EOF, time.time())
        child_in.close()
        to_devnull(0)

    def s2c_done() -> None:
        tap.put(S2C_EOF, time.time())
        to_devnull(1)
        child_out.close()

    up, down = start_forwarding(child_in.fileno(), child_out.fileno(), tap.put, c2s_done, s2c_done)

    def on_signal(signum, frame) -> None:
        if not _exited(child):
            child.send_signal(signum)
        else:
            raise _Interrupted

    old = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            old[s] = signal.signal(s, on_signal)
    try:
        up.start()
        down.start()
        late = False
        try:
            code = child.wait()
        except _Interrupted:  # the signal came with the child gone, before wait() took its status
            late, code = True, child.wait()
        try:
            down.join(10.0)  # a grandchild may hold the pipe open: do not wait for it forever
        except _Interrupted:
            late = True
        try:
            finish({"exit": code}, wait=not late)
        except _Interrupted:
            spool.thread.join(1.0)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return code if code >= 0 else 128 - code
