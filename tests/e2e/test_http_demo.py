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
    assert "tampered_deploy: the server rejected the altered requestState" in out
    assert "error   request-state-altered" in out or "error request-state-altered" in out  # shown live
    r = json.loads(report.read_text())
    assert r["summary"]["chains"] == 7
    assert [f["rule"] for f in r["findings"] if f["severity"] == "error"] == ["request-state-altered"]
    altered = next(f for f in r["findings"] if f["rule"] == "request-state-altered")
    assert altered["chain"] == "c7" and "extended" in altered["message"]
    assert record.read_text().startswith('{"mrtr-inspect":"recording"')
    assert done.stderr.decode() == ""
