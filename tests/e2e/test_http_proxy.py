"""`mrtr-inspect --upstream URL` as a user runs it: a real process, in front of a scripted HTTP/1.1
upstream that the test controls byte for byte (and holds open, or breaks, on cue).

Also the helpers of the other HTTP end-to-end tests: `ProxyRun` starts the proxy and waits for its
ready line; `Upstream` is the scripted server.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import json
import os
import queue
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

import pytest

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, SseEvent
from mrtr_inspect.recording.reader import read_frames

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"^mrtr-inspect: listening on (http://[^/\s]+:(\d+))(/\S*)$")
WAIT = 30.0  # seconds any one step may take before the test fails


@functools.cache
def _cache_dir() -> str:
    """One cache folder for the proxies of this test run (mitmproxy's certificates are made once), not
    the user's."""
    d = tempfile.mkdtemp(prefix="mrtr-inspect-test-cache-")
    atexit.register(shutil.rmtree, d, True)
    return d


def child_env() -> dict[str, str]:
    """The environment of the processes the tests start: this checkout importable, a fixed redaction
    key, a cache folder of the test run's own."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("MRTR_INSPECT_REDACTION_KEY", "test-key")
    e["XDG_CACHE_HOME"] = _cache_dir()
    return e


class LineReader:
    """Collects a stream's lines on a thread; `wait(regex)` blocks until a line matches or the stream ends."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for raw in stream:
            self._q.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._q.put(None)

    def wait(self, pattern: str | re.Pattern, timeout: float = WAIT) -> re.Match | None:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        for line in self.lines:
            if m := rx.search(line):
                return m
        while True:
            line = self._q.get(timeout=timeout)
            if line is None:
                self._q.put(None)
                return None
            self.lines.append(line)
            if m := rx.search(line):
                return m

    def rest(self, timeout: float = WAIT) -> str:
        """Everything, once the stream has ended."""
        self.wait(re.compile(r"(?!)"), timeout)
        return "\n".join(self.lines)


class ProxyRun:
    """`mrtr-inspect --upstream UPSTREAM --listen 127.0.0.1:0 ARGS...` as a child process."""

    def __init__(self, upstream: str, *args: str, listen: str = "127.0.0.1:0") -> None:
        self.cmd = [sys.executable, "-m", "mrtr_inspect", "--upstream", upstream, "--listen", listen, *args]
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err = LineReader(self.proc.stderr)
        self.url = self.port = self.path = None

    def ready(self) -> "ProxyRun":
        m = self.err.wait(READY)
        assert m is not None, f"the proxy did not start: {self.err.rest()}"
        self.url, self.port, self.path = m.group(1) + m.group(3), int(m.group(2)), m.group(3)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def proxies():
    """Start proxies with `proxies(upstream, *args)`; whatever is left running is killed at teardown."""
    started: list[ProxyRun] = []

    def start(upstream: str, *args: str, **kw) -> ProxyRun:
        p = ProxyRun(upstream, *args, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


# -- a scripted upstream ---------------------------------------------------------------------------


class Request:
    def __init__(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class Upstream:
    """An HTTP/1.1 server on 127.0.0.1:0 in this process: `script(request, write)` answers each
    request by writing raw bytes; it may wait on events the test sets. Keeps what it received."""

    def __init__(self, script: Callable[[Request, Callable[[bytes], None]], None], port: int = 0,
                 sock: socket.socket | None = None) -> None:
        self.script = script
        self.received: list[Request] = []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while (req := _read_request(self.rfile)) is not None:
                    outer.received.append(req)
                    outer.script(req, self._write)

            def _write(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        if sock is None:
            self.server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler)
        else:  # a socket bound already (the port held since the test chose it): it only starts listening
            self.server = socketserver.ThreadingTCPServer(sock.getsockname(), Handler, bind_and_activate=False)
            self.server.socket.close()
            self.server.socket = sock
            self.server.server_activate()
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _read_request(rfile) -> Request | None:
    line = rfile.readline()
    if not line:
        return None
    head = [line]
    while (h := rfile.readline()) not in (b"\r\n", b"\n", b""):
        head.append(h)
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers = [tuple(x.strip() for x in h.decode("latin-1").split(":", 1)) for h in head[1:]]
    if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers):
        body = b""
        while (size := int(rfile.readline().split(b";")[0], 16)) > 0:
            body += rfile.read(size)
            rfile.readline()
        rfile.readline()
    else:
        body = rfile.read(int(next((v for k, v in headers if k.lower() == "content-length"), "0")))
    return Request(method, path, headers, body)


def json_response(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            .encode() + body)


def sse_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@pytest.fixture
def upstreams():
    started: list[Upstream] = []

    def start(script) -> Upstream:
        u = Upstream(script)
        started.append(u)
        return u

    yield start
    for u in started:
        u.close()


# -- a raw client ----------------------------------------------------------------------------------


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One POST on a fresh connection; the status, headers and body bytes exactly as they arrived."""
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=WAIT)
    try:
        conn.request("POST", u.path, body=body, headers={"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream",
                                                         **(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def frames(path: Path) -> list:
    return list(read_frames(path))


def report(path: Path) -> dict:
    return json.loads(path.read_text())


CALL = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy","arguments":{},'
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}')
MCP_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "deploy"}
DONE = b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"resultType":"complete"}}'


# -- startup errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/mcp", "127.0.0.1:3000", "http://", "http://127.0.0.1:99999/mcp",
                                 "http://user:secret@127.0.0.1:3000/mcp"])
def test_a_bad_url_is_one_line_and_exit_2(proxies, url):
    p = proxies(url)
    assert p.proc.wait(WAIT) == 2
    out = p.err.rest().strip().splitlines()
    assert len(out) == 1 and out[0].startswith("mrtr-inspect: "), out
    assert "secret" not in out[0]


def test_a_bad_listen_address_is_one_line_and_exit_2(proxies):
    p = proxies("http://127.0.0.1:3000/mcp", listen="127.0.0.1:http")
    assert p.proc.wait(WAIT) == 2
    assert p.err.rest().strip().splitlines() == ["mrtr-inspect: --listen takes HOST:PORT (port 0 picks a free one), "
                                                 "not '127.0.0.1:http'"]


def test_a_port_in_use_is_one_line_and_exit_2(proxies, tmp_path):
    """Issue 25 item 16: nothing is written either: no empty session appended to the recording, no
    new recording file, no report."""
    earlier, fresh, rep = tmp_path / "earlier.jsonl", tmp_path / "fresh.jsonl", tmp_path / "report.json"
    earlier.write_bytes(b'{"mrtr-inspect":"recording","version":1,"session":"a","transport":"http","t":1.0}\n')
    before = earlier.read_bytes()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        outs = []
        for record in (earlier, fresh):
            p = proxies("http://127.0.0.1:3000/mcp", "--record", str(record), "--report", str(rep),
                        listen=f"127.0.0.1:{port}")
            assert p.proc.wait(WAIT) == 2
            outs.append(p.err.rest().strip().splitlines())
    finally:
        taken.close()
    assert outs == [[f"mrtr-inspect: cannot listen on 127.0.0.1:{port}: address already in use"]] * 2
    assert earlier.read_bytes() == before and not fresh.exists() and not rep.exists()


def test_an_unwritable_recording_is_one_line_and_exit_2(proxies, tmp_path):
    not_a_recording = tmp_path / "notes.txt"
    not_a_recording.write_text("my notes\n")
    p = proxies("http://127.0.0.1:3000/mcp", "--record", str(not_a_recording))
    assert p.proc.wait(WAIT) == 2
    out = p.err.rest().strip().splitlines()
    assert len(out) == 1 and "not an mrtr-inspect recording" in out[0]
    assert not_a_recording.read_text() == "my notes\n"


# -- the path, the bytes ----------------------------------------------------------------------------


def test_the_path_passes_through_and_the_ready_line_names_it(proxies, upstreams, tmp_path):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    p = proxies(f"http://127.0.0.1:{up.port}/api/v2/mcp", "--quiet").ready()
    assert p.path == "/api/v2/mcp"
    status, _, body = post(p.url, CALL, MCP_HEADERS)
    assert (status, body) == (200, DONE)
    assert up.received[0].path == "/api/v2/mcp"
    assert up.received[0].body == CALL
    assert p.stop() == 0


BAD_BODIES = {
    "not JSON": b'{"jsonrpc":"2.0","id":1,"method":',
    "not UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"d\xff"}}',
}


@pytest.mark.parametrize("what", sorted(BAD_BODIES))
def test_a_bad_body_passes_unchanged_and_is_a_finding(proxies, upstreams, tmp_path, what):
    body = BAD_BODIES[what]
    answer = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    up = upstreams(lambda req, write: write(json_response(answer, "400 Bad Request")))
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--record", str(rec), "--report", str(rep), "--quiet").ready()
    status, _, got = post(p.url, body, MCP_HEADERS)
    assert (status, got) == (400, answer)
    assert up.received[0].body == body
    assert p.stop() == 0
    req = next(f for f in frames(rec) if type(f) is HttpRequest)
    assert req.body == body
    rules = {f["rule"] for f in report(rep)["findings"]}
    assert "http-body-not-single-message" in rules, rules


def test_compressed_bodies_pass_unchanged_and_are_recorded_decoded(proxies, upstreams, tmp_path):
    zipped = gzip.compress(DONE)
    events = b'event: message\r\ndata: ' + DONE + b'\r\n\r\n'
    zipped_events = gzip.compress(events)

    def script(req, write):
        if b'"id":7' in req.body:
            write(json_response(zipped, extra="Content-Encoding: gzip\r\n"))
        else:
            write(sse_head().replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n") + chunk(zipped_events)
                  + b"0\r\n\r\n")

    up = upstreams(script)
    rec = tmp_path / "s.jsonl"
    p = proxies(up.url, "--record", str(rec), "--quiet").ready()
    call8 = CALL.replace(b'"id":7', b'"id":8')
    gz_call = gzip.compress(call8)
    assert post(p.url, CALL, MCP_HEADERS)[2] == zipped
    assert post(p.url, gz_call, {**MCP_HEADERS, "Content-Encoding": "gzip"})[2] == zipped_events
    assert up.received[1].body == gz_call
    assert p.stop() == 0
    fs = frames(rec)
    body = next(f for f in fs if type(f) is HttpBody)
    assert (body.data, body.body_note) == (DONE, "decoded from content-encoding gzip")
    req2 = [f for f in fs if type(f) is HttpRequest][1]
    assert req2.body == call8
    assert [f.raw for f in fs if type(f) is SseEvent] == [events]


def test_decompression_bombs_pass_unchanged_and_are_recorded_as_their_wire_bytes(proxies, upstreams, tmp_path):
    """A response of a few KiB of zstd that decodes to 64 MiB, a request of gzip over gzip: each passes
    byte for byte; the recording keeps the wire bytes (its decoding stopped at max_message_bytes),
    and the report says so."""
    from mitmproxy.net import encoding

    bomb = encoding.encode(b"\0" * (64 << 20), "zstd")
    gzip_bomb = gzip.compress(gzip.compress(b"\0" * (64 << 20)))
    assert len(bomb) < 32 * 1024 and len(gzip_bomb) < 32 * 1024
    up = upstreams(lambda req, write: write(json_response(bomb, extra="Content-Encoding: zstd\r\n")))
    conf, rec, rep = tmp_path / "mrtr.toml", tmp_path / "s.jsonl", tmp_path / "r.json"
    conf.write_text("max_message_bytes = 1048576\n")
    p = proxies(up.url, "--config", str(conf), "--record", str(rec), "--report", str(rep), "--quiet").ready()
    assert post(p.url, CALL, MCP_HEADERS)[::2] == (200, bomb)
    assert post(p.url, gzip_bomb, {**MCP_HEADERS, "Content-Encoding": "gzip, gzip"})[::2] == (200, bomb)
    assert up.received[1].body == gzip_bomb
    assert p.stop() == 0
    assert rec.stat().st_size < 200 * 1024  # the wire bytes, not 64 MiB of each
    fs = frames(rec)
    assert [f.data for f in fs if type(f) is HttpBody] == [bomb, bomb]
    assert [f.body for f in fs if type(f) is HttpRequest] == [CALL, gzip_bomb]
    assert all(f.body_note.startswith("not decoded: ") for f in fs if type(f) is HttpBody)
    found = [f for f in report(rep)["findings"] if f["rule"] == "message-too-large"]
    assert len(found) == 3, found  # two responses, one request
    assert "decodes to more than 1 MiB" in found[0]["message"]


def test_large_and_chunked_request_bodies_are_streamed_unchanged_and_recorded_whole(proxies, upstreams, tmp_path):
    big = CALL.replace(b'"arguments":{}', b'"arguments":{"text":"' + b"x" * (100 * 1024) + b'"}')
    up = upstreams(lambda req, write: write(json_response(DONE)))
    rec = tmp_path / "s.jsonl"
    p = proxies(up.url, "--record", str(rec), "--quiet").ready()
    assert post(p.url, big, MCP_HEADERS)[::2] == (200, DONE)
    s = socket.create_connection(("127.0.0.1", p.port), timeout=WAIT)  # a body of unknown length
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
              + chunk(CALL[:40]) + chunk(CALL[40:]) + b"0\r\n\r\n")
    got = b""
    while not got.endswith(DONE):
        got += s.recv(65536)
    s.close()
    assert p.stop() == 0
    assert [r.body for r in up.received] == [big, CALL]
    assert [f.body for f in frames(rec) if type(f) is HttpRequest] == [big, CALL]


# -- failures around the traffic --------------------------------------------------------------------


def _held_port() -> socket.socket:
    """A port bound and not listening: a connection to it is refused, and no other socket of the
    machine can take it before the test's upstream listens on it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def test_an_upstream_that_is_down_gets_502_and_a_finding_and_the_proxy_goes_on(proxies, tmp_path):
    held = _held_port()
    port = held.getsockname()[1]
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(f"http://127.0.0.1:{port}/mcp", "--record", str(rec), "--report", str(rep)).ready()
    for _ in range(2):
        status, _, _ = post(p.url, CALL, MCP_HEADERS)
        assert status == 502
    assert p.err.wait("warning upstream-error") is not None  # the live view says so as it happens
    up = Upstream(lambda req, write: write(json_response(DONE)), sock=held)  # the upstream comes up: the same
    try:                                                                   # proxy reaches it now
        assert post(p.url, CALL, MCP_HEADERS)[::2] == (200, DONE)
    finally:
        up.close()
    assert p.stop() == 0
    ends = [f for f in frames(rec) if type(f) is HttpEnd]
    assert [e.error.startswith("upstream-error: ") for e in ends[:2]] == [True, True]
    found = [f for f in report(rep)["findings"] if f["rule"] == "upstream-error"]
    assert len(found) == 2 and all(f["severity"] == "warning" for f in found)
    assert [e.error for e in ends[2:]] == [None]
    assert "502" in found[0]["message"]


def test_a_client_that_leaves_mid_stream_cancels_the_chain(proxies, upstreams, tmp_path):
    sent_first, release = threading.Event(), threading.Event()
    progress = (b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":'
                b'{"progressToken":1,"progress":1}}\r\n\r\n')

    def script(req, write):
        write(sse_head() + chunk(progress))
        sent_first.set()
        release.wait(WAIT)
        try:
            write(b"0\r\n\r\n")
        except OSError:
            pass

    up = upstreams(script)
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--record", str(rec), "--report", str(rep)).ready()
    s = socket.create_connection(("127.0.0.1", p.port), timeout=WAIT)
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Accept: application/json, text/event-stream\r\n" + b"".join(
                  f"{k}: {v}\r\n".encode() for k, v in MCP_HEADERS.items())
              + f"Content-Length: {len(CALL)}\r\n\r\n".encode() + CALL)
    got = b""
    while progress not in got:  # the first event arrives while the server still holds the stream
        got += s.recv(65536)
    s.close()
    assert p.err.wait(r"c1 tools/call deploy  cancelled") is not None  # the live view saw the chain end
    release.set()
    assert p.stop() == 0
    ends = [f for f in frames(rec) if type(f) is HttpEnd]
    assert [e.error for e in ends] == ["client-disconnected"]
    chains = report(rep)["chains"]
    assert [(c["target"], c["outcome"]) for c in chains] == [("deploy", "cancelled")]


