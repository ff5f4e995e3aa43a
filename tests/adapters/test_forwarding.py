"""The tee's forwarding in one thread (adapters/forwarding.py): the order the analysis relies on,
no direction waiting for the other, each direction ending alone, and writers that never block
without changing what other processes see."""

from __future__ import annotations

import os
import pty
import select
import socket
import subprocess
import sys
import threading

import pytest

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import forwarding as fw


class Seen:
    """`put`'s stand-in: the chunks, and whether each one's destination could already read it."""

    def __init__(self, watch: dict[int, int]) -> None:
        self.watch = watch  # kind -> the read end of that way's destination
        self.items: list[tuple] = []
        self.lock = threading.Lock()

    def put(self, kind: int, t: float, data: bytes) -> None:
        readable = bool(select.select([self.watch[kind]], [], [], 0)[0])
        with self.lock:
            self.items.append((kind, data, readable))


def _way(kind: int, done: list) -> tuple:
    """(way, the write end of its source, the read end of its destination): pipes, the
    destination's write end non-blocking as `start_forwarding` makes the child's stdin."""
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.set_blocking(dst_w, False)
    way = fw.Way(src_r, dst_w, kind, lambda data, fd=dst_w: os.write(fd, data), lambda: done.append(kind))
    return way, src_w, dst_r


def _read_all(fd: int, n: int) -> bytes:
    """Up to `n` bytes of `fd` (fewer at its end); fails when nothing comes for 10 s (a stall)."""
    got = b""
    while len(got) < n:
        assert select.select([fd], [], [], 10)[0], f"stalled after {len(got)} of {n} bytes"
        piece = os.read(fd, n - len(got))
        if not piece:
            break
        got += piece
    return got


def test_each_chunk_is_put_before_its_reader_can_have_it_and_bytes_pass_unchanged():
    done: list = []
    up, up_w, up_r = _way(ap.C2S, done)
    down, down_w, down_r = _way(ap.S2C, done)
    seen = Seen({ap.C2S: up_r, ap.S2C: down_r})
    request, answer = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n', b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    os.write(up_w, request)
    os.write(down_w, answer)
    os.close(up_w)
    os.close(down_w)
    fw.forward_both([up, down], seen.put)
    assert sorted(seen.items) == [(ap.C2S, request, False), (ap.S2C, answer, False)]
    assert os.read(up_r, 100) == request and os.read(down_r, 100) == answer
    assert sorted(done) == [ap.C2S, ap.S2C]


def test_a_reader_that_stops_stalls_its_own_direction_only():
    """The client stops reading the server's answers: its requests still reach the server, and
    what waited reaches the client, whole and in order, once it reads again."""
    done: list = []
    up, up_w, up_r = _way(ap.C2S, done)
    down, down_w, down_r = _way(ap.S2C, done)
    seen = Seen({ap.C2S: up_r, ap.S2C: down_r})
    thread = threading.Thread(target=fw.forward_both, args=([up, down], seen.put), daemon=True)
    thread.start()
    answers = b"".join(b'{"jsonrpc":"2.0","id":%d,"result":{"pad":"%s"}}\n' % (i, b"x" * 900) for i in range(400))
    writer = threading.Thread(target=os.write, args=(down_w, answers), daemon=True)  # more than the pipes hold
    writer.start()
    for i in range(50):  # nobody reads the answers meanwhile
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i
        os.write(up_w, line)
        assert _read_all(up_r, len(line)) == line
    assert _read_all(down_r, len(answers)) == answers
    writer.join(10)
    os.close(up_w)
    os.close(down_w)
    thread.join(10)
    assert not thread.is_alive() and sorted(done) == [ap.C2S, ap.S2C]
    assert b"".join(d for k, d, _ in seen.items if k == ap.S2C) == answers  # put whole, in order, once


def test_a_reader_gone_ends_its_direction_and_not_the_other():
    done: list = []
    up, up_w, up_r = _way(ap.C2S, done)
    down, down_w, down_r = _way(ap.S2C, done)
    os.close(up_r)  # the server went away
    thread = threading.Thread(target=fw.forward_both, args=([up, down], lambda *a: None), daemon=True)
    thread.start()
    os.write(up_w, b"x\n")
    os.write(down_w, b"y\n")
    assert _read_all(down_r, 2) == b"y\n"
    for _ in range(100):
        if done:
            break
        threading.Event().wait(0.05)
    assert done == [ap.C2S]  # while the answers still flow
    os.write(down_w, b"z\n")
    assert _read_all(down_r, 2) == b"z\n"
    os.close(down_w)
    thread.join(10)
    assert sorted(done) == [ap.C2S, ap.S2C]


