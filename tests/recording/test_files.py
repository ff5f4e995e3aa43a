"""Files written for the user: private when new, and checked up front without being left behind."""

from __future__ import annotations

import os

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpRequest, StdioLine
from mrtr_inspect.recording.files import open_private, unwritable
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.writer import redactor_for


def test_a_new_file_is_created_0600_and_an_existing_one_keeps_its_mode(tmp_path):
    new, old = tmp_path / "new.txt", tmp_path / "old.txt"
    old.write_text("before")
    old.chmod(0o644)
    for path in (new, old):
        with open_private(path) as f:
            f.write("é\n")
    assert new.stat().st_mode & 0o777 == 0o600
    assert old.stat().st_mode & 0o777 == 0o644
    assert old.read_text(encoding="utf-8") == "é\n"  # truncated, UTF-8


def test_a_writable_path_passes_the_check_and_nothing_is_left_or_changed(tmp_path):
    existing = tmp_path / "report.json"
    existing.write_text("kept")
    assert unwritable(tmp_path / "new.json", "report") is None
    assert not (tmp_path / "new.json").exists()
    assert unwritable(existing, "report") is None
    assert existing.read_text() == "kept"


def test_unwritable_paths_give_one_line_saying_why(tmp_path):
    (tmp_path / "file").write_text("")
    assert unwritable(tmp_path / "missing" / "r.json", "report") == (
        f"cannot write report {tmp_path / 'missing' / 'r.json'}: No such file or directory")
    assert unwritable(tmp_path / "file" / "r.json", "output").endswith(": Not a directory")
    assert unwritable(tmp_path, "summary").endswith(": Is a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_directory_is_unwritable(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert unwritable(ro / "r.json", "report").endswith(": Permission denied")
    finally:
        ro.chmod(0o700)


def test_the_configured_paths_and_headers_join_the_defaults(monkeypatch):
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "k")
    r = redactor_for(Config(redact_paths=["params.arguments.version"], redact_headers=["X-Tenant"]))
    plain = Redactor(b"k")
    line = StdioLine(1.0, "s", "c2s", b'{"params":{"arguments":{"version":"1.0.0","env":"prod"}}}')
    assert r.frame(line).data == b'{"params":{"arguments":{"version":"%s","env":"prod"}}}' % (
        plain.placeholder("1.0.0").encode())
    req = HttpRequest(1.0, "s", 1, "POST", "/mcp", (("X-Tenant", "acme"), ("X-Tenantish", "kept"),
                                                     ("Authorization", "Bearer t0k")), b"", "", True)
    assert r.frame(req).headers == (("X-Tenant", plain.placeholder("acme")), ("X-Tenantish", "kept"),
                                    ("Authorization", "Bearer " + plain.placeholder("t0k")))
    assert redactor_for(None).frame(line) == line  # no configuration: the defaults only
