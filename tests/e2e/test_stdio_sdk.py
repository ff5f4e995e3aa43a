"""The official Python SDK (mcp==2.3.0) client and server over stdio, through the tee.

    SDK client → capture A → mrtr-inspect stdio → capture B → SDK server (samples/server.py)

The captures keep each direction byte for byte on both sides of the tee: what the server wrote is
what the client read, and the other way round. The SDK server seals `requestState` with a random key
per process, so byte identity is proved within one run; a run without the tee gives the same bytes
but for those sealed tokens.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.e2e import helper, recorded_lines, tee_cmd
from tests.e2e.conftest import Processes

TOOLS = ("deploy", "release", "summarize", "workspace")
ROUNDS = {"deploy": 1, "release": 3, "summarize": 1, "workspace": 1}
ASKED = {"deploy": ["elicitation/create"], "release": ["elicitation/create"] * 3,
         "summarize": ["sampling/createMessage"], "workspace": ["roots/list"]}
CLIENT_SAYS = ["deploy: deployed to production", "release: released 1.0.0 as v1.0.0: first release",
               "summarize: summary: one request, several rounds", "workspace: roots: file:///workspace/project"]
SERVER = ["-m", "mrtr_inspect.samples.server"]
SEALED = re.compile(rb'"requestState":"v1\.[A-Za-z0-9_-]+"')


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One SDK session through the tee, with captures on both sides."""
    tmp = tmp_path_factory.mktemp("sdk")
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    record, report = tmp / "session.jsonl", tmp / "report.json"
    server = helper("capture", str(tmp / "b"), "--", sys.executable, *SERVER)
    tee = tee_cmd("--record", str(record), "--report", str(report), cmd=server)
    client = helper("sdk_client", ",".join(TOOLS), "--", *helper("capture", str(tmp / "a"), "--", *tee))
    ps = Processes()
    try:
        done = ps.run(client, timeout=120)
    finally:
        ps.close()
    assert done.returncode == 0, done.stderr.decode()
    return {"tmp": tmp, "record": record, "report": json.loads(report.read_text()), "client": done}


def test_the_client_gets_its_answers(session):
    assert session["client"].stdout.decode().splitlines() == CLIENT_SAYS


@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_is_one_complete_chain(session, tool):
    chains = [c for c in session["report"]["chains"] if c["target"] == tool]
    assert len(chains) == 1, chains
    c = chains[0]
    assert (c["method"], c["rounds"], c["outcome"], c["link"]) == ("tools/call", ROUNDS[tool], "complete", "state")
    assert len(c["requests"]) == ROUNDS[tool] + 1
    assert len(set(c["requests"])) == len(c["requests"])  # a new JSON-RPC id each round
    asked = [m["method"] for r in c["round_details"] for m in r["asked"].values()]
    assert asked == ASKED[tool]


def test_no_error_finding(session):
    report = session["report"]
    assert report["summary"]["errors"] == 0
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert report["summary"]["chains"] == len(TOOLS)


def test_bytes_cross_the_tee_unchanged(session):
    a, b = session["tmp"] / "a", session["tmp"] / "b"
    assert (a / "s2c").read_bytes() == (b / "s2c").read_bytes()  # what the server wrote, the client read
    assert (a / "c2s").read_bytes() == (b / "c2s").read_bytes()  # what the client wrote, the server read
    assert SEALED.search((a / "s2c").read_bytes())  # the sealed states went through too
    for d in ("c2s", "s2c"):
        wire = (b / d).read_bytes()
        assert wire.endswith(b"\n")
        assert recorded_lines(session["record"], d) == wire.split(b"\n")[:-1]


def test_check_of_the_recording_shows_what_the_live_session_showed(session, procs):
    done = procs.run([sys.executable, "-m", "mrtr_inspect", "check", str(session["record"]), "--format", "json"])
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == session["report"]


def test_same_bytes_as_without_the_tee(session, procs, tmp_path):
    server = helper("capture", str(tmp_path), "--", sys.executable, *SERVER)
    done = procs.run(helper("sdk_client", ",".join(TOOLS), "--", *server), timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == session["client"].stdout
    for d in ("c2s", "s2c"):
        direct = (tmp_path / d).read_bytes()
        teed = (session["tmp"] / "a" / d).read_bytes()
        assert len(SEALED.findall(direct)) == len(SEALED.findall(teed)) > 0
        assert SEALED.sub(b"<sealed>", direct) == SEALED.sub(b"<sealed>", teed)
