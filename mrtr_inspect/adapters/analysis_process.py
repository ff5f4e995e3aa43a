"""The analysis process: where a live session is framed, recorded and analysed, away from the traffic.

The stdio tee and the HTTP proxy fork it before any thread exists (and, for the tee, before the
child starts), in a session of its own, so terminal and process-group signals do not reach it:

    forwarding (tee threads, or mitmproxy's event loop)
        └─ put(kind, time, bytes): never blocks ─▶ Spooler thread ──pipe──▶ reader thread ─▶ analysis

The forwarding side only hands references to a queue; one spooler thread writes them to the pipe in
batches, and a reader thread in the analysis process drains the pipe up to READ_AHEAD bytes ahead of
the analysis; a longer backlog waits in the spooler, which counts it, and the tee skips ahead past
`max_backlog_bytes` of it (stdio_tee.Tap): memory stays bounded on both sides. The analysis object has these
methods (the `Consumer` protocol: live_analysis.LiveAnalysis), called in order on the analysis
process' main thread:

- `chunk(time, direction, data)` for `C2S`/`S2C` items (the tee's bytes; the proxy sends its
  batched frames, encoded as recording records, as `C2S`),
- `skip(time, direction, n)` for `C2S_CUT`/`S2C_CUT` (the tee only): `n` more bytes of the line
  being read, already past `max_message_bytes`, that the tee counted and did not send (their
  bytes are recorded, not analysed: the analysis needs their number only),
- `behind(time, n)` for `BEHIND` (the tee only): the analysis fell `max_backlog_bytes` behind the
  traffic, and the tee skipped ahead; `n` the messages (lines) it has not handed over so far, sent
  as a stretch of skipping begins and once more before `END` (stdio_tee.Tap),
- `upto(time, offset)` for `UPTO` (the tee with a recording: `Spooler.follow`): the recording's writes
  reached `offset`; the analysis reads the records appended since (whole lines) from the file itself,
  so the tee hands over no copy of the bytes, only this notice (one at a time while the spooler
  has not sent the last, and the final one before `END`); the proxy's too, from the offset its
  `FOLLOW` gives (`follow(time, offset)`: where its session's header ended, sent once it listens),
  which it reads between items without notices (`look()`: the seconds until it looks again).
  A follower yields to the traffic: it acts on the news at a pause in it, or once it has waited
  `live_yield_seconds` for one (its object's `yielding`, a `Yielding`; none: at once),
- `eof(time, direction)` for `C2S_EOF`/`S2C_EOF` (the proxy sends `C2S_EOF` once it listens),
- `end(info, time, gone)` for `END` (info: JSON, such as the child's exit status), after which the
  process exits with the status `end` returns (None: 0; the proxy passes it on, docs/http-proxy.md).
  A pipe that breaks before `END` (the forwarding process was killed) ends the session the same way,
  with `gone` true: the forwarding process could not end the recording, so the analysis does.

If the analysis process dies, the traffic goes on: the spooler stops writing and drops what comes.
"""

from __future__ import annotations

import json
import os
import queue
import struct
import sys
import threading
import time
from typing import Callable, Protocol

from ..core.events import Direction

HEAD = struct.Struct("<BdI")  # item kind, time, length of the bytes that follow
C2S, S2C, C2S_EOF, S2C_EOF, END, GONE, C2S_CUT, S2C_CUT, BEHIND, UPTO, FOLLOW = range(11)  # GONE: the pipe broke before END (never sent)
DIRECTION = {C2S: Direction.C2S, S2C: Direction.S2C, C2S_EOF: Direction.C2S, S2C_EOF: Direction.S2C, C2S_CUT: Direction.C2S,
             S2C_CUT: Direction.S2C}
SKIPPED = struct.Struct("<Q")  # a CUT item's bytes: how many bytes of the line were not sent (BEHIND's: messages; UPTO's, FOLLOW's: an offset)
SPOOL_BATCH = 64  # items per write to the analysis pipe
SPOOL_GATHER = 0.002  # seconds the spooler waits, once the queue ran dry, before it looks again
#: bytes the analysis process' reader holds for the analysis: past them the reader waits until the
#: analysis is down to half, the pipe fills, and the backlog waits in the forwarding process'
#: spooler, which counts it (`Spooler.held`) and is bounded there (max_backlog_bytes: stdio_tee.Tap)
READ_AHEAD = 16 << 20
#: seconds without news of the traffic (an UPTO notice; the proxy's recording not grown) that make a
#: pause in it, when a follower that yields to the traffic works (`Yielding`)
QUIET = 0.01


