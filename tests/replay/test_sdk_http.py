"""A real session over Streamable HTTP (official SDK client and sample server), replayed to the real
client and verified against fresh real servers.

The committed recording was made by the plugin through the HTTP proxy
(`pytest tests/replay/test_sdk_http.py --mrtr-record-mode=all`). The recorder of
tests/replay/sdk_server.py (an ASGI middleware around the SDK app feeding core.framing.HttpFramer
frames to a RecordingWriter) records fresh sessions without the proxy.
"""

from __future__ import annotations

import dataclasses
import http.client
import sys
import time
from urllib.parse import urlsplit

import pytest

from mrtr_inspect.core.framing import SseDecoder, parse_sse_event
from mrtr_inspect.replay.script import load_script
from mrtr_inspect.replay.serve import BackgroundHttpServer, ServeOptions, ServeSession

from tests.traffic import Traffic

from .conftest import FIXTURES, SAMPLE, cli, save, sdk_server
from .sdk_client import EVERY_CHAIN, EXPECTED, call
from .test_sdk_stdio import RECORDING as STDIO_RECORDING

RECORDING = FIXTURES / "test_sdk_http" / "test_the_client_completes_every_chain.jsonl"
EVERY_LINE = r"(?!)"  # a pattern no line matches: LineWaiter.wait reads to the end of the stream


@pytest.mark.mrtr_replay(transport="http", server=[*SAMPLE, "--http", "--port", "{port}"])
def test_the_client_completes_every_chain(mrtr_replay):
    assert call(mrtr_replay.url, *EVERY_CHAIN) == [EXPECTED[t] for t in EVERY_CHAIN]
    if mrtr_replay.mode == "replay":
        assert mrtr_replay.url.endswith("/mcp")
        s = mrtr_replay.summary()
        assert (s["served"], s["misses"], s["unused"]) == (14, [], [])


def test_verify_passes_against_a_fresh_server(running):
    server = running(sdk_server("--http"))
    r = cli("replay", "verify", str(RECORDING), "--upstream", server.url)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert out.splitlines()[-1] == "14 same, 0 differ, 0 skipped, 0 failed"
    assert out.count("[sent with the live requestState]") == 7


def test_verify_fails_against_a_server_with_a_round_added(running):
    server = running(sdk_server("--http", "--variant", "extra-round"))
    r = cli("replay", "verify", str(RECORDING), "--upstream", server.url)
    out = r.stdout.decode()
    assert r.returncode == 1
    assert ("  differs  tools/call deploy id=3 (#4, chain c1, retry of round 1)  [sent with the live requestState]"
            in out)
    assert "the live server asks for a round the recording does not have (inputRequests: reason)" in out
    assert out.splitlines()[-1] == "13 same, 1 differ, 0 skipped, 0 failed"


