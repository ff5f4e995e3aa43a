"""`import PATH --output PATH`: HAR files and mitmproxy flow files into recordings.

The end-to-end test puts plain mitmdump (writing a HAR with savehar's `hardump` and a flow file with
`-w`) in front of mrtr-inspect's own proxy, in front of the sample server, and runs the sample client
through both: the two imports must give the chains the proxy recorded of the very same traffic."""

from __future__ import annotations

import base64
import gzip
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy import io as mitm_io
from mitmproxy import tcp
from mitmproxy.test import tflow

from mrtr_inspect.api import analysed
from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SessionStart, SseEvent
from mrtr_inspect.core.observations import Decoded
from mrtr_inspect.recording.reader import read_frames
from tests.e2e.test_http_proxy import WAIT, LineReader, ProxyRun, child_env
from tests.e2e.test_http_sdk import start_server
from tests.outputs.conftest import HTTP_FIXTURE, ROOT, run_cli

MITMDUMP = Path(sys.executable).with_name("mitmdump")
TOOLS = "deploy,release,summarize,workspace,slow_deploy,flaky_deploy"
CHAIN_KEYS = ("id", "method", "target", "rounds", "requests", "outcome", "link")


def checked(path: Path) -> dict:
    r = run_cli("check", path, "--format", "json", "--fail-on", "never")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def chains(rep: dict) -> list[dict]:
    return [{k: c[k] for k in CHAIN_KEYS} for c in rep["chains"]]


def findings(rep: dict, path: Path) -> list[tuple]:
    """The report's findings, each message named by its direction and bytes, not by its place in the
    recording: two hops may see two requests of separate connections in either order (a full run
    numbered a `chain-linked` finding's messages (2, 4) in one and (3, 4) in the other)."""
    names: dict[int, tuple] = {}

    def observe(obs) -> None:
        if isinstance(obs, Decoded):
            names[obs.msg.index] = (obs.msg.direction, bytes(obs.msg.raw))

    analysed([path], observe=observe).close()
    return sorted((f["rule"], f["severity"], tuple(names.get(i, i) for i in f["messages"])) for f in rep["findings"])


def imported(src: Path, out: Path) -> dict:
    r = run_cli("import", src, "--output", out)
    assert r.exit_code == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    return checked(out)


