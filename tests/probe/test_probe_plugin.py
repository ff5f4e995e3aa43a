"""The `mrtr_probe` marker and fixture as a server's CI meets them: a test file of its own, run by
pytest in a subprocess (the plugin loads through the mrtr_replay plugin's entry point)."""

from __future__ import annotations

import shutil
import textwrap

from tests.replay.test_plugin import pytest_run

from .test_probe_live import recording  # noqa: F401 (fixture)

USER_TESTS = textwrap.dedent('''
    import sys

    import pytest

    SERVER = [sys.executable, "-m", "tests.probe.switch_server"]


    @pytest.mark.mrtr_probe("fixtures/session.jsonl", server=SERVER, only=["tampered-state", "declined"])
    def test_my_server_rejects_a_tampered_state(mrtr_probe):
        assert [p["mutation"] for p in mrtr_probe.passed()] == ["tampered-state", "declined"]


    @pytest.mark.mrtr_probe("fixtures/session.jsonl", server=SERVER + ["--break", "unsealed"], only="tampered-state")
    def test_a_broken_server_fails(mrtr_probe):
        pass


    @pytest.mark.mrtr_probe("fixtures/session.jsonl", server=SERVER + ["--break", "unsealed"],
                            only="tampered-state", allow_failures=True)
    def test_failures_allowed(mrtr_probe):
        [p] = mrtr_probe.failed("tampered-state")
        assert p["rule"] == "server-accepted-altered-state"
''')


def test_the_marker_runs_the_probes_and_fails_a_test_on_a_failed_probe(recording, tmp_path):  # noqa: F811
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "fixtures").mkdir()
    shutil.copy(recording, tmp_path / "fixtures" / "session.jsonl")
    r = pytest_run(tmp_path, "-rA")
    out = r.stdout + r.stderr
    assert "PASSED test_user.py::test_my_server_rejects_a_tampered_state" in out, out
    assert "PASSED test_user.py::test_failures_allowed" in out, out
    assert "FAILED test_user.py::test_a_broken_server_fails" in out, out
    assert "server-accepted-altered-state (warning): probe tampered-state of chain c1" in out, out
    assert r.returncode == 1
