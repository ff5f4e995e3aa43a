"""Faults injected on purpose (`replay serve --fault`, faults.py): parsed, picked (on a chosen
request, or at random from a seed, reproducibly) and carried out over stdio and HTTP."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mrtr_inspect.core.events import HttpEnd
from mrtr_inspect.core.messages import decode_message
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.faults import Fault, FaultPicker, parse_fault
from mrtr_inspect.replay.script import load_script
from mrtr_inspect.replay.serve import BackgroundHttpServer, ServeOptions, ServeSession

ROOT = Path(__file__).resolve().parents[2]
STDIO_REC = ROOT / "fixtures/test_sdk_stdio/test_the_client_completes_every_chain.jsonl"
HTTP_REC = ROOT / "fixtures/test_sdk_http/test_the_client_completes_every_chain.jsonl"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


def req(rid: int, method: str, **params) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}).encode()


DISCOVER = req(1, "server/discover")
DEPLOY = req(2, "tools/call", name="deploy", arguments={"env": "production"})


def test_parse_fault():
    assert parse_fault("delay") == Fault("delay")
    assert parse_fault("delay:2.5@tools/call:deploy") == Fault("delay", seconds=2.5, which="tools/call:deploy")
    assert parse_fault("error:-32000@3") == Fault("error", code=-32000, which="3")
    assert parse_fault("ERROR") == Fault("error", code=-32603)
    assert parse_fault("malformed@chain").which == "chain"
    for bad, why in [("boom", "the kind is one of"), ("delay:x", "number of seconds"), ("error:x", "an integer"),
                     ("disconnect:1", "takes no argument"), ("error@deploy", "@WHICH is")]:
        with pytest.raises(ValueError, match=why):
            parse_fault(bad)


def test_a_fault_fires_once_on_the_request_it_picks():
    picker = FaultPicker([parse_fault("error@tools/call:release"), parse_fault("malformed")])
    d, dep, rel = decode_message(DISCOVER), decode_message(DEPLOY), decode_message(req(3, "tools/call", name="release"))
    assert picker.pick(d) is None  # the handshake is never faulted by default
    assert picker.pick(dep).kind == "malformed"
    assert picker.pick(dep) is None  # once
    assert picker.pick(rel).kind == "error"
    assert picker.pick(rel) is None
    assert FaultPicker([parse_fault("delay@2")]).pick(d) is None
    nth = FaultPicker([parse_fault("delay@2")])
    nth.pick(d)
    assert nth.pick(dep).kind == "delay"


def test_faults_at_random_are_the_same_for_the_same_seed():
    def picks(seed: int) -> list:
        p = FaultPicker([parse_fault("error"), parse_fault("delay:1")], seed=seed, rate=0.5)
        return [getattr(p.pick(decode_message(DEPLOY)), "kind", None) for _ in range(40)]

    assert picks(7) == picks(7)
    assert picks(7) != picks(8)
    assert {"error", "delay", None} == set(picks(7))


def serve_stdio(fault: str, lines: list[bytes]) -> tuple[list[bytes], str]:
    p = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", "--quiet",
                          "--fault", fault, str(STDIO_REC)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    got = []
    for line in lines:
        p.stdin.write(line + b"\n")
        p.stdin.flush()
        got.append(p.stdout.readline())
    p.stdin.close()
    err = p.stderr.read().decode()
    assert p.wait(30) == 0
    return got, err


def test_stdio_error_malformed_disconnect_delay():
    got, err = serve_stdio("error:-32050@tools/call", [DISCOVER, DEPLOY])
    assert json.loads(got[1])["error"]["code"] == -32050
    assert "fault: error:-32050@tools/call on tools/call deploy" in err
    got, _ = serve_stdio("malformed", [DISCOVER, DEPLOY])
    assert got[1].startswith(b'{"jsonrpc":"2.0","id":2') and got[1].endswith(b"\n")
    with pytest.raises(ValueError):
        json.loads(got[1])
    got, _ = serve_stdio("disconnect", [DISCOVER, DEPLOY])
    assert got == [got[0], b""]  # stdout closed: the client reads its end
    got, _ = serve_stdio("delay:0.2", [DISCOVER, DEPLOY])
    assert json.loads(got[1])["result"]["resultType"] == "input_required"  # late, but sent


def post(url: str, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    u = urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request("POST", u.path, body, {"content-type": "application/json",
                                          "accept": "application/json, text/event-stream"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def ends_of(rec: Path) -> list:
    return [f.error for f in read_frames(rec) if type(f) is HttpEnd] if rec.exists() else []


def test_http_delay_disconnect_and_a_client_that_gives_up(tmp_path):
    rec = tmp_path / "live.jsonl"
    options = ServeOptions(faults=(parse_fault("disconnect@tools/call"), parse_fault("delay@3")))
    server = BackgroundHttpServer(ServeSession(load_script(HTTP_REC), options, "http", record=str(rec)))
    url = server.start()
    try:
        assert post(url, DISCOVER)[0] == 200
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            post(url, DEPLOY)
        with pytest.raises(TimeoutError):  # held back for ever: the client gives up, closing its side
            post(url, req(3, "tools/call", name="release", arguments={"version": "1.0.0"}), timeout=0.5)
        deadline = time.monotonic() + 20
        while len(ends_of(rec)) < 3 and time.monotonic() < deadline:  # the server sees the client go
            time.sleep(0.05)
    finally:
        summary = server.stop()
    assert [f["fault"] for f in summary["faults"]] == ["disconnect@tools/call", "delay@3"]
    ends = ends_of(rec)
    assert ends[1].startswith("upstream-error: ") and ends[2] == "client-disconnected"


def test_pace_recorded_is_pace(tmp_path):
    from click.testing import CliRunner

    from mrtr_inspect.cli import main

    r = CliRunner().invoke(main, ["replay", "serve", "--pace", "recorded", "--fault", "bogus", str(STDIO_REC)])
    assert r.exit_code == 2 and "--fault: fault 'bogus'" in r.output
    r = CliRunner().invoke(main, ["replay", "serve", "--pace", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "missing.jsonl" in r.output  # --pace PATH still reads PATH as the recording
