"""The official Python SDK (mcp==2.3.0) server and client over Streamable HTTP, through the proxy.

    SDK client ──httpx2 (tap)──▶ mrtr-inspect --upstream … ──▶ capture middleware ─▶ SDK server
                                    (a real process)             (ASGI, in the server process)

Both ends keep every exchange byte for byte: the client's transport tap (request body sent, response
chunks received with their arrival times) and an ASGI middleware around the server's app (request
body received, response chunks sent with their times). The SDK server seals `requestState` with a
random key per process, so byte identity is proved within one run: what the server sent is what the
client received, both ways, and the recording's payloads are those bytes too. A second client run
straight to the server gives the SSE timing without the proxy.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mrtr_inspect.adapters.offline import analyze
from mrtr_inspect.core.events import HttpBody, HttpRequest, SseEvent
from mrtr_inspect.core.framing import SseDecoder
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.samples import client as sample
from tests.e2e.test_http_proxy import ROOT, WAIT, LineReader, ProxyRun, child_env, frames

TOOLS = ("deploy", "release", "summarize", "workspace", "slow_deploy", "flaky_deploy")
EXPECTED = {  # tool → (rounds, outcome)
    "deploy": (1, "complete"), "release": (3, "complete"), "summarize": (1, "complete"),
    "workspace": (1, "complete"), "slow_deploy": (1, "complete"), "flaky_deploy": (1, "error"),
}
PROGRESS_GAP = 0.05  # the sample slow_deploy sleeps 50 ms between its progress notifications


# -- the server, with its byte capture (runs in its own process) -------------------------------------


class CaptureASGI:
    """Wraps an ASGI app; writes one JSON line per HTTP exchange: the request body as received,
    the status, and each response body chunk as sent, with its time."""

    def __init__(self, app, out) -> None:
        self.app, self.out, self.started = app, out, 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.started += 1  # the order requests came in: an exchange's line is written when it ends
        ex = {"n": self.started, "method": scope["method"], "path": scope["path"], "request": b"", "status": None,
              "chunks": []}

        async def tap_receive():
            m = await receive()
            if m["type"] == "http.request":
                ex["request"] += m.get("body", b"")
            return m

        async def tap_send(m):
            if m["type"] == "http.response.start":
                ex["status"] = m["status"]
            elif m["type"] == "http.response.body" and m.get("body"):
                ex["chunks"].append([time.time(), base64.b64encode(m["body"]).decode()])
            await send(m)

        try:
            await self.app(scope, tap_receive, tap_send)
        finally:
            ex["request"] = base64.b64encode(ex["request"]).decode()
            self.out.write(json.dumps(ex) + "\n")
            self.out.flush()


def serve_sdk(argv: list[str]) -> None:
    """The sample server over HTTP on 127.0.0.1:0 with a byte capture to argv[0]; says `port N`."""
    import socket

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from mrtr_inspect.samples.server import build_server

    app = build_server().streamable_http_app(
        streamable_http_path="/mcp", transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio turns Nagle off
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"port {sock.getsockname()[1]}", flush=True)
    with open(argv[0], "a", encoding="utf-8") as out:
        uvicorn.Server(uvicorn.Config(CaptureASGI(app, out), log_level="error")).run(sockets=[sock])


def start_server(capture) -> tuple[subprocess.Popen, int]:
    cmd = [sys.executable, "-c", "import sys, tests.e2e.test_http_sdk as t; t.serve_sdk(sys.argv[1:])", str(capture)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    m = LineReader(proc.stdout).wait(r"^port (\d+)$")
    assert m is not None, "the SDK server did not start"
    return proc, int(m.group(1))


def server_exchanges(capture) -> list[dict]:
    """The server's exchanges in the order their requests came (the SDK client closes an event stream
    on its answer and sends its next request, which can end first)."""
    out = []
    for line in capture.read_text().splitlines():
        ex = json.loads(line)
        ex["request"] = base64.b64decode(ex["request"])
        ex["chunks"] = [(t, base64.b64decode(b)) for t, b in ex["chunks"]]
        out.append(ex)
    return sorted(out, key=lambda ex: ex["n"])


# -- the client, with its byte tap (runs in the test) ------------------------------------------------


class Tap(httpx2.AsyncBaseTransport):
    """The SDK client's HTTP transport, keeping each exchange as it crossed the wire."""

    def __init__(self, log: list[dict]) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.log = log

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self.inner.handle_async_request(request)
        ex = {"request": body, "status": response.status_code, "chunks": []}
        self.log.append(ex)
        response.stream = _TapStream(response.stream, ex["chunks"])
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TapStream(httpx2.AsyncByteStream):
    def __init__(self, inner, chunks: list) -> None:
        self.inner, self.chunks = inner, chunks

    async def __aiter__(self):
        async for data in self.inner:
            self.chunks.append((time.time(), bytes(data)))
            yield data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run_client(url: str, tools=TOOLS) -> tuple[list[str], list[dict]]:
    log: list[dict] = []
    results = []
    async with httpx2.AsyncClient(transport=Tap(log), timeout=httpx2.Timeout(WAIT, read=WAIT)) as http:
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=sample.on_elicit,
                          sampling_callback=sample.on_sample, list_roots_callback=sample.on_roots) as c:
            for name in tools:
                progress = []

                async def on_progress(p, total, message):
                    progress.append(p)

                try:
                    r = await c.call_tool(name, sample.CALLS[name], progress_callback=on_progress)
                    results.append(f"{name}: {' '.join(x.text for x in r.content)}"
                                   + (f" (progress {progress})" if progress else ""))
                except Exception as e:
                    results.append(f"{name}: error: {e}")
    return results, log


