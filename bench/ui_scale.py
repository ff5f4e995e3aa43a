"""The terminal view (`mrtr-inspect ui`) over a recording of about 100,000 chains: its memory and
CPU against `check` of the same recording, and how quickly it answers keys while it reads, after
it read, and while a filter is applied (docs/ui.md, "Large recordings").

    python bench/ui_scale.py [--messages 600000] [--keep DIR]

The recording is bench/gen_recording.py's (600,000 messages: about 118,000 chains, 177,000
findings). `check --format json` and the view each run in a process of their own (wait4 gives
each one's peak memory and CPU); the view runs headless under textual's pilot at 200x50, pressing
every 100 ms a message through the app's queue while it reads and while it filters (timed until
handled), then keys once it has read (timed until the list's cursor moved).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, env_with_project, measure  # noqa: E402


def _lat(values: list[float]) -> dict:
    ms = sorted(v * 1000 for v in values)
    return {"keys": len(ms), "median_ms": round(statistics.median(ms), 1) if ms else None,
            "p90_ms": round(ms[int(len(ms) * 0.9)], 1) if ms else None, "max_ms": round(ms[-1], 1) if ms else None}


async def _child(path: str) -> dict:
    from textual import events

    from mrtr_inspect.filter import parse
    from mrtr_inspect.ui.app import InspectApp
    from mrtr_inspect.ui.store import Feeder, Store

    store = Store([path])
    feeder = Feeder(store)
    feeder.open()
    app = InspectApp(store, feeder, parse)
    out: dict = {}
    t0 = time.perf_counter()
    async with app.run_test(size=(200, 50)) as pilot:
        lst = app.query_one("#chains")

        async def key(k: str) -> float:
            """A key posted to the app, timed until the list has handled it (its cursor moved; the
            pilot's own press waits for a screen at rest, which a view that keeps drawing never is)."""
            lst.cursor = 0 if k == "down" else lst.cursor
            before = (lst.cursor, round(lst.scroll_y))
            t = time.perf_counter()
            app.post_message(events.Key(k, None))
            while (lst.cursor, round(lst.scroll_y)) == before and time.perf_counter() - t < 30:
                await asyncio.sleep(0.001)
            return time.perf_counter() - t

        async def lag(_: str) -> float:
            """A message through the app's queue, as a key's goes (a list that is empty or still
            filling may not move its cursor), timed until the app has handled it."""
            done = asyncio.get_running_loop().create_future()
            t = time.perf_counter()
            app.call_later(lambda: done.done() or done.set_result(None))
            await done
            return time.perf_counter() - t

        first = None
        loading: list[float] = []
        while store.status == "reading":
            if first is None and store.count:
                first = time.perf_counter() - t0
            loading.append(await lag("down"))
            await asyncio.sleep(0.1)
        out["first_rows_s"] = round(first or 0.0, 2)
        out["read_s"] = round(time.perf_counter() - t0, 2)
        out["chains"], out["findings"] = store.count, len(store.f_where)
        out["keys_while_reading"] = _lat(loading)
        await pilot.pause(0.3)
        after = [await key(k) for k in ("end", "home", "pagedown", "pagedown", "end", "home", "down", "down")]
        out["keys_after"] = _lat(after)
        app._apply_filter("tool:release rounds>2")
        t = time.perf_counter()
        during: list[float] = []
        while store.filtering is not None:
            during.append(await lag("down"))
            await asyncio.sleep(0.1)
        out["filter_s"] = round(time.perf_counter() - t, 2)
        out["filtered_chains"] = len(store.visible())
        out["keys_while_filtering"] = _lat(during)
        await pilot.press("q")
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=600_000)
    ap.add_argument("--keep", metavar="DIR", help="Keep the recording there (reused when it is there).")
    ap.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child))))
        return
    folder = args.keep or tempfile.mkdtemp(prefix="mrtr-bench-ui-")
    rec = Path(folder) / f"ui-{args.messages}.jsonl"
    if not rec.exists():
        subprocess.run([PY, str(ROOT / "bench" / "gen_recording.py"), str(rec), "--messages", str(args.messages)],
                       check=True, stdout=subprocess.DEVNULL)
    env = env_with_project()
    check = measure([PY, "-m", "mrtr_inspect", "check", str(rec), "--format", "json", "--output", os.devnull,
                     "--fail-on", "never"], env=env)
    with tempfile.TemporaryFile("w+") as out:
        ui = measure([PY, str(ROOT / "bench" / "ui_scale.py"), "--child", str(rec)], stdout=out, env=env)
        out.seek(0)
        figures = json.loads(out.read().strip().splitlines()[-1])
    print(f"recording: {rec.stat().st_size / 2**20:.0f} MiB, {figures['chains']} chains, {figures['findings']} findings")
    print(f"check --format json: {check.maxrss_mb:.0f} MB peak, {check.cpu:.1f} s CPU, {check.seconds:.1f} s")
    print(f"ui (read, keys, filter, quit): {ui.maxrss_mb:.0f} MB peak, {ui.cpu:.1f} s CPU, {ui.seconds:.1f} s")
    print(f"memory ui/check: {ui.maxrss_mb / check.maxrss_mb:.2f}x; CPU ui/check: {ui.cpu / check.cpu:.2f}x")
    print(f"first rows after {figures['first_rows_s']} s; all read after {figures['read_s']} s")
    for what in ("keys_while_reading", "keys_after", "keys_while_filtering"):
        k = figures[what]
        print(f"{what.replace('_', ' ')}: {k['keys']} keys, median {k['median_ms']} ms, p90 {k['p90_ms']} ms, "
              f"max {k['max_ms']} ms")
    print(f"filter 'tool:release rounds>2' over every chain: {figures['filter_s']} s "
          f"({figures['filtered_chains']} chains)")
    if not args.keep:
        rec.unlink()
        os.rmdir(folder)


if __name__ == "__main__":
    main()
