"""FastMCP (PyPI `fastmcp`, pinned in the test extra beside `mcp==2.3.0`) as a real third-party peer, in
both eras and over both transports, as the official SDKs are:

    FastMCP client ──▶ mrtr-inspect stdio --record R -- FastMCP server (stdio)
    FastMCP client ──▶ mrtr-inspect --upstream http://…/mcp --record R ──▶ FastMCP server (Streamable HTTP)

The server (fastmcp_peer.py) asks the user to confirm a deployment: on 2026-07-28 with an
`input_required` result whose requestState FastMCP seals, on 2025-11-25 with `ctx.elicit`, a
server-initiated elicitation/create while the call is open (RULES.md §13). The client calls deploy,
then a slow tool it cancels, then deploy again; in the modern era it also drives deploy by hand with an
altered requestState, which the server refuses, and then the verbatim one.

What the real peer showed before issue 25's items 17 and 18 were fixed: on legacy stdio the second
deploy's question, asked while it was the only request really open (the slow call was cancelled and
never answered), was left unattached, its chain 0 rounds (RULES.md decision 14); and the verbatim
retry after the refused one started a second, 0-round chain (decision 13).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import ROOT, env, tee_cmd
from tests.e2e.fastmcp_peer import WAIT
from tests.e2e.test_everything import check
from tests.e2e.test_http_proxy import LineReader, ProxyRun

PEER = [sys.executable, "-m", "tests.e2e.fastmcp_peer"]
STEPS = {"modern": "deploy,cancel,deploy,tamper", "legacy": "deploy,cancel,deploy"}
SAYS = {"deploy": "deploy: deployed to production", "cancel": "cancel: cancelled",
        "tamper": "tamper: refused -32602, then deployed to staging"}
# how each era's and transport's questions are tied to their call (RULES.md §3, §13)
LINK = {("stdio", "modern"): "state", ("http", "modern"): "state",
        ("stdio", "legacy"): "time",  # the only request open on the pipe (the cancelled one is not, decision 14)
        ("http", "legacy"): "stream"}  # elicitation/create on the call's own POST event stream
# the true findings, and why each is true
TRUE = {
    # the `tamper` step alters the sealed requestState on purpose
    ("request-state-altered", "error"),
}
RUNS = [("stdio", "modern"), ("stdio", "legacy"), ("http", "modern"), ("http", "legacy")]


def client(mode: str, *target: str) -> list[str]:
    return [*PEER, "client", mode, STEPS[mode], *target]


def stdio_run(mode: str, tmp: Path) -> dict:
    record, report = tmp / "session.jsonl", tmp / "report.json"
    tee = tee_cmd("--record", str(record), "--report", str(report), cmd=[*PEER, "server", "stdio"])
    done = subprocess.run(client(mode, "--", *tee), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return {"out": done.stdout.splitlines(), "report": json.loads(report.read_text()), "check": check(record)}


def http_run(mode: str, tmp: Path) -> dict:
    record = tmp / "session.jsonl"
    server = subprocess.Popen([*PEER, "server", "http"], cwd=ROOT, env=env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        m = LineReader(server.stdout).wait(r"^listening on (http://\S+)$")
        assert m is not None, "the FastMCP server did not start"
        proxy = ProxyRun(m.group(1), "--record", str(record), "--quiet").ready()
        done = subprocess.run(client(mode, proxy.url), cwd=ROOT, env=env(), capture_output=True, text=True,
                              timeout=180)
        assert done.returncode == 0, done.stderr
        assert proxy.stop() == 0, proxy.err.rest()
    finally:
        if proxy is not None:
            proxy.kill()
        if server.poll() is None:
            server.kill()
            server.wait()
    r = check(record)
    return {"out": done.stdout.splitlines(), "report": r, "check": r}


@pytest.fixture(scope="module", params=RUNS, ids=["-".join(r) for r in RUNS])
def run(request, tmp_path_factory):
    transport, mode = request.param
    tmp = tmp_path_factory.mktemp(f"fastmcp-{transport}-{mode}")
    got = (stdio_run if transport == "stdio" else http_run)(mode, tmp)
    return {**got, "transport": transport, "mode": mode}


def chains(run: dict, target: str) -> list[dict]:
    return [c for c in run["check"]["chains"] if c["target"] == target]


def test_the_client_gets_the_servers_answers(run):
    assert run["out"] == [SAYS[s] for s in STEPS[run["mode"]].split(",")]


def test_each_deploy_is_one_chain_of_one_round_tied_by_its_evidence(run):
    era = run["mode"]
    deploys = [c for c in chains(run, "deploy") if c["requests"] and c["round_details"]]
    asked = 2 + (era == "modern")  # the tamper step's deploy is one more
    assert len(chains(run, "deploy")) == len(deploys) == asked
    for c in deploys:
        assert (c["era"], c["rounds"], c["outcome"]) == (era, 1, "complete"), c
        (rd,) = c["round_details"]
        assert [a["method"] for a in rd["asked"].values()] == ["elicitation/create"]
    # the user's time: the round's wait covers the handler's WAIT
    waits = [c["timeline"][1]["wait_ms"] if era == "modern" else c["round_details"][0]["wait_ms"] for c in deploys[:2]]
    assert all(w >= WAIT * 1000 for w in waits), waits
    assert [c["link"] for c in deploys[:2]] == [LINK[(run["transport"], era)]] * 2


def test_the_cancelled_call_is_cancelled_and_the_next_question_is_no_stranger(run):
    """Item 17 with the real peer: after the cancel, the second deploy's question is its round."""
    (slow,) = chains(run, "slow")
    assert (slow["rounds"], slow["outcome"]) == (0, "cancelled")
    assert not [f for f in run["check"]["findings"] if f["rule"] == "legacy-server-request-unattached"]


def test_a_verbatim_retry_after_the_refused_one_continues_its_chain(run):
    """Item 18 with the real peer: FastMCP refuses the altered state (-32602); the verbatim retry
    continues the same chain, which ends complete."""
    if run["mode"] != "modern":
        pytest.skip("MRTR retries are of the 2026-07-28 era")
    (c,) = [c for c in chains(run, "deploy") if len(c["requests"]) == 3]
    assert (c["rounds"], c["outcome"], c["error_code"]) == (1, "complete", None)
    assert [e.get("error_code") for e in c["timeline"]] == [None, -32602, None]
    (f,) = [f for f in run["check"]["findings"] if f["rule"] == "request-state-altered"]
    assert f["chain"] == c["id"]


def test_no_warning_or_error_but_the_true_ones(run):
    seen = {(f["rule"], f["severity"]) for f in run["check"]["findings"] if f["severity"] != "info"}
    assert seen == (TRUE if run["mode"] == "modern" else set()), run["check"]["findings"]


def test_the_live_report_is_what_check_reads(run):
    assert run["report"] == run["check"]
