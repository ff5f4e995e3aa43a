"""The stdio tee's forwarding threads: both directions in one thread when they can be, else one each.

Two threads, each reading one side and writing the other, never deadlock whatever the peers do,
but they pay for it on every chunk: the GIL and the Tap's lock go back and forth between them, each
hand-over a futex wake and a context switch. At full speed on 2 CPUs (bench/tee_throughput.py) the
tee's process then spent about 65 ms of CPU and 3,700 time slices on 100,000 messages; one thread
that polls both sides spent about 45 ms and 700 slices (docs/performance.md).

One thread may never block on a write, or a peer that stops reading one side while it writes the
other would stall both. So it writes only where a write can be asked not to wait without changing
how anyone else sees the file: the child's stdin is the tee's own pipe (made non-blocking), and
the tee's standard output is a pipe or FIFO reopened through /proc (a new open file description
of its own, non-blocking: the client's, shared with the tee's fd 1, keeps its flags) or a socket
(MSG_DONTWAIT on each send; Node's clients give their children socket pairs). A write that cannot
be taken whole keeps the rest (one chunk at most: that side is not read until it is written), and
the thread waits for the reader. Anything else (standard output a terminal, a file, no /proc) has
the two threads, as before.

Each chunk is handed to `put` (the Tap: recorded, the analysis told) before it is written on, as
`pump` does; end of file or an error reading one side, and a reader gone on the other,
end that direction (`done`) and no other.
"""

from __future__ import annotations

import os
import select
import socket
import stat
import threading
import time
from typing import Callable

from .analysis_process import C2S, S2C, write_all

CHUNK = 1 << 16
_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
_WAIT = (BlockingIOError, InterruptedError)


def own_writer(fd: int) -> tuple[Callable, Callable[[], None]] | None:
    """(write, close) for `fd` that never blocks and leaves `fd`'s open file description as it is:
    a pipe or FIFO reopened through /proc/self/fd, non-blocking; a stream socket, sent to with
    MSG_DONTWAIT. None for anything else (a terminal, a file: `O_NONBLOCK` on them would be seen by
    every process sharing them, and a file reopened would be written from its start)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    if stat.S_ISFIFO(st.st_mode):
        try:
            own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # no /proc, or the reader gone already
            return None
        mine = os.fstat(own)
        if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISFIFO(mine.st_mode):  # pragma: no cover
            os.close(own)
            return None
        write = os.write
        return (lambda data: write(own, data)), (lambda: os.close(own))
    if stat.S_ISSOCK(st.st_mode):
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            return None
        if sock.type != socket.SOCK_STREAM:
            sock.detach()
            return None
        send, flags = sock.send, socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)
        return (lambda data: send(data, flags)), sock.close
    return None


class Way:
    """One direction: read `src`, `put` each chunk, write it with `write` (which never blocks)."""

    __slots__ = ("src", "dst", "kind", "write", "done", "pending")

    def __init__(self, src: int, dst: int, kind: int, write: Callable, done: Callable[[], None]) -> None:
        self.src, self.dst, self.kind, self.write, self.done = src, dst, kind, write, done
        self.pending: memoryview | None = None  # what `dst` has not taken yet: `src` is not read meanwhile


def forward_both(ways: list[Way], put: Callable[[int, float, bytes], None]) -> None:
    """Forward every way until each has ended, in this thread."""
    poller = select.poll()
    polled: dict[int, Way] = {}  # the descriptor each live way waits on: its src, or its dst while a write waits
    for way in ways:
        poller.register(way.src, _READ)
        polled[way.src] = way
    read, now, poll = os.read, time.time, poller.poll

    def end(way: Way, fd: int) -> None:
        poller.unregister(fd)
        del polled[fd]
        way.done()

    def send(way: Way, data, fd: int) -> None:
        """Write `data` on; what is left waits for `dst` (polled instead of `src`, now `fd`)."""
        try:
            n = way.write(data)
        except _WAIT:
            n = 0
        except OSError:  # the reader went away: this direction ends, as a direct pipe's would
            end(way, fd)
            return
        if n == len(data):
            if way.pending is not None:
                way.pending = None
                poller.unregister(fd)
                del polled[fd]
                poller.register(way.src, _READ)
                polled[way.src] = way
            return
        way.pending = memoryview(data)[n:]
        if fd == way.src:
            poller.unregister(fd)
            del polled[fd]
            poller.register(way.dst, _WRITE)
            polled[way.dst] = way

    try:
        while polled:
            for fd, _ in poll():
                way = polled.get(fd)
                if way is None:  # (ended by an earlier event of this round)
                    continue
                if way.pending is not None:
                    send(way, way.pending, fd)
                    continue
                try:
                    chunk = read(fd, CHUNK)
                except _WAIT:  # (a source another process made non-blocking, woken for nothing: poll again)
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    end(way, fd)
                    continue
                put(way.kind, now(), chunk)
                send(way, chunk, fd)
    finally:  # (an exception: each direction still live ends, as its thread's would)
        for way in list(polled.values()):
            way.done()


def pump(src: int, dst: int, kind: int, put: Callable[[int, float, bytes], None], done: Callable[[], None]) -> None:
    """Copy src to dst until either end closes; each chunk goes to `put`, then on to dst (blocking)."""
    read, write, now = os.read, os.write, time.time
    try:
        while True:
            try:
                chunk = read(src, CHUNK)
            except OSError:
                return
            if not chunk:
                return
            put(kind, now(), chunk)
            try:  # (`write_all`, its first write inline: a pipe takes a chunk whole as a rule)
                n = write(dst, chunk)
                if n < len(chunk):
                    write_all(dst, chunk[n:])
            except OSError:  # the reader went away: `done` closes src too, as a direct pipe would
                return
    finally:
        done()


class _Ended:
    """The server's direction when `forward_both`'s thread forwards it: `join` waits for its end."""

    def __init__(self, ended: threading.Event) -> None:
        self.ended = ended

    def start(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        self.ended.wait(timeout)


def start_forwarding(child_in: int, child_out: int, put: Callable[[int, float, bytes], None],
                     c2s_done: Callable[[], None], s2c_done: Callable[[], None]) -> tuple:
    """(up, down), to `start` and `join` as threads: the client's direction (this process' stdin to
    `child_in`) and the server's (`child_out` to stdout). Both are one thread (`forward_both`) when
    standard output has a writer that never blocks (`own_writer`), `down` then waiting for the
    server's direction's end; else one thread each (`pump`)."""
    out = own_writer(1)
    if out is None:
        return (threading.Thread(target=pump, name="mrtr-inspect-c2s", daemon=True,
                                 args=(0, child_in, C2S, put, c2s_done)),
                threading.Thread(target=pump, name="mrtr-inspect-s2c", daemon=True,
                                 args=(child_out, 1, S2C, put, s2c_done)))
    write, close = out
    os.set_blocking(child_in, False)  # (the tee's own end of its own pipe: no other process shares it)
    ended = threading.Event()

    def s2c_over() -> None:
        try:
            close()
            s2c_done()
        finally:
            ended.set()

    def to_child(data, fd: int = child_in, write: Callable = os.write) -> int:
        return write(fd, data)

    ways = [Way(0, child_in, C2S, to_child, c2s_done), Way(child_out, 1, S2C, write, s2c_over)]
    return (threading.Thread(target=forward_both, name="mrtr-inspect-forward", daemon=True, args=(ways, put)),
            _Ended(ended))
