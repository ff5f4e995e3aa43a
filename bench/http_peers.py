"""What the HTTP benchmarks run: the sample MRTR server (official SDK), mrtr-inspect or plain mitmdump
in front of it, and a lean MRTR client (one keep-alive connection, `tools/call deploy` answered and
retried with the state echoed), so the figures measure the proxies rather than a heavy client.

    with sample_server() as upstream, proxy("mrtr-inspect", upstream) as url:
        seconds = chain(Connection(url), n)
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from _util import PY, ROOT, env_with_project

MITMDUMP = str(Path(PY).with_name("mitmdump"))
WAIT = 60.0

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "deploy"}
ANSWER = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def env(cache: str) -> dict[str, str]:
    """The project's environment, with a cache folder of the benchmark's own (mitmproxy's certificates)."""
    return {**env_with_project(), "XDG_CACHE_HOME": cache}


def _wait_line(stream, pattern: str) -> re.Match:
    """The first line of `stream` that matches (within WAIT seconds); the rest is drained on a thread."""
    rx = re.compile(pattern)
    lines: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        for raw in stream:
            lines.put(raw.decode("utf-8", "replace"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (line := lines.get(timeout=WAIT)) is not None:
        if m := rx.search(line):
            return m
    raise RuntimeError(f"no line matching {pattern!r}")


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(WAIT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


SERVE = """
import logging, socket, sys, uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from mrtr_inspect.samples.server import build_server
logging.getLogger("mcp").setLevel(logging.WARNING)
app = build_server().streamable_http_app(streamable_http_path="/mcp",
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP); sock.bind(("127.0.0.1", 0)); sock.listen(1024)
print("port", sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="error", access_log=False)).run(sockets=[sock])
"""


@contextmanager
def sample_server(cache: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """The sample MRTR server over HTTP in its own process; yields its URL and process."""
    p = subprocess.Popen([PY, "-c", SERVE], cwd=ROOT, env=env(cache), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = _wait_line(p.stdout, r"^port (\d+)").group(1)
        yield f"http://127.0.0.1:{port}/mcp", p
    finally:
        _stop(p)


@contextmanager
def proxy(kind: str, upstream: str, cache: str, *args: str, tree: str | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """`mrtr-inspect` (the embedded proxy, with ARGS; `tree`: the code of another checkout), `mitmdump`
    (plain, reverse mode, its flow dump off: a bare proxy) or `lean` (bench/lean_proxy.py: mitmproxy
    as mrtr-inspect embeds it, without mrtr-inspect) in front of `upstream`."""
    u = urlsplit(upstream)
    if kind == "mrtr-inspect":
        cmd = [PY, "-m", "mrtr_inspect", "--upstream", upstream, "--listen", "127.0.0.1:0", "--quiet", *args]
        rx, out = r"listening on http://127\.0\.0\.1:(\d+)", "stderr"
    elif kind == "lean":
        cmd = [PY, str(ROOT / "bench" / "lean_proxy.py"), f"{u.scheme}://{u.netloc}", f"{cache}/mitmproxy", *args]
        rx, out = r"listening at 127\.0\.0\.1:(\d+)", "stdout"
    else:
        cmd = [MITMDUMP, "--mode", f"reverse:{u.scheme}://{u.netloc}", "--listen-host", "127.0.0.1",
               "--listen-port", "0", "--set", f"confdir={cache}/mitmproxy", "--set", "flow_detail=0", *args]
        rx, out = r"listening at 127\.0\.0\.1:(\d+)", "stdout"
    p = subprocess.Popen(cmd, cwd=tree or ROOT, env={**env(cache), **({"PYTHONPATH": tree} if tree else {})},
                         stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if out == "stdout" else subprocess.DEVNULL,
                         stderr=subprocess.PIPE if out == "stderr" else subprocess.DEVNULL)
    try:
        port = _wait_line(getattr(p, out), rx).group(1)
        yield f"http://127.0.0.1:{port}{u.path}", p
    finally:
        _stop(p)


class Connection:
    """One keep-alive HTTP/1.1 connection doing MRTR chains."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.path = u.path
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=WAIT)
        self.next_id = 1

    def post(self, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        self.next_id += 1
        data = json.dumps(body).encode()  # bytes: one send
        try:
            self.conn.request("POST", self.path, body=data, headers=HEADERS)
            r = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # a keep-alive connection the server closed while idle (uvicorn: after 5 s, which a loaded
            # machine's warm-up of the other paths can take): once more, on a new connection
            self.conn.close()
            self.conn.request("POST", self.path, body=data, headers=HEADERS)
            r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
        return json.loads(data)

    def chain(self) -> None:
        """tools/call deploy → input_required → the retry with the answer and the state → complete."""
        params = {"name": "deploy", "arguments": {"env": "bench"}, "_meta": META}
        irr = self.post(params)["result"]
        assert irr["resultType"] == "input_required", irr
        done = self.post({**params, "inputResponses": ANSWER, "requestState": irr["requestState"]})["result"]
        assert done.get("resultType", "complete") == "complete", done

    def close(self) -> None:
        self.conn.close()


def drive_chains(url: str, chains: int, clients: int) -> None:
    """`chains` chains (two requests each) spread over `clients` connections at once, one thread each."""

    def run() -> None:
        conn = Connection(url)
        for _ in range(chains // clients):
            conn.chain()
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


AGAINST = "mrtr-inspect@before"  # the path of `paths(against=…)`
LIKE_FOR_LIKE = ("--set", "connection_strategy=lazy",)  # as mrtr-inspect's embedded mitmproxy is set


@contextmanager
def paths(cache: str, upstream: str, record: bool = True, against: str | None = None) -> Iterator[dict[str, tuple[str, int]]]:
    """The paths the figures compare, all up at once, as {name: (url, pid)}:

    - `direct`: the sample server itself;
    - `mitmdump`: plain mitmdump in reverse mode (its flow dump off);
    - `mitmdump-like`: mitmdump with the setting mrtr-inspect gives its embedded mitmproxy (upstream
      connections opened on a request, not on a client's connect, so that an upstream that is down
      gets each request a 502), all 34 of mitmdump's addons loaded (the bodies here are small JSON,
      which mrtr-inspect lets mitmproxy take whole too);
    - `mitmproxy-lean`: mitmproxy as mrtr-inspect embeds it (`proxy.reverse_proxy_master`: only the
      addons a reverse proxy uses, lazy upstream connections) without mrtr-inspect's addon and analysis,
      so the difference to mrtr-inspect is mrtr-inspect's own work alone;
    - `mrtr-inspect`: recording and reporting (`--record`, `--report`), no terminal output (`--quiet`);
    - `against` (a checkout's folder, given): `mrtr-inspect` as that tree's code runs it (`AGAINST`),
      to compare a change with the tree before it in one run.
    """
    with ExitStack() as stack:
        out = {"direct": (upstream, -1)}
        for name, kind, args in (("mitmdump", "mitmdump", ()), ("mitmdump-like", "mitmdump", LIKE_FOR_LIKE),
                                 ("mitmproxy-lean", "lean", ()),
                                 ("mrtr-inspect", "mrtr-inspect",
                                  ("--record", f"{cache}/bench.jsonl", "--report", f"{cache}/report.json")
                                  if record else ())):
            url, p = stack.enter_context(proxy(kind, upstream, cache, *args))
            out[name] = (url, p.pid)
        if against is not None:
            url, p = stack.enter_context(proxy("mrtr-inspect", upstream, cache, "--record", f"{cache}/against.jsonl",
                                               "--report", f"{cache}/against.json", tree=against))
            out[AGAINST] = (url, p.pid)
        yield out


def _pids(pid: int) -> list[int]:
    """A process and its descendants (mrtr-inspect's analysis process is its child)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").iterdir():
            todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def process_cpu(pid: int) -> float:
    """CPU time (user + system) used so far by one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its descendants."""
    return sum(map(process_cpu, _pids(pid)))


def settle(pid: int, quiet: float = 0.3, limit: float = 120.0) -> float:
    """Wait until the process and its descendants use no CPU for `quiet` seconds (at most `limit`);
    returns the seconds waited."""
    start = time.monotonic()
    before = cpu_seconds(pid)
    while time.monotonic() < start + limit:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now == before:
            break
        before = now
    return time.monotonic() - start


def rss_mb(pid: int) -> list[float]:
    """Resident memory (VmRSS, MiB) of a process and of each of its descendants now."""
    out = []
    for p in _pids(pid):
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out.append(int(line.split()[1]) / 1024)
    return out


@contextmanager
def cache_folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-") as d:
        yield d
