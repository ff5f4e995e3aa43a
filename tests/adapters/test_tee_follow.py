"""The tee's analysis reading its recording as it grows (live_inputs.RecordedInput, the Tap with
`follow`, the spooler's UPTO notices): no copy of the bytes is handed over, the live report is
`check`'s of the recording, a record is read only once it is whole, a follower behind by
max_backlog_bytes skips whole messages and says how many, and a recording that stops hands chunks
again."""

from __future__ import annotations

import itertools
import json
import os

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import stdio_tee as tee
from mrtr_inspect.adapters.live_analysis import LiveAnalysis
from mrtr_inspect.adapters.live_inputs import RecordedInput
from mrtr_inspect.adapters.offline import analyze
from mrtr_inspect.adapters.recorder import StdioRecorder
from mrtr_inspect.config import Config
from mrtr_inspect.core.events import StdioClose, StdioLine
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.recording.writer import RecordingWriter
from tests.captures import capture_frames


class Notices:
    """A spooler stand-in for a following Tap: keeps what it is put, counts its wake-ups."""

    queued = written = 0

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.wakes = 0

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        self.items.append((kind, data))

    def wake(self) -> None:
        self.wakes += 1


def _wire() -> list[tuple[float, int, bytes]]:
    """The lines of a captured MRTR session (a chain with rounds), as (time, C2S/S2C, line + LF)."""
    return [(f.time, ap.C2S if f.direction == "c2s" else ap.S2C, f.data + b"\n")
            for f in capture_frames("stdio_auto.jsonl") if type(f) is StdioLine]


def _cut(wire, sizes):
    """The lines as chunks cut anywhere (sizes from the cycle), each with its line's time."""
    sizes = itertools.cycle(sizes)
    for t, kind, data in wire:
        pos = 0
        while pos < len(data):
            n = next(sizes)
            yield t, kind, data[pos:pos + n]
            pos += n


def _check(rec, config=None) -> dict:
    again = ReportBuilder([str(rec)])
    analyze([str(rec)], again.add, config or Config())
    return again.to_dict()


def fail_after_writes(writer: RecordingWriter, writes: int) -> None:
    """The recording cannot be written after `writes` appends (a full disk)."""
    n = itertools.count()

    def failing(real):
        def append(data: bytes) -> None:
            if next(n) >= writes:
                raise OSError(28, "No space left on device")
            real(data)
        return append

    writer.append = failing(writer.append)  # type: ignore[method-assign]
    writer.append_serial = failing(writer.append_serial)  # type: ignore[method-assign]


def _run(tmp_path, chunks, config=None, fail_after=None) -> tuple[dict, tee.Tap]:
    """The tee's parts as run_tee joins them, in this process: a Tap following the recording, the
    real spooler and pipe, then the analysis process' loop (`analysis_main`) until END. `fail_after`:
    the recording cannot be written after that many chunks (a full disk)."""
    config = config or Config()
    rec, rep = tmp_path / "rec.jsonl", tmp_path / "report.json"
    writer = RecordingWriter(rec, "stdio", {"command": ["server"]}, session="s1")
    follow = writer.reader()
    assert follow is not None and follow[1] == rec.stat().st_size  # from the end of the header on
    r, w = os.pipe()
    spool = ap.Spooler(w)
    spool.follow(writer.fileno())
    tap = tee.Tap(spool, StdioRecorder(writer), config.max_message_bytes, config.max_backlog_bytes, follow=True)
    if fail_after is not None:
        fail_after_writes(writer, fail_after)
    last = 0.0
    for t, kind, data in chunks:
        tap.put(kind, t, data)
        last = t
    tap.put(ap.C2S_EOF, last)
    tap.put(ap.S2C_EOF, last)
    tap.finish({"exit": 0}, last + 1)
    make = lambda: LiveAnalysis(writer.start, config, writer, None, ReportBuilder([str(rec)]), str(rep),
                                forwarder_records=True, follow=follow)
    assert ap.analysis_main(r, make) == 0
    spool.thread.join(10)
    return json.loads(rep.read_text()), tap


