"""The live analysis (adapters/live_analysis.py), fed as the tee's analysis process feeds it: chunks
cut anywhere give the report `check` gives of the recording; a failing output stops nothing; the
configured redaction is what the analysis sees; the report is private and its failure the status."""

from __future__ import annotations

import io
import itertools
import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters.live_analysis import REPORT_FAILED, LiveAnalysis
from mrtr_inspect.adapters.offline import analyze
from mrtr_inspect.config import Config
from mrtr_inspect.core.events import SessionStart, StdioLine
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.recording.writer import RecordingWriter
from tests.captures import capture_frames


def _analysis(tmp_path, printer=None):
    writer = RecordingWriter(tmp_path / "rec.jsonl", "stdio", {"command": ["server"]}, session="s1")
    report = ReportBuilder([str(tmp_path / "rec.jsonl")])
    return LiveAnalysis(writer.start, Config(), writer, printer, report, str(tmp_path / "report.json"))


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


def _run_lines(a: LiveAnalysis, lines: list[bytes]) -> None:
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
    a = LiveAnalysis(writer.start, config, writer, None, ReportBuilder([str(rec)]), str(rep))
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
    start = SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = LiveAnalysis(start, config, None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    _run_lines(a, _email_chain("alice@example.com"))
    text = (tmp_path / "report.json").read_text()
    assert "alice@example.com" not in text
    assert "elicit-result-schema-mismatch" in text


def test_unredacted_a_valid_address_is_no_finding(tmp_path):
    """The near miss: the same traffic without the path configured is judged on the address itself."""
    start = SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = LiveAnalysis(start, Config(), None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    _run_lines(a, _email_chain("alice@example.com"))
    report = json.loads((tmp_path / "report.json").read_text())
    assert "elicit-result-schema-mismatch" not in {f["rule"] for f in report["findings"]}


def test_the_report_is_created_private_and_a_failed_write_is_the_exit_status(tmp_path):
    start = SessionStart(0.0, "s1", "stdio", {"command": ["server"]})
    a = LiveAnalysis(start, Config(), None, None, ReportBuilder([]), str(tmp_path / "report.json"))
    assert a.end({"exit": 0}, 1.0) == 0
    assert os.stat(tmp_path / "report.json").st_mode & 0o777 == 0o600
    said = io.StringIO()
    from mrtr_inspect.outputs.text import FindingPrinter

    gone = tmp_path / "gone" / "report.json"
    a = LiveAnalysis(start, Config(), None, FindingPrinter(said), ReportBuilder([]), str(gone))
    assert a.end({"exit": 0}, 1.0) == REPORT_FAILED
    assert f"cannot write report {gone}: No such file or directory" in said.getvalue()
