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


# -- redaction: the configuration's paths, and what the analysis sees ----------------------------

ASK_EMAIL = {"method": "elicitation/create", "params": {"mode": "form", "message": "Where to?", "requestedSchema": {
    "type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]}}}


def _email_chain(email: str) -> list[bytes]:
    """A tools/call answered with an e-mail address the user typed, as stdio lines."""
    from tests.traffic import dumps, meta

    call = {"name": "notify", "arguments": {"env": "prod"}, "_meta": meta()}
    return [dumps(m) + b"\n" for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": {"to": ASK_EMAIL},
                                               "requestState": "st-1"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            **call, "inputResponses": {"to": {"action": "accept", "content": {"email": email}}}, "requestState": "st-1"}},
        {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "content": []}},
    )]


def _run_lines(a: tee.TeeAnalysis, lines: list[bytes]) -> None:
    for i, line in enumerate(lines):
        a.chunk(float(i + 1), "s2c" if b'"result"' in line else "c2s", line)
    a.end({"exit": 0}, 10.0)


def test_configured_paths_are_redacted_and_the_analysis_sees_what_is_recorded(tmp_path):
    """The live report is the check of the recording even where a redacted value decides a finding:
    the placeholder is no e-mail address, live and later alike; the address is in neither file."""
    from mrtr_inspect.recording.writer import redactor_for

    config = Config(redact_paths=["params.inputResponses.*.content.email"])
    rec, rep = tmp_path / "rec.jsonl", tmp_path / "report.json"
    writer = RecordingWriter(rec, "stdio", {"command": ["server"]}, redactor_for(config), session="s1")
    a = tee.TeeAnalysis(writer.start, config, writer, None, ReportBuilder([str(rec)]), str(rep))
    _run_lines(a, _email_chain("alice@example.com"))
    assert b"alice@example.com" not in rec.read_bytes()
    assert b"[redacted:" in rec.read_bytes()
    live = json.loads(rep.read_text())
    assert "alice@example.com" not in rep.read_text()
    again = ReportBuilder([str(rec)])
    analyze([str(rec)], again.add, config)
    assert again.to_dict() == live
    assert "elicit-result-schema-mismatch" in {f["rule"] for f in live["findings"]}
    assert [c["outcome"] for c in live["chains"]] == ["complete"]


def test_without_a_recording_the_analysis_still_sees_the_redacted_frames(tmp_path):
    """Findings do not depend on --record: the same configuration gives the same report."""
    config = Config(redact_paths=["params.inputResponses.*.content.email"])
    start = tee.SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = tee.TeeAnalysis(start, config, None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    _run_lines(a, _email_chain("alice@example.com"))
    text = (tmp_path / "report.json").read_text()
    assert "alice@example.com" not in text
    assert "elicit-result-schema-mismatch" in text


def test_unredacted_a_valid_address_is_no_finding(tmp_path):
    """The near miss: the same traffic without the path configured is judged on the address itself."""
    start = tee.SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = tee.TeeAnalysis(start, Config(), None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    _run_lines(a, _email_chain("alice@example.com"))
    report = json.loads((tmp_path / "report.json").read_text())
    assert "elicit-result-schema-mismatch" not in {f["rule"] for f in report["findings"]}


def test_the_report_is_created_private_and_a_failed_write_is_the_exit_status(tmp_path):
    start = tee.SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = tee.TeeAnalysis(start, Config(), None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    assert a.end({"exit": 0}, 1.0) == 0
    assert os.stat(tmp_path / "report.json").st_mode & 0o777 == 0o600
    said = io.StringIO()
    from mrtr_inspect.outputs.text import FindingPrinter

    gone = tmp_path / "gone" / "report.json"
    a = tee.TeeAnalysis(start, Config(), None, FindingPrinter(said), ReportBuilder([]), str(gone))
    assert a.end({"exit": 0}, 1.0) == tee.REPORT_FAILED
    assert f"cannot write report {gone}: No such file or directory" in said.getvalue()


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
