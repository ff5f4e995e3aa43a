"""Flow files written by mitmdump while the addon runs (`mitmdump -s addons/mrtr_inspect.py -w FILE`),
read again by `import` and by the addon itself (`mitmdump -n -r FILE -s addons/mrtr_inspect.py`).

The official SDK server and client on either side of a real mitmdump; the client asks for progress,
so slow_deploy's calls are answered with event streams, which the addon streams. Without
`store_streamed_bodies` mitmproxy keeps no streamed body: those exchanges are left out, with a note,
and nothing else is mistaken; with it, both readings give the addon's live analysis, an event stream
that broke off included: mitmproxy drops the body of one even with the option, and the addon puts
back what went by (the SDK client closes a stream on its answer, racing the server's end of it; a
raw server and client make that happen every time)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from tests.e2e.test_http_proxy import ROOT, WAIT, LineReader, child_env
from tests.e2e.test_http_sdk import EXPECTED, run_client, start_server
from tests.outputs.conftest import run_cli

MITMDUMP = Path(sys.executable).with_name("mitmdump")
KEYS = ("target", "rounds", "requests", "outcome", "link")
STREAMED = "slow_deploy"  # the tool whose answers come as event streams


def _dump(tmp_path: Path, *args: str) -> list[str]:
    return [str(MITMDUMP), "-s", "addons/mrtr_inspect.py", "--set", f"confdir={tmp_path / 'mitmproxy'}", *args]


def _live(procs, tmp_path: Path, *options: str) -> tuple[dict, Path]:
    """The addon's live report of the sample tools through mitmdump, and the flow file it wrote."""
    flows, rep = tmp_path / "flows.mitm", tmp_path / "live.json"
    server, port = start_server(tmp_path / "server.jsonl")
    procs.started.append(server)  # killed at teardown, as what procs starts
    dump = procs.start(_dump(tmp_path, "--mode", f"reverse:http://127.0.0.1:{port}", "--listen-host", "127.0.0.1",
                             "--listen-port", "0", "--set", f"mrtr_report={rep}", "-w", str(flows), *options),
                       stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    out = LineReader(dump.stdout)
    assert (m := out.wait(r"listening at 127\.0\.0\.1:(\d+)")) is not None, out.rest()
    said, _ = anyio.run(run_client, f"http://127.0.0.1:{m.group(1)}/mcp")
    assert said[0] == "deploy: deployed to production" and "progress" in said[4]
    dump.send_signal(signal.SIGTERM)
    assert dump.wait(WAIT) == 0
    live = json.loads(rep.read_text())
    assert {c["target"]: (c["rounds"], c["outcome"]) for c in live["chains"]} == EXPECTED
    assert live["summary"]["errors"] == 0
    return live, flows


def _reread(tmp_path: Path, flows: Path) -> dict:
    """The addon's report of the flow file read back with `mitmdump -n -r`."""
    rep = tmp_path / "reread.json"
    r = subprocess.run(_dump(tmp_path, "-n", "-r", str(flows), "--set", f"mrtr_report={rep}"), cwd=ROOT,
                       env=child_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT * 2)
    assert r.returncode == 0, r.stdout.decode()[-2000:]
    return json.loads(rep.read_text())


def _imported(tmp_path: Path, flows: Path) -> tuple[dict, str]:
    r = run_cli("import", flows, "--output", tmp_path / "imported.jsonl")
    assert r.exit_code == 0, r.stderr
    check = run_cli("check", tmp_path / "imported.jsonl", "--format", "json", "--fail-on", "never")
    return json.loads(check.stdout), r.stderr


def _broken_off(flows: Path) -> list[bytes | None]:
    """The bodies mitmproxy's flow file holds of the event streams that broke off (mitmproxy's
    "Client disconnected.")."""
    from mitmproxy.io import FlowReader

    with open(flows, "rb") as f:
        return [fl.response.raw_content for fl in FlowReader(f).stream() if fl.error is not None
                and fl.response is not None and fl.response.headers.get("content-type", "").startswith("text/event-stream")]


def chains(rep: dict) -> list[tuple]:
    return [tuple(c[k] for k in KEYS) for c in rep["chains"]]


def findings(rep: dict) -> list[tuple]:
    return sorted((f["rule"], f["severity"], tuple(f["messages"])) for f in rep["findings"])


@pytest.mark.parametrize("store", [False, True], ids=["streamed-bodies-not-kept", "store_streamed_bodies"])
def test_a_flow_file_of_the_addon_reads_back_as_the_live_analysis_or_says_what_it_lacks(procs, tmp_path, store):
    live, flows = _live(procs, tmp_path, *(["--set", "store_streamed_bodies=true"] if store else []))
    rep, said = _imported(tmp_path, flows)
    back = _reread(tmp_path, flows)
    if store:  # every body is in the file, a stream the client broke off too: the live analysis, both ways
        for got in (rep, back):
            assert chains(got) == chains(live) and findings(got) == findings(live)
            assert got["summary"] == live["summary"] and "notes" not in got
        assert "left out" not in said
        return
    # the two slow_deploy exchanges are left out, said once with the remedy; nothing else is mistaken
    assert "left out 2 exchanges whose body the flow file does not hold" in said
    assert "--set store_streamed_bodies=true" in said
    [note] = back["notes"]
    assert note.startswith("did not analyse 2 exchanges whose body the file read") and "store_streamed_bodies" in note
    kept = [c for c in chains(live) if c[0] != STREAMED]
    for got in (rep, back):
        assert chains(got) == kept
        assert got["summary"]["errors"] == got["summary"]["warnings"] == 0


CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}'
EVENT = b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}\n\n'