def response_bytes(ex: dict) -> bytes:
    return b"".join(b for _, b in ex["chunks"])


def event_times(chunks: list[tuple[float, bytes]], marker: bytes) -> list[float]:
    """When each SSE event carrying `marker` was complete, from chunks and their arrival times."""
    dec, out = SseDecoder(), []
    for t, data in chunks:
        out += [t for ev in dec.feed(data) if marker in ev]
    return out


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


# -- one run -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def proxied_server(capture, *proxy_args: str):
    """The SDK server, and the proxy in front of it, ready; both stopped after (the proxy by a
    signal, and asked to exit 0)."""
    server, port = start_server(capture)
    proxy = ProxyRun(f"http://127.0.0.1:{port}/mcp", *proxy_args)
    try:
        proxy.ready()
        yield proxy, port
        assert proxy.stop() == 0
        server.send_signal(signal.SIGTERM)
        server.wait(WAIT)
    finally:
        proxy.kill()
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("http-sdk")
    capture, record, rep = tmp / "server.jsonl", tmp / "session.jsonl", tmp / "report.json"
    with proxied_server(capture, "--record", str(record), "--report", str(rep)) as (proxy, port):
        said, client_log = anyio.run(run_client, proxy.url)
        n_proxied = len(client_log)
        _, direct_log = anyio.run(run_client, f"http://127.0.0.1:{port}/mcp", ("slow_deploy",))
    served = server_exchanges(capture)
    return {"said": said, "client": client_log, "direct": direct_log, "server": served[:n_proxied],
            "server_direct": served[n_proxied:], "record": record, "report": json.loads(rep.read_text()),
            "stderr": proxy.err.rest()}


