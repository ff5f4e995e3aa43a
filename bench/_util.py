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


def alternated_turns(script: Path, args: list[str], trees: dict, turns: int, scale: float = 1e6) -> dict[str, list[float]]:
    """`script --one ARGS` run `turns` times for each tree (a checkout: its `mrtr_inspect` first on the
    path), each run a process of its own, the trees alternated; the last word each printed, times
    `scale`, by tree name."""
    per: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(turns):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), "MRTR_INSPECT_REDACTION_KEY": "bench"}
            out = subprocess.run([PY, str(script), "--one", *args], env=env, cwd=tree, check=True,
                                 capture_output=True, text=True).stdout
            per[name].append(float(out.split()[-1]) * scale)
    return per


def show_turns(per: dict[str, list[float]], digits: int = 1) -> dict[str, float]:
    """Each tree's median and range (`alternated_turns`), and this tree's to the other's; the medians."""
    med = {}
    for name, v in per.items():
        v.sort()
        med[name] = v[len(v) // 2]
        print(f"  {name:<10} {med[name]:7.{digits}f}   range {v[0]:.{digits}f}-{v[-1]:.{digits}f}")
    if "against" in med:
        print(f"  this tree / against: {med['this tree'] / med['against']:.3f}x")
    return med


def instructions_per(trees: dict, module: str, args: list[str], size_flag: str, n: int) -> dict[str, float]:
    """Instructions (callgrind, as bench/instructions.py counts them) per unit of `bench/MODULE.py --one
    ARGS SIZE_FLAG 3n` less those of the same with n, divided by the 2n units between them, by tree."""
    sys.path.insert(0, str(ROOT / "bench"))
    from instructions import _count

    code = (f"import sys; sys.argv = [{module!r}, '--one', *{args!r}, {size_flag!r}, sys.argv[1]]; "
            f"sys.path.insert(0, {str(ROOT / 'bench')!r}); import {module}; {module}.main()")
    os.environ["MRTR_INSPECT_REDACTION_KEY"] = "bench"
    return {name: (_count(tree, code, [str(3 * n)], ok=(0,)) - _count(tree, code, [str(n)], ok=(0,))) / (2 * n)
            for name, tree in trees.items()}


def show_counts(per: dict[str, float], digits: int = 1) -> None:
    """`instructions_per`'s counts in thousands, and this tree's to the other's."""
    for name, n in per.items():
        print(f"  {name:<10} {n / 1000:9.{digits}f} k")
    if len(per) > 1:
        print(f"  this tree / against: {per['this tree'] / per['against']:.3f}x")