class Consumer(Protocol):
    """What the analysis process feeds (live_analysis.LiveAnalysis)."""

    def chunk(self, t: float, direction: str, data: bytes) -> None: ...
    def skip(self, t: float, direction: str, n: int) -> None: ...
    def behind(self, t: float, n: int) -> None: ...
    def upto(self, t: float, offset: int) -> None: ...
    def follow(self, t: float, offset: int) -> None: ...
    def eof(self, t: float, direction: str) -> None: ...
    def end(self, info: dict, t: float, gone: bool = False) -> int | None: ...


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def to_devnull(fd: int) -> None:
    """Close what `fd` refers to, keeping the number taken (by /dev/null) so nothing else reuses it."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, fd)
    os.close(null)


class Spooler:
    """The tee's end of the pipe to the analysis process: `put` never blocks; one thread writes.
    `held()`: the bytes put and not yet written to the pipe (`put`'s callers are one at a time: the
    tee's Tap holds its lock, the proxy puts from its event loop; the spooler thread counts what it wrote).

    `follow(fd)`: the analysis reads the recording written on `fd` (its own descriptor of the file)
    instead of copies of the chunks; `wake()` then tells it that the writes went on: at most one
    notice waits in the queue, and the spooler thread fills in the offset the writes reached (`lseek`
    on a duplicate of `fd`, which shares its offset) as it sends it, so the forwarding threads make
    no system call for it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self.queued = 0  # bytes put (by the callers of `put`)
        self.written = 0  # bytes written to the pipe, or dropped with it (by the spooler thread)
        self._follow: int | None = None  # the duplicate of the recording's descriptor (`follow`)
        self._woken = False  # an UPTO notice waits in the queue
        self.thread = threading.Thread(target=self._run, name="mrtr-inspect-spool", daemon=True)
        self.thread.start()

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        self.queued += len(data)
        self._q.put((kind, t, data))

    def held(self) -> int:
        return self.queued - self.written

    def follow(self, fd: int) -> None:
        self._follow = os.dup(fd)

    def wake(self) -> None:
        """The recording grew: an UPTO notice, unless one waits already (its offset is read as it is sent)."""
        if not self._woken:
            self._woken = True
            self._q.put((UPTO, 0.0, b""))

    def _offset(self) -> bytes:
        self._woken = False  # (before the offset is read: a write after this wakes again)
        try:
            return SKIPPED.pack(os.lseek(self._follow, 0, os.SEEK_CUR)) if self._follow is not None else SKIPPED.pack(0)
        except OSError:
            return SKIPPED.pack(0)

    def _run(self) -> None:
        get, get_nowait, pack = self._q.get, self._q.get_nowait, HEAD.pack
        while True:
            batch = [get()]
            try:
                while len(batch) < SPOOL_BATCH and batch[-1][0] != END:
                    batch.append(get_nowait())
            except queue.Empty:
                pass
            size = sum(len(d) for _, _, d in batch)  # (an UPTO notice's offset is not counted: it was not put)
            if self._fd is not None:
                if self._follow is not None:
                    batch = [(k, t, self._offset()) if k == UPTO else (k, t, d) for k, t, d in batch]
                try:
                    write_all(self._fd, b"".join(pack(k, t, len(d)) + d for k, t, d in batch))
                except OSError:  # the analysis process is gone; the traffic goes on
                    os.close(self._fd)
                    self._fd = None
            self.written += size
            if batch[-1][0] == END:
                if self._fd is not None:
                    os.close(self._fd)
                if self._follow is not None:
                    os.close(self._follow)
                return
            if len(batch) < SPOOL_BATCH:
                # the queue ran dry: let the chunks of the next moments gather, one wake-up and one
                # write for many of them, not a thread switch per chunk against the forwarding threads
                time.sleep(SPOOL_GATHER)


class Yielding:
    """When a follower (an analysis that reads the recording as it grows) works: at a pause in the
    traffic (QUIET seconds without news of it), or once it has waited `most` seconds for one
    (`live_yield_seconds`; 0: at once). On this project's 2-core machines the analysis' CPU slows
    the forwarding at full speed even at the lowest priority (docs/performance.md), and at full speed
    it trails the stream anyway; so while the traffic flows it waits, the backlog waiting in the file
    (bounded: past max_backlog_bytes the follower skips ahead, and says so). After it worked, the
    next news begins a new wait."""

    def __init__(self, most: float) -> None:
        self.most = most
        self.since: float | None = None  # when the news it has not acted on began (time.monotonic)

    def news(self, now: float) -> bool:
        """News of the traffic at `now`: whether to work on it now."""
        if self.since is None:
            self.since = now
        if now - self.since < self.most:
            return False
        self.since = None
        return True

    def paused(self) -> None:
        """A pause in the traffic: work (and the next news begins a new wait)."""
        self.since = None


class ReadAhead:
    """How far the reader is ahead of the analysis, in bytes: `got` (the reader) waits while more than
    `limit` are held, until `done` (the analysis) is down to half. Each side counts on its own."""

    def __init__(self, limit: int = READ_AHEAD) -> None:
        self.limit = limit
        self._got = self._done = 0
        self._room = threading.Event()
        self._room.set()

    def got(self, n: int) -> None:
        self._got += n
        if self._got - self._done > self.limit:
            self._room.clear()
            if self._got - self._done > self.limit:  # (the analysis may have caught up since the first look)
                self._room.wait()

    def done(self, n: int) -> None:
        self._done += n
        if not self._room.is_set() and self._got - self._done <= self.limit // 2:
            self._room.set()


def read_items(fd: int, put: Callable, got: Callable[[int], None] | None = None) -> None:
    """Read the tee's items from the pipe as they come, up to READ_AHEAD bytes ahead of the analysis
    (`got`); past it the backlog waits in the forwarding process' spooler, which bounds it."""
    with open(fd, "rb") as f:
        while True:
            head = f.read(HEAD.size)
            if len(head) < HEAD.size:
                break
            kind, t, n = HEAD.unpack(head)
            data = f.read(n) if n else b""
            if len(data) < n:
                break
            put((kind, t, data))
            if got is not None:
                got(n)
            if kind == END:
                return
    put((GONE, time.time(), b""))  # the tee went away before the end of the session


def analysis_main(fd: int, make: Callable[[], Consumer]) -> int:
    """Run the analysis until END; returns the process' exit status."""
    items: queue.SimpleQueue = queue.SimpleQueue()
    ahead = ReadAhead()
    threading.Thread(target=read_items, args=(fd, items.put, ahead.got), daemon=True).start()
    analysis = make()
    # a follower that looks at the recording itself (the proxy's): between items, at the times it asks
    look = getattr(analysis, "look", None)
    wait = None
    yielding = getattr(analysis, "yielding", None) or Yielding(0.0)
    pending: tuple[float, int] | None = None  # the last UPTO notice, not yet acted on (yielding to the traffic)

    def act() -> None:
        nonlocal pending
        analysis.upto(*pending)  # type: ignore[misc]
        pending = None

    while True:
        if pending is not None:
            try:
                kind, t, data = items.get(timeout=QUIET)
            except queue.Empty:  # a pause in the traffic
                yielding.paused()
                act()
                continue
        elif wait is None:
            kind, t, data = items.get()
        else:
            try:
                kind, t, data = items.get(timeout=wait)
            except queue.Empty:
                wait = look()  # type: ignore[misc]
                continue
        ahead.done(len(data))
        if kind == UPTO:
            pending = (t, SKIPPED.unpack(data)[0])
            if yielding.news(time.monotonic()):
                act()
            continue
        if pending is not None:
            act()
        if kind == C2S or kind == S2C:
            analysis.chunk(t, DIRECTION[kind], data)
        elif kind == C2S_CUT or kind == S2C_CUT:
            analysis.skip(t, DIRECTION[kind], SKIPPED.unpack(data)[0])
        elif kind == FOLLOW:
            analysis.follow(t, SKIPPED.unpack(data)[0])
        elif kind == BEHIND:
            analysis.behind(t, SKIPPED.unpack(data)[0])
        elif kind == END:
            return analysis.end(json.loads(data) if data else {}, t) or 0
        elif kind == GONE:
            return analysis.end({}, t, gone=True) or 0
        else:
            analysis.eof(t, DIRECTION[kind])
        if look is not None:
            wait = look()


def fork_analysis(make: Callable[[], Consumer]) -> tuple[int, Spooler]:
    """Fork the analysis process (before any thread exists); returns its pid and the spooler feeding it."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the analysis process: never returns
        code = 0
        try:
            os.close(w)
            os.setsid()
            for fd in (0, 1):  # the client must see our stdout close when the tee closes it
                to_devnull(fd)
            code = analysis_main(r, make)
        except BaseException as e:
            code = 70
            try:
                sys.stderr.write(f"mrtr-inspect: the analysis stopped (traffic unaffected): {type(e).__name__}: {e}\n")
            except Exception:
                pass
        finally:
            try:
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(r)
    return pid, Spooler(w)
