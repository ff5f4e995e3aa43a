"""Instructions per MRTR chain of a proxy's process, mitmproxy and all, counted by callgrind: the
load-independent figure behind `http_cpu.py`'s proxy process (on a shared machine its CPU per chain
spreads by a third between turns; two runs of these counts 0.01% to 0.2% apart).

Each proxy runs under `valgrind --tool=callgrind` in front of the sample server (the server and
the clients run at full speed); after `--warm` chains its counters are zeroed and after `--chains`
more they are dumped (`callgrind_control`, by the proxy's process id), so neither startup nor
shutdown is counted. mitmproxy-lean (`bench/lean_proxy.py`: mitmproxy as mrtr-inspect embeds it)
is the baseline; mrtr-inspect runs with `--record` and `--report`, its analysis process (forked
under valgrind too) is not counted here. What mrtr-inspect's own work costs the proxy process is the
difference to the lean proxy's figure. Instructions are not time (a system call's kernel side,
cache misses), but they move with the CPU a change saves on the loop.

    python bench/http_instructions.py [--chains 100] [--warm 40] [--clients 2] [--against DIR]

`--against DIR`: also mrtr-inspect as another checkout's code runs it. About a minute and a half per
proxy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import http_peers
from http_peers import PY, ROOT, _stop, _wait_line, cache_folder, drive_chains, env, sample_server


def _totals(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def count(kind: str, upstream: str, cache: str, chains: int, warm: int, clients: int, tree: Path = ROOT) -> float:
    """Instructions per chain of one proxy process (`kind`: lean or mrtr-inspect)."""
    u = urlsplit(upstream)
    with tempfile.TemporaryDirectory() as out:
        vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p"]
        if kind == "lean":
            cmd = vg + [PY, str(tree / "bench" / "lean_proxy.py"), f"{u.scheme}://{u.netloc}", f"{cache}/mitmproxy"]
            rx, stream = r"listening at 127\.0\.0\.1:(\d+)", "stdout"
        else:
            cmd = vg + [PY, "-m", "mrtr_inspect", "--upstream", upstream, "--listen", "127.0.0.1:0", "--quiet",
                        "--record", f"{cache}/{kind}.jsonl", "--report", f"{cache}/{kind}.json"]
            rx, stream = r"listening on http://127\.0\.0\.1:(\d+)", "stderr"
        p = subprocess.Popen(cmd, cwd=tree, env={**env(cache), "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
                             stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL)
        try:
            port = _wait_line(getattr(p, stream), rx).group(1)
            url = f"http://127.0.0.1:{port}{u.path}"
            drive_chains(url, warm, clients)
            subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True, capture_output=True)
            drive_chains(url, chains, clients)
            time.sleep(1.0)
            subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True, capture_output=True)
            dump = Path(out) / f"cg.{p.pid}.1"
            for _ in range(100):
                if dump.exists() and "totals:" in dump.read_text(errors="replace"):
                    break
                time.sleep(0.2)
            return _totals(dump) / chains
        finally:
            _stop(p)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--warm", type=int, default=40)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--against", help="another checkout: its mrtr-inspect counted too")
    args = ap.parse_args(argv)
    http_peers.WAIT = 600.0  # startup under valgrind
    out: dict[str, float] = {}
    with cache_folder() as cache, sample_server(cache) as (upstream, _):
        out["mitmproxy-lean"] = count("lean", upstream, cache, args.chains, args.warm, args.clients)
        out["mrtr-inspect"] = count("mrtr-inspect", upstream, cache, args.chains, args.warm, args.clients)
        if args.against:
            out["mrtr-inspect@before"] = count("against", upstream, cache, args.chains, args.warm, args.clients,
                                               Path(args.against).resolve())
    print(f"the proxy process, instructions per MRTR chain (callgrind; {args.chains} chains from {args.clients} "
          f"clients after {args.warm}; load {os.getloadavg()[0]:.1f}):")
    lean = out["mitmproxy-lean"]
    for name, n in out.items():
        extra = "" if name == "mitmproxy-lean" else f"   (+{(n - lean) / 1000:,.1f}k over mitmproxy-lean, {n / lean:.3f}x)"
        print(f"  {name:<20} {n / 1000:9,.1f}k{extra}")
    return out


if __name__ == "__main__":
    main()