def test_with_a_recording_the_analysis_is_handed_no_bytes_only_notices():
    """A following Tap records each chunk and wakes the spooler: no C2S/S2C item, no copy. Near miss:
    without `follow` the same chunks are handed over."""
    import tempfile

    wire = _wire()
    with tempfile.TemporaryDirectory() as tmp:
        for follow in (True, False):
            writer = RecordingWriter(os.path.join(tmp, f"{follow}.jsonl"), "stdio", {}, session="s1")
            spool = Notices()
            tap = tee.Tap(spool, StdioRecorder(writer), follow=follow)  # type: ignore[arg-type]
            for t, kind, data in _cut(wire, [7, 300, 41]):
                tap.put(kind, t, data)
            tap.put(ap.C2S_EOF, 9.0)
            tap.finish({"exit": 0}, 10.0)
            tap.put(ap.S2C_EOF, 11.0)  # late: the other thread saw its end of file after the session ended
            kinds = [k for k, _ in spool.items if k != ap.S2C_EOF]
            if follow:
                assert kinds == [ap.UPTO, ap.END] and spool.wakes > 0  # the final offset, then the end
            else:
                assert b"".join(d for k, d in spool.items if k in (ap.C2S, ap.S2C)) == b"".join(d for _, _, d in wire)
                assert spool.wakes == 0


def test_the_live_report_of_a_follower_is_the_check_of_the_recording(tmp_path):
    """Chunks cut anywhere, both ways, through the real spooler and pipe: the analysis reads the
    recording and its report equals `check` of it, every message analysed."""
    wire = _wire()
    live, tap = _run(tmp_path, _cut(wire, [1, 13, 200, 5, 64]))
    assert live == _check(tmp_path / "rec.jsonl")
    assert live["summary"]["messages"] == len(wire) and tap.skipped == 0 and "notes" not in live
    assert [c["outcome"] for c in live["chains"]] == ["complete"]


def test_the_follower_never_reads_a_half_line(tmp_path):
    """Records appended one byte at a time, the follower asked after each byte: it gives each record
    once, whole, when its LF is there, and nothing of one still being written. Near miss: the
    records written at once give the same items."""
    writer = RecordingWriter(tmp_path / "rec.jsonl", "stdio", {}, session="s1")
    file, start = writer.reader()  # type: ignore[misc]
    frames = [StdioLine(1.5, "s1", "c2s", b'{"jsonrpc":"2.0","id":1,"method":"ping"}'),
              StdioLine(2.0, "other", "s2c", b'{"jsonrpc":"2.0","id":1,"result":{}}'),  # another writer's
              StdioLine(2.5, "s1", "s2c", b"\xff not utf-8"),  # base64: decoded as a frame
              StdioLine(3.0, "s1", "s2c", b'{"jsonrpc":"2.0","id":1,"result":{}}'),
              StdioClose(4.0, "s1", "c2s")]
    data = b"".join(map(fmt.encode, frames))
    follower = RecordedInput("s1", None, file, start, 1 << 20, lambda: None)
    got, ends = [], []
    for i in range(len(data)):
        writer.append(data[i:i + 1])
        items = list(follower.items(start + i + 1))
        got += items
        if items:
            ends.append(i + 1)
    as_frames = [StdioLine(*x) if type(x) is tuple else x for x in got]
    assert as_frames == [f for f in frames if f.session == "s1"]
    record_ends = list(itertools.accumulate(len(fmt.encode(f)) for f in frames))
    assert ends == [e for e, f in zip(record_ends, frames) if f.session == "s1"]  # at its LF, not before

    writer2 = RecordingWriter(tmp_path / "whole.jsonl", "stdio", {}, session="s1")
    file2, start2 = writer2.reader()  # type: ignore[misc]
    writer2.append(data)
    assert list(RecordedInput("s1", None, file2, start2, 1 << 20, lambda: None).items(start2 + len(data))) == got


def _line(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d}}\n' % i


