"""`replay verify` against live servers that go away or cannot be reached: what it says, how fast,
and with which exit status (real processes)."""

from __future__ import annotations

import sys

from .conftest import cli
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
