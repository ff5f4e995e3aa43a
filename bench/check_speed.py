"""`check` against the parse floor, and its peak memory (targets: <= 3x the floor, < 200 MB).

On a generated recording of N messages (bench/gen_recording.py: SDK-shaped stdio sessions, tools/call
chains of 1 to 3 rounds with elicitation, sampling and roots), two programs run, alternated, REPEAT
times each, each in a fresh process timed from start to exit:

  floor:  bare `json.loads` of every message payload (the bytes after the TAB of each line record)
  check:  `mrtr-inspect check REC --format json --output /dev/null --fail-on never`

The ratio is median(check) / median(floor), by wall time (the target) and by CPU time (user +
system, steadier when other work shares the machine). Peak memory is the check process' own
ru_maxrss (from wait4), the largest over the runs; the floor's is shown for comparison.

    python bench/check_speed.py [--messages 1000000] [--repeat 3] [--recording PATH (kept; made if absent)]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from _util import PY, measure, median, verdict
from gen_recording import generate

TARGET = 3.0
MEMORY_MB = 200


def floor(path: str) -> None:
    """The parse floor: read the recording, json.loads every payload, nothing else."""
    loads = json.loads
    with open(path, "rb") as f:
        for line in f:
            head, sep, payload = line.partition(b"\t")
            if sep:
                loads(payload)


def n_messages(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if b"\t" in line)


def main() -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--recording", help="use this recording (generated there first if absent) and keep it")
    ap.add_argument("--floor", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor:
        floor(args.floor)
        return 0.0
    with tempfile.TemporaryDirectory() as tmp:
        path = args.recording or os.path.join(tmp, "bench.jsonl")
        if not os.path.exists(path):
            t0 = time.perf_counter()
            n = generate(path, args.messages)
            print(f"generated {path}: {n:,} messages, {os.path.getsize(path) / 1e6:.0f} MB "
                  f"in {time.perf_counter() - t0:.1f} s")
        floors, checks = [], []
        for _ in range(args.repeat):
            floors.append(measure([PY, __file__, "--floor", path]))
            checks.append(measure([PY, "-m", "mrtr_inspect", "check", path, "--format", "json", "--output", os.devnull,
                                   "--fail-on", "never"]))
        count = n_messages(path)
        for r in floors + checks:
            if r.code != 0:
                sys.exit(f"a run failed with exit status {r.code}")
    f, c = median(r.seconds for r in floors), median(r.seconds for r in checks)
    fc, cc = median(r.cpu for r in floors), median(r.cpu for r in checks)
    peak = max(r.maxrss_mb for r in checks)
    ratio = c / f
    print(f"check speed, {count:,} messages, {args.repeat} run(s) each, medians (wall / CPU):")
    for name, runs, w, cpu in (("floor (json.loads of each payload)", floors, f, fc), ("check --format json", checks, c, cc)):
        print(f"  {name + ':':36s}{w:.2f} s / {cpu:.2f} s   peak {max(r.maxrss_mb for r in runs):.0f} MB   runs: "
              + ", ".join(f"{r.seconds:.2f}/{r.cpu:.2f}" for r in runs))
    print(f"  ratio: {ratio:.1f}x the parse floor by wall time, {cc / fc:.1f}x by CPU time (target <= {TARGET}x): "
          f"{verdict(ratio, TARGET, False)}")
    print(f"  check peak memory: {peak:.0f} MB (target < {MEMORY_MB} MB): {verdict(-peak, -MEMORY_MB, True)}")
    return ratio


if __name__ == "__main__":
    main()
