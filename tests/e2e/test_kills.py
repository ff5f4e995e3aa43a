"""SIGKILL while traffic flows at full speed (CONTRACTS.md, Recordings): whatever is killed (the
forwarding process alone, or every process of the tool at once), the recording lacks at most the
message in flight on each connection, and `check` reads it.

"Crossed" is counted at the ends, never from the tool: a request crossed when the server read it
(the echo server appends each line it reads to a file before answering; the HTTP upstream keeps
each request it read), an answer when the client read it whole. The kill comes after a number of
answers the client has seen, not after a sleep. The figures go to docs/reliability.md (Kills).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mrtr_inspect.core.events import HttpBody, HttpRequest, SessionEnd, StdioLine
from mrtr_inspect.recording.reader import ReadNotes, read_frames
from tests.e2e import ROOT, tee_cmd
from tests.e2e.test_http_proxy import WAIT, ProxyRun, Upstream, json_response

MESSAGES = 20_000  # requests the stdio client writes (and as many answers)
KILL_AFTER = 8_000  # answers seen before the kill
HTTP_CLIENTS = 4
HTTP_REQUESTS = 2_500  # per client: 20,000 messages in all
HTTP_KILL_AFTER = 2_000  # answers seen (all clients) before the kill
ID = re.compile(rb'"id":"?([A-Za-z0-9-]+)')
META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":'
        '{"name":"kill-test","version":"1.0"},"io.modelcontextprotocol/clientCapabilities":{}}')


def wait_until(condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return value


def gone(pid: int) -> bool:
    """Whether a process (not ours to wait for) has exited: no such process, or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def children(pid: int) -> list[tuple[int, bytes]]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append((int(d.name), (d / "cmdline").read_bytes()))
            except (OSError, IndexError, ValueError):
                continue
    return out


def analysis_of(pid: int) -> int:
    """The analysis process a tee or proxy forked: its child running the same command line."""
    me = Path(f"/proc/{pid}/cmdline").read_bytes()
    kids = [k for k, cmd in children(pid) if cmd == me]
    assert len(kids) == 1, kids
    return kids[0]


def ids(lines) -> set[bytes]:
    return {m.group(1) for line in lines if (m := ID.search(line))}