def test_mitmdumps_har_and_flows_give_the_chains_the_proxy_recorded(tmp_path):
    recorded, har, flows = tmp_path / "proxy.jsonl", tmp_path / "dump.har", tmp_path / "dump.flows"
    started: list[subprocess.Popen] = []
    try:
        server, port = start_server(tmp_path / "server.jsonl")  # the sample server on a port it chose
        started.append(server)
        proxy = ProxyRun(f"http://127.0.0.1:{port}/mcp", "--record", str(recorded), "--quiet")
        started.append(proxy.proc)
        proxy.ready()
        dump = subprocess.Popen(
            [str(MITMDUMP), "--mode", f"reverse:http://127.0.0.1:{proxy.port}", "--listen-host", "127.0.0.1",
             "--listen-port", "0", "--set", f"confdir={tmp_path / 'mitmproxy'}", "--set", f"hardump={har}",
             "-w", str(flows)],
            cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        started.append(dump)
        m = LineReader(dump.stdout).wait(r"listening at 127\.0\.0\.1:(\d+)")
        assert m is not None, "mitmdump did not start"
        client = subprocess.run([sys.executable, "-m", "mrtr_inspect.samples.client", "http",
                                 f"http://127.0.0.1:{m.group(1)}/mcp", "--tools", TOOLS],
                                cwd=ROOT, env=child_env(), capture_output=True, timeout=WAIT * 2)
        assert client.stdout.decode().startswith("deploy: deployed to production"), client.stderr.decode()[-2000:]
        dump.send_signal(signal.SIGTERM)
        assert dump.wait(WAIT) == 0
        assert proxy.stop() == 0
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert har.exists() and flows.exists()
    proxy_rep = checked(recorded)
    assert [c["target"] for c in proxy_rep["chains"]] == TOOLS.split(",")
    assert {c["outcome"] for c in proxy_rep["chains"]} == {"complete", "error"}
    for src, name in ((har, "from-har.jsonl"), (flows, "from-flows.jsonl")):
        rep = imported(src, tmp_path / name)
        assert chains(rep) == chains(proxy_rep), src.name
        assert findings(rep, tmp_path / name) == findings(proxy_rep, recorded), src.name
        assert rep["summary"] == proxy_rep["summary"]
    # the bodies the client and the server sent, byte for byte as the proxy recorded them; in mitmdump's
    # order in both of its files, but not always in the proxy's: the client's requests travel on
    # connections of their own (a notification and the next request, the SSE stream's events), and two
    # hops may see two of them in either order (a clean run once did), so the proxy's are compared as a
    # multiset: each body as often, each byte the same
    def bodies(path: Path) -> list[bytes]:
        return [f.body if type(f) is HttpRequest else f.data for f in read_frames(path) if type(f) in (HttpRequest, HttpBody)]

    assert bodies(tmp_path / "from-flows.jsonl") == bodies(tmp_path / "from-har.jsonl")
    assert sorted(bodies(tmp_path / "from-har.jsonl")) == sorted(bodies(recorded))


def test_a_har_export_imports_back_to_the_same_chains(tmp_path):
    har = tmp_path / "s.har"
    assert run_cli("export", HTTP_FIXTURE, "--to", "har", "--output", har).exit_code == 0
    back = imported(har, tmp_path / "back.jsonl")
    orig = checked(HTTP_FIXTURE)
    assert chains(back) == chains(orig) and findings(back, tmp_path / "back.jsonl") == findings(orig, HTTP_FIXTURE)
    events = [f.raw for f in read_frames(tmp_path / "back.jsonl") if type(f) is SseEvent]
    assert events == [f.raw for f in read_frames(HTTP_FIXTURE) if type(f) is SseEvent] and len(events) > 1
    for a, b in zip(back["chains"], orig["chains"]):  # times kept to the microsecond, but for events in a stream
        assert a["duration_ms"] == pytest.approx(b["duration_ms"], abs=1.0)


def _flow(t: float, path: str, body: bytes, status: int | None, resp_headers: dict, resp_body: bytes,
          error: str | None = None):
    f = tflow.tflow(resp=status is not None, err=error is not None)
    f.request.method, f.request.path = "POST", path
    f.request.headers.clear()
    f.request.headers["content-type"] = "application/json"
    f.request.headers["authorization"] = "Bearer sekret-token"
    f.request.raw_content = body
    f.request.timestamp_start, f.request.timestamp_end = t, t + 0.001
    if status is not None:
        f.response.status_code = status
        f.response.headers.clear()
        for k, v in resp_headers.items():
            f.response.headers[k] = v
        f.response.raw_content = resp_body
        f.response.timestamp_start, f.response.timestamp_end = t + 0.01, t + 0.5
    if error is not None:
        f.error.msg = error
        f.error.timestamp = t + 0.2
    return f


def test_a_flow_file_gives_the_frames_the_proxy_records(tmp_path):
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}'
    events = [b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\r\n\r\n',
              b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}\n\n']
    flows = tmp_path / "flows"
    with open(flows, "wb") as f:
        w = mitm_io.FlowWriter(f)
        w.add(_flow(100.0, "/mcp?x=1", call, 200, {"content-type": "text/event-stream", "content-encoding": "gzip"},
                    gzip.compress(b"".join(events))))
        w.add(tcp.TCPFlow(tflow.tclient_conn(), tflow.tserver_conn()))  # not HTTP: skipped with a note
        w.add(_flow(101.0, "/mcp", call.replace(b'"id":1', b'"id":2'), None, {}, b"", error="Client disconnected."))
    r = run_cli("import", flows, "--output", tmp_path / "r.jsonl")
    assert r.exit_code == 0, r.stderr
    assert "skipped 1 flow that" in r.stderr and "2 exchanges from the mitmproxy flows in 1 session" in r.stderr
    frames = list(read_frames(tmp_path / "r.jsonl"))
    kinds = [type(f).__name__ for f in frames]
    assert kinds == ["SessionStart", "HttpRequest", "HttpResponse", "SseEvent", "SseEvent", "HttpEnd", "HttpRequest",
                     "HttpEnd", "SessionEnd"]
    assert frames[0].info["imported"] == {"from": "flows", "format": "mitmproxy flows"}
    req = frames[1]
    assert (req.method, req.path, req.body, req.time) == ("POST", "/mcp?x=1", call, 100.001)
    assert dict(req.headers)["authorization"].startswith("Bearer [redacted:")  # redacted as a live recording is
    assert [f.raw for f in frames if type(f) is SseEvent] == events  # decoded, split by the core's SseDecoder
    assert frames[2].time == 100.01 and frames[3].time == frames[5].time == 100.5  # events: when the body was whole
    assert frames[7] == HttpEnd(101.2, req.session, 2, "client-disconnected")
    assert [f.time for f in frames] == sorted(f.time for f in frames)


