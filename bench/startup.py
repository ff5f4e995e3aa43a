"""Startup: `check` of a 10-message recording against `mrtr-inspect --version` (target: under 2.5x).

A short `check` is mostly startup: the interpreter, the command line, the rules, the analysis, the
report. The 10-message recording is the first 10 messages of the bench recording
(bench/gen_recording.py, seed 1): server/discover, tools/list, and a tools/call chain of three
elicitation rounds (input requests, input responses, requestState), so the shapes the MRTR rules
judge are there. Bytecode is written first (a warm-up run), as pip writes it on install. Both programs run, alternated, REPEAT times each, each a fresh process of the
console script (`.venv/bin/mrtr-inspect`, what a user types), timed from start to exit; medians with
their range, by wall time (the target) and by CPU time (user + system, steadier on a shared machine).

    python bench/startup.py [--repeat 15] [--importtime]

`--importtime` also prints the slowest imports of one `check` (`python -X importtime`), cumulative.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _util import PY, measure, median, verdict
from gen_recording import generate

TARGET = 2.5
MESSAGES = 10


def ten_messages(path: Path) -> None:
    """The first MESSAGES messages of the bench recording (a torn session: the recording of a kill)."""
    big = path.with_suffix(".big.jsonl")
    generate(str(big), messages=60)
    out, n = [], 0
    with open(big, encoding="utf-8") as f:
        for line in f:
            if "\t" in line:
                if n == MESSAGES:
                    break
                n += 1
            out.append(line)
    big.unlink()
    path.write_text("".join(out), encoding="utf-8")


def _script() -> list[str]:
    """The console script beside this Python, as `make demo` and a user run it; else `python -m`."""
    script = Path(PY).with_name("mrtr-inspect")
    return [str(script)] if script.exists() else [PY, "-m", "mrtr_inspect"]


def _show(name: str, runs: list) -> str:
    wall, cpu = [r.seconds for r in runs], [r.cpu for r in runs]
    return (f"  {name + ':':32s}wall {median(wall):.3f} s ({min(wall):.3f}-{max(wall):.3f})   "
            f"CPU {median(cpu):.3f} s ({min(cpu):.3f}-{max(cpu):.3f})")


def importtime(recording: Path, top: int = 15) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([PY, "-X", "importtime", "-m", "mrtr_inspect", "check", str(recording)],
                          capture_output=True, text=True, env=env)
    rows = []
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(3)) == 1:  # top-level imports only
            rows.append((int(m.group(2)), m.group(4)))
    total = sum(c for c, _ in rows)
    print(f"imports of one check (python -X importtime, top level, cumulative): {total / 1e6:.3f} s in all")
    for cumulative, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative / 1e6:.3f} s  {name}")


def main() -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--importtime", action="store_true")
    args = ap.parse_args()
    cmd = _script()
    with tempfile.TemporaryDirectory() as tmp:
        recording = Path(tmp) / "ten.jsonl"
        ten_messages(recording)
        # bytecode written, as pip writes it on install: a source compiled at each start is not startup
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["MRTR_INSPECT_REDACTION_KEY"] = "bench"
        measure([*cmd, "check", str(recording), "--fail-on", "never"], env=env)  # warm-up: writes it
        version, check = [], []
        for _ in range(args.repeat):
            version.append(measure([*cmd, "--version"], env=env))
            check.append(measure([*cmd, "check", str(recording), "--fail-on", "never"], env=env))
        for r in version + check:
            if r.code != 0:
                sys.exit(f"a run failed with exit status {r.code}")
        if args.importtime:
            importtime(recording)
    ratio = median(r.seconds for r in check) / median(r.seconds for r in version)
    cpu_ratio = median(r.cpu for r in check) / median(r.cpu for r in version)
    print(f"startup, {' '.join(Path(c).name for c in cmd)}, {args.repeat} alternated runs each, medians (range):")
    print(_show("--version", version))
    print(_show(f"check ({MESSAGES} messages)", check))
    print(f"  ratio: {ratio:.2f}x --version by wall time, {cpu_ratio:.2f}x by CPU time (target < {TARGET}x): "
          f"{verdict(ratio, TARGET, False)}")
    return ratio


if __name__ == "__main__":
    main()
