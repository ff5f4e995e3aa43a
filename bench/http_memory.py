"""Resident memory over 20,000 requests: mrtr-inspect recording and reporting, with plain mitmdump as the
reference, in front of the sample server (official SDK).

Clients run MRTR chains (two requests each) through each proxy; the resident memory of the proxy is
sampled every 1,000 requests (mrtr-inspect: its proxy process and its analysis process apart). The
first sample, after a warm-up, is the baseline.

    python bench/http_memory.py [--requests 20000] [--clients 4]

Target: flat. What the analysis keeps is bounded by design: the stitcher remembers the request states
of the last `remembered_states` closed chains (10,000 by default, to recognise a replayed state; about
2 KB each with this server), and the report spools chains and findings in memory up to 1 MiB each,
then on disk. So the analysis process grows until 10,000 chains (20,000 requests) have closed and
then stays there; run with --requests 40000 to see it.

Each sample is taken once the processes have gone idle (their CPU time still for 0.3 s): the analysis
trails the traffic, and on a busy machine the frames waiting for it (in its process) would otherwise
be counted as what it keeps. `--no-settle` samples right after each step, as the first version did.
"""

from __future__ import annotations

import argparse

from http_peers import cache_folder, drive_chains, paths, rss_mb, sample_server, settle

STEP = 1000  # requests between samples
WARMUP = 1000


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--no-settle", action="store_true", help="sample right after each step, not once idle")
    args = ap.parse_args(argv)
    samples: dict[str, list[list[float]]] = {}

    def sample(pid: int) -> list[float]:
        if not args.no_settle:
            settle(pid)
        return rss_mb(pid)

    with cache_folder() as cache, sample_server(cache) as (upstream, _), paths(cache, upstream) as urls:
        for name in ("mitmdump", "mrtr-inspect"):
            url, pid = urls[name]
            drive_chains(url, WARMUP // 2, args.clients)
            samples[name] = [sample(pid)]
            for _ in range(args.requests // STEP):
                drive_chains(url, STEP // 2, args.clients)
                samples[name].append(sample(pid))
    when = "right after each step" if args.no_settle else "once idle"
    print(f"resident memory over {args.requests} requests ({args.clients} clients), sampled every {STEP} ({when}), MiB:")
    out = {}
    for name, s in samples.items():
        parts = ("proxy", "analysis")[:len(s[0])] if name == "mrtr-inspect" else ("proxy",)
        for i, part in enumerate(parts):
            series = [x[i] for x in s]
            half = series[len(series) // 2]
            growth = series[-1] - series[0]
            out[f"{name} {part}"] = {"start_mb": series[0], "end_mb": series[-1], "second_half_mb": series[-1] - half}
            print(f"  {name + ' ' + part:<22} {series[0]:6.1f} → {series[-1]:6.1f} ({growth:+.1f}, {growth / series[0] * 100:+.0f} %;"
                  f" second half {series[-1] - half:+.1f})   {' '.join(f'{x:.0f}' for x in series)}")
    return out


if __name__ == "__main__":
    main()
