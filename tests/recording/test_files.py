"""Files written for the user: private when new, and checked up front without being left behind."""

from __future__ import annotations

import os

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpRequest, StdioLine
from mrtr_inspect.recording.files import CannotWrite, open_private, unwritable, write_private
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


def test_a_whole_file_is_written_private_with_its_folders_and_replaces_the_old_one(tmp_path):
    new, old = tmp_path / "a" / "b" / "out.html", tmp_path / "old.html"
    old.write_text("before")
    old.chmod(0o644)
    write_private(str(new), b"\xc3\xa9")
    write_private(str(old), b"after")
    assert new.read_bytes() == b"\xc3\xa9" and new.stat().st_mode & 0o777 == 0o600
    assert old.read_bytes() == b"after"  # renamed over it: a reader sees the old file or the new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "old.html"]  # no temporary file left


def test_a_whole_file_that_cannot_be_written_is_one_line_saying_why(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(CannotWrite) as e:
        write_private(str(tmp_path / "file" / "sub" / "out.html"), b"x")
    assert str(e.value) == f"cannot write {tmp_path / 'file' / 'sub' / 'out.html'}: Not a directory"


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
