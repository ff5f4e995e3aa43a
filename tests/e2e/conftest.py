"""Fixtures of the end-to-end tests: processes that are always cleaned up."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e import ROOT, env


class Processes:
    """Starts processes in the checkout with the test environment; kills what is left at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []

    def start(self, cmd: list[str], **kw) -> subprocess.Popen:
        kw.setdefault("stdin", subprocess.PIPE)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("env", env())
        p = subprocess.Popen(cmd, cwd=ROOT, **kw)
        self.started.append(p)
        return p

    def run(self, cmd: list[str], input: bytes = b"", timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """Run to the end, feeding `input` and collecting stdout and stderr."""
        p = self.start(cmd, **kw)
        out, err = p.communicate(input, timeout=timeout)
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)

    def close(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def procs():
    ps = Processes()
    yield ps
    ps.close()
