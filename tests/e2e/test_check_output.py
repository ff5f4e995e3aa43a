"""`check --output PATH`: a path that cannot be written is exit 2 with one line (1 means findings);
a new file is private (it may quote what users answered)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e import ROOT, env

RECORDING = ROOT / "fixtures" / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"
FORMATS = ["text", "json", "sarif", "junit"]


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(RECORDING), *args], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_missing_folder_is_one_line_and_exit_2(tmp_path, fmt):
    out = tmp_path / "missing" / "x.txt"
    r = check("--format", fmt, "--output", str(out))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [f"mrtr-inspect: cannot write output {out}: No such file or directory"]


def test_a_path_under_a_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "x.txt"
    r = check("--output", str(out))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"mrtr-inspect: cannot write output {out}: Not a directory"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_file_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "x.txt"
    out.write_text("kept")
    out.chmod(0o444)
    r = check("--output", str(out))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"mrtr-inspect: cannot write output {out}: Permission denied"]
    assert out.read_text() == "kept"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_new_output_is_private_and_an_existing_one_keeps_its_mode(tmp_path, fmt):
    new, old = tmp_path / "new.out", tmp_path / "old.out"
    old.write_text("before")
    old.chmod(0o644)
    for out in (new, old):
        r = check("--format", fmt, "--output", str(out), "--fail-on", "never")
        assert (r.returncode, r.stdout) == (0, ""), r.stderr
        assert out.read_text() != "before" and out.stat().st_size > 0
    assert new.stat().st_mode & 0o777 == 0o600
    assert old.stat().st_mode & 0o777 == 0o644