def test_the_client_gets_its_answers_through_the_proxy(run):
    assert run["said"] == [
        "deploy: deployed to production", "release: released 1.0.0 as v1.0.0: first release",
        "summarize: summary: one request, several rounds", "workspace: roots: file:///workspace/project",
        "slow_deploy: deployed to staging (progress [1.0, 2.0, 3.0, 1.0, 2.0, 3.0])",
        "flaky_deploy: error: the deployment of staging failed after the confirmation",
    ]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_chain_is_stitched_with_its_rounds_and_outcome(run, tool):
    chains = [c for c in run["report"]["chains"] if c["target"] == tool]
    assert len(chains) == 1, chains
    c = chains[0]
    assert (c["method"], c["rounds"], c["outcome"]) == ("tools/call", *EXPECTED[tool])
    assert c["link"] == "state" and len(c["requests"]) == c["rounds"] + 1
    assert len(set(map(str, c["requests"]))) == len(c["requests"])  # a new JSON-RPC id for every retry


def test_no_error_finding(run):
    errors = [f for f in run["report"]["findings"] if f["severity"] == "error"]
    assert errors == []
    assert run["report"]["summary"]["chains"] == len(TOOLS)


def test_what_the_server_sent_is_what_the_client_received_both_ways(run):
    client, server = run["client"], run["server"]
    assert len(client) == len(server) > len(TOOLS)
    for c, s in zip(client, server):
        assert c["request"] == s["request"]
        assert c["status"] == s["status"]
        assert response_bytes(c) == response_bytes(s)
    assert any(b'"requestState":"v1.' in response_bytes(s) for s in server)  # sealed states crossed intact


def test_the_recording_keeps_the_same_bytes(run):
    by_x: dict[int, dict] = {}
    for f in frames(run["record"]):
        if type(f) is HttpRequest:
            by_x[f.exchange] = {"request": f.body, "response": b""}
        elif type(f) is HttpBody:
            by_x[f.exchange]["response"] += f.data
        elif type(f) is SseEvent:
            by_x[f.exchange]["response"] += f.raw
    recorded = [by_x[x] for x in sorted(by_x)]
    assert [(r["request"], r["response"]) for r in recorded] == [
        (s["request"], response_bytes(s)) for s in run["server"]]


def test_check_on_the_recording_gives_the_live_analysis(run):
    builder = ReportBuilder([str(run["record"])])
    analyze([str(run["record"])], builder.add)
    again = builder.to_dict()
    builder.close()
    live = run["report"]
    assert again["summary"] == live["summary"]
    assert again["chains"] == live["chains"]
    assert again["findings"] == live["findings"]


def test_sse_events_reach_the_client_spread_out_as_the_server_sent_them(run):
    """The server sends three progress events 50 ms apart; a buffering proxy would deliver them at once,
    at the end. The first event must reach the client before the server sent the last (100 ms of
    slack; the gaps between arrivals are not asserted: a test process late by 25 ms reads two events
    at once through any proxy), and the events about as soon after the server sent them as without
    the proxy (the median, 25 ms of slack; a buffering proxy's is 50 ms). That a proxied event
    arrives while the server still holds the stream open is test_http_proxy's mid-stream test."""
    marker = b"notifications/progress"

    def streams(client_log, server_log):
        return [(event_times(s["chunks"], marker), event_times(c["chunks"], marker))
                for c, s in zip(client_log, server_log) if marker in response_bytes(s)]

    proxied = streams(run["client"], run["server"])
    direct = streams(run["direct"], run["server_direct"])
    assert len(proxied) == len(direct) == 2, "slow_deploy answered without an event stream"
    for sent, got in proxied:
        assert len(sent) == len(got) == 3
        assert got[0] < sent[-1], (gaps(sent), gaps(got))

    def delay(pairs):
        return statistics.median(g - s for sent, got in pairs for s, g in zip(sent, got))

    assert delay(proxied) < delay(direct) + PROGRESS_GAP / 2, (delay(proxied), delay(direct))


def test_the_live_view_showed_the_chains(run):
    err = run["stderr"]
    assert "c2 tools/call release: round 3 input_required, asks notes" in err
    assert "c6 tools/call flaky_deploy  error  1 round" in err
    assert "waiting for input" in err
