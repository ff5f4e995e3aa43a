"""Instructions `check` costs, counted by callgrind: the figure a change to the analysis is held to.

Whole runs of `check` vary by 5 to 10% between identical runs on a shared machine; instruction
counts do not (the same total for the same binary, inputs and environment). This runs
`valgrind --tool=callgrind` twice with PYTHONHASHSEED=0: once on `check --format json` of a
generated 20,003-message recording (bench/gen_recording.py, seed 1, the golden corpus' bench
recording), once on the same interpreter importing the command line and exiting (the startup),
and prints both and their difference, the analysis' own instructions.

    python bench/instructions.py [--messages 20000] [--recording PATH] [--tree DIR] [--against DIR] [--stages]

`--stages` counts the cumulative stages of bench/check_stages.py instead (floor, read, decode, core,
rules, items, check: each in its own run, less the same interpreter importing them and loading the rules)
and prints each per message with its step over the one before, the figure of each step of the
pipeline (issue 27).

`--tree DIR` counts the code of another checkout (its `mrtr_inspect` first on the path), so a
change is compared with the tree before it in one run; `--against DIR` does both and prints the
change in percent.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

_STARTUP = "import mrtr_inspect.cli, mrtr_inspect.rules; mrtr_inspect.rules.load_rules()"
_CHECK = ("import sys; from mrtr_inspect.cli import main; "
          "sys.argv = ['mrtr-inspect', 'check', sys.argv[1], '--format', 'json', '--output', os.devnull,"
          " '--fail-on', 'never']; main()")


def _count(tree: Path, code: str, args: list[str], ok: tuple = (0, 1)) -> int:
    """Instructions (Ir) of `python -c code args` under callgrind, with `tree` first on the path."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c",
               "import os; " + code, *args]
        p = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
        m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
        if p.returncode not in ok or m is None:
            raise SystemExit(f"callgrind failed ({p.returncode}): {p.stderr[-2000:]}")
        return int(m.group(1))


_STAGE = ("import sys; sys.path.insert(0, sys.argv[3]); import check_stages; from mrtr_inspect.rules import load_rules; "
          "load_rules(); sys.argv[2] != 'none' and check_stages.stages(sys.argv[1])[sys.argv[2]]()")
STAGES = ("floor", "read", "decode", "core", "rules", "items", "check")


def measure_stages(tree: Path, recording: str) -> dict:
    bench = str(ROOT / "bench")
    base = _count(tree, _STAGE, [recording, "none", bench], (0,))
    return {"tree": str(tree), **{s: _count(tree, _STAGE, [recording, s, bench], (0,)) - base for s in STAGES}}


def _show_stages(r: dict, n: int, before: dict | None) -> None:
    print(f"{r['tree']}: instructions per message ({n:,} messages)")
    prev = None
    for s in STAGES:
        step = f"  step {(r[s] - r[prev]) / n / 1e3:+8.1f}k" if prev not in (None, "floor") else " " * 16
        change = f"  {100.0 * (r[s] - before[s]) / before[s]:+6.2f}%" if before else ""
        print(f"  {s:7s} {r[s] / n / 1e3:8.1f}k{step}  {r[s] / r['floor']:5.2f}x the floor{change}")
        prev = s


def measure(tree: Path, recording: str) -> dict:
    startup = _count(tree, _STARTUP, [])
    check = _count(tree, _CHECK, [recording])
    return {"tree": str(tree), "startup": startup, "check": check, "analysis": check - startup}


def _show(r: dict) -> None:
    print(f"{r['tree']}: check {r['check'] / 1e6:,.1f}M instructions, startup {r['startup'] / 1e6:,.1f}M, "
          f"analysis {r['analysis'] / 1e6:,.1f}M")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--recording", help="the recording to check (generated there if it does not exist)")
    ap.add_argument("--tree", default=str(ROOT), help="the checkout whose code is counted")
    ap.add_argument("--against", help="a second checkout (the tree before the change) counted in the same run")
    ap.add_argument("--stages", action="store_true", help="count each stage of bench/check_stages.py")
    a = ap.parse_args()
    from gen_recording import generate

    with tempfile.TemporaryDirectory() as tmp:
        rec = a.recording or str(Path(tmp) / "bench.jsonl")
        if not Path(rec).exists():
            generate(rec, a.messages)
        rec = str(Path(rec).resolve())
        if a.stages:
            from check_speed import n_messages

            n = n_messages(rec)
            before = measure_stages(Path(a.against).resolve(), rec) if a.against else None
            after = measure_stages(Path(a.tree).resolve(), rec)
            if before is not None:
                _show_stages(before, n, None)
            _show_stages(after, n, before)
            return
        before = measure(Path(a.against).resolve(), rec) if a.against else None
        after = measure(Path(a.tree).resolve(), rec)
    if before is not None:
        _show(before)
    _show(after)
    if before is not None:
        for k in ("check", "analysis"):
            print(f"{k}: {100.0 * (after[k] - before[k]) / before[k]:+.2f}%")


if __name__ == "__main__":
    main()
