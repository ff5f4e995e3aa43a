"""The view in a real terminal, as a person uses it: tmux at 200x50, keys typed, the screen read
(issue 29, "done when"). The tee and the proxy are the real ones, in front of the sample server
(official Python SDK) and its scripted client."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .recordings import sample

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")
PY = shlex.quote(sys.executable)


class Terminal:
    """A tmux server of its own (its socket in tmp_path) with one 200x50 window running sh."""

    def __init__(self, tmp: Path) -> None:
        self.socket = str(tmp / "tmux.sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        env.update(PS1="$ ", TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        self._tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", "t", "sh", env=env)
        self._tmux("set-option", "-t", "t", "remain-on-exit", "on")

    def _tmux(self, *args: str, env: dict | None = None) -> str:
        p = subprocess.run([TMUX, "-S", self.socket, *args], capture_output=True, text=True, env=env, timeout=30)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)

    def keys(self, *names: str) -> None:
        self._tmux("send-keys", "-t", "t", *names)

    def run(self, command: str) -> None:
        self.type(command)
        self.keys("Enter")

    @property
    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, what: "str | re.Pattern", timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        while True:
            screen = self.screen
            if (what.search(screen) if isinstance(what, re.Pattern) else what in screen):
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{what!r} not on the screen after {timeout} s:\n{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def term(tmp_path):
    t = Terminal(tmp_path)
    yield t
    t.close()


def _list(screen: str) -> list[str]:
    """The chain ids in the list (left of the detail pane)."""
    return re.findall(r"^(c\d+) ", screen, re.M)


def filter_(term: Terminal, text: str) -> None:
    """`/`, then (once the footer shows the filter bar's keys) the expression and Enter."""
    term.type("/")
    term.wait_for("Apply the filter")
    term.type(text)
    term.keys("Enter")
    term.wait_for("⏎ Open")  # back in the list (its keys in the footer)


def test_the_view_in_a_terminal_filter_open_quit(term, tmp_path):
    rec = sample(tmp_path / "sample.jsonl")
    term.run(f"echo before; {PY} -m mrtr_inspect ui {shlex.quote(str(rec))}; echo exit=$?")
    screen = term.wait_for("showing 6 chains")
    assert _list(screen) == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert "/ Filter" in screen and "q Quit" in screen  # the footer shows the keys
    filter_(term, "tool:wizard")
    assert _list(term.wait_for("showing 2 chains")) == ["c1", "c3"]
    filter_(term, "severity:error")
    assert _list(term.wait_for("showing 1 chains")) == ["c5"]
    filter_(term, "id:6")  # a retry of c3
    screen = term.wait_for(re.compile(r"showing 1 chains.*\n(.*\n)*c3 "))
    assert _list(screen) == ["c3"]
    term.keys("Enter")
    screen = term.wait_for("c3 tools/call wizard  complete  2 rounds")
    assert "← input_required round 1 (#11" in screen
    assert "asks name: elicitation/create (form) 'Which name?'" in screen
    assert "requestState sha256:b5787c51d1dcd28d" in screen
    term.type("q")
    screen = term.wait_for("exit=0")
    assert "before" in screen and "showing" not in screen  # the terminal is given back as it was


def _tee(rec: Path, tools: str) -> None:
    """The scripted client through the tee in front of the sample server: one session appended."""
    tee = [sys.executable, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(rec), "--",
           sys.executable, "-m", "mrtr_inspect.samples.server"]
    p = subprocess.run([sys.executable, "-m", "mrtr_inspect.samples.client", "stdio", "--tools", tools, "--", *tee],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_follow_shows_a_session_a_tee_appends(term, tmp_path):
    rec = tmp_path / "tee.jsonl"
    _tee(rec, "deploy")
    term.run(f"{PY} -m mrtr_inspect ui --follow {shlex.quote(str(rec))}; echo exit=$?")
    screen = term.wait_for("[following]")
    assert _list(screen) == ["c1"]
    _tee(rec, "release,summarize")
    screen = term.wait_for("showing 3 chains")
    assert re.search(r"^c2 +release +complete +3 ", screen, re.M), screen
    assert re.search(r"^c3 +summarize +complete +1 ", screen, re.M), screen
    term.type("q")
    term.wait_for("exit=0")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_proxy_shows_the_view_in_its_terminal(term, tmp_path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mrtr_inspect.samples.server", "--http", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < end and server.poll() is None, "the sample server did not start"
            time.sleep(0.05)
        rec = tmp_path / "proxy.jsonl"
        term.run(f"{PY} -m mrtr_inspect --upstream http://127.0.0.1:{port}/mcp --listen 127.0.0.1:0 --ui "
                 f"--record {shlex.quote(str(rec))}; echo exit=$?")
        screen = term.wait_for(re.compile(r"listening on http://127\.0\.0\.1:\d+/mcp"))
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", screen).group(1)
        client = subprocess.run([sys.executable, "-m", "mrtr_inspect.samples.client", "http", url,
                                 "--tools", "deploy"], capture_output=True, text=True, timeout=120)
        assert client.returncode == 0, client.stderr
        screen = term.wait_for(re.compile(r"^c1 +deploy +complete +1 ", re.M))
        term.keys("Enter")
        term.wait_for("asks confirm: elicitation/create (form)")
        term.type("q")
        screen = term.wait_for("exit=0")
        assert "mrtr-inspect: listening on http://127.0.0.1:" in screen  # its lines, once the view is gone
        assert rec.stat().st_size > 0
    finally:
        server.terminate()
        server.wait(timeout=30)
