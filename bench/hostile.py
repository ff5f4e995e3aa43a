"""Hostile input: what a decompression bomb through the proxy and a huge stdio line through the tee cost.

* bomb: a scripted upstream answers every POST with a zstd body of a few KiB that decodes to 1 GiB
  (`--bomb-mib`). The client's time for the whole response, straight to the upstream and through
  `mrtr-inspect --upstream` (median of `--requests`), the peak resident memory (VmHWM) of the
  proxy process and of its analysis process, and how much the recording grew.
* huge line: one line of `--line-mib` MiB (500) then a small one, through `mrtr-inspect stdio
  --record … -- cat`, read back on stdout; the peak resident memory of the tee and its analysis
  process (the child `cat` not counted), then `check` and `export --to html` of that recording:
  their peak memory (ru_maxrss) and the page's size.

Peaks are the processes' own high-water marks (/proc/PID/status VmHWM), read every 20 ms until they
exit, so the largest value read is the peak up to the last read.

    python bench/hostile.py [--tree PATH] [--bomb-mib 1024] [--line-mib 500] [--limit-mib N] [--requests 5]
                            [--only bomb|line]

`--limit-mib` runs the huge line with `max_message_bytes` at N MiB (a config file; default: the
tool's default, 64 MiB).

`--tree` runs another checkout's mrtr-inspect (the tree before a change) against the same inputs.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _util import PY, ROOT, measure

READY = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)(/\S*)")


def env_for(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.setdefault("MRTR_INSPECT_REDACTION_KEY", "bench")
    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="mrtr-hostile-cache-")
    return env


def hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Peaks:
    """The largest VmHWM read of a process and of its children that run the same command line."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _ours(self) -> list[int]:
        try:
            me = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return []
        out = [self.pid]
        for kid in children(self.pid):
            try:
                if Path(f"/proc/{kid}/cmdline").read_bytes() == me:
                    out.append(kid)
            except OSError:
                pass
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._ours():
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), hwm_mib(pid))
            time.sleep(0.02)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return [self.peaks[p] for p in sorted(self.peaks, key=lambda p: p != self.pid)]


# -- the bomb -------------------------------------------------------------------------------------


def make_bomb(mib: int) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        from backports import zstd  # type: ignore[no-redef]
    c = zstd.ZstdCompressor(level=19)
    zero = b"\0" * (1 << 20)
    out = [c.compress(zero) for _ in range(mib)]
    out.append(c.flush())
    return b"".join(out)


def upstream(body: bytes) -> socketserver.TCPServer:
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: zstd\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while line := self.rfile.readline():
                n = 0
                while (h := self.rfile.readline()) not in (b"\r\n", b""):
                    if h.lower().startswith(b"content-length:"):
                        n = int(h.split(b":")[1])
                self.rfile.read(n)
                self.wfile.write(head + body)
                self.wfile.flush()

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


CALL = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},'
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}')