def test_a_follower_behind_by_the_backlog_skips_whole_messages_and_counts_them(tmp_path):
    """max_backlog_bytes at 4 KiB and 400 records appended before the follower looks: it skips the
    message records until it is 2 KiB from the end (the stream's close it still reads), says so once
    as the stretch begins, and what it read and what it skipped are every message. Near miss: a
    follower asked after each record skips none."""
    writer = RecordingWriter(tmp_path / "rec.jsonl", "stdio", {}, session="s1")
    file, start = writer.reader()  # type: ignore[misc]
    lines = [StdioLine(float(i), "s1", "c2s", _line(i)[:-1]) for i in range(400)]
    data = b"".join(map(fmt.encode, lines)) + fmt.encode(StdioClose(400.0, "s1", "c2s"))
    began = []
    follower = RecordedInput("s1", None, file, start, 4096, lambda: began.append(True))
    writer.append(data)
    got = list(follower.items(start + len(data)))
    assert began == [True]
    assert 0 < len(got) - 1 < 400 and follower.skipped == 400 - (len(got) - 1)
    assert [StdioLine(*x) for x in got[:-1]] == lines[follower.skipped:]  # the last ones, whole
    assert got[-1] == StdioClose(400.0, "s1", "c2s")
    tail = sum(len(fmt.encode(f)) for f in lines[follower.skipped:]) + len(fmt.encode(got[-1]))
    assert tail <= 2048 < tail + len(fmt.encode(lines[follower.skipped - 1]))  # back to half, no further

    near = RecordingWriter(tmp_path / "near.jsonl", "stdio", {}, session="s1")
    file, start = near.reader()  # type: ignore[misc]
    follower = RecordedInput("s1", None, file, start, 4096, lambda: began.append(True))
    got = []
    for f in lines:
        near.append(fmt.encode(f))
        got += follower.items(0)
    assert follower.skipped == 0 and len(got) == 400 and began == [True]


def test_a_follower_stopped_past_the_backlog_says_so_in_the_report(tmp_path):
    """The whole tee path with max_backlog_bytes at 4 KiB and the analysis reading only at the end
    (the pipe is read once everything crossed): the report's note gives the count, which with the
    messages analysed is every message, and names `check` of the recording, which sees them all."""
    wire = [(float(i), ap.C2S, _line(i)) for i in range(400)]
    config = Config(max_backlog_bytes=4096)
    live, tap = _run(tmp_path, _cut(wire, [333]), config)
    rec = tmp_path / "rec.jsonl"
    [note] = live["notes"]
    skipped = int(note.split("skipped ", 1)[1].split()[0])
    assert skipped > 0 and live["summary"]["messages"] + skipped == 400 and tap.skipped == 0
    assert note == (f"the live analysis skipped {skipped} messages, behind the traffic by max_backlog_bytes (4 KiB); "
                    f"the recording keeps every message: `mrtr-inspect check {rec}` gives the full verdict")
    assert _check(rec)["summary"]["messages"] == 400


def test_a_recording_that_stops_hands_the_analysis_chunks_again(tmp_path):
    """The recording cannot be written after 5 chunks (a full disk): the analysis read what reached
    the file, the lines of the failed write and the one open then are counted as skipped, and every
    later line is handed over and analysed; together they are every message."""
    wire = _wire()
    live, tap = _run(tmp_path, _cut(wire, [150]), fail_after=5)
    rec = tmp_path / "rec.jsonl"
    recorded = _check(rec)["summary"]["messages"]
    assert 0 < recorded < len(wire) and tap.skipped > 0 and not tap.following
    assert live["summary"]["messages"] + tap.skipped == len(wire)
    assert live["summary"]["messages"] > recorded  # it went on after the recording stopped
    assert live["notes"] == [f"the live analysis skipped {tap.skipped} messages, as the recording it read stopped, "
                             "or behind the traffic by max_backlog_bytes (64 MiB); the recording stopped (it could "
                             "not be written): it does not keep every message either"]
