"""Throughput with 8 concurrent clients: mrtr-inspect against plain mitmdump (and the other paths of
`http_peers.paths`).

Eight client processes, each on its own keep-alive connection, run MRTR chains (`tools/call deploy` →
`input_required` → retry → complete) against the sample server (official SDK) for a fixed time, all
at once; the figure is chains per second. The paths take turns, one window each per turn; the ratio
is taken within each turn (runs seconds apart, under the same load) and its median over the turns
is the figure. Each window starts once the path before it is idle (no CPU for 0.3 s), so work
a proxy left over (mrtr-inspect's analysis trailing the traffic) is not done in another's window.

    python bench/http_throughput.py [--turns 9] [--seconds 3] [--clients 8] [--against DIR]

Targets: mrtr-inspect >= 0.9x plain mitmdump; >= 0.85x mitmproxy-lean (issue 27: mrtr-inspect's own
work costs at most 15% of the lean proxy's throughput). `--against DIR`: also mrtr-inspect as another
checkout's code runs it (`mrtr-inspect@before`), in the same turns, with its ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from _util import median, verdict
from http_peers import AGAINST, Connection, cache_folder, paths, sample_server, settle

TARGET = 0.9
TARGET_LEAN = 0.85


def _client(url: str, start, seconds: float, out) -> None:
    conn = Connection(url)
    conn.chain()  # connected and warm before the clock starts
    start.wait()
    n, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.chain()
        n += 1
    conn.close()
    out.put(n)


def chains_per_second(url: str, clients: int, seconds: float) -> float:
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(clients + 1), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(url, start, seconds, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    start.wait()
    t = time.monotonic()
    total = sum(out.get(timeout=seconds + 60) for _ in procs)
    elapsed = time.monotonic() - t
    for p in procs:
        p.join()
    return total / elapsed


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--against", help="another checkout: its mrtr-inspect measured in the same turns")
    args = ap.parse_args(argv)
    with cache_folder() as cache, sample_server(cache) as (upstream, _), \
            paths(cache, upstream, against=args.against) as urls:
        turns: dict[str, list[float]] = {k: [] for k in urls}
        lag: list[float] = []
        for _ in range(args.turns):
            for k, (url, pid) in urls.items():
                turns[k].append(chains_per_second(url, args.clients, args.seconds))
                # the next window starts once this path is idle: an analysis that trails the traffic
                # finishes on its own time, not on the next path's
                waited = settle(pid) if pid > 0 else 0.0
                if k == "mrtr-inspect":
                    lag.append(waited)
    load = os.getloadavg()  # when the turns ended
    rate = {k: median(v) for k, v in turns.items()}
    print(f"throughput, {args.clients} concurrent clients, median of {args.turns} turns x {args.seconds:g} s "
          f"(load {load[0]:.1f} at the end):")
    for k, v in rate.items():
        print(f"  {k:<19} {v:7.1f} chains/s   turns: {', '.join(f'{x:.1f}' for x in turns[k])}")
    # each turn's ratio compares runs seconds apart, under the same load; the figure is their median
    ratios: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for who in ("mrtr-inspect", AGAINST):
        if who not in turns:
            continue
        for base in ("mitmdump", "mitmdump-like", "mitmproxy-lean"):
            each = [m / b for m, b in zip(turns[who], turns[base])]
            key = base if who == "mrtr-inspect" else f"{who} / {base}"
            ratios[key], spans[key] = median(each), (min(each), max(each))
    print(f"  mrtr-inspect's analysis idle {median(lag):.1f} s after its window ended (median; "
          f"including the {0.3:g} s of quiet that tells)")
    for key, r in ratios.items():  # the targets are against plain mitmdump and the lean proxy; the others explain
        said = ("for comparison" if "/" in key else f"target >= {TARGET}x: {verdict(r, TARGET, True)}" if key == "mitmdump"
                else f"target >= {TARGET_LEAN}x: {verdict(r, TARGET_LEAN, True)}" if key == "mitmproxy-lean"
                else "for comparison")
        who = key if "/" in key else f"mrtr-inspect / {key}"
        print(f"  {who}: {r:.3f}x, median of the turns' ratios, range {spans[key][0]:.3f}-{spans[key][1]:.3f} ({said})")
    return {"rate": rate, "ratios": ratios}


if __name__ == "__main__":
    main()
