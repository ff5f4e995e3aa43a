"""The tee's parts in process: forwarding order, the pipe to the analysis process (the analysis
itself: test_live_analysis.py)."""

from __future__ import annotations

import os
import select
import threading

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import forwarding as fw
from mrtr_inspect.adapters import stdio_tee as tee


class Recorder:
    """A spooler stand-in: keeps the items and whether `watch` was already readable at each one."""

    queued = written = 0  # (what it holds: nothing, for the Tap)

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
    fw.pump(src_r, dst_w, ap.S2C, spool.put, lambda: done.append(True))
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
    fw.pump(src_r, dst_w, ap.C2S, Recorder().put, lambda: done.append(True))
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


def _live_report(items: list, writer, config, rec, rep) -> dict:
    """The report of the analysis process fed `items` (kind, data, _) through the pipe, as
    `fork_analysis` runs it."""
    import json

    from mrtr_inspect.adapters.live_analysis import LiveAnalysis
    from mrtr_inspect.outputs.report import ReportBuilder

    r, w = os.pipe()
    real = ap.Spooler(w)
    for kind, data, _ in items:
        real.put(kind, 1.0, data)
    make = lambda: LiveAnalysis(writer.start, config, writer, None, ReportBuilder([str(rec)]), str(rep),
                                forwarder_records=True)
    assert ap.analysis_main(r, make) == 0
    return json.loads(rep.read_text())


def test_of_a_line_past_the_limit_the_analysis_gets_its_length_not_its_bytes(tmp_path):
    """A 5 MiB line, max_message_bytes at 1 MiB, cut in many chunks each way: the tee hands the
    analysis at most the limit and one chunk of it (the rest as counts), the recording holds it
    whole, and the live report (message-too-large, its size) is `check`'s of the recording."""
    from mrtr_inspect.adapters.offline import analyze
    from mrtr_inspect.adapters.recorder import StdioRecorder
    from mrtr_inspect.config import Config
    from mrtr_inspect.outputs.report import ReportBuilder
    from mrtr_inspect.recording.writer import RecordingWriter

    limit = 1 << 20
    config = Config(max_message_bytes=limit)
    rec, rep = tmp_path / "rec.jsonl", tmp_path / "report.json"
    writer = RecordingWriter(rec, "stdio", {"command": ["server"]}, session="s1")
    spool = Recorder()
    tap = tee.Tap(spool, StdioRecorder(writer), config.max_message_bytes)  
    big = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"blob":"' + \
          b"x" * (5 << 20) + b'"}}}'
    after = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n'
    wire = big + b"\n" + after
    chunks = {ap.C2S: fw.CHUNK, ap.S2C: 50_000}
    for kind, size in chunks.items():
        for i in range(0, len(wire), size):
            tap.put(kind, 1.0, wire[i:i + size])
    tap.put(ap.C2S_EOF, 2.0)
    tap.put(ap.S2C_EOF, 2.0)
    tap.finish({"exit": 0}, 3.0)
    for kind, size in chunks.items():
        handed = sum(len(data) for k, data, _ in spool.items if k == kind)
        assert handed <= limit + size + len(b"\n" + after)  # not 5 MiB
    live = _live_report(spool.items, writer, config, rec, rep)
    large = [f["message"] for f in live["findings"] if f["rule"] == "message-too-large"]
    assert len(large) == 2 and all(f"({len(big)} bytes)" in m for m in large)
    assert live["summary"]["messages"] == 4  # the cut line and `after`, both ways
    again = ReportBuilder([str(rec)])
    analyze([str(rec)], again.add, config)
    assert again.to_dict() == live


class Held(Recorder):
    """A spooler stand-in that counts what it holds, as `Spooler` does: nothing is written until
    `drain` says the analysis took it."""

    def __init__(self) -> None:
        super().__init__()
        self.queued = self.written = self.most = 0

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        self.queued += len(data)
        self.most = max(self.most, self.held())
        super().put(kind, t, data)

    def held(self) -> int:
        return self.queued - self.written

    def drain(self) -> None:
        self.written = self.queued


