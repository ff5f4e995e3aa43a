"""The tee's parts in process: forwarding order, the pipe to the analysis process, the analysis."""

from __future__ import annotations

import io
import itertools
import json
import os
import select
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import stdio_tee as tee
from mrtr_inspect.adapters.recording import analyze
from mrtr_inspect.config import Config
from mrtr_inspect.core.events import StdioLine
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.recording.writer import RecordingWriter
from tests.captures import capture_frames


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
    r, w = os.pipe()
    os.write(w, ap.HEAD.pack(ap.C2S, 1.0, 10) + b"torn")
    os.close(w)
    got: list = []
    ap.read_items(r, got.append)
    assert [k for k, _, _ in got] == [ap.END]


def _analysis(tmp_path, printer=None):
    writer = RecordingWriter(tmp_path / "rec.jsonl", "stdio", {"command": ["server"]}, session="s1")
    report = ReportBuilder([str(tmp_path / "rec.jsonl")])
    return tee.TeeAnalysis(writer.start, Config(), writer, printer, report, str(tmp_path / "report.json"))


def _wire(frames) -> list[tuple[float, str, bytes]]:
    return [(f.time, f.direction, f.data + b"\n") for f in frames if type(f) is StdioLine]


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 400), min_size=1, max_size=30))
def test_the_live_report_is_the_check_of_the_recording(tmp_path_factory, cuts):
    """Chunks cut anywhere: the live report equals `check` of the recording, which holds every line."""
    tmp_path = tmp_path_factory.mktemp("tee")
    a = _analysis(tmp_path)
    wire = _wire(capture_frames("stdio_auto.jsonl"))
    sizes = itertools.cycle(cuts)
    for t, d, data in wire:
        pos = 0
        while pos < len(data):
            n = next(sizes)
            a.chunk(t, d, data[pos:pos + n])
            pos += n
    a.eof(wire[-1][0], "c2s")
    a.end({"exit": 0}, wire[-1][0])
    live = json.loads((tmp_path / "report.json").read_text())
    again = ReportBuilder([str(tmp_path / "rec.jsonl")])
    analyze([str(tmp_path / "rec.jsonl")], again.add, Config())
    assert again.to_dict() == live
    assert live["summary"]["messages"] == len(wire)
    assert [c["outcome"] for c in live["chains"]] == ["complete"]


class BrokenStream(io.StringIO):
    def write(self, s):
        raise OSError("stderr is gone")

    def isatty(self):
        return False


def test_a_failing_output_does_not_stop_the_recording(tmp_path):
    from mrtr_inspect.outputs.text import FindingPrinter

    a = _analysis(tmp_path, FindingPrinter(BrokenStream()))
    forged = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"f","_meta":' \
             b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n'
    a.chunk(1.0, "c2s", forged)
    a.end({"exit": 0}, 2.0)
    lines = (tmp_path / "rec.jsonl").read_bytes().splitlines()
    assert lines[1].endswith(b"\t" + forged[:-1])
    assert b'"k":"session-end"' in lines[-1]
    assert a.errors >= 1