def test_an_upstream_that_breaks_off_a_stream_is_a_finding(proxies, upstreams, tmp_path):
    progress = (b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":'
                b'{"progressToken":1,"progress":1}}\n\n')

    def script(req, write):
        write(sse_head() + chunk(progress) + b"ff\r\ndata: {")  # then the connection drops mid-chunk
        raise ConnectionAbortedError

    up = upstreams(script)
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--record", str(rec), "--report", str(rep), "--quiet").ready()
    with pytest.raises(Exception):
        post(p.url, CALL, MCP_HEADERS)
    assert p.stop() == 0
    fs = frames(rec)
    assert [f.raw for f in fs if type(f) is SseEvent][0] == progress
    ends = [f for f in fs if type(f) is HttpEnd]
    assert len(ends) == 1 and ends[0].error.startswith("upstream-error: ")
    assert [f["rule"] for f in report(rep)["findings"] if f["rule"] == "upstream-error"] == ["upstream-error"]


# -- shutdown ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_port_flushes_the_recording_and_writes_the_report(proxies, upstreams, tmp_path, sig):
    holding, release = threading.Event(), threading.Event()

    def script(req, write):
        if b'"id":7' in req.body:
            write(json_response(DONE))
            return
        write(sse_head())
        holding.set()
        release.wait(WAIT)

    up = upstreams(script)
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--record", str(rec), "--report", str(rep), "--quiet").ready()
    assert post(p.url, CALL, MCP_HEADERS)[0] == 200
    # a stream left open by the server: shutdown must close it too
    s = socket.create_connection(("127.0.0.1", p.port), timeout=WAIT)
    call9 = CALL.replace(b'"id":7', b'"id":9')
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(call9)}\r\n\r\n".encode() + call9)
    assert holding.wait(WAIT)
    assert p.stop(sig) == 0
    release.set()
    while s.recv(65536):  # the open stream was closed (EOF), not left hanging (a timeout fails the test)
        pass
    s.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", p.port), timeout=WAIT)
    again = socket.socket()  # a server can listen there again (SO_REUSEADDR, as servers do: the closed
    again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # connections linger in TIME_WAIT)
    again.bind(("127.0.0.1", p.port))
    again.listen(1)
    again.close()
    fs = frames(rec)
    assert type(fs[-1]).__name__ == "SessionEnd"
    assert [f.error for f in fs if type(f) is HttpEnd] == [None, "capture-ended"]
    r = report(rep)
    assert r["summary"]["messages"] == 3
    assert sorted(c["outcome"] for c in r["chains"]) == ["complete", "open"]


