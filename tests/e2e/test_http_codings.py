"""Compressed traffic through the proxy, from a real server (uvicorn, tests/e2e/compressing_server.py)
answering in each content coding: gzip, deflate, br and zstd, a JSON body and an event stream
compressed event by event, the requests compressed alike. The client gets the server's bytes
unchanged; the recording holds the bodies decoded, with their note; the chains and findings are
those of the same traffic uncompressed."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from mitmproxy.net import encoding

from mrtr_inspect.core.events import HttpBody, HttpRequest, SseEvent
from tests.e2e.servers import command
from tests.e2e.test_http_proxy import WAIT, ProxyRun, frames
from tests.replay.conftest import Running

CODINGS = ["gzip", "deflate", "br", "zstd"]
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "codings", "version": "1.0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


@pytest.fixture(scope="module")
def server():
    s = Running(command("tests.e2e.compressing_server"))
    yield s
    s.stop()


def _post(port: int, path: str, msg: dict, coding: str) -> tuple[dict[str, str], bytes]:
    body = json.dumps(msg).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Accept-Encoding": coding, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "deploy"}
    if coding != "identity":
        body = encoding.encode(body, coding)
        headers["Content-Encoding"] = coding
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _chain(port: int, coding: str, sse: bool, first: int) -> list[bytes]:
    """A tools/call answered `input_required`, then its retry: the bodies as the client got them, decoded."""
    path = "/mcp?sse=1" if sse else "/mcp"
    call = {"name": "deploy", "arguments": {"env": "prod"}, "_meta": META}
    out = []
    for msg in ({"jsonrpc": "2.0", "id": first, "method": "tools/call", "params": call},
                {"jsonrpc": "2.0", "id": first + 1, "method": "tools/call", "params": {
                    **call, "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
                    "requestState": "st-1"}}):
        head, wire = _post(port, path, msg, coding)
        assert head.get("content-encoding", "identity") == coding  # passed on as the server said it
        out.append(encoding.decode(wire, coding) if coding != "identity" else wire)
    return out


def _run(server, tmp_path: Path, coding: str) -> tuple[dict, list, list[bytes]]:
    rec, rep = tmp_path / f"{coding}.jsonl", tmp_path / f"{coding}.json"
    p = ProxyRun(server.url, "--record", str(rec), "--report", str(rep), "--quiet").ready()
    try:
        got = _chain(p.port, coding, sse=False, first=1) + _chain(p.port, coding, sse=True, first=3)
        assert p.stop() == 0
    finally:
        p.kill()
    return json.loads(rep.read_text()), frames(rec), got


def _judged(report: dict) -> tuple:
    """What the analysis made of the traffic, without times."""
    chains = [(c["method"], c["target"], c["rounds"], c["requests"], c["outcome"], c["link"]) for c in report["chains"]]
    findings = [(f["rule"], f["severity"], f["messages"]) for f in report["findings"]]
    return report["summary"], chains, findings


@pytest.fixture(scope="module")
def identity(server, tmp_path_factory):
    return _run(server, tmp_path_factory.mktemp("identity"), "identity")


@pytest.mark.parametrize("coding", CODINGS)
def test_each_coding_is_decoded_and_analysed_as_the_same_traffic_uncompressed(server, identity, tmp_path, coding):
    plain_report, plain_frames, plain_got = identity
    report, fs, got = _run(server, tmp_path, coding)
    assert got == plain_got  # the client decoded what the server sent: the proxy passed it unchanged
    assert [c["outcome"] for c in report["chains"]] == ["complete", "complete"]
    assert _judged(report) == _judged(plain_report)
    note = f"decoded from content-encoding {coding}"
    reqs = [f for f in fs if type(f) is HttpRequest]
    assert [f.body_note for f in reqs] == [note] * 4
    assert [f.body for f in reqs] == [f.body for f in plain_frames if type(f) is HttpRequest]
    bodies = [f for f in fs if type(f) is HttpBody]
    assert [(f.data, f.body_note) for f in bodies] == [(b, note) for b in got[:2]]
    events = [f.raw for f in fs if type(f) is SseEvent]
    assert events == [f.raw for f in plain_frames if type(f) is SseEvent] and len(events) == 4
