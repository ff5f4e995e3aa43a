"""A soak: 100,000 MRTR chains through one proxy (recording and reporting), its resident memory
sampled as they go: flat once what the analysis keeps is bounded (docs/reliability.md).

    python bench/http_soak.py [--chains 100000] [--clients 4] [--every 10000]

Each chain is `tools/call deploy` → `input_required` → the retry with the answer and the state →
complete, against the sample server (official SDK), from `--clients` keep-alive connections at once.
The proxy's two processes (the forwarding one and its analysis process) are sampled every `--every`
chains, once both have gone idle (bench/http_peers.settle: the analysis trails the traffic, and the
frames still waiting for it are not what it keeps). What is bounded: the stitcher remembers the states
of the last `remembered_states` closed chains (10,000 by default), and the report spools chains and
findings to disk past 1 MiB each; so the analysis grows until about 10,000 chains have closed and
then stays flat. At the end the report is read: the chains' outcomes, the findings above info (the
clients count their ids from 1 on one address: one look-alike warning, RULES.md §10.10), and the
recording's size.

Not a test (it takes minutes); its figures go to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

from http_peers import cache_folder, drive_chains, proxy, rss_mb, sample_server, settle


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--every", type=int, default=10_000)
    args = ap.parse_args(argv)
    samples: list[tuple[int, float, list[float]]] = []
    with cache_folder() as cache, sample_server(cache) as (upstream, _):
        rec, rep = Path(cache) / "soak.jsonl", Path(cache) / "report.json"
        with proxy("mrtr-inspect", upstream, cache, "--record", str(rec), "--report", str(rep)) as (url, p):
            start = time.monotonic()
            done = 0
            while done < args.chains:
                step = min(args.every, args.chains - done)
                drive_chains(url, step, args.clients)
                done += step
                settle(p.pid)
                samples.append((done, time.monotonic() - start, rss_mb(p.pid)))
                proc, ana = (samples[-1][2] + [0.0])[:2]
                print(f"  {done:>7} chains  {samples[-1][1]:7.0f} s   proxy {proc:6.1f} MiB   analysis {ana:6.1f} MiB",
                      flush=True)
            p.send_signal(signal.SIGTERM)
            p.wait(300)
        report = json.loads(rep.read_text())
        size = os.path.getsize(rec)
    chains = report["chains"]
    outcomes = {}
    for c in chains:
        outcomes[(c["outcome"], c["rounds"])] = outcomes.get((c["outcome"], c["rounds"]), 0) + 1
    above_info: dict[str, int] = {}
    for f in report["findings"]:
        if f["severity"] != "info":
            key = f"{f['rule']} ({f['severity']})"
            above_info[key] = above_info.get(key, 0) + 1
    out = {"samples": [{"chains": n, "seconds": round(t, 1), "proxy_mb": round(m[0], 1),
                        "analysis_mb": round(m[1], 1) if len(m) > 1 else None} for n, t, m in samples],
           "chains_reported": len(chains), "outcomes": {f"{o}/{r}": k for (o, r), k in outcomes.items()},
           "findings_above_info": above_info, "recording_mb": round(size / 2**20, 1)}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