def _stream_without_end(srv: socket.socket, gone: threading.Event) -> None:
    """One exchange: reads the request, answers with an event stream of one event, and never ends it:
    waits until the proxy closes the connection (the client went away)."""
    c, _ = srv.accept()
    with c:
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        n = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        while len(body) < n:
            body += c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % len(EVENT) + EVENT + b"\r\n")
        while c.recv(65536):
            pass
        gone.set()


@pytest.mark.parametrize("store", [False, True], ids=["streamed-bodies-not-kept", "store_streamed_bodies"])
def test_an_event_stream_the_client_closed_before_its_end_is_kept_as_it_went_by_or_left_out(procs, tmp_path, store):
    """The client takes its answer's event and closes the connection before the server ends the
    stream: live, the addon saw the answer (a complete chain); the flow file has the response head
    and mitmproxy's "Client disconnected.". Asked to store streamed bodies, mitmproxy drops such a
    body: the addon puts back what went by, so `import` and `mitmdump -r` give the live analysis.
    Without the option no body is kept: both leave the exchange out and say why, rather than
    analyse a call that got no answer."""
    srv = socket.create_server(("127.0.0.1", 0))
    gone = threading.Event()
    server = threading.Thread(target=_stream_without_end, args=(srv, gone), daemon=True)
    server.start()
    flows, rep = tmp_path / "flows.mitm", tmp_path / "live.json"
    dump = procs.start(_dump(tmp_path, "--mode", f"reverse:http://127.0.0.1:{srv.getsockname()[1]}",
                             "--listen-host", "127.0.0.1", "--listen-port", "0", "--set", f"mrtr_report={rep}",
                             *(["--set", "store_streamed_bodies=true"] if store else []), "-w", str(flows)),
                       stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    out = LineReader(dump.stdout)
    assert (m := out.wait(r"listening at 127\.0\.0\.1:(\d+)")) is not None, out.rest()
    with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=WAIT) as c:
        c.sendall(b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                  b"accept: application/json, text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(CALL) + CALL)
        got = b""
        while EVENT not in got:
            chunk = c.recv(65536)
            assert chunk, got
            got += chunk
    server.join(WAIT)
    assert gone.is_set()
    assert out.wait(r"Client disconnected") is not None, out.rest()
    dump.send_signal(signal.SIGTERM)
    assert dump.wait(WAIT) == 0
    srv.close()
    live = json.loads(rep.read_text())
    assert [(c["target"], c["outcome"]) for c in live["chains"]] == [("x", "complete")]
    assert _broken_off(flows) == [EVENT if store else None]
    r = run_cli("import", flows, "--output", tmp_path / "imported.jsonl")
    back = _reread(tmp_path, flows)
    if store:
        assert r.exit_code == 0, r.stderr
        check = run_cli("check", tmp_path / "imported.jsonl", "--format", "json", "--fail-on", "never")
        for got in (json.loads(check.stdout), back):
            assert chains(got) == chains(live) and findings(got) == findings(live) and "notes" not in got
        return
    assert r.exit_code == 2 and "no HTTP exchange to import (left out 1 exchange" in r.stderr
    assert "broke off" in r.stderr
    assert back["chains"] == [] and back["notes"][0].startswith("did not analyse 1 exchange ")
