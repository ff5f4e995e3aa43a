"""The pytest plugin over a test's life: several replay processes in one test, redaction that must
not break the next run, a failing test while recording, record mode `all` with shared recordings,
and the processes a failed start leaves behind. User projects run by pytest in a subprocess, as in
test_plugin.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import textwrap
from pathlib import Path

import pytest

from mrtr_inspect.core.events import SessionStart, StdioLine
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.meaning import sessions
from mrtr_inspect.replay.script import load_script

from .conftest import ROOT
from .test_plugin import pytest_run
from .test_sdk_stdio import RECORDING

HEAD = textwrap.dedent('''
    import json
    import os
    import sys

    import pytest

    from tests.replay.sdk_client import EXPECTED, call

    SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
''')


def project(where: Path, body: str, shared: bool = True) -> Path:
    """A user's project: test_user.py (HEAD + body), and fixtures/shared.jsonl (the stdio session
    of every sample chain)."""
    (where / "test_user.py").write_text(HEAD + textwrap.dedent(body))
    (where / "fixtures").mkdir()
    if shared:
        shutil.copy(RECORDING, where / "fixtures" / "shared.jsonl")
    return where


# ---- (a miss in one of several stdio processes)

TWICE = '''
    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_miss_then_ok(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})  # a miss
        assert call(mrtr_replay.command, "summarize") == [EXPECTED["summarize"]]  # a second process, served


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_ok_twice(mrtr_replay):
        # each process replays the recording from its start: the one summarize chain serves both
        assert call(mrtr_replay.command, "summarize") == [EXPECTED["summarize"]]
        assert call(mrtr_replay.command, "summarize") == [EXPECTED["summarize"]]
        s = mrtr_replay.summary()
        assert (s["processes"], s["misses"]) == (2, [])


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", allow_misses=True)
    def test_miss_then_ok_allowed(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})
        call(mrtr_replay.command, "summarize")
        s = mrtr_replay.summary()
        print("SUMMARY", json.dumps(s))
'''


def test_a_miss_of_one_stdio_process_fails_the_test_though_a_later_one_had_none(tmp_path):
    """Each process started from mrtr_replay.command keeps its own summary, and the verdict counts
    them all: the second process (no miss) no longer hides the first one's miss."""
    user = project(tmp_path, TWICE)
    r = pytest_run(user, "-rf")
    assert "FAILED test_user.py::test_miss_then_ok - Failed: mrtr-inspect: 1 request matched nothing" in r.stdout
    assert "1 failed, 2 passed" in r.stdout, r.stdout + r.stderr
    s = json.loads(re.search(r"SUMMARY (\{.*\})$", r.stdout, re.M)[1])
    assert s["processes"] == 2
    assert [m["request"] for m in s["misses"]] == ["tools/call id=2"]
    # unused: what neither process was served (the summarize chain was, by the second one)
    assert not any("summarize" in u or "server/discover" in u for u in s["unused"])
    assert "tools/call deploy id=2 (#2, chain c1)" in s["unused"]


# ---- (redact_paths on a matched field)

REDACTED = '''
    SECRET = "my api key is sk-123"


    @pytest.fixture
    def mrtr_config():
        return {"redact_paths": ["params.arguments.text"]}


    @pytest.mark.mrtr_replay(server=SAMPLE)
    def test_summarize_secret(mrtr_replay):
        assert call(mrtr_replay.command, "summarize", summarize={"text": SECRET}) == [EXPECTED["summarize"]]
        print("MODE", mrtr_replay.mode)


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_other_fields_still_count(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})
'''


def test_a_path_redacted_when_recording_is_not_compared_when_replaying(tmp_path):
    user = project(tmp_path, REDACTED)
    recording = user / "fixtures" / "test_user" / "test_summarize_secret.jsonl"
    first = pytest_run(user, "test_user.py::test_summarize_secret")
    assert first.returncode == 0 and "MODE record" in first.stdout, first.stdout + first.stderr
    [call_] = [ex.request for ex in load_script(recording).exchanges
               if ex.request.method == "tools/call" and "requestState" not in ex.request.params]
    assert call_.params["arguments"]["text"].startswith("[redacted:")
    # path redaction reaches that path only: the server's echo of the value keeps it (docs/replay.md says so)
    assert any("sk-123" in f.data.decode() for f in read_frames(recording) if type(f) is StdioLine)

    again = pytest_run(user, "-rf")
    assert "MODE replay" in again.stdout
    # the redacted argument no longer differs; an argument that was not redacted still does
    assert "FAILED test_user.py::test_other_fields_still_count" in again.stdout
    assert "1 failed, 1 passed" in again.stdout, again.stdout + again.stderr


# ---- (a test that fails while recording)

FAILING = '''
    @pytest.mark.mrtr_replay(server=SAMPLE)
    def test_deploy(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]
        assert os.environ.get("MAKE_IT_FAIL") != "1", "failed on purpose"
'''