def test_har_bodies_encodings_pages_and_errors(tmp_path):
    body = '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}'

    def entry(page: str, t: str, resp: dict) -> dict:
        return {"pageref": page, "startedDateTime": t, "time": 30,
                "request": {"method": "POST", "url": "http://h:1/mcp", "httpVersion": "HTTP/2",
                            "headers": [{"name": ":authority", "value": "h:1"}, {"name": "content-type", "value": "application/json"}],
                            "postData": {"mimeType": "application/json",
                                         "text": '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"é"}}'}},
                "response": resp, "timings": {"send": 1, "wait": 10, "receive": 19}}
    har = {"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "pages": [], "entries": [
        entry("a", "2026-01-01T00:00:00.000Z", {"status": 200, "headers": [{"name": "content-encoding", "value": "gzip"}],
                                                 "content": {"mimeType": "application/json", "text": body}}),
        entry("b", "2026-01-01T00:00:01+00:00", {"status": 200, "headers": [],
                                                  "content": {"text": base64.b64encode(body.encode()).decode(), "encoding": "base64"}}),
        entry("b", "2026-01-01T00:00:02Z", {"status": 0, "headers": [], "content": {}, "_error": "Connection refused"}),
    ]}}
    src = tmp_path / "x.har"
    src.write_text(json.dumps(har))
    r = run_cli("import", src, "--output", tmp_path / "r.jsonl")
    assert r.exit_code == 0 and "3 exchanges from the HAR in 2 sessions" in r.stderr
    frames = list(read_frames(tmp_path / "r.jsonl"))
    assert [f.info["upstream"] for f in frames if type(f) is SessionStart] == ["http://h:1/mcp"] * 2
    reqs = [f for f in frames if type(f) is HttpRequest]
    assert reqs[0].headers == (("content-type", "application/json"),)  # no HTTP/2 pseudo-header
    assert reqs[0].body.decode() == '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"é"}}'
    t0 = 1767225600.0
    assert reqs[0].time == pytest.approx(t0 + 0.001)
    bodies = [f for f in frames if type(f) is HttpBody]
    assert [b.data.decode() for b in bodies] == [body, body]
    assert bodies[0].body_note == "decoded from content-encoding gzip (by the HAR writer)" and bodies[1].body_note is None
    assert bodies[0].time == pytest.approx(t0 + 0.030)
    assert next(f for f in frames if type(f) is HttpResponse).time == pytest.approx(t0 + 0.011)
    assert [f.error for f in frames if type(f) is HttpEnd] == [None, None, "upstream-error: Connection refused"]


