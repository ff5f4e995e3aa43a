"""The public Python API (mrtr_inspect/api.py, docs/api.md): `check` gives what the `check` command
computes, as typed objects whose `to_dict()` is the JSON report itself; docs/api.md's examples run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import mrtr_inspect
from mrtr_inspect.api import ChainSummary, Report, RequestSummary, RoundSummary, Summary
from mrtr_inspect.cli import main
from mrtr_inspect.config import Config
from mrtr_inspect.core.findings import Finding

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "fixtures").glob("*/*.jsonl")
                  if p.parent.name != "captures")  # fixtures/captures hold the SDK captures' own format
API_MD = ROOT / "docs" / "api.md"


def _cli_report(paths: list[str], *args: str) -> dict:
    r = CliRunner().invoke(main, ["check", *paths, "--format", "json", "--fail-on", "never", *args],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(autouse=True)
def _in_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # the fixtures' paths are relative, as a user types them


def test_the_fixtures_are_there():
    assert len(FIXTURES) >= 5


@pytest.mark.parametrize("path", FIXTURES)
def test_to_dict_is_the_json_report_of_check(path):
    report = mrtr_inspect.check([path])
    assert report.to_dict() == _cli_report([path])
    assert report.summary.chains == len(report.chains) and report.summary.messages > 0


def test_several_recordings_are_one_capture_with_the_readers_notes_as_the_command_gives_them(tmp_path):
    one, two = FIXTURES[0], str(tmp_path / "copy.jsonl")
    Path(two).write_bytes(Path(one).read_bytes() + b'{"t":1,"s":"torn')  # the same sessions, a torn last line
    report = mrtr_inspect.check([one, two])
    assert report.notes and any("torn" in n for n in report.notes) and any("~2" in n for n in report.notes)
    assert report.to_dict() == _cli_report([one, two])
    assert report.inputs == [one, two]


def test_a_configuration_changes_the_report_as_the_command_options_do():
    path = "fixtures/seed/state_on_other_call.jsonl"
    config = Config(severity={"http-session-id-minted": "info"}, disabled={"chain-linked"})
    report = mrtr_inspect.check(path, config=config)  # one path as it is
    assert report.to_dict() == _cli_report([path], "--severity", "http-session-id-minted=info",
                                           "--disable", "chain-linked")
    assert not report.of("chain-linked") and {f.severity for f in report.of("http-session-id-minted")} == {"info"}


def test_the_parts_are_typed_objects_with_the_reports_field_names():
    report = mrtr_inspect.check(["fixtures/seed/state_on_other_call.jsonl"])
    assert type(report) is Report and type(report.summary) is Summary
    assert report.format == "mrtr-inspect.report/1" and report.tool == {"name": "mrtr-inspect",
                                                                         "version": mrtr_inspect.__version__}
    assert [c.id for c in report.chains] == ["c1", "c3", "c2"]  # in the order they ended
    c1, c3, c2 = report.chains
    assert (c2.outcome, c2.rounds, c3.rounds) == ("abandoned", 1, 0)
    assert type(c1) is ChainSummary and (c1.id, c1.method, c1.target) == ("c1", "tools/call", "github.create_issue")
    assert c1.rounds == 1 and c1.outcome == "complete" and c1.link == "state" and c1.requests == [2, 3]
    first, retry = c1.timeline
    assert type(first) is RequestSummary and first.retries_round is None and first.response == "input_required"
    assert retry.retries_round == 1 and retry.link == "state" and retry.response == "result"
    [rd] = c1.round_details
    assert type(rd) is RoundSummary and rd.round == 1 and rd.message == first.response_message
    assert all(type(f) is Finding for f in report.findings)
    [f] = [f for f in report.of("server-accepted-state-on-other-request") if f.chain == "c1"]
    assert f.severity == "warning" and f.messages and f.spec


def test_a_report_reads_back_from_its_json_form_unchanged_an_unknown_key_kept():
    d = _cli_report(["fixtures/seed/gave_up_after_rounds.jsonl"])
    d["chains"][0]["lane"] = "front"  # a field a later format adds
    d["probes"] = []
    d["chains"][0]["timeline"][0]["later"] = 1
    back = Report.from_dict(json.loads(json.dumps(d)))
    assert back.to_dict() == d
    assert back.chains[0].extra == {"lane": "front"} and back.extra == {"probes": []}


def test_an_input_that_is_no_recording_raises_what_the_command_reports(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    with pytest.raises(mrtr_inspect.UnreadableRecording, match="not an mrtr-inspect recording"):
        mrtr_inspect.check([bad])


def test_the_public_names_resolve_and_importing_the_package_loads_none_of_the_analysis():
    for name in mrtr_inspect.__all__:
        assert getattr(mrtr_inspect, name) is not None, name
    assert {"check", "Report", "Inspector", "Analysis", "StdioLine", "HttpRequest", "Finding"} <= set(mrtr_inspect.__all__)
    code = "import sys, mrtr_inspect; print(sorted(m for m in sys.modules if m.startswith('mrtr_inspect.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "['mrtr_inspect.version']"
    with pytest.raises(AttributeError):
        mrtr_inspect.no_such_name  # noqa: B018


# --- docs/api.md --------------------------------------------------------------------------------


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", API_MD.read_text(encoding="utf-8"), re.S)


def _run(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(API_MD), "exec"), {"__name__": "__api_md__"})
    return out.getvalue()


def test_the_docs_example_analyses_a_recording_in_three_lines():
    code = _blocks("python")[0]
    assert len(code.strip().splitlines()) == 3
    printed = _run(code)
    report = mrtr_inspect.check(["fixtures/seed/state_on_other_call.jsonl"])
    assert printed.splitlines() == [f"{f.severity} {f.rule} {f.message}" for f in report.findings]
    assert "server-accepted-state-on-other-request" in printed


def test_the_docs_frames_example_prints_what_the_docs_say():
    code = _blocks("python")[1]
    shown = re.search(r"prints\n\n```\n(.*?)```", API_MD.read_text(encoding="utf-8"), re.S).group(1)
    assert _run(code) == shown
