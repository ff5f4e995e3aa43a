"""`replay verify` against live servers that go away or cannot be reached: what it says, how fast,
and with which exit status (real processes)."""

from __future__ import annotations

import http.server
import json
import sys
import threading

from .conftest import SAMPLE, cli, sdk_server
from .test_sdk_http import RECORDING as HTTP_RECORDING
from .test_sdk_stdio import RECORDING

# a server that exits at once, without reading a line
EXITS = [sys.executable, "-c", "import sys; sys.exit(3)"]
# a server that answers the first request (server/discover), then exits
ANSWERS_ONE = [sys.executable, "-c", "import json, sys\n"
               "rid = json.loads(sys.stdin.readline())['id']\n"
               "print(json.dumps({'jsonrpc': '2.0', 'id': rid, 'result': {}}), flush=True)\n"
               "sys.exit(4)"]


def test_a_server_that_exits_at_once_cannot_be_started_exit_2():
    """Nothing waits out --timeout (600 s here, longer than the test allows): the first request
    fails at the exit, every later one at once, and as none was ever answered the server counts as
    one that cannot be started: exit 2, with its exit status."""
    r = cli("replay", "verify", str(RECORDING), "--timeout", "600", "--", *EXITS)
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    assert r.stderr.decode().splitlines() == [
        "mrtr-inspect: the server closed its output (exit status 3) before answering any request"]


def test_a_server_that_exits_after_one_answer_fails_the_rest_at_once():
    """Near miss: a server that answered once did start. Its answer is compared (it differs), the
    requests after its exit fail at once with its exit status, the retries are skipped: exit 1."""
    r = cli("replay", "verify", str(RECORDING), "--timeout", "600", "--quiet", "--", *ANSWERS_ONE)
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert "  differs  server/discover id=1 (#0)" in out
    assert "the server closed its output (exit status 4) before answering\n" in out
    assert "before answering any request" not in out
    assert out.splitlines()[-1] == "0 same, 1 differ, 7 skipped, 6 failed"


def died_at_start(tmp_path) -> tuple:
    """A recording of a server that died at start: the real client's server/discover, never answered."""
    header, discover = RECORDING.read_bytes().splitlines()[:2]
    rec = tmp_path / "died.jsonl"
    rec.write_bytes(header + b"\n" + discover + b"\n")
    return rec, discover.split(b"\t", 1)[1]


def test_a_request_never_answered_is_served_the_replays_error_and_a_miss(tmp_path):
    """It was served by sending nothing: 0 misses, exit 0, a client waiting for ever. Now a note at
    load, the replay's own error at once, a miss, exit 1."""
    rec, discover = died_at_start(tmp_path)
    r = cli("replay", "serve", "--stdio", str(rec), input=discover + b"\n")
    assert r.returncode == 1
    [reply] = r.stdout.decode().splitlines()
    assert json.loads(reply)["error"]["message"] == (
        "mrtr-inspect replay: the recording has no response to server/discover id=1 (#0): "
        "the recorded server never answered it")
    err = r.stderr.decode().splitlines()
    assert err[0] == (f"mrtr-inspect: note: {rec}: server/discover id=1 (#0) has no recorded response "
                      "(the recorded server never answered it)")
    assert err[1] == f"mrtr-inspect: replay of {rec}: 0 requests served, 1 miss"


def test_verify_never_calls_a_request_never_answered_the_same(tmp_path):
    """verify said `same` (both answered nothing, as it did not wait for the live answer): the live
    server's answer now differs from none (exit 1), and a live server that exits at once cannot be
    started (exit 2)."""
    rec, _ = died_at_start(tmp_path)
    r = cli("replay", "verify", str(rec), "--quiet", "--", *SAMPLE)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert "  differs  server/discover id=1 (#0)\n" in out
    assert "the recording has no response: the recorded server never answered it\n" in out
    assert "response: recorded absent, live {" in out
    assert out.splitlines()[-1] == "0 same, 1 differ, 0 skipped, 0 failed"
    r = cli("replay", "verify", str(rec), "--timeout", "600", "--", *EXITS)
    assert r.returncode == 2, r.stdout.decode()


class _OnlyDiscover(http.server.BaseHTTPRequestHandler):
    """An HTTP server that answers server/discover, and 404 (text) to every other request."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if msg.get("method") == "server/discover":
            body, status, kind = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}).encode(), 200, "json"
        else:
            body, status, kind = b"nothing here", 404, "plain"
        self.send_response(status)
        self.send_header("content-type", f"application/{kind}" if kind == "json" else "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_verify_at_a_wrong_http_path_cannot_reach_the_server(running):
    """Every request got 404 (`the response ended without a JSON-RPC response`, exit 1): no MCP
    endpoint is there, the server is not reached: exit 2, with the status (near miss: the right path
    passes, test_sdk_http.test_verify_passes_against_a_fresh_server)."""
    server = running(sdk_server("--http"))
    wrong = server.url.rsplit("/", 1)[0] + "/wrong"
    r = cli("replay", "verify", str(HTTP_RECORDING), "--quiet", "--upstream", wrong)
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    assert r.stderr.decode().splitlines() == [
        f"mrtr-inspect: {wrong} answered HTTP 404 Not Found without a JSON-RPC response"]


def test_a_failure_shows_the_http_status(tmp_path):
    """A server reached that answers some requests 404: each failure shows the status, and the run
    is a failed verify, not an unreachable server (exit 1)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OnlyDiscover)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    try:
        r = cli("replay", "verify", str(HTTP_RECORDING), "--quiet", "--upstream", url)
    finally:
        httpd.shutdown()
        httpd.server_close()
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert "  differs  server/discover id=1" in out
    assert out.count(f"           {url} answered HTTP 404 Not Found without a JSON-RPC response\n") == 6
    assert "the response ended without a JSON-RPC response" not in out
    assert out.splitlines()[-1] == "0 same, 1 differ, 7 skipped, 6 failed"


# a server that closes its output at once and runs on (until verify stops it)
CLOSES_AND_RUNS = [sys.executable, "-c", "import os, sys\nos.close(1)\nsys.stdin.buffer.read()\nimport time\n"
                   "time.sleep(600)"]


def test_a_server_that_closes_its_output_and_runs_on_fails_at_once():
    """It closed its stdout without exiting: verify waited out --timeout for each request (600 s
    here) on a process that would never answer. Now what waits fails once the output closed, the
    status said as 'still running', and it counts as a server that cannot be started (exit 2)."""
    r = cli("replay", "verify", str(RECORDING), "--timeout", "600", "--", *CLOSES_AND_RUNS)
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    assert r.stderr.decode().splitlines() == [
        "mrtr-inspect: the server closed its output (still running) before answering any request"]
