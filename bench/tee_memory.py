"""The tee's memory at full speed: its processes together (target: under 256 MiB), and what the
live analysis skipped (issue 27: bounded backlogs, said out loud).

A driver writes N requests as fast as the pipe takes them through `mrtr-inspect stdio --record
FILE --report FILE -- echo server` (bench/echo_server.py) and reads the N results back, as
bench/tee_throughput.py does. Every 50 ms the resident memory (VmRSS) of the tee and of its
analysis process (the tee's child running the tee's command line) is read from /proc; printed: the
peak of their sum, each one's peak, how long the tee took to exit after the last result, and the
report's note of what the live analysis skipped (max_backlog_bytes, docs/configuration.md).

    python bench/tee_memory.py [--messages 500000] [--backlog BYTES (max_backlog_bytes; default the default)]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from _util import PY, ROOT, env_with_project
from tee_throughput import request

TARGET_MB = 256


def rss_mb(pid: int) -> float:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def analysis_of(tee: int) -> int | None:
    """The tee's analysis process: its child with the tee's own command line."""
    try:
        me = Path(f"/proc/{tee}/cmdline").read_bytes()
    except OSError:
        return None
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == tee and (d / "cmdline").read_bytes() == me:
                    return int(d.name)
            except (OSError, IndexError, ValueError):
                continue
    return None


def main() -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--backlog", type=int, help="max_backlog_bytes for this run")
    args = ap.parse_args()
    n = args.messages
    with tempfile.TemporaryDirectory() as tmp:
        rec, rep = Path(tmp) / "rec.jsonl", Path(tmp) / "report.json"
        cmd = [PY, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(rec), "--report", str(rep)]
        if args.backlog:
            settings = Path(tmp) / "settings.toml"
            settings.write_text(f"max_backlog_bytes = {args.backlog}\n")
            cmd += ["--config", str(settings)]
        cmd += ["--", PY, str(ROOT / "bench" / "echo_server.py")]
        err = open(Path(tmp) / "stderr.txt", "wb")
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0,
                             env=env_with_project(), cwd=ROOT)
        w, r = p.stdin.fileno(), p.stdout.fileno()
        os.write(w, request(0))
        buf = b""
        while b"\n" not in buf:
            buf += os.read(r, 65536)
        analysis = analysis_of(p.pid)
        peak = {"sum": 0.0, "tee": 0.0, "analysis": 0.0}
        sampling = True

        def sample() -> None:
            while sampling:
                a, b = rss_mb(p.pid), rss_mb(analysis) if analysis else 0.0
                peak["tee"], peak["analysis"] = max(peak["tee"], a), max(peak["analysis"], b)
                peak["sum"] = max(peak["sum"], a + b)
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        lines = b"".join(request(i) for i in range(1, n + 1))
        writer = threading.Thread(target=_write_all, args=(w, lines))
        t0 = time.perf_counter()
        writer.start()
        seen = 0
        while seen < n:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"the tee closed its output after {seen} of {n} results")
            seen += chunk.count(b"\n")
        stream = time.perf_counter() - t0
        writer.join()
        p.stdin.close()
        p.wait()
        trail = time.perf_counter() - t0 - stream
        sampling = False
        sampler.join()
        err.close()
        report = json.loads(rep.read_text())
        notes = [x for x in report.get("notes", []) if "skipped" in x]
    print(f"tee memory, {n} requests + {n} results at full speed, recording and analysis on:")
    print(f"  stream {stream:.2f} s ({2 * n / stream:,.0f} msg/s); the tee exited {trail:.2f} s after the last result")
    print(f"  peak resident memory: tee + analysis {peak['sum']:.0f} MiB (tee {peak['tee']:.0f}, analysis "
          f"{peak['analysis']:.0f}; target < {TARGET_MB} MiB): {'meets' if peak['sum'] < TARGET_MB else 'MISSES'}")
    print(f"  analysed {report['summary']['messages']:,} of {2 * (n + 1):,} messages; "
          + (notes[0] if notes else "the live analysis skipped none"))
    return peak["sum"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:1 << 16]):]


if __name__ == "__main__":
    main()