def _line(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d}}\n' % i


def test_an_analysis_behind_by_the_backlog_skips_ahead_whole_lines_and_says_how_many(tmp_path):
    """max_backlog_bytes at 4 KiB: the lines cross in chunks that cut them anywhere while the analysis
    takes nothing; past 4 KiB held, the analysis is handed only the end of the line it holds, then
    no line until it is back to half; each line it gets is whole, the count of the others is said
    live (BEHIND as the stretch begins) and in the report (a note naming `check`), the recording
    holds every line, and `check` of it sees them all. Near miss: an analysis that keeps up
    (drained after every chunk) is handed every line and skips none."""
    from mrtr_inspect.adapters.offline import analyze
    from mrtr_inspect.adapters.recorder import StdioRecorder
    from mrtr_inspect.config import Config
    from mrtr_inspect.outputs.report import ReportBuilder
    from mrtr_inspect.recording.writer import RecordingWriter

    wire = b"".join(_line(i) for i in range(400))
    chunks = [wire[i:i + 333] for i in range(0, len(wire), 333)]

    def run(keeps_up: bool, tmp):
        config = Config(max_backlog_bytes=4096)
        rec, rep = tmp / "rec.jsonl", tmp / "report.json"
        writer = RecordingWriter(rec, "stdio", {"command": ["server"]}, session="s1")
        spool = Held()
        tap = tee.Tap(spool, StdioRecorder(writer), config.max_message_bytes, config.max_backlog_bytes)  
        for n, chunk in enumerate(chunks):
            tap.put(ap.C2S, 1.0, chunk)
            if keeps_up or n == 30:  # the analysis catches up once, midway
                spool.drain()
        tap.put(ap.C2S_EOF, 2.0)
        tap.finish({"exit": 0}, 3.0)
        handed = b"".join(d for k, d, _ in spool.items if k == ap.C2S)
        return tap, spool, handed, _live_report(spool.items, writer, config, rec, rep), rec

    tap, spool, handed, live, rec = run(False, tmp_path)
    lines = handed.splitlines(keepends=True)
    assert all(line in set(wire.splitlines(keepends=True)) for line in lines)  # each whole
    assert 0 < len(lines) < 400 and tap.skipped == 400 - len(lines)
    behind = [ap.SKIPPED.unpack(d)[0] for k, d, _ in spool.items if k == ap.BEHIND]
    assert len(behind) >= 2 and behind[0] < behind[-1] == tap.skipped  # as it began; the total before END
    assert 4096 < spool.most <= 4096 + 333  # bounded: past the backlog by one chunk at most
    assert live["summary"]["messages"] == len(lines)
    assert live["notes"] == [f"the live analysis skipped {tap.skipped} messages, behind the traffic by "
                             f"max_backlog_bytes (4 KiB); the recording keeps every message: "
                             f"`mrtr-inspect check {rec}` gives the full verdict"]
    again = ReportBuilder([str(rec)])
    analyze([str(rec)], again.add, Config())
    assert again.summary()["messages"] == 400

    (tmp_path / "near").mkdir()
    tap, spool, handed, live, rec = run(True, tmp_path / "near")
    assert handed == wire and tap.skipped == 0 and "notes" not in live
    assert [k for k, _, _ in spool.items if k == ap.BEHIND] == []


def test_the_reader_waits_while_the_analysis_is_its_read_ahead_behind():
    """ReadAhead: `got` past the limit waits until `done` brings it back to half."""
    ahead = ap.ReadAhead(limit=100)
    ahead.got(60)
    ahead.got(40)  # at the limit: no wait
    waited = threading.Event()
    t = threading.Thread(target=lambda: (ahead.got(10), waited.set()))
    t.start()
    assert not waited.wait(0.2)  # 110 held: it waits
    ahead.done(50)  # 60 held: not yet half
    assert not waited.wait(0.2)
    ahead.done(10)  # 50 held: half
    assert waited.wait(10)
    t.join(10)