def test_a_fresh_recording_replays_through_the_command_line(running, tmp_path):
    """Record a live session (the middleware recorder), serve it with `replay serve --listen`, run
    the client against it, and read the exit summary."""
    rec = tmp_path / "live.jsonl"
    server = running(sdk_server("--http", "--record", str(rec)))
    assert call(server.url, "deploy", "release") == [EXPECTED["deploy"], EXPECTED["release"]]
    server.stop()  # uvicorn re-raises the SIGTERM once shut down: every frame is written by then
    serve = running([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--listen", "127.0.0.1:0", str(rec)], on="stderr")
    assert call(serve.url, "release", "deploy") == [EXPECTED["release"], EXPECTED["deploy"]]
    assert serve.stop() == 0
    assert serve.err.wait(r"replay of .*live\.jsonl: 8 requests served, 0 misses$") is not None


def _post(url: str, body: bytes) -> tuple[float, list[tuple[float, bytes]]]:
    """POST and read the event stream; (time the request went, [(arrival, event)])."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    start = time.monotonic()
    conn.request("POST", u.path, body=body, headers={"content-type": "application/json",
                                                     "accept": "application/json, text/event-stream"})
    resp = conn.getresponse()
    assert resp.getheader("content-type") == "text/event-stream"
    assert resp.getheader("transfer-encoding") == "chunked"  # sent event by event, not as one body
    dec, events = SseDecoder(), []
    while chunk := resp.read1(65536):
        events += [(time.monotonic(), ev) for ev in dec.feed(chunk)]
    conn.close()
    return start, events


@pytest.mark.parametrize("pace", [True, False])
def test_an_event_stream_is_replayed_event_by_event_at_its_pace(pace):
    script = load_script(RECORDING)
    ex = next(e for e in script.exchanges if e.target == "slow_deploy" and e.round == 0)
    recorded = [r.time - ex.time for r in ex.replies]
    assert len(recorded) == 4 and ex.http.stream  # three progress notifications, then input_required
    srv = BackgroundHttpServer(ServeSession(script, ServeOptions(pace=pace), "http"))
    try:
        start, events = _post(srv.start(), ex.request.raw)
    finally:
        srv.stop()
    fields = [parse_sse_event(ev) for _, ev in events]
    assert [f.data.count(b"notifications/progress") for f in fields] == [1, 1, 1, 0]
    assert b'"input_required"' in fields[-1].data
    if pace:
        # no event before its recorded time (the server worked 50 ms between progress reports)
        for (arrived, _), offset in zip(events, recorded):
            assert arrived - start >= offset - 0.005


def test_a_stop_while_start_still_waits_ends_the_server_thread():
    """As when Ctrl-C cuts start() short (probe-client): the stop comes before the server's loop
    may be there to hear it, and the thread still ends."""
    srv = BackgroundHttpServer(ServeSession(load_script(RECORDING), ServeOptions(), "http"))
    try:
        srv.start(timeout=0)
    except RuntimeError:  # not started within 0 s: what a KeyboardInterrupt in its wait leaves
        pass
    srv.stop()
    assert not srv._thread.is_alive()


def test_what_is_not_a_request_gets_no_recorded_answer():
    srv = BackgroundHttpServer(ServeSession(load_script(RECORDING), ServeOptions(), "http"))
    u = urlsplit(srv.start())
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", u.path, headers={"accept": "text/event-stream"})
        get = conn.getresponse()
        assert (get.status, get.getheader("allow"), get.read()) == (405, "POST", b"")
        conn.request("POST", u.path, body=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                     headers={"content-type": "application/json"})
        note = conn.getresponse()
        assert (note.status, note.read()) == (202, b"")
        conn.close()
    finally:
        summary = srv.stop()
    assert (summary["served"], summary["misses"]) == (0, [])


def test_a_stream_the_replay_builds_is_not_reported_as_the_servers(running, tmp_path):
    """A stdio recording served over HTTP: the replay builds the event stream of a reply with
    progress, with `X-Accel-Buffering: no`, so `--fail-on warning` does not fail on the replay's own
    framing (it did: sse-x-accel-buffering)."""
    serve = running([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--listen", "127.0.0.1:0",
                     "--fail-on", "warning", str(STDIO_RECORDING)], on="stderr")
    assert call(serve.url, "slow_deploy") == [EXPECTED["slow_deploy"]]
    assert serve.stop() == 0, serve.err.lines
    assert serve.err.wait(EVERY_LINE) is None  # read to the end
    assert [line for line in serve.err.lines if "replay of" in line] == [
        f"mrtr-inspect: replay of {STDIO_RECORDING}: 4 requests served, 0 misses, 10 recorded requests not asked for"]
    assert not [line for line in serve.err.lines if "sse-x-accel-buffering" in line]


def test_a_recorded_stream_keeps_the_recorded_servers_headers(running, tmp_path):
    """Near miss: a stream the recorded server sent without `X-Accel-Buffering: no` is replayed as
    it was, and the live session reports it (the recorded server's framing, not the replay's)."""
    t = Traffic("http")
    a = t.tool("slow", {})
    t.answer({"jsonrpc": "2.0", "id": a, "result": {"resultType": "complete", "content": []}}, sse=True,
             headers=(("content-type", "text/event-stream"),))
    rec = save(t.frames, tmp_path / "r.jsonl")
    serve = running([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--listen", "127.0.0.1:0",
                     "--fail-on", "warning", str(rec)], on="stderr")
    _, events = _post(serve.url, load_script(rec).exchanges[0].request.raw)
    assert len(events) == 1
    assert serve.stop() == 1
    assert serve.err.wait(EVERY_LINE) is None  # read to the end
    assert [line for line in serve.err.lines if "sse-x-accel-buffering" in line]


@pytest.mark.parametrize("repeats", [False, True])
def test_a_second_client_session_is_told_how_to_be_served(repeats):
    """The real client's second session against a one-session recording: server/discover was served
    already, the client falls back to initialize; both misses say why, and how (near miss: with
    repeats allowed, the second session is served)."""
    srv = BackgroundHttpServer(ServeSession(load_script(RECORDING), ServeOptions(repeats=repeats), "http"))
    url = srv.start()
    try:
        assert call(url, "deploy") == [EXPECTED["deploy"]]
        if repeats:
            assert call(url, "deploy") == [EXPECTED["deploy"]]
        else:
            with pytest.raises(Exception):
                call(url, "deploy")
    finally:
        summary = srv.stop()
    misses = [m["message"] for m in summary["misses"]]
    if repeats:
        assert misses == []
        return
    assert len(misses) == 2
    assert misses[0].startswith("no recorded request matches server/discover; closest: server/discover id=1 (#0); "
                                "it was served already")
    assert "--allow-repeats (allow_repeats=True in the pytest plugin) serves it again" in misses[0]
    assert misses[1].startswith("no recorded request matches initialize; ")
    assert misses[1].endswith("a client falls back to initialize when server/discover fails (see the miss before "
                              "this one)")


def test_a_recording_whose_path_has_a_query_is_served_at_that_url(tmp_path):
    """Issue 25 item 16: the URL `replay serve` gives keeps the recorded query, and a request to it
    matches (the query was cut off the live request and compared with the recorded path, so every
    request missed). Near miss: another query still misses."""
    t = Traffic("http")
    a = t.call("tools/list", {})
    t.frames[-1] = dataclasses.replace(t.frames[-1], path="/mcp?tenant=acme")
    t.result(a, {"tools": []})
    script = load_script(save(t.frames, tmp_path / "query.jsonl"))
    srv = BackgroundHttpServer(ServeSession(script, ServeOptions(repeats=True), "http"))
    url = srv.start()
    u = urlsplit(url)
    try:
        assert url.endswith("/mcp?tenant=acme")
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        body = script.exchanges[0].request.raw
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        conn.request("POST", f"{u.path}?{u.query}", body=body, headers=headers)
        served = conn.getresponse()
        assert served.status == 200 and b'"tools"' in served.read()
        conn.request("POST", f"{u.path}?tenant=other", body=body, headers=headers)
        missed = conn.getresponse()
        assert b"path: recorded" in missed.read()
        conn.close()
    finally:
        summary = srv.stop()
    assert summary["served"] == 1 and len(summary["misses"]) == 1
