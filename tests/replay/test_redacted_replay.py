"""Redacted arguments replay on any machine (issue 14, item 1): a recording made with
`redact_paths` holds placeholders keyed by the recording machine's redaction key; replayed on a
machine with a fresh home (another key, and no MRTR_INSPECT_REDACTION_KEY reaching the
`mrtr_replay.command` process) the test still passes, whether the path came from pyproject.toml,
the marker or `mrtr_config`. On the machine that recorded (the same key) a placeholder matches the
one secret it stands for: another secret is a miss that says both sides are placeholders.

The user's project is run by the real pytest in a subprocess, as tests/replay/test_plugin.py does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import ROOT, WAIT

TOKEN = "tok-Secret-ABC123"
TESTS = textwrap.dedent('''
    import os
    import sys

    import pytest

    from tests.replay.sdk_client import call

    SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
    SOURCE = os.environ["PATH_SOURCE"]
    PATHS = ["params.arguments.api_token"]


    @pytest.fixture
    def mrtr_config():
        return {"redact_paths": PATHS} if SOURCE == "mrtr_config" else {}


    @pytest.mark.mrtr_replay(server=SAMPLE, **({"redact_paths": PATHS} if SOURCE == "marker" else {}))
    def test_deploy(mrtr_replay):
        said = call(mrtr_replay.command, "deploy", deploy={"env": "production", "api_token": os.environ["API_TOKEN"]})
        assert said == ["deploy: deployed to production"], said
''')


def run(project: Path, home: Path, source: str, token: str = TOKEN) -> subprocess.CompletedProcess:
    """pytest in `project` as a machine whose home is `home` runs it: no redaction key in the
    environment, no cache folder but the home's; on CI (so a missing recording is not recorded)
    once the recording exists."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "MRTR_INSPECT_REDACTION_KEY", "XDG_CACHE_HOME", "HOME")}
    env.update({"HOME": str(home), "PYTHONPATH": str(ROOT), "COLUMNS": "400", "PATH_SOURCE": source,
                "API_TOKEN": token})
    if (project / "fixtures").exists():
        env["CI"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(project),
                           "--basetemp", f"{project}-basetemp", "test_user.py"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=3 * WAIT)


@pytest.mark.parametrize("source", ["pyproject.toml", "marker", "mrtr_config"])
def test_a_redacted_argument_replays_on_a_machine_with_a_fresh_home(tmp_path, source):
    project, recorder, ci = tmp_path / "project", tmp_path / "home-1", tmp_path / "home-2"
    for d in (project, recorder, ci):
        d.mkdir()
    (project / "test_user.py").write_text(TESTS)
    if source == "pyproject.toml":
        (project / "pyproject.toml").write_text('[tool.mrtr-inspect]\nredact_paths = ["params.arguments.api_token"]\n')
    first = run(project, recorder, source)
    assert first.returncode == 0, first.stdout + first.stderr
    fixture = project / "fixtures" / "test_user" / "test_deploy.jsonl"
    text = fixture.read_text()
    assert TOKEN not in text and '"api_token":"[redacted:' in text
    assert (recorder / ".cache" / "mrtr-inspect" / "redaction.key").exists()  # the recorder's own key

    elsewhere = run(project, ci, source)  # another key: the placeholders cannot be told apart, they match
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    assert (ci / ".cache" / "mrtr-inspect" / "redaction.key").read_bytes() != (
        recorder / ".cache" / "mrtr-inspect" / "redaction.key").read_bytes()

    same = run(project, recorder, source)  # the recording machine: the same secret matches
    assert same.returncode == 0, same.stdout + same.stderr
    other = run(project, recorder, source, token="another-secret")  # near miss: another secret, same key
    assert other.returncode == 1, other.stdout + other.stderr
    assert "both sides are redacted placeholders there, made with the same redaction key" in other.stdout
    assert "another-secret" not in other.stdout
