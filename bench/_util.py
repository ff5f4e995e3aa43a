"""Helpers shared by the benchmarks: run a command and measure it, medians, ratios."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


@dataclass
class Run:
    seconds: float  # wall time
    cpu: float  # user + system CPU time of the process (steadier than wall time on a shared machine)
    maxrss_mb: float  # peak resident memory of the process (ru_maxrss)
    code: int


def measure(cmd: list[str], stdin=None, stdout=subprocess.DEVNULL, stderr=None, env=None) -> Run:
    """Run `cmd` to the end; its wall and CPU time and its own peak memory (wait4 gives that child's rusage)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=ROOT)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, p.returncode)


def median(values) -> float:
    return statistics.median(values)


def env_with_project() -> dict:
    """The environment for child processes: the project importable from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MRTR_INSPECT_REDACTION_KEY", "bench")
    return env


def verdict(ratio: float, target: float, higher_is_better: bool) -> str:
    ok = ratio >= target if higher_is_better else ratio <= target
    return "meets" if ok else "MISSES"