def check_reads(path: Path) -> dict:
    """`mrtr-inspect check` of the recording: it reads it (exit 0 or 1, not 2) and reports JSON."""
    r = subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(path), "--format", "json",
                        "--fail-on", "never"], cwd=ROOT, capture_output=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def report_figures(name: str, **figures) -> None:
    print(f"\n[kills] {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


# -- the stdio tee ----------------------------------------------------------------------------------


def request(i: int) -> bytes:
    return (f'{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":'
            f'{{"text":"message {i}"}},{META}}}}}\n').encode()


@pytest.mark.parametrize("what", ["tee", "every process"])
def test_a_killed_tee_loses_no_message_that_crossed(tmp_path, what):
    """20,000 requests through the tee to bench/echo_server.py, SIGKILL after 8,000 answers: of the
    tee alone (its analysis process lives on and ends the session in the file), or of the tee, its
    analysis process and its child at once. The recording lacks at most one message that crossed.
    The analysis process follows the recording (live_inputs.RecordedInput): when it outlives the
    tee, its report is `check`'s of the recording it ended."""
    record, received, report = tmp_path / "r.jsonl", tmp_path / "received", tmp_path / "report.json"
    server = [sys.executable, str(ROOT / "bench" / "echo_server.py"), str(received)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MRTR_INSPECT_REDACTION_KEY": "test-key"}
    p = subprocess.Popen(tee_cmd("--record", str(record), "--report", str(report), "--quiet", cmd=server), cwd=ROOT, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    try:
        w, r = p.stdin.fileno(), p.stdout.fileno()
        os.write(w, request(0))  # the tee, its analysis and the server are up once this comes back
        buf = b""
        while b"\n" not in buf:
            buf += os.read(r, 65536)
        analysis = analysis_of(p.pid)
        pids = [p.pid, analysis] + [k for k, cmd in children(p.pid) if k != analysis]
        assert len(pids) == 3

        def write_all() -> None:
            try:
                for i in range(1, MESSAGES + 1):
                    os.write(w, request(i))
            except OSError:  # the tee is gone
                pass

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        answers = buf.count(b"\n")
        while answers < KILL_AFTER + 1:
            chunk = os.read(r, 65536)
            assert chunk, "the tee closed its output before the kill"
            buf += chunk
            answers += chunk.count(b"\n")
        for pid in (pids[:1] if what == "tee" else pids):
            os.kill(pid, signal.SIGKILL)
        while chunk := os.read(r, 65536):  # what was in the pipe already
            buf += chunk
        p.wait(WAIT)
        writer.join(WAIT)
        for pid in pids[1:]:
            wait_until(lambda: gone(pid), what=f"process {pid} to end")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    got = buf.split(b"\n")[:-1]  # whole answers only
    crossed_c2s = ids(received.read_bytes().split(b"\n")[:-1])
    crossed_s2c = ids(got)
    notes = ReadNotes()
    frames = list(read_frames(record, notes))
    lines = [f for f in frames if type(f) is StdioLine and f.eol]
    rec_c2s, rec_s2c = ids(f.data for f in lines if f.direction == "c2s"), ids(f.data for f in lines if f.direction == "s2c")
    missing = len(crossed_c2s - rec_c2s) + len(crossed_s2c - rec_s2c)
    report_figures(f"stdio, kill {what}", crossed=len(crossed_c2s) + len(crossed_s2c), recorded=len(lines),
                   missing=missing, torn_tail=notes.torn_tail)
    assert len(crossed_s2c) > KILL_AFTER and len(crossed_c2s) >= len(crossed_s2c)
    assert missing <= 1
    # a SIGKILL that lands during the tee's write() of a chunk's lines cuts the write short (Linux
    # stops a write to a file for a fatal signal): the file ends in a line cut short, which the
    # surviving analysis ends before the session's end. The bytes of that write had not been passed
    # on yet (the tee records before it forwards), so nothing that crossed is lost by it
    assert len(notes.skipped) <= (1 if what == "tee" else 0), notes.skipped
    assert all("cut short" in why for _, why in notes.skipped), notes.skipped
    checked = check_reads(record)
    if what == "tee":  # the analysis process outlived it and ended the session in the file
        assert type(frames[-1]) is SessionEnd
        live = json.loads(report.read_text())
        assert live["summary"] == checked["summary"] and live["findings"] == checked["findings"]
        assert live["chains"] == checked["chains"]
    assert checked["summary"]["messages"] >= len(crossed_c2s) + len(crossed_s2c) - 1


# -- the HTTP proxy -------------------------------------------------------------------------------


def _answer(req, write) -> None:
    m = ID.search(req.body)
    rid = m.group(1).decode() if m else "0"
    write(json_response(b'{"jsonrpc":"2.0","id":"%s","result":{"content":[],"resultType":"complete"}}' % rid.encode()))


class _Mitmdump:
    """Stock `mitmdump -s addons/mrtr_inspect.py` in reverse mode, recording (the analysis on a thread)."""

    def __init__(self, upstream: str, record: Path, confdir: Path) -> None:
        from tests.e2e.test_http_proxy import LineReader, child_env

        exe = Path(sys.executable).with_name("mitmdump")
        self.proc = subprocess.Popen(
            [str(exe), "-s", "addons/mrtr_inspect.py", "--mode", f"reverse:{upstream.rsplit('/mcp', 1)[0]}",
             "--listen-host", "127.0.0.1", "--listen-port", "0", "--set", f"confdir={confdir}",
             "--set", f"mrtr_record={record}"],
            cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        m = LineReader(self.proc.stdout).wait(r"listening at 127\.0\.0\.1:(\d+)")
        assert m is not None, "mitmdump did not start"
        self.port = int(m.group(1))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("what", ["proxy", "every process", "mitmdump"])
def test_a_killed_proxy_loses_at_most_the_message_in_flight_per_client(tmp_path, what):
    """4 clients, each on its own keep-alive connection, POST tools/calls through the proxy as fast as
    the answers come; SIGKILL after 2,000 answers of the proxy alone, of the proxy and its analysis
    process at once, or of stock mitmdump running the addon. Per client, the recording lacks at most
    one message that crossed."""
    record = tmp_path / "r.jsonl"
    upstream = Upstream(_answer)
    upstream.server.handle_error = lambda *_: None  # the proxy's connections reset by the kill: expected
    if what == "mitmdump":
        proxy = _Mitmdump(upstream.url, record, tmp_path / "mitmproxy")
        pids = [proxy.proc.pid]
    else:
        proxy = ProxyRun(upstream.url, "--record", str(record), "--quiet")
    try:
        if what != "mitmdump":
            proxy.ready()
            pids = [proxy.proc.pid, analysis_of(proxy.proc.pid)]
        answered: dict[int, list[bytes]] = {c: [] for c in range(HTTP_CLIENTS)}
        total = [0]
        lock = threading.Lock()
        enough = threading.Event()

        def client(c: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=WAIT)
            try:
                for i in range(HTTP_REQUESTS):
                    body = ('{"jsonrpc":"2.0","id":"c%d-%d","method":"tools/call","params":{"name":"echo",'
                            '"arguments":{},%s}}' % (c, i, META)).encode()
                    conn.request("POST", "/mcp", body=body, headers={
                        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
                    answered[c].append(conn.getresponse().read())
                    with lock:
                        total[0] += 1
                        if total[0] >= HTTP_KILL_AFTER:
                            enough.set()
            except (OSError, http.client.HTTPException):  # the proxy is gone
                pass
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(HTTP_CLIENTS)]
        for t in threads:
            t.start()
        assert enough.wait(300), "the clients did not get their answers"
        for pid in (pids[:1] if what == "proxy" else pids):
            os.kill(pid, signal.SIGKILL)
        for t in threads:
            t.join(WAIT)
        proxy.proc.wait(WAIT)
        for pid in pids[1:]:
            wait_until(lambda: gone(pid), what="the analysis process to end")
    finally:
        proxy.kill()
        upstream.close()
    notes = ReadNotes()
    frames = list(read_frames(record, notes))
    rec_req = ids(f.body for f in frames if type(f) is HttpRequest)
    rec_resp = ids(f.data for f in frames if type(f) is HttpBody)
    crossed_req = ids(r.body for r in upstream.received)
    figures = {}
    for c in range(HTTP_CLIENTS):
        mine = re.compile(rb"c%d-" % c)
        req = {i for i in crossed_req if mine.match(i)}
        resp = {i for i in ids(answered[c]) if mine.match(i)}
        missing = len(req - rec_req) + len(resp - rec_resp)
        figures[f"client{c}"] = f"{len(req) + len(resp)} crossed/{missing} missing"
        assert missing <= 1, (c, sorted(req - rec_req), sorted(resp - rec_resp))
    report_figures(f"http, kill {what}", **figures, torn_tail=notes.torn_tail)
    assert sum(len(a) for a in answered.values()) >= HTTP_KILL_AFTER
    assert not notes.skipped
    if what == "proxy":
        assert type(frames[-1]) is SessionEnd
    check_reads(record)
