"""The tee's parts in process: forwarding order, the pipe to the analysis process (the analysis
itself: test_live_analysis.py)."""

from __future__ import annotations

import os
import select
import threading

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import stdio_tee as tee


class Recorder:
    """A spooler stand-in: keeps the items and whether `watch` was already readable at each one."""

    def __init__(self, watch: int | None = None) -> None:
        self.watch = watch
        self.items: list[tuple] = []

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        readable = bool(select.select([self.watch], [], [], 0)[0]) if self.watch is not None else None
        self.items.append((kind, data, readable))


def test_a_chunk_reaches_the_analysis_before_the_peer_can_read_it():
    """So the analysis sees a message before any answer to it, however the threads are scheduled."""
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    spool = Recorder(watch=dst_r)
    os.write(src_w, b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    os.close(src_w)
    done = []
    tee._pump(src_r, dst_w, ap.S2C, spool, lambda: done.append(True))  # type: ignore[arg-type]
    assert spool.items == [(ap.S2C, b'{"jsonrpc":"2.0","id":1,"result":{}}\n', False)]
    assert os.read(dst_r, 100) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert done == [True]
    for fd in (src_r, dst_r, dst_w):
        os.close(fd)


def test_a_broken_destination_ends_the_pump():
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.close(dst_r)
    os.write(src_w, b"x\n")
    done = []
    tee._pump(src_r, dst_w, ap.C2S, Recorder(), lambda: done.append(True))  # type: ignore[arg-type]
    assert done == [True]  # returned although src is still open
    for fd in (src_r, src_w, dst_w):
        os.close(fd)


def test_items_cross_the_pipe_in_order_and_intact():
    r, w = os.pipe()
    spool = ap.Spooler(w)
    sent = [(ap.C2S, 1.5, b"a" * 70000), (ap.S2C, 2.25, b"b\n"), (ap.C2S_EOF, 3.0, b""),
            (ap.END, 4.0, b'{"exit": 0}')]
    got: list = []
    reader = threading.Thread(target=ap.read_items, args=(r, got.append))
    reader.start()
    for item in sent:
        spool.put(*item)
    spool.thread.join(10)
    reader.join(10)
    assert got == sent


def test_a_tee_that_goes_away_ends_the_session():
    """As GONE (never sent by a tee): the analysis then ends the recording the tee could not end."""
    r, w = os.pipe()
    os.write(w, ap.HEAD.pack(ap.C2S, 1.0, 10) + b"torn")
    os.close(w)
    got: list = []
    ap.read_items(r, got.append)
    assert [k for k, _, _ in got] == [ap.GONE]


def test_a_child_gone_but_not_yet_waited_for_counts_as_exited():
    """The tee's signal handler runs in the main thread, which can be inside `child.wait()` with the
    child already gone and `returncode` still None: such a signal is a late one (it ends the wait
    for the analysis), not one to pass on to a dead child. Near miss: a running child is not
    exited. WNOWAIT leaves the status to `wait()`."""
    import subprocess
    import sys

    from mrtr_inspect.adapters.stdio_tee import _exited

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"],
                             stdin=subprocess.PIPE)
    try:
        assert not _exited(child)
        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # blocks until it is gone, takes nothing
        assert child.returncode is None and _exited(child)
        assert child.wait() == 3 and _exited(child)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
