"""Where the time of `check` goes: each stage of the pipeline against the parse floor, in one process.

On a recording (bench/gen_recording.py makes one), CPU time (time.process_time) of cumulative
stages, each run REPEAT times alternated with the floor, the best run of each taken:

  floor    read the recording, json.loads of every payload (bench/check_speed.py's floor)
  read     the recording reader (recording/reader.py), frames or line tuples, nothing else
  decode   read + decode_message of every payload (strict parse, classification)
  core     read + the whole inspector with every rule disabled (pairing, eras, stitching, dispatch)
  rules    read + the inspector with the full catalog
  items    rules + the report's items made (`ReportBuilder.add_all`: the chain summaries, the
           findings' dicts), not serialised
  check    what `check --format json` does: rules + the JSON report, written to /dev/null (the
           step over `items`: serialising the items, spooling them, writing the report)

    python bench/check_stages.py REC [--repeat 5] [--stages read,decode,core,rules,items,check]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

# this checkout first, unless the caller put one on the path (instructions.py --tree/--against sets
# PYTHONPATH to the tree it counts: this file's own checkout first would count it instead)
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from check_speed import floor as parse_floor  # noqa: E402

from mrtr_inspect.adapters.offline import analyze_all  # noqa: E402
from mrtr_inspect.config import Config  # noqa: E402
from mrtr_inspect.core.messages import decode_message  # noqa: E402
from mrtr_inspect.outputs.report import ReportBuilder  # noqa: E402
from mrtr_inspect.recording.reader import read_frames  # noqa: E402
from mrtr_inspect.rules import load_rules  # noqa: E402
from mrtr_inspect.rules.registry import REGISTRY  # noqa: E402


# the stages from `core` on analyse as `check` does (`api.analysed`): only `closed` chain events, the one
# kind a report reads (a tree from before the option is counted without it)
_REPORT = {"chain_events": False} if "chain_events" in inspect.signature(analyze_all).parameters else {}


def stages(path: str) -> dict:
    def floor() -> None:
        parse_floor(path)

    def read() -> None:
        for _ in read_frames(path, lines_as_tuples=True):
            pass

    def decode() -> None:
        for item in read_frames(path, lines_as_tuples=True):
            if type(item) is tuple:
                decode_message(item[3])

    def core() -> None:
        analyze_all([path], lambda outs: None, Config(disabled=set(REGISTRY)), **_REPORT)

    def rules() -> None:
        analyze_all([path], lambda outs: None, Config(), **_REPORT)

    def items() -> None:
        b = ReportBuilder([path])
        b._chains.add = b._findings.add = lambda obj: None  # the item made, not serialised
        analyze_all([path], b.add_all, Config(), **_REPORT)
        b.close()

    def check() -> None:
        b = ReportBuilder([path])
        analyze_all([path], b.add_all, Config(), **_REPORT)
        with open(os.devnull, "w", encoding="utf-8") as out:
            b.write_json(out)
        b.close()

    return {"floor": floor, "read": read, "decode": decode, "core": core, "rules": rules, "items": items,
            "check": check}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stages", default="read,decode,core,rules,items,check")
    args = ap.parse_args()
    load_rules()
    all_stages = stages(args.recording)
    chosen = ["floor"] + [s for s in args.stages.split(",") if s != "floor"]
    for name in chosen:  # warm up: imports, caches
        all_stages[name]()
    best = {name: float("inf") for name in chosen}
    for _ in range(args.repeat):
        for name in chosen:
            t0 = time.process_time()
            all_stages[name]()
            best[name] = min(best[name], time.process_time() - t0)
    f = best["floor"]
    print(f"{args.recording}: CPU time, best of {args.repeat}")
    prev = None
    for name in chosen:
        step = f" (+{(best[name] - best[prev]) / f:.2f}x)" if prev not in (None, "floor") else ""
        print(f"  {name:8s} {best[name]:8.3f} s  {best[name] / f:6.2f}x the floor{step}")
        prev = name


if __name__ == "__main__":
    main()
