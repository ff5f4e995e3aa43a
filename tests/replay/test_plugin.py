"""The pytest plugin as its users meet it: test files of their own, run by pytest in a subprocess
(the plugin loads through its pytest11 entry point)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mrtr_inspect.core.events import SessionStart, StdioClose
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.script import load_script

from .conftest import ROOT, WAIT
from .test_sdk_stdio import RECORDING

USER_TESTS = textwrap.dedent('''
    import sys

    import pytest

    from mrtr_inspect.core.events import StdioClose
    from tests.replay.sdk_client import EXPECTED, call

    SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]


    @pytest.fixture
    def mrtr_config():
        return {"redact_paths": ["params.inputResponses.*.content.tag"],
                "before_record": lambda f: None if type(f) is StdioClose else f}


    @pytest.mark.mrtr_replay(server=SAMPLE)
    def test_release(mrtr_replay):
        assert call(mrtr_replay.command, "release") == [EXPECTED["release"]]
        print("MODE", mrtr_replay.mode)


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_staging(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", allow_misses=True)
    def test_staging_allowed(mrtr_replay):
        [line] = call(mrtr_replay.command, "deploy", deploy={"env": "staging"})
        assert "closest: tools/call deploy id=2" in line
        assert [d["field"] for d in mrtr_replay.misses[0]["differences"]] == ["params.arguments.env"]
''')


def pytest_run(where: Path, *args: str, ci: bool = False, cwd: Path | None = None,
               **env_vars: str) -> subprocess.CompletedProcess:
    """pytest in the user's project `where` (lines of 400 columns: reasons are not cut), run from
    `cwd` (default `where`); its temporary files under `where`-basetemp (its own, so that the run's
    cleanup never touches the temporary folders of this one)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update({"PYTHONPATH": str(ROOT), "MRTR_INSPECT_REDACTION_KEY": "plugin-test", "COLUMNS": "400", **env_vars})
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--rootdir",
                           str(where), "--basetemp", f"{where}-basetemp", *args], cwd=cwd or where, env=env,
                          capture_output=True, text=True, timeout=3 * WAIT)


@pytest.fixture
def user(tmp_path) -> Path:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "fixtures").mkdir()
    shutil.copy(RECORDING, tmp_path / "fixtures" / "shared.jsonl")
    return tmp_path


def test_record_once_then_replay_then_record_all(user):
    recording = user / "fixtures" / "test_user" / "test_release.jsonl"
    first = pytest_run(user, "test_user.py::test_release")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "MODE record" in first.stdout and recording.exists()
    frames = list(read_frames(recording))
    assert frames[0].info["exported"]["chains"] == ["c1"]  # the recording is the release chain, exported
    assert not any(type(f) is StdioClose for f in frames)  # the before_record hook dropped them
    [answer] = [ex.request.params["inputResponses"] for ex in load_script(recording).exchanges
                if "tag" in ex.request.params.get("inputResponses", {})]
    assert answer["tag"]["content"]["tag"].startswith("[redacted:")

    again = pytest_run(user, "test_user.py::test_release")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "MODE replay" in again.stdout

    before = recording.read_bytes()
    redo = pytest_run(user, "test_user.py::test_release", "--mrtr-record-mode=all")
    assert redo.returncode == 0, redo.stdout + redo.stderr
    assert "MODE record" in redo.stdout
    # recorded again, and nothing meaningful changed: the fixture is kept as it was (no diff to review;
    # tests/replay/test_plugin_usage.py has one that changed, replaced)
    assert recording.read_bytes() == before


@pytest.mark.parametrize("how", [["--mrtr-record-mode=none"], "CI"])
def test_without_a_recording_record_mode_none_fails_the_test(user, how):
    r = pytest_run(user, "test_user.py::test_release", *([] if how == "CI" else how), ci=how == "CI")
    assert r.returncode == 1
    path = user / "fixtures" / "test_user" / "test_release.jsonl"
    assert f"mrtr-inspect: no recording at {path} (record mode none: run with --mrtr-record-mode=once" in r.stdout
    assert not path.exists()


def test_a_miss_fails_the_test_unless_allowed(user):
    r = pytest_run(user, "test_user.py::test_staging", "test_user.py::test_staging_allowed", "-rf")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout
    assert "FAILED test_user.py::test_staging" in r.stdout
    assert "1 request matched nothing in" in r.stdout
    assert 'tools/call id=2: no recorded request matches tools/call deploy; closest: tools/call deploy id=2' in r.stdout
