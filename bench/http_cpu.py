"""CPU time per MRTR chain, each proxy and each of its processes apart, read from /proc.

Unlike wall time and throughput, CPU time per chain hardly depends on what else the machine does,
so it tells where a proxy's cost goes: mitmproxy's own forwarding, mrtr-inspect's addon on
mitmproxy's event loop, and mrtr-inspect's analysis process (framing, recording, rules, report).
Each path in turn (`http_peers.paths`) gets a warm-up, then `--chains` chains from 4 clients at once,
then is left until idle (so the analysis, which trails the traffic, is counted whole); its processes'
CPU time (user + system) over that, divided by the chains. Medians over `--turns` turns.

    python bench/http_cpu.py [--chains 2000] [--turns 3] [--against DIR]

`--against DIR`: also mrtr-inspect as another checkout's code runs it (`mrtr-inspect@before`), in the
same turns.

No target of its own: it explains http_throughput.py. With 2 cores saturated by the clients, the
server and the proxy, throughput goes as the inverse of all the CPU a chain takes, the proxy's share
included.
"""

from __future__ import annotations

import argparse
import os

from _util import median
from http_peers import _pids, cache_folder, drive_chains, paths, process_cpu, sample_server, settle

CLIENTS = 4


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=2000)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--against", help="another checkout: its mrtr-inspect measured in the same turns")
    args = ap.parse_args(argv)
    chains = args.chains // CLIENTS * CLIENTS
    per: dict[str, list[list[float]]] = {}
    with cache_folder() as cache, sample_server(cache) as (upstream, _), paths(cache, upstream, against=args.against) as urls:
        for _ in range(args.turns):
            for name, (url, pid) in urls.items():
                if pid <= 0:
                    continue
                drive_chains(url, 20 * CLIENTS, CLIENTS)  # warm: connections, caches, the analysis process
                settle(pid)
                procs = _pids(pid)  # the proxy first, then (mrtr-inspect) its analysis process
                before = [process_cpu(p) for p in procs]
                drive_chains(url, chains, CLIENTS)
                settle(pid)
                per.setdefault(name, []).append([(process_cpu(p) - b) / chains * 1000 for p, b in zip(procs, before)])
    print(f"CPU per MRTR chain (ms; {chains} chains from {CLIENTS} clients, median of {args.turns} turns; "
          f"load {os.getloadavg()[0]:.1f}):")
    out = {}
    for name, turns in per.items():
        parts = [median([t[i] for t in turns]) for i in range(len(turns[0]))]
        out[name] = parts
        detail = f"  (proxy {parts[0]:.2f} + analysis {parts[1]:.2f})" if len(parts) > 1 else ""
        print(f"  {name:<19} {sum(parts):5.2f}{detail}   turns: "
              + ", ".join(f"{sum(t):.2f}" for t in turns)
              + ("" if len(parts) < 2 else "; proxy process " + ", ".join(f"{t[0]:.2f}" for t in turns)))
    return out


if __name__ == "__main__":
    main()
