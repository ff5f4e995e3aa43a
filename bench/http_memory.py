"""Resident memory over 20,000 requests: mrtr-inspect recording and reporting, with plain mitmdump as the
reference, in front of the sample server (official SDK).

Clients run MRTR chains (two requests each) through each proxy; the resident memory of the proxy is
sampled every 1,000 requests (mrtr-inspect: its proxy process and its analysis process apart). The
first sample, after a warm-up, is the baseline.

    python bench/http_memory.py [--requests 20000] [--clients 4]

Target: flat. What the analysis keeps is bounded by design: the stitcher remembers the request states
of the last `remembered_states` closed chains (10,000 by default, to recognise a replayed state), and
the report spools chains and findings in memory up to 8 MiB each, then on disk. So the analysis
process grows until those bounds are reached and stays there; run with --requests 40000 to see it.
"""

from __future__ import annotations

import argparse
import threading

from http_peers import Connection, cache_folder, paths, rss_mb, sample_server

STEP = 1000  # requests between samples
WARMUP = 1000


def drive(url: str, requests: int, clients: int) -> None:
    """`requests` requests (chains of two) spread over `clients` connections at once."""
    per_client = requests // 2 // clients

    def run() -> None:
        conn = Connection(url)
        for _ in range(per_client):
            conn.chain()
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args(argv)
    samples: dict[str, list[list[float]]] = {}
    with cache_folder() as cache, sample_server(cache) as (upstream, _), paths(cache, upstream) as urls:
        for name in ("mitmdump", "mrtr-inspect"):
            url, pid = urls[name]
            drive(url, WARMUP, args.clients)
            samples[name] = [rss_mb(pid)]
            for _ in range(args.requests // STEP):
                drive(url, STEP, args.clients)
                samples[name].append(rss_mb(pid))
    print(f"resident memory over {args.requests} requests ({args.clients} clients), sampled every {STEP}, MiB:")
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
