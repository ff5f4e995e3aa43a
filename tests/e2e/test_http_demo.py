"""`mrtr-inspect demo` (what `make demo` runs): the sample server, the proxy, the scripted client."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_inspect.demo import invocation

from tests.e2e.test_http_proxy import ROOT, child_env


SCRIPT = Path(sys.executable).with_name("mrtr-inspect")


def _path_without_the_script() -> str:
    """PATH as after `make demo` in a shell that did not activate .venv: no mrtr-inspect on it."""
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "mrtr-inspect").exists())


def test_the_demo_runs_the_main_job_and_names_what_it_leaves(tmp_path):
    env = child_env()
    env["PATH"] = _path_without_the_script()
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "demo", "--out", str(tmp_path)], cwd=ROOT,
                          env=env, capture_output=True, timeout=180)
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
    # its hints work as printed, in the shell it ran in: mrtr-inspect is not on PATH there (issue 25 item 13)
    hints = re.findall(r"^(?:try:)?\s+(\S+ (?:show|check) \S+)$", out, re.M)
    assert hints == [f"{os.path.relpath(SCRIPT, ROOT)} show {record}", f"{os.path.relpath(SCRIPT, ROOT)} check {record}"]
    for hint, status in zip(hints, (0, 1)):  # check: 1, the demo has an error finding on purpose
        ran = subprocess.run(hint, shell=True, cwd=ROOT, env=env, capture_output=True, timeout=120)
        assert ran.returncode == status, (hint, ran.stderr.decode())
        assert b"tools/call release" in ran.stdout


def test_the_hint_is_the_name_when_path_finds_this_one_and_a_path_when_not(tmp_path, monkeypatch):
    if not SCRIPT.exists():
        pytest.skip("this Python has no mrtr-inspect script beside it (not installed in its environment)")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", f"{SCRIPT.parent}{os.pathsep}{_path_without_the_script()}")
    assert invocation() == "mrtr-inspect"
    other = tmp_path / "elsewhere"  # another mrtr-inspect on PATH: not this one
    other.mkdir()
    (other / "mrtr-inspect").write_text("#!/bin/sh\n")
    (other / "mrtr-inspect").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{SCRIPT.parent}")
    assert invocation() == os.path.relpath(SCRIPT, ROOT)
    monkeypatch.chdir(tmp_path)  # outside the folder that holds it: absolute
    assert invocation() == str(SCRIPT.absolute())
    monkeypatch.setattr(sys, "executable", str(tmp_path / "py" / "python3"))  # no script beside this Python
    monkeypatch.setenv("PATH", _path_without_the_script())
    assert invocation() == "py/python3 -m mrtr_inspect"  # relative: inside the current directory
    assert shutil.which("mrtr-inspect") is None
