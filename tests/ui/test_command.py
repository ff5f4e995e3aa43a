"""`mrtr-inspect ui` as a command: what it says before it takes the screen."""

from __future__ import annotations

import subprocess
import sys

from .recordings import sample


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", "ui", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


def test_without_a_terminal_it_says_so_in_one_line(tmp_path):
    p = _run(str(sample(tmp_path / "s.jsonl")))
    assert p.returncode == 2
    assert p.stderr == "mrtr-inspect: ui needs a terminal (for a report use `check`, for the chains `show`)\n"
    assert p.stdout == ""


def test_a_file_that_is_not_a_recording_is_one_line_before_the_screen(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    p = _run(str(bad))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "not an mrtr-inspect recording" in p.stderr


def test_a_bad_filter_is_one_line_naming_the_term(tmp_path):
    p = _run(str(sample(tmp_path / "s.jsonl")), "--filter", "tool:wizard rounds>>1")
    assert p.returncode == 2
    assert p.stderr.startswith("mrtr-inspect: --filter: ") and p.stderr.count("\n") == 1
    assert "rounds>>1" in p.stderr