@pytest.mark.parametrize("content, why", [
    (None, "this is an mrtr-inspect recording already"),
    (b'{"t": 1, "n": 1}\n{"t": 2}\n', "not a HAR file"),
    (b"hello\n", "not a HAR file nor a mitmproxy flow file"),
    (b'{"log": {}}', "not a HAR file (no log.entries)"),
])
def test_what_cannot_be_imported_is_refused_in_one_line(tmp_path, content, why):
    src = HTTP_FIXTURE if content is None else tmp_path / "in"
    if content is not None:
        src.write_bytes(content)
    r = run_cli("import", src, "--output", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and why in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("configured", [True, False])
def test_an_import_is_redacted_with_the_projects_settings(tmp_path, monkeypatch, configured):
    """`redact_headers` and `redact_paths` of the project's settings apply to an import as to a live
    recording (near miss: without them, the header and the argument stay in clear)."""
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"version":"1.0.0"}}}'
    flow = _flow(100.0, "/mcp", call, 200, {"content-type": "application/json"},
                 b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')
    flow.request.headers["x-tenant"] = "acme-private"
    with open(tmp_path / "flows", "wb") as f:
        mitm_io.FlowWriter(f).add(flow)
    if configured:
        (tmp_path / ".mrtr-inspect.toml").write_text(
            'redact_headers = ["X-Tenant"]\nredact_paths = ["params.arguments.version"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = run_cli("import", "flows", "--output", "r.jsonl")
    assert r.exit_code == 0, r.stderr
    req = next(f for f in read_frames(tmp_path / "r.jsonl") if type(f) is HttpRequest)
    tenant, version = dict(req.headers)["x-tenant"], json.loads(req.body)["params"]["arguments"]["version"]
    assert dict(req.headers)["authorization"].startswith("Bearer [redacted:")  # the defaults, either way
    if configured:
        assert tenant.startswith("[redacted:") and version.startswith("[redacted:")
    else:
        assert (tenant, version) == ("acme-private", "1.0.0")


def test_a_body_the_flow_file_does_not_hold_is_left_out_not_taken_for_empty(tmp_path):
    """mitmproxy keeps no body it streamed unless run with store_streamed_bodies (`raw_content` None,
    the message over all the same), and none of a stream that broke off (the SDK client closes an
    event stream on its last event, racing the server's end of it: "Client disconnected.") or was
    still coming when the file was saved: such an exchange is left out with a note that says the
    remedy, not analysed as an empty body (a call with no answer, its retry unsolicited). Near
    misses: the same stream kept is imported; a flow saved while a small JSON answer was coming
    (mitmproxy forwards such a body only whole: nothing of it went by) ends as the capture ending."""
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}'
    sse = {"content-type": "text/event-stream"}
    event = b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}\n\n'
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}'
    lost, kept, broke, going = (_flow(t, "/mcp", call, 200, sse, event) for t in (100.0, 101.0, 103.0, 104.0))
    broke.error = tflow.terr("Client disconnected.")
    coming = _flow(102.0, "/mcp", call, 200, {"content-type": "application/json",
                                                "content-length": str(len(answer))}, answer)
    lost.response.raw_content = None  # streamed, not stored: the response is over (timestamp_end)
    for f in (broke, going, coming):  # broke off; mitmdump -w at exit, mid-stream; at exit, body not in
        f.response.raw_content, f.response.timestamp_end = None, None
    flows = tmp_path / "flows"
    with open(flows, "wb") as f:
        w = mitm_io.FlowWriter(f)
        for flow in (lost, kept, coming, broke, going):
            w.add(flow)
    r = run_cli("import", flows, "--output", tmp_path / "r.jsonl")
    assert r.exit_code == 0, r.stderr
    assert "left out 3 exchanges whose body the flow file does not hold" in r.stderr
    assert "--set store_streamed_bodies=true" in r.stderr and "broke off" in r.stderr
    assert "2 exchanges from the mitmproxy flows" in r.stderr
    frames = [f for f in read_frames(tmp_path / "r.jsonl") if type(f) in (HttpRequest, SseEvent, HttpEnd)]
    assert [(type(f).__name__, f.time) for f in frames] == [
        ("HttpRequest", 101.001), ("SseEvent", 101.5), ("HttpEnd", 101.5), ("HttpRequest", 102.001),
        ("HttpEnd", 102.01)]
    assert [f.error for f in frames if type(f) is HttpEnd] == [None, "capture-ended"]
    assert [f for f in checked(tmp_path / "r.jsonl")["findings"] if f["severity"] == "error"] == []
    for alone in (lost, broke):
        only = tmp_path / "alone"
        with open(only, "wb") as f:
            mitm_io.FlowWriter(f).add(alone)
        r = run_cli("import", only, "--output", tmp_path / "none.jsonl")
        assert r.exit_code == 2 and r.stderr.count("\n") == 1
        assert "no HTTP exchange to import (left out 1 exchange " in r.stderr


def test_a_retry_whose_round_was_in_a_left_out_exchange_is_capture_incomplete_not_an_error(tmp_path):
    """Round 0 answered as an event stream mitmproxy did not keep (left out), the retry answered as
    JSON (kept): the retry's requestState came in the hole, so the capture did not see its round
    (capture-incomplete, info), where it was request-state-unsolicited, an error. Near miss: the
    same capture with nothing left out, the round simply never there: the error stays."""
    from tests.traffic import meta

    m = meta()
    discover = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": m}}).encode()
    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "deploy", "arguments": {}, "_meta": m}}).encode()
    retry = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "deploy", "arguments": {}, "_meta": m, "requestState": "s1",
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}}}).encode()
    js = {"content-type": "application/json"}
    irr = b'data: {"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","requestState":"s1"}}\n\n'
    done = b'{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[]}}'
    first = _flow(100.0, "/mcp", discover, 200, js, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    lost = _flow(101.0, "/mcp", call, 200, {"content-type": "text/event-stream"}, irr)
    lost.response.raw_content = None  # streamed, not stored
    kept = _flow(102.0, "/mcp", retry, 200, js, done)
    for name, flows in (("holed", (first, lost, kept)), ("whole", (first, kept))):
        path = tmp_path / name
        with open(path, "wb") as f:
            w = mitm_io.FlowWriter(f)
            for flow in flows:
                w.add(flow)
        r = run_cli("import", path, "--output", tmp_path / f"{name}.jsonl")
        assert r.exit_code == 0, r.stderr
        rules = {(f["rule"], f["severity"]) for f in checked(tmp_path / f"{name}.jsonl")["findings"]}
        if name == "holed":
            assert ("capture-incomplete", "info") in rules and ("request-state-unsolicited", "error") not in rules
        else:
            assert ("request-state-unsolicited", "error") in rules and ("capture-incomplete", "info") not in rules