def test_an_exception_in_put_still_ends_every_direction():
    done: list = []
    up, up_w, _ = _way(ap.C2S, done)
    down, _, _ = _way(ap.S2C, done)
    os.write(up_w, b"x\n")

    def put(*a):
        raise RuntimeError("analysis bug")

    with pytest.raises(RuntimeError):
        fw.forward_both([up, down], put)
    assert sorted(done) == [ap.C2S, ap.S2C]


def test_a_pipe_gets_a_writer_of_its_own_and_the_shared_one_keeps_blocking():
    r, w = os.pipe()
    got = fw.own_writer(w)
    assert got is not None
    write, close = got
    assert os.get_blocking(w)  # what the client shares with the tee is as it was
    written = 0
    with pytest.raises(BlockingIOError):  # the tee's own description does not wait
        while True:
            written += write(b"x" * 4096)
    assert written >= 4096
    close()
    os.close(w)
    assert len(_read_all(r, written + 1)) == written  # every byte once, then end of file: no writer left
    os.close(r)


def test_a_socket_gets_a_writer_that_does_not_wait_and_stays_blocking_for_others():
    a, b = socket.socketpair()
    got = fw.own_writer(a.fileno())
    assert got is not None
    write, close = got
    with pytest.raises(BlockingIOError):
        while True:
            write(b"x" * 65536)
    assert a.getblocking() and os.get_blocking(a.fileno())
    close()
    assert a.fileno() >= 0  # the tee's fd 1 itself stays open
    a.close()
    b.close()


def test_a_file_or_a_terminal_has_no_writer_of_its_own(tmp_path):
    with open(tmp_path / "out", "wb") as f:
        assert fw.own_writer(f.fileno()) is None  # reopened, it would be written from its start
    main, sub = pty.openpty()
    try:
        assert fw.own_writer(sub) is None  # O_NONBLOCK would reach the shell that shares it
    finally:
        os.close(main)
        os.close(sub)


ECHO = ("import sys\n"
        "for line in sys.stdin.buffer:\n"
        "    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()\n")


@pytest.mark.parametrize("stdio", ["socketpair", "file"])
def test_the_tee_forwards_on_sockets_and_on_a_file_as_on_pipes(tmp_path, stdio):
    """Node's clients give their children socket pairs (one thread, MSG_DONTWAIT); a standard output
    redirected to a file has the two threads."""
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}\n' % i for i in range(200)]
    cmd = [sys.executable, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(tmp_path / "rec.jsonl"), "--",
           sys.executable, "-c", ECHO]
    if stdio == "socketpair":
        ours, theirs = socket.socketpair()
        p = subprocess.Popen(cmd, stdin=theirs, stdout=theirs)
        theirs.close()
        ours.sendall(b"".join(lines))
        ours.shutdown(socket.SHUT_WR)
        got = b""
        while piece := ours.recv(65536):
            got += piece
        ours.close()
    else:
        with open(tmp_path / "out", "wb") as out:
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out)
            p.communicate(b"".join(lines))
        got = (tmp_path / "out").read_bytes()
    assert p.wait(60) == 0
    assert got == b"".join(lines)
    recorded = (tmp_path / "rec.jsonl").read_bytes()
    assert recorded.count(b'"k":"line","d":"c2s"') == 200 and recorded.count(b'"k":"line","d":"s2c"') == 200


def test_a_source_made_non_blocking_elsewhere_is_read_when_it_has_bytes(monkeypatch):
    """A stdin another process set O_NONBLOCK on (its description is shared): a read that finds
    nothing is no end of file."""
    done: list = []
    up, up_w, up_r = _way(ap.C2S, done)
    os.set_blocking(up.src, False)
    thread = threading.Thread(target=fw.forward_both, args=([up], lambda *a: None), daemon=True)
    real_poll = select.poll

    polled_again = threading.Event()

    class Spurious:  # the first poll says readable with nothing there yet
        def __init__(self):
            self.p, self.calls = real_poll(), 0

        def register(self, *a):
            self.p.register(*a)

        def unregister(self, *a):
            self.p.unregister(*a)

        def poll(self, *a):
            self.calls += 1
            if self.calls == 1:
                return [(up.src, select.POLLIN)]
            polled_again.set()  # the read that found nothing is over
            return self.p.poll(*a)

    monkeypatch.setattr(fw.select, "poll", Spurious)
    thread.start()
    assert polled_again.wait(10), "the way ended on a read that found nothing"
    os.write(up_w, b"x\n")
    assert _read_all(up_r, 2) == b"x\n"
    os.close(up_w)
    thread.join(10)
    assert done == [ap.C2S]
