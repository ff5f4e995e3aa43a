"""Output files as the user names them (CONTRACTS.md, third wave): `-` is standard output; a path
that is a symlink is written through and stays a link; a FIFO or a device is written to, never
replaced; temporary files have random names and are created O_EXCL|O_NOFOLLOW, so a link planted
where one would go is never written through; wrap/unwrap keep a symlinked configuration a link."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from mrtr_inspect import wrap as w
from mrtr_inspect.recording import files
from mrtr_inspect.recording.files import open_private, write_private
from tests.outputs.conftest import run_cli
from tests.replay.test_sdk_stdio import RECORDING

@contextmanager
def fifo_read(path: Path):
    """A FIFO at `path` with a reader: yields a list that holds, after the block, every byte
    written to it. The reader sees the end once the code under test and this holder have closed
    their ends (it holds one, so the end never comes before the writer opened it)."""
    os.mkfifo(path, 0o600)
    r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    held = os.open(path, os.O_WRONLY)
    os.set_blocking(r, True)
    got: list[bytes] = []

    def read() -> None:
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        got.append(b"".join(chunks))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield got
    finally:
        os.close(held)
        reader.join()
        os.close(r)


def test_dash_is_standard_output_and_no_file_named_dash_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checked = run_cli("check", RECORDING, "--format", "json", "--output", "-", "--fail-on", "never")
    assert checked.exit_code == 0 and json.loads(checked.stdout)["summary"]
    html = run_cli("export", RECORDING, "--to", "html", "--output", "-")
    assert html.exit_code == 0 and html.stdout.startswith("<!DOCTYPE html>")
    assert "wrote standard output: html" in html.stderr
    fixture = run_cli("export", RECORDING, "--to", "fixture", "--output", "-")
    assert fixture.exit_code == 0 and fixture.stdout.startswith('{"mrtr-inspect":"recording"')
    assert os.listdir(tmp_path) == []  # near miss: a path is still a file
    assert run_cli("export", RECORDING, "--to", "mermaid", "--output", "m.md").exit_code == 0
    assert os.listdir(tmp_path) == ["m.md"]


def test_a_recording_to_dash_goes_to_standard_output_and_the_tee_refuses_it(tmp_path):
    code = ("import sys; from mrtr_inspect.recording.writer import RecordingWriter\n"
            "with RecordingWriter('-', 'stdio') as w: pass\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(b'{"mrtr-inspect":"recording"') and os.listdir(tmp_path) == []
    tee = subprocess.run([sys.executable, "-m", "mrtr_inspect", "stdio", "--record", "-", "--", "true"],
                         cwd=tmp_path, capture_output=True, timeout=60)
    assert tee.returncode == 2 and tee.stdout == b"" and b"standard output carries the server's messages" in tee.stderr


def test_an_output_through_a_symlink_writes_its_target_and_the_link_stays(tmp_path):
    target = tmp_path / "dotfiles" / "report.html"
    target.parent.mkdir()
    target.write_text("before")
    target.chmod(0o644)
    link = tmp_path / "report.html"
    link.symlink_to(target)
    assert run_cli("export", RECORDING, "--to", "html", "--output", link).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # as `>` leaves it: the file keeps its mode
    assert sorted(os.listdir(target.parent)) == ["report.html"]  # no temporary file left
    dangling = tmp_path / "new.json"
    dangling.symlink_to(tmp_path / "dotfiles" / "new.json")
    write_private(str(dangling), b"{}")  # a link to nothing yet: its target is made, as `>` makes it
    assert dangling.is_symlink() and (tmp_path / "dotfiles" / "new.json").read_bytes() == b"{}"


def test_a_file_with_two_names_keeps_both(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("before")
    os.link(a, b)
    write_private(str(a), b"after")
    assert b.read_bytes() == b"after" and os.path.samefile(a, b)


def test_a_fifo_is_written_to_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.html"
    with fifo_read(fifo) as got:
        done = run_cli("export", RECORDING, "--to", "html", "--output", fifo)
    assert done.exit_code == 0, done.stderr
    assert got[0].startswith(b"<!DOCTYPE html>") and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    report = tmp_path / "report.json"
    with fifo_read(report) as got:  # check --output: its up-front check does not wait for a reader
        done = run_cli("check", RECORDING, "--format", "json", "--output", report, "--fail-on", "never")
    assert done.exit_code == 0 and json.loads(got[0])["summary"] and stat.S_ISFIFO(os.lstat(report).st_mode)
    lonely = tmp_path / "no-reader-yet"
    os.mkfifo(lonely)
    assert files.unwritable(lonely, "output") is None  # the reader may come later, as with `>`


def test_a_recording_to_a_fifo_is_appended_to_without_reading_it(tmp_path):
    """A recording is checked (is it one? does it end mid-line?) by reading it: not a FIFO, which
    would wait for ever (so the writer runs in a process of its own, with a deadline)."""
    fifo = tmp_path / "rec.jsonl"
    code = ("import sys; from mrtr_inspect.recording.writer import RecordingWriter\n"
            "with RecordingWriter(sys.argv[1], 'stdio') as w: pass\n")
    with fifo_read(fifo) as got:
        try:
            done = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            done = None
    assert done is not None and done.returncode == 0, done and done.stderr
    lines = got[0].splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["mrtr-inspect"] == "recording"
    assert json.loads(lines[1])["k"] == "session-end"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_behind_a_link_is_written_to_never_replaced(tmp_path):
    """`/dev/stdout` as root was replaced by a regular file; here a link to /dev/null (writing
    into it is harmless) must stay a link to a character device."""
    link = tmp_path / "out"
    link.symlink_to("/dev/null")
    assert run_cli("export", RECORDING, "--to", "html", "--output", link).exit_code == 0
    write_private(str(link), b"x")
    with open_private(link) as f:
        f.write("x")
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.listdir(tmp_path) == ["out"]


def test_dev_stdout_appending_to_a_file_is_appended_to_never_truncated_or_replaced(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"earlier\n")
    inode = log.stat().st_ino
    for args in (["export", str(RECORDING), "--to", "mermaid", "--output", "/dev/stdout"],
                 ["check", str(RECORDING), "--format", "json", "--output", "/dev/stdout", "--fail-on", "never"]):
        with open(log, "ab") as out:
            done = subprocess.run([sys.executable, "-m", "mrtr_inspect", *args], stdout=out, stderr=subprocess.PIPE,
                                  timeout=120)
        assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("earlier\n%% c1") and "sequenceDiagram" in text and '"summary"' in text and log.stat().st_ino == inode


def test_a_link_planted_at_the_old_temporary_names_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("mine")
    out, summary = tmp_path / "out.html", tmp_path / "summary.json"
    (tmp_path / f"out.html.{os.getpid()}.tmp").symlink_to(victim)  # write_private's old name
    write_private(str(out), b"new")
    assert victim.read_text() == "mine" and out.read_bytes() == b"new" and not out.is_symlink()
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "python3", "args": ["s.py"]}}}))
    (tmp_path / ".mcp.json.mrtr-inspect-tmp").symlink_to(victim)  # wrap's old name
    w.wrap(config, record_dir=str(tmp_path / "rec"))
    assert victim.read_text() == "mine" and "stdio" in config.read_text() and not config.is_symlink()
    from mrtr_inspect.replay.script import load_script
    from mrtr_inspect.replay.serve import ServeSession

    (tmp_path / f"summary.json.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)  # replay serve's
    session = ServeSession(load_script(str(RECORDING)), summary_path=str(summary))
    assert session.answer(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') is not None
    session.close()
    assert victim.read_text() == "mine" and json.loads(summary.read_text())["synthesized"] == 1


def test_temporary_files_have_random_names_and_are_created_exclusively_without_following(tmp_path, monkeypatch):
    opened: list[tuple[str, int]] = []
    real = os.open

    def spy(path, flags, *a, **k):
        opened.append((os.fspath(path), flags))
        return real(path, flags, *a, **k)

    monkeypatch.setattr(files.os, "open", spy)
    out = tmp_path / "out.json"
    for data in (b"1", b"2"):  # new, then replaced
        write_private(str(out), data)
    temps = [(p, f) for p, f in opened if p != str(out)]
    assert len(temps) == 2 and temps[0][0] != temps[1][0]
    assert all(os.path.dirname(p) == str(tmp_path) for p, _ in temps)
    need = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    assert all(f & need == need for _, f in temps)
    assert out.read_bytes() == b"2" and os.listdir(tmp_path) == ["out.json"]


def test_an_exception_while_writing_leaves_the_old_file(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(RuntimeError):
        with open_private(out) as f:
            f.write("half")
            raise RuntimeError
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]


def test_wrap_and_unwrap_keep_a_symlinked_config_a_link(tmp_path):
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home"
    dotfiles.mkdir()
    home.mkdir()
    target = dotfiles / "mcp.json"
    original = b'{\n  "mcpServers": {"s": {"command": "python3", "args": ["s.py"]}}  // mine\n}\n'
    target.write_bytes(original)
    target.chmod(0o640)
    link = home / "mcp.json"
    link.symlink_to(target)
    lines = w.wrap(link, record_dir=str(tmp_path / "rec"))
    assert any(x.startswith("wrapped s") for x in lines)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "stdio" in json.loads(target.read_text())["mcpServers"]["s"]["args"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    # the backup and sidecar beside the link named, not in the dotfiles folder the link points to
    assert sorted(os.listdir(home)) == ["mcp.json", "mcp.json.mrtr-inspect-backup", "mcp.json.mrtr-inspect-wrap.json"]
    assert os.listdir(dotfiles) == ["mcp.json"]
    with pytest.raises(w.WrapError, match="wrapped already"):
        w.wrap(link)
    w.unwrap(link)
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_bytes() == original
    assert os.listdir(home) == ["mcp.json"] and os.listdir(dotfiles) == ["mcp.json"]
