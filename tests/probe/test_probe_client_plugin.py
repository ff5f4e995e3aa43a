"""The pytest side of client probes, as a client's own test suite meets it (a test file of its own,
run by pytest in a subprocess): the `mrtr_probe_client` marker runs the body once per mutation and
reports each verdict as the test's result; `mrtr_replay(faults=...)` serves a recording with faults."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.replay.test_plugin import pytest_run

ROOT = Path(__file__).resolve().parents[2]
HTTP_REC = ROOT / "fixtures/test_sdk_http/test_the_client_completes_every_chain.jsonl"

USER_TESTS = textwrap.dedent('''
    import json
    import subprocess
    import sys
    import urllib.request

    import pytest

    CLIENT = [sys.executable, "-m", "tests.probe.mrtr_client"]
    REC = "fixtures/session.jsonl"


    @pytest.mark.mrtr_probe_client(REC, mutations=["state-rotated", "state-only", "parallel"], timeout=30, window=0.3)
    def test_good(mrtr_probe_client):
        subprocess.run(CLIENT + ["http", mrtr_probe_client.url], timeout=120)


    @pytest.mark.mrtr_probe_client(REC, mutations="state-only", timeout=30)
    def test_bad(mrtr_probe_client):
        subprocess.run(CLIENT + ["http", mrtr_probe_client.url, "--bug", "ignore-state-only"], timeout=120)


    @pytest.mark.mrtr_probe_client(REC, mutations=["fault-delay"], timeout=3)
    def test_hang(mrtr_probe_client):
        # no request timeout: the body returns only once the probe sends its held-back answer late
        subprocess.run(CLIENT + ["http", mrtr_probe_client.url, "--bug", "hang"], timeout=120)


    @pytest.mark.mrtr_probe_client(REC, mutations=["state-rotated"], transport="stdio", timeout=30)
    def test_stdio(mrtr_probe_client):
        subprocess.run(CLIENT + ["stdio", "--", *mrtr_probe_client.command], timeout=120)


    @pytest.mark.mrtr_replay(REC, faults=["error:-32050@tools/call"])
    def test_replay_with_a_fault(mrtr_replay):
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "deploy", "arguments": {"env": "production"}}}
        req = urllib.request.Request(mrtr_replay.url, json.dumps(body).encode(),
                                     {"content-type": "application/json", "accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert json.loads(r.read())["error"]["code"] == -32050


    @pytest.mark.mrtr_replay(REC, faults="error")
    def test_faults_is_a_list(mrtr_replay):
        pass
''')


def test_the_marker_reports_each_mutation_as_a_test(tmp_path):
    (tmp_path / "test_client.py").write_text(USER_TESTS)
    (tmp_path / "fixtures").mkdir()
    shutil.copy(HTTP_REC, tmp_path / "fixtures" / "session.jsonl")
    r = pytest_run(tmp_path, "-rA")
    out = r.stdout + r.stderr
    assert "PASSED test_client.py::test_good[state-rotated]" in out, out
    assert "PASSED test_client.py::test_good[state-only]" in out, out
    assert "SKIPPED [1]" in out and "probe-client parallel: the client made no two calls" in out, out
    assert "FAILED test_client.py::test_bad[state-only]" in out and "client-ignored-state-only" in out, out
    assert "FAILED test_client.py::test_hang[fault-delay]" in out and "client-hung" in out, out
    assert "PASSED test_client.py::test_stdio[state-rotated]" in out, out
    assert "PASSED test_client.py::test_replay_with_a_fault" in out, out
    assert "faults is a list of strings" in out and "write faults=['error']" in out, out
    assert r.returncode == 1
