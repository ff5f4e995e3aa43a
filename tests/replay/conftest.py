"""Helpers of the replay tests: recordings from test traffic, the CLI, the SDK servers over HTTP."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mrtr_inspect.recording import format as fmt

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "fixtures"
SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
WAIT = 60.0  # seconds a process may take to start, answer or stop on a loaded machine


def save(frames: list, path: Path) -> Path:
    """Frames (tests.traffic) written as a recording."""
    path.write_bytes(b"".join(fmt.encode(f) for f in frames))
    return path


def cli(*args: str, input: bytes | None = None, timeout: float = WAIT) -> subprocess.CompletedProcess:
    """`mrtr-inspect ARGS` in the checkout; text output."""
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", *args], cwd=ROOT, input=input,
                          capture_output=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def sdk_server(*args: str) -> list[str]:
    """The command line of the test SDK server (tests/replay/sdk_server.py)."""
    return [sys.executable, str(HERE / "sdk_server.py"), *args]


class LineWaiter:
    """Reads a stream on a thread; `wait(pattern)` returns the first line matching it, with a timeout."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue = queue.Queue()
        self.lines: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self.q.put(line.decode("utf-8", "replace").rstrip("\n"))
        self.q.put(None)

    def wait(self, pattern: str, timeout: float = WAIT) -> re.Match | None:
        while True:
            try:
                line = self.q.get(timeout=timeout)
            except queue.Empty:
                return None
            if line is None:
                return None
            self.lines.append(line)
            m = re.search(pattern, line)
            if m:
                return m


class Running:
    """A process that says `listening on URL` (stdout or stderr); stopped with SIGTERM."""

    def __init__(self, cmd: list[str], on: str = "stdout", env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env or {**os.environ, "PYTHONPATH": str(ROOT)})
        self.out = LineWaiter(self.proc.stdout)
        self.err = LineWaiter(self.proc.stderr)
        m = (self.out if on == "stdout" else self.err).wait(r"listening on (http://\S+)")
        if m is None:
            self.stop()
            raise AssertionError(f"{cmd} did not start")
        self.url = m[1]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


@pytest.fixture
def running():
    """Start processes that say where they listen; all stopped at teardown."""
    started: list[Running] = []

    def start(cmd: list[str], on: str = "stdout") -> Running:
        r = Running(cmd, on)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()
