"""The progress bar of long work: on a terminal (a pty as stderr, CI unset) `check`, `import` and
`replay verify` draw one (bytes read, chains done; requests played); in a pipe or under CI they
write nothing more than without it, and stdout is the same either way."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import pytest

from tests.outputs.conftest import HTTP_FIXTURE, run_cli, save
from tests.traffic import ACCEPT, ELICIT, Traffic

ROOT = Path(__file__).resolve().parents[2]
CHAINS = 800
SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
STDIO_RECORDING = ROOT / "fixtures" / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    t = Traffic("stdio")
    for i in range(CHAINS):
        a = t.tool("deploy", {"env": "prod"}, id=2 * i + 1)
        t.irr(a, {"confirm": ELICIT}, state=f"s{i}")
        b = t.tool("deploy", {"env": "prod"}, id=2 * i + 2, inputResponses={"confirm": ACCEPT}, requestState=f"s{i}")
        t.result(b, {"content": []})
    return save(t.frames, tmp_path_factory.mktemp("progress") / "big.jsonl")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "MRTR_INSPECT_NO_PROGRESS")}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("TERM", "xterm-256color")
    env.update(extra)
    return env


def on_a_terminal(*args: str, **env: str) -> tuple[int, bytes, bytes]:
    """`mrtr-inspect ARGS` with stderr on a pty (120 columns), stdout to a file: (status, stdout, what
    the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    with tempfile.TemporaryFile() as stdout:
        p = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", *map(str, args)], cwd=ROOT, env=_env(**env),
                             stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave)
        os.close(slave)
        term, deadline = b"", time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if not select.select([master], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    break
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer of the pty is gone
                    break
                if not chunk:
                    break
                term += chunk
            code = p.wait(timeout=60)
        finally:
            os.close(master)
            if p.poll() is None:
                p.kill()
                p.wait()
        stdout.seek(0)
        return code, stdout.read(), term


def in_a_pipe(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", *map(str, args)], cwd=ROOT, env=_env(**env),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


def test_check_on_a_terminal_shows_bytes_read_and_chains_done(big):
    code, out, term = on_a_terminal("check", big, "--format", "json", "--fail-on", "never")
    assert code == 0
    size = big.stat().st_size / 1e6
    assert b"check" in term and f"{CHAINS} chains".encode() in term  # the final figures, drawn before it goes
    assert f"{size:.1f}/{size:.1f} MB".encode() in term
    assert b"\x1b[?25l" in term and b"\x1b[?25h" in term  # the cursor hidden while it draws, then shown
    piped = in_a_pipe("check", big, "--format", "json", "--fail-on", "never")
    assert out == piped.stdout  # the report is the same with the bar


def test_nothing_in_a_pipe_nor_under_ci(big):
    piped = in_a_pipe("check", big, "--fail-on", "never")
    assert piped.returncode == 0 and piped.stderr == b""
    code, _, term = on_a_terminal("check", big, "--fail-on", "never", CI="true")
    assert code == 0 and term == b""


def test_import_on_a_terminal(tmp_path):
    har = tmp_path / "s.har"
    assert run_cli("export", HTTP_FIXTURE, "--to", "har", "--output", har).exit_code == 0
    code, _, term = on_a_terminal("import", har, "--output", tmp_path / "s.jsonl")
    assert code == 0, term
    assert b"import" in term and b"exchanges written" in term and b"\x1b[?25l" in term
    assert b"wrote " in term  # its own line comes after the bar
    code, _, term = on_a_terminal("import", har, "--output", tmp_path / "t.jsonl", CI="1")
    assert code == 0 and b"exchanges written" not in term and b"\x1b[?25l" not in term


def test_replay_verify_on_a_terminal_counts_requests_played():
    requests = sum(1 for line in STDIO_RECORDING.read_bytes().splitlines()
                   if b'"d":"c2s"' in line and b'"method"' in line and b'"id"' in line.split(b"\t", 1)[1])
    code, out, term = on_a_terminal("replay", "verify", STDIO_RECORDING, "--quiet", "--", *SAMPLE)
    assert code == 0, out.decode()
    assert b"replay verify" in term and f"{requests}/{requests}".encode() in term and b"requests" in term
    piped = in_a_pipe("replay", "verify", STDIO_RECORDING, "--quiet", "--", *SAMPLE)
    assert piped.returncode == 0 and b"requests" not in piped.stderr