def timed_posts(port: int, n: int, want: bytes) -> float:
    times = []
    for _ in range(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.perf_counter()
        conn.request("POST", "/mcp", body=CALL, headers={"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream"})
        got = conn.getresponse().read()
        times.append(time.perf_counter() - t0)
        conn.close()
        assert got == want, "the body did not pass unchanged"
    return statistics.median(times)


def plain_mitmdump(port: int, requests: int, body: bytes) -> float:
    """The client's time per response through mitmdump without mrtr-inspect (reverse mode, no flow
    file): what the bomb costs with no tool of ours in the way."""
    from http_peers import proxy

    with tempfile.TemporaryDirectory() as cache:
        with proxy("mitmdump", f"http://127.0.0.1:{port}/mcp", cache) as (url, _):
            return timed_posts(int(url.split(":")[2].split("/")[0]), requests, body)


def bomb(tree: Path, mib: int, requests: int) -> None:
    body = make_bomb(mib)
    up = upstream(body)
    port = up.server_address[1]
    direct = timed_posts(port, requests, body)
    plain = plain_mitmdump(port, requests, body)
    with tempfile.TemporaryDirectory() as d:
        rec = Path(d) / "r.jsonl"
        p = subprocess.Popen([PY, "-m", "mrtr_inspect", "--upstream", f"http://127.0.0.1:{port}/mcp", "--listen",
                              "127.0.0.1:0", "--record", str(rec), "--quiet"], env=env_for(tree), cwd=tree,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        m = READY.search(p.stderr.readline())
        assert m, "the proxy did not start"
        peaks = Peaks(p.pid)
        size0 = rec.stat().st_size
        proxied = timed_posts(int(m.group(1)), requests, body)
        time.sleep(1.0)  # the analysis trails
        grown = rec.stat().st_size - size0
        p.terminate()
        p.wait(600)
        proxy, *analysis = peaks.stop()
    up.shutdown()
    print(f"bomb: {len(body) / 1024:.1f} KiB of zstd that decodes to {mib} MiB, {requests} requests")
    print(f"  client time per response: direct {direct * 1000:.1f} ms, plain mitmdump {plain * 1000:.1f} ms, "
          f"through mrtr-inspect {proxied * 1000:.1f} ms ({proxied / plain:.2f}x plain mitmdump)")
    print(f"  peak memory: proxy {proxy:.0f} MiB, analysis {sum(analysis):.0f} MiB")
    print(f"  recording grew by {grown / 1024:.1f} KiB ({grown / (len(body) * requests):.2f}x the wire bytes)")


# -- the huge line ---------------------------------------------------------------------------------


def huge_line(tree: Path, mib: int, limit_mib: int | None = None) -> None:
    piece = b"x" * (1 << 20)
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"blob":"'
    tail = b'"}}}\n'
    after = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n'
    total = len(head) + mib * len(piece) + len(tail) + len(after)
    with tempfile.TemporaryDirectory() as d:
        rec = Path(d) / "r.jsonl"
        env = env_for(tree)
        conf: list[str] = []
        if limit_mib is not None:
            (Path(d) / "c.toml").write_text(f"max_message_bytes = {limit_mib << 20}\n")
            conf = ["--config", str(Path(d) / "c.toml")]
        p = subprocess.Popen([PY, "-m", "mrtr_inspect", "stdio", *conf, "--record", str(rec), "--quiet", "--", "cat"],
                             env=env, cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        peaks = Peaks(p.pid)
        got = [0]

        def drain() -> None:
            while chunk := p.stdout.read1(1 << 20):
                got[0] += len(chunk)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        t0 = time.perf_counter()
        p.stdin.write(head)
        for _ in range(mib):
            p.stdin.write(piece)
        p.stdin.write(tail + after)
        p.stdin.flush()
        while got[0] < total:
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
        time.sleep(2.0)  # the analysis trails
        p.stdin.close()
        p.wait(600)
        reader.join()
        tee, *analysis = peaks.stop()
        size = rec.stat().st_size
        check = measure([PY, "-m", "mrtr_inspect", "check", *conf, "--format", "json", str(rec)], env=env)
        page = Path(d) / "p.html"
        export = measure([PY, "-m", "mrtr_inspect", "export", *conf, "--to", "html", "--output", str(page), str(rec)], env=env)
        page_size = page.stat().st_size if page.exists() else 0
    limit = f"max_message_bytes {limit_mib} MiB" if limit_mib is not None else "max_message_bytes the default"
    print(f"huge line: one line of {mib} MiB and a small one through the tee (`cat`), {limit}, {seconds:.1f} s to pass")
    print(f"  peak memory: tee {tee:.0f} MiB, analysis {sum(analysis):.0f} MiB, together {tee + sum(analysis):.0f} MiB")
    print(f"  recording: {size / (1 << 20):.0f} MiB ({size / total:.2f}x the line)")
    print(f"  check: peak {check.maxrss_mb:.0f} MiB, {check.seconds:.1f} s, exit {check.code}")
    print(f"  export --to html: peak {export.maxrss_mb:.0f} MiB, {export.seconds:.1f} s, page {page_size / 1024:.0f} KiB")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--bomb-mib", type=int, default=1024)
    ap.add_argument("--line-mib", type=int, default=500)
    ap.add_argument("--limit-mib", type=int, help="max_message_bytes in MiB for the huge line (default: the tool's)")
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--only", choices=["bomb", "line"])
    args = ap.parse_args(argv)
    print(f"tree: {args.tree}")
    if args.only != "line":
        bomb(args.tree.resolve(), args.bomb_mib, args.requests)
    if args.only != "bomb":
        huge_line(args.tree.resolve(), args.line_mib, args.limit_mib)


if __name__ == "__main__":
    sys.exit(main())
