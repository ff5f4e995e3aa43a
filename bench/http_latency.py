"""Added latency per MRTR chain: mrtr-inspect against a direct connection and against plain mitmdump.

A chain is `tools/call deploy` → `input_required` → the retry with the answer and the echoed state →
complete: two HTTP exchanges with the sample server (official SDK). The paths (`http_peers.paths`:
direct, plain mitmdump, mitmdump with mrtr-inspect's transport settings, mrtr-inspect recording and
analysing everything) are up side by side and take turns chain by chain, so load from elsewhere on
the machine falls on all alike; each figure is the median over all chains of a path. The CPU time
each proxy spent per chain (its processes, mrtr-inspect's analysis process included) is shown too:
unlike wall time, it does not depend on what else the machine is doing.

    python bench/http_latency.py [--chains 600] [--no-exports] [--against DIR]

`--against DIR`: also mrtr-inspect as another checkout's code runs it (`mrtr-inspect@before`), taking
turns with the others.

Target: mrtr-inspect's chain latency <= 1.05x plain mitmdump's (issue 27; 1.10x before it; shown
against both mitmdumps and the lean proxy), and <= 1.10x with both live exports on (`mrtr+exports`: `--otlp-endpoint` to an OTLP/HTTP receiver that accepts
every batch, and `--metrics`, scraped every second as Prometheus would; docs/observability.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from _util import median, verdict
from http_peers import AGAINST, Connection, cache_folder, cpu_seconds, paths, proxy, sample_server

TARGET = 1.05
TARGET_EXPORTS = 1.10
EXPORTS = "mrtr+exports"


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that accepts every batch (200, an empty ExportTraceServiceResponse)."""

    batches = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).batches += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def exporting(cache: str, upstream: str):
    """mrtr-inspect with both live exports on, a collector taking its spans and a scraper reading its
    metrics every second; yields (url, pid) and a dict that gets the scrape and batch counts."""
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    metrics = f"127.0.0.1:{_free_port()}"
    counts = {"scrapes": 0, "batches": 0}
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            try:
                with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as r:
                    r.read()
                counts["scrapes"] += 1
            except OSError:
                pass

    try:
        with proxy("mrtr-inspect", upstream, cache, "--record", f"{cache}/bench-exports.jsonl",
                   "--report", f"{cache}/report-exports.json",
                   "--otlp-endpoint", f"http://127.0.0.1:{collector.server_address[1]}", "--metrics", metrics) as (url, p):
            threading.Thread(target=scrape, daemon=True).start()
            yield (url, p.pid), counts
    finally:
        stop.set()
        counts["batches"] = _Collector.batches
        collector.shutdown()
        collector.server_close()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=600, help="chains per path")
    ap.add_argument("--no-exports", dest="exports", action="store_false", help="leave out the mrtr+exports path")
    ap.add_argument("--against", help="another checkout: its mrtr-inspect measured in the same turns")
    args = ap.parse_args(argv)
    with contextlib.ExitStack() as stack:
        cache = stack.enter_context(cache_folder())
        upstream, _ = stack.enter_context(sample_server(cache))
        urls = stack.enter_context(paths(cache, upstream, against=args.against))
        counts = None
        if args.exports:
            urls[EXPORTS], counts = stack.enter_context(exporting(cache, upstream))
        conns = {k: Connection(u) for k, (u, _) in urls.items()}
        for c in conns.values():  # warm up: connections, caches, the analysis process
            for _ in range(30):
                c.chain()
        cpu0 = {k: cpu_seconds(pid) for k, (_, pid) in urls.items() if pid > 0}
        times: dict[str, list[float]] = {k: [] for k in conns}
        for _ in range(args.chains):
            for k, c in conns.items():
                t = time.perf_counter()
                c.chain()
                times[k].append(time.perf_counter() - t)
        cpu = {k: (cpu_seconds(urls[k][1]) - c0) / args.chains * 1000 for k, c0 in cpu0.items()}
    ms = {k: median(v) * 1000 for k, v in times.items()}
    print(f"latency per MRTR chain (2 exchanges), median of {args.chains} chains per path, taking turns "
          f"(load {os.getloadavg()[0]:.1f} at the end):")
    for k, v in ms.items():
        extra = f"  +{v - ms['direct']:5.2f} ms over direct   proxy CPU {cpu[k]:5.2f} ms/chain" if k in cpu else ""
        print(f"  {k:<14} {v:6.2f} ms{extra}")
    ratios = {base: ms["mrtr-inspect"] / ms[base] for base in ("mitmdump", "mitmdump-like", "mitmproxy-lean")}
    for base, r in ratios.items():  # the target is against plain mitmdump; the others explain it
        said = f"target <= {TARGET}x: {verdict(r, TARGET, False)}" if base == "mitmdump" else "for comparison"
        print(f"  mrtr-inspect / {base}: {r:.3f}x ({said})")
    if AGAINST in ms:
        for base in ("mitmdump", "mitmproxy-lean", "mrtr-inspect"):
            ratios[f"{AGAINST} / {base}"] = r = ms[AGAINST] / ms[base]
            print(f"  {AGAINST} / {base}: {r:.3f}x (for comparison)")
    if counts is not None:
        ratios[EXPORTS] = r = ms[EXPORTS] / ms["mitmdump"]
        print(f"  {EXPORTS} / mitmdump: {r:.3f}x (target <= {TARGET_EXPORTS}x: {verdict(r, TARGET_EXPORTS, False)}; "
              f"{counts['batches']} OTLP batches accepted, {counts['scrapes']} scrapes of /metrics)")
    return {"ms": ms, "cpu_ms": cpu, "ratios": ratios}


if __name__ == "__main__":
    main()