def test_a_failing_test_does_not_write_its_recording(tmp_path):
    user = project(tmp_path, FAILING, shared=False)
    recording = user / "fixtures" / "test_user" / "test_deploy.jsonl"
    failed = pytest_run(user, "-W", "always", MAKE_IT_FAIL="1")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    m = re.search(r"mrtr-inspect: (\S+) is not written: the test failed while recording it; the session recorded "
                  r"is at (\S+)", failed.stdout)
    assert m, failed.stdout
    assert m[1] == str(recording) and not recording.exists()
    assert Path(m[2]).exists()  # the session is kept, to look into

    passed = pytest_run(user, MAKE_IT_FAIL="0")  # the near miss: recorded (once), as the test passed
    assert passed.returncode == 0 and recording.exists(), passed.stdout + passed.stderr
    before = recording.read_bytes()

    again = pytest_run(user, "--mrtr-record-mode=all", MAKE_IT_FAIL="1")
    assert again.returncode == 1
    assert f"mrtr-inspect: {recording} is left as it was: the test failed while recording it" in again.stdout
    assert recording.read_bytes() == before


# ---- (record mode all, recordings shared)

SHARED_ALL = '''
    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", server=SAMPLE)
    def test_records(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]
        print("MODE", "test_records", mrtr_replay.mode)


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_replays(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]
        print("MODE", "test_replays", mrtr_replay.mode)


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", server=SAMPLE)
    def test_records_too(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]
        print("MODE", "test_records_too", mrtr_replay.mode)


    @pytest.mark.mrtr_replay("fixtures/absent.jsonl")
    def test_nothing_to_record_from(mrtr_replay):
        pass
'''


def test_record_mode_all_records_a_shared_recording_once_and_replays_it_elsewhere(tmp_path):
    user = project(tmp_path, SHARED_ALL)
    shared = user / "fixtures" / "shared.jsonl"
    [old] = [f.session for f in read_frames(shared) if type(f) is SessionStart]
    r = pytest_run(user, "--mrtr-record-mode=all", "-rfE")
    modes = dict(re.findall(r"MODE (\S+) (\S+)", r.stdout))
    assert modes == {"test_records": "record", "test_replays": "replay", "test_records_too": "replay"}, r.stdout
    [new] = [f.session for f in read_frames(shared) if type(f) is SessionStart]
    assert new != old  # recorded again, by the first test that names a server, once
    # the near miss: a test with no server and no recording still cannot record
    assert "ERROR test_user.py::test_nothing_to_record_from - Failed: mrtr-inspect: nothing to record" in r.stdout
    assert "3 passed, 1 error" in r.stdout, r.stdout + r.stderr


def test_the_documented_command_records_this_projects_fixtures_again(tmp_path):
    """docs/replay.md: `pytest tests/replay/test_sdk_stdio.py tests/replay/test_sdk_http.py
    --mrtr-record-mode=all`, in a copy of the project (its fixtures are the copy's)."""
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "tests", copy / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("test_sdk_stdio", "test_sdk_http"):
        shutil.copytree(ROOT / "fixtures" / name, copy / "fixtures" / name)
    stdio = copy / "fixtures" / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"
    before, meant = stdio.read_bytes(), sessions(stdio)
    r = pytest_run(copy, "tests/replay/test_sdk_stdio.py", "tests/replay/test_sdk_http.py",
                   "--mrtr-record-mode=all", PYTHONPATH=f"{copy}{os.pathsep}{ROOT}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " error" not in r.stdout.splitlines()[-1]
    # recorded again: replaced where its meaning changed, else kept byte for byte (no diff to review)
    assert stdio.read_bytes() == before or sessions(stdio) != meant


# ---- (a server that never listens)

def _running_with(token: str) -> list[int]:
    """Processes whose command line holds `token`."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if token.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


NEVER_LISTENS = '''
    TOKEN = os.environ["SERVER_TOKEN"]
    NAP = "import os, time; os.close(1); os.close(2); time.sleep(600)"  # not holding pytest's output open


    @pytest.mark.mrtr_replay(transport="http",
                             server=[sys.executable, "-c", NAP, TOKEN, "{port}"])
    def test_server_never_listens(mrtr_replay):
        pass


    @pytest.mark.mrtr_replay(transport="http", server=[sys.executable, "-c", "import sys; sys.exit(3)", "{port}"])
    def test_server_exits(mrtr_replay):
        pass
'''


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_server_that_never_listens_is_stopped(tmp_path):
    user = project(tmp_path, NEVER_LISTENS, shared=False)
    token = f"mrtr-never-listens-{tmp_path.name}"
    try:
        r = pytest_run(user, "-o", "mrtr_start_timeout=2", "-rE", SERVER_TOKEN=token)
    finally:
        left = _running_with(token)
        for pid in left:  # started by this test, left by the run: stopped here, by pid
            os.kill(pid, signal.SIGKILL)
    assert left == [], "the server to record was left running"
    assert re.search(r"ERROR test_user.py::test_server_never_listens - Failed: mrtr-inspect: the server to record "
                     r"did not listen on port \d+ \(within 2 s; ini option mrtr_start_timeout\)", r.stdout), r.stdout
    # the near miss: a server that exits says so
    assert re.search(r"ERROR test_user.py::test_server_exits - Failed: mrtr-inspect: the server to record did not "
                     r"listen on port \d+ \(exited with status 3;", r.stdout), r.stdout
