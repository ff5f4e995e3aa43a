"""`mrtr-inspect demo` (what `make demo` runs): the sample server, the proxy, the scripted client."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.e2e.test_http_proxy import ROOT, child_env


def test_the_demo_runs_the_main_job_and_names_what_it_leaves(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "demo", "--out", str(tmp_path)], cwd=ROOT,
                          env=child_env(), capture_output=True, timeout=180)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "mrtr-inspect: listening on http://127.0.0.1:" in out
    assert "mrtr-inspect: c2 tools/call release: round 3 input_required, asks notes" in out  # the live view
    assert "mrtr-inspect: c6 tools/call flaky_deploy  error  1 round" in out
    record, report = tmp_path / "demo-http.jsonl", tmp_path / "demo-http-report.json"
    assert f"recording: {record}" in out and f"report:    {report}" in out
    r = json.loads(report.read_text())
    assert r["summary"]["chains"] == 6 and r["summary"]["errors"] == 0
    assert record.read_text().startswith('{"mrtr-inspect":"recording"')
    assert done.stderr.decode() == ""