# -- the project's redaction settings; the report's path ----------------------------------------------


def test_configured_headers_and_paths_are_redacted_in_the_recording(proxies, upstreams, tmp_path):
    conf = tmp_path / "mrtr.toml"
    conf.write_text('redact_headers = ["X-Tenant"]\nredact_paths = ["params.arguments.version"]\n')
    up = upstreams(lambda req, write: write(json_response(DONE)))
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--config", str(conf), "--record", str(rec), "--report", str(rep), "--quiet").ready()
    call = CALL.replace(b'"arguments":{}', b'"arguments":{"version":"1.0.0","env":"prod"}')
    status, _, body = post(p.url, call, {**MCP_HEADERS, "X-Tenant": "acme", "X-Tenant-Region": "eu"})
    assert (status, body) == (200, DONE)
    assert up.received[0].header("X-Tenant") == "acme" and up.received[0].body == call  # forwarded as sent
    assert p.stop() == 0
    req = next(f for f in frames(rec) if type(f) is HttpRequest)
    headers = dict(req.headers)
    assert headers["X-Tenant"].startswith("[redacted:") and headers["X-Tenant-Region"] == "eu"
    assert b'"version":"[redacted:' in req.body and b'"env":"prod"' in req.body
    assert b"acme" not in rec.read_bytes() and b"1.0.0" not in rec.read_bytes()
    assert os.stat(rep).st_mode & 0o777 == 0o600
    assert "acme" not in rep.read_text()


def test_a_report_that_cannot_be_written_is_one_line_and_exit_2(proxies, tmp_path):
    rep = tmp_path / "missing" / "r.json"
    p = proxies("http://127.0.0.1:3000/mcp", "--report", str(rep))
    assert p.proc.wait(WAIT) == 2
    assert p.err.rest().strip().splitlines() == [f"mrtr-inspect: cannot write report {rep}: No such file or directory"]


def test_a_report_that_fails_at_the_end_is_said_and_exit_1(proxies, upstreams, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    rep = folder / "r.json"
    up = upstreams(lambda req, write: write(json_response(DONE)))
    p = proxies(up.url, "--report", str(rep), "--quiet").ready()
    assert post(p.url, CALL, MCP_HEADERS)[0] == 200
    folder.rmdir()
    assert p.stop() == 1
    assert f"mrtr-inspect: cannot write report {rep}: No such file or directory" in p.err.rest()
