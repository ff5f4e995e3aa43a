"""CPU time of mrtr-inspect's own work in the proxy process, per MRTR chain, in-process: what the
embedded proxy's addons (`HostGuard`, `MrtrInspect`) and the recorder do on mitmproxy's event loop,
with mitmproxy itself, the sockets and the analysis process left out.

A chain is the two exchanges `bench/http_peers.py` drives (`tools/call deploy` → `input_required`,
the retry → complete), as mitmproxy hands them to the addons: real `HTTPFlow`s with the same headers
and bodies, the hooks called in mitmproxy's order (requestheaders, request, responseheaders,
response), each step framed, redacted and appended to a recording (a temporary file, as with
`--record`), `proxy.AnalysisProcess` with its analysis following the recording, as with `--record`
(a step's write hands nothing over; a tree before that: the records batched for it, its spooler
replaced by one that drops them: the hand-off to the analysis process is not counted here).
The figure is the main thread's CPU time (`time.process_time` less the other threads': none here)
divided by the chains, the median of `--turns` turns.

    python bench/proxy_hooks.py [--chains 4000] [--turns 7] [--against DIR] [--instructions]

`--against DIR` measures another checkout (its `mrtr_inspect` first on the path) in turns
alternated with this one, each turn a process of its own, and prints both and their ratio.
`--instructions` counts instructions instead (callgrind, as bench/instructions.py: the same count
for the same code whatever the machine does): a run of 3 x `--chains` chains less a run of
`--chains`, divided by the 2 x `--chains` chains between them. No target of its own: it explains
`http_cpu.py`'s proxy process figure (mrtr-inspect's less mitmproxy-lean's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from _util import alternated_turns, instructions_per, show_counts, show_turns

ROOT = Path(__file__).resolve().parent.parent

_ANSWER = (b'{"jsonrpc":"2.0","id":%d,"result":{"inputRequests":{"confirm":{"method":"elicitation/create",'
           b'"params":{"message":"Deploy to bench?","mode":"form","requestedSchema":{"properties":{"confirm":'
           b'{"type":"boolean"}},"required":["confirm"],"type":"object"}}}},"requestState":"v1.' + b"x" * 300
           + b'","resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sample",'
           b'"version":"1"}}}}')
_DONE = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"deployed to bench"}],"isError":false}}'


def _turn(chains: int) -> float:
    """One turn in this process: CPU seconds per chain."""
    from mitmproxy import http
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.test import tflow

    from mrtr_inspect.adapters import proxy
    from mrtr_inspect.adapters.host_guard import HostGuard
    from mrtr_inspect.adapters.mitm_addon import MrtrInspect
    from mrtr_inspect.adapters.recorder import HttpRecorder
    from mrtr_inspect.config import Config
    from mrtr_inspect.recording.writer import RecordingWriter, redactor_for

    class Spool:  # the spooler's counters; the records dropped
        queued = written = 0

        def put(self, kind, t, data=b""):
            self.queued += len(data)
            self.written = self.queued

        def follow(self, fd):
            pass

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    headers = [(b"Host", b"127.0.0.1:8788"), (b"Accept-Encoding", b"identity"), (b"Content-Type", b"application/json"),
               (b"Accept", b"application/json, text/event-stream"), (b"MCP-Protocol-Version", b"2026-07-28"),
               (b"Mcp-Method", b"tools/call"), (b"Mcp-Name", b"deploy")]
    mode = ProxyMode.parse("reverse:http://127.0.0.1:3000")

    def flow(body: bytes, answer: bytes) -> tuple[http.HTTPFlow, http.Response]:
        f = tflow.tflow()
        f.client_conn.proxy_mode = mode
        f.client_conn.sockname = ("127.0.0.1", 8788)
        f.client_conn.peername = ("127.0.0.1", 40000)
        f.server_conn.address = ("127.0.0.1", 3000)
        f.response = None
        f.metadata.clear()
        req = f.request
        req.method, req.path = "POST", "/mcp"
        req.headers = http.Headers(headers + [(b"Content-Length", str(len(body)).encode())])
        req.raw_content = body
        resp = http.Response.make(200, answer, {"content-type": "application/json", "date": "Sat, 05 Dec 2026 15:42:47 GMT",
                                                "server": "uvicorn"})
        return f, resp

    with tempfile.TemporaryDirectory() as tmp:
        config = Config()
        writer = RecordingWriter(str(Path(tmp) / "r.jsonl"), "http", {}, redactor_for(config))
        spool = Spool()
        proxy.fork_analysis = lambda make: (0, spool)
        recorder = HttpRecorder(writer.session, writer.redactor, writer, limit=config.max_message_bytes)
        try:  # the analysis follows the recording, as with `--record`
            analysis = proxy.AnalysisProcess(None, recorder, config.max_backlog_bytes, follow=True)
        except TypeError:  # a tree before that
            analysis = proxy.AnalysisProcess(None, recorder, config.max_backlog_bytes)
        guard = HostGuard((), lambda line: None)
        guard.rewrite = True
        addon = MrtrInspect(config, analysis=analysis, guard=guard)  # the guard runs from the addon's hooks, as embedded
        params = {"name": "deploy", "arguments": {"env": "bench"}, "_meta": meta}
        first = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
        retry = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            **params, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
            "requestState": "v1." + "x" * 300}}).encode()
        # the chain's two flows, used again for every chain (what the hooks change put back: the
        # request's headers, whose Host the guard rewrites, the response, the metadata), so that
        # the count is the hooks' work and not the making of flows
        flows = [(f, resp, f.request.headers.fields) for f, resp in (flow(first, _ANSWER % 1), flow(retry, _DONE % 2))]

        async def run() -> float:
            t0 = time.process_time()
            for n in range(chains):
                for f, resp, head in flows:
                    f.metadata.clear()
                    f.response = None
                    f.request.headers = http.Headers(head)
                    addon.requestheaders(f)
                    addon.request(f)
                    f.response = resp
                    addon.responseheaders(f)
                    addon.response(f)
                if n % 8 == 7:
                    await asyncio.sleep(0)  # the batches flushed as the loop turns (FLUSH_AFTER)
            analysis._flush()
            return time.process_time() - t0

        cpu = asyncio.run(run())
        writer.close()
    return cpu / chains


def _instructions(trees: dict[str, Path], chains: int) -> dict:
    per = instructions_per(trees, "proxy_hooks", [], "--chains", chains)
    print(f"mrtr-inspect's work in the proxy process, instructions per MRTR chain (callgrind; {3 * chains} "
          f"chains less {chains}):")
    show_counts(per)
    return per


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4000)
    ap.add_argument("--turns", type=int, default=7)
    ap.add_argument("--against", help="another checkout, measured in turns alternated with this one")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a turn of this process' tree
    ap.add_argument("--instructions", action="store_true", help="count instructions (callgrind) instead of CPU time")
    args = ap.parse_args(argv)
    if args.one:
        print(_turn(args.chains))
        return {}
    trees = {"this tree": ROOT} | ({"against": Path(args.against).resolve()} if args.against else {})
    if args.instructions:
        return _instructions(trees, args.chains)
    per = alternated_turns(Path(__file__).resolve(), ["--chains", str(args.chains)], trees, args.turns)
    print(f"mrtr-inspect's work in the proxy process, CPU per MRTR chain (µs; {args.chains} chains, "
          f"median of {args.turns} turns; load {os.getloadavg()[0]:.1f}):")
    return show_turns(per)


if __name__ == "__main__":
    main()
