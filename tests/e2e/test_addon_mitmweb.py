"""What a mitmproxy user sees of MCP (issue 14, items 7-10), with the real mitmweb and mitmdump, the
official SDK server and client on either side, and one request of a client that breaks a rule
(`id: null`, request-id-null, an error):

- mitmweb's flow list (its REST API, `/flows`): each flow's comment says what it is (chain, round,
  what answered it), the flow with an error finding is marked;
- the "MCP JSON-RPC" contentview (`/flows/ID/response/content/auto.json`): the answer that ends a
  chain is headed by its chain too;
- a flow file of `mitmdump -w`: every flow's notes, the response's and the findings at its end
  (chain-ended-error) included, its comment and mark, filterable with mitmproxy's filters;
- mitmdump's output: the analysis logs through mitmproxy's log on its event loop (where mitmproxy
  prints its own lines), error findings at ERROR; where the recording and the report went; a
  recording path that cannot be written is one line and exit status 1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.e2e.test_http_proxy import WAIT, LineReader, child_env
from tests.e2e.test_http_sdk import EXPECTED, run_client, start_server

BIN = Path(sys.executable).parent
BAD = b'{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{}}'
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2026-07-28"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until(what, fn, deadline: float = WAIT):
    """`fn()` once it is truthy (polled until the deadline: the analysis trails the traffic)."""
    end = time.monotonic() + deadline
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _traffic(port: int) -> None:
    said, _ = anyio.run(run_client, f"http://127.0.0.1:{port}/mcp")
    assert said[0] == "deploy: deployed to production"
    httpx2.post(f"http://127.0.0.1:{port}/mcp", content=BAD, headers=HEADERS, timeout=WAIT)


def _mitm(procs, tmp_path: Path, tool: str, upstream: int, *args: str, env: dict | None = None):
    p = procs.start([str(BIN / tool), "-s", "addons/mrtr_inspect.py", "--mode", f"reverse:http://127.0.0.1:{upstream}",
                     "--listen-host", "127.0.0.1", "--listen-port", "0", "--set", f"confdir={tmp_path / 'mitmproxy'}",
                     *args], stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT, **({"env": env} if env else {}))
    out = LineReader(p.stdout)
    m = out.wait(r"listening at 127\.0\.0\.1:(\d+)")
    assert m is not None, out.rest()
    return p, out, int(m.group(1))


def _stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGTERM)
    assert p.wait(WAIT) == 0


def _final_answers(comments: list[str]) -> list[str]:
    return [c for c in comments if c.endswith("final response") or "final response" in c]


def test_mitmweb_lists_what_each_flow_is_and_heads_a_chain_s_last_answer_with_its_chain(procs, tmp_path):
    server, port = start_server(tmp_path / "server.jsonl")
    procs.started.append(server)
    web_port = _free_port()
    web, out, proxy = _mitm(procs, tmp_path, "mitmweb", port, "--set", "web_open_browser=false",
                            "--set", f"web_port={web_port}", "--set", "web_password=test",
                            "--set", "store_streamed_bodies=true", "--set", "web_columns=tls",
                            "--set", "web_columns=icon", "--set", "web_columns=path", "--set", "web_columns=method",
                            "--set", "web_columns=status", "--set", "web_columns=comment")
    api = httpx2.Client(base_url=f"http://127.0.0.1:{web_port}", headers={"Authorization": "Bearer test"}, timeout=WAIT)
    _traffic(proxy)
    flows = _until("the flow marked for its error", lambda: (fs := api.get("/flows").json()) and fs[-1]["marked"] and fs)
    comments = [f["comment"] for f in flows]
    # every MCP flow says what it is; the list shows the chains and their rounds
    assert "c2 tools/call release · retry of round 1 → round 2: input_required" in comments
    assert "c1 tools/call deploy · first request → round 1: input_required" in comments
    assert "c6 tools/call flaky_deploy · retry of round 1 → final response (error)" in comments
    assert any(c.startswith("tools/list id=") and c.endswith("→ result") for c in comments)
    assert len(_final_answers(comments)) == len(EXPECTED)
    # the flow with an error finding is marked, and its comment names the rule; no other is marked
    assert flows[-1]["marked"] == "🔴" and "· error request-id-null" in flows[-1]["comment"]
    assert [f["marked"] for f in flows[:-1]] == [""] * (len(flows) - 1)
    # the answer that ended chain c1 is headed by its chain, as the round's answer is
    [last] = [f for f in flows if f["comment"].startswith("c1 tools/call deploy · retry of round 1")]
    view = api.get(f"/flows/{last['id']}/response/content/auto.json").json()
    assert view["view_name"] == "MCP JSON-RPC"
    assert view["text"].splitlines()[0] == "# result id=3  ·  chain c1 tools/call deploy, final response"
    [rd] = [f for f in flows if f["comment"].startswith("c1 tools/call deploy · first request")]
    head = api.get(f"/flows/{rd['id']}/response/content/auto.json").json()["text"].splitlines()[0]
    assert head == "# result id=2  ·  chain c1 tools/call deploy, round 1: input_required"
    assert api.get("/options.json").json()["web_columns"]["value"] == ["tls", "icon", "path", "method", "status", "comment"]
    _stop(web)


def test_a_flow_file_of_mitmdump_keeps_every_note_and_the_log_is_mitmproxy_s(procs, tmp_path):
    from mitmproxy import flowfilter
    from mitmproxy.io import FlowReader

    server, port = start_server(tmp_path / "server.jsonl")
    procs.started.append(server)
    flows, record, rep, probe = (tmp_path / n for n in ("flows.mitm", "s.jsonl", "report.json", "log.jsonl"))
    env = child_env() | {"MRTR_TEST_LOG_PROBE": str(probe)}
    dump, out, proxy = _mitm(procs, tmp_path, "mitmdump", port, "-s", "tests/e2e/log_probe.py",
                             "--set", "store_streamed_bodies=true", "-w", str(flows),
                             "--set", f"mrtr_record={record}", "--set", f"mrtr_report={rep}", env=env)
    _traffic(proxy)
    assert out.wait(r"request-id-null") is not None, out.rest()
    _stop(dump)
    with open(flows, "rb") as f:
        saved = list(FlowReader(f).stream())
    mcp = [fl for fl in saved if fl.request.content]
    # every flow holds its request's and its response's notes, the chain's last answer with its chain
    for fl in mcp:
        notes = fl.metadata["mrtr-inspect"]
        assert {n["direction"] for n in notes["messages"]} >= {"c2s", "s2c"} or fl is mcp[-1], notes
        assert fl.comment == notes["comment"] and fl.comment
    finals = [n for fl in mcp for n in fl.metadata["mrtr-inspect"]["messages"] if n.get("step") == "final response"]
    assert sorted(n["chain"].split()[-1] for n in finals) == sorted(EXPECTED)
    [flaky] = [fl for fl in mcp if fl.comment.startswith("c6 tools/call flaky_deploy · retry")]
    assert "chain-ended-error" in [f["rule"] for f in flaky.metadata["mrtr-inspect"]["findings"]]
    # the list can be filtered with mitmproxy's own filters
    assert [fl.comment for fl in mcp if flowfilter.parse("~marked")(fl)] == [mcp[-1].comment]
    assert len([fl for fl in mcp if flowfilter.parse("~comment \"^c2 \"")(fl)]) == 4  # release: the first request, three retries
    # the analysis' lines went through mitmproxy's log on its event loop, an error finding at ERROR
    logged = [json.loads(line) for line in probe.read_text().splitlines()]
    assert {r["thread"] for r in logged} == {"MainThread"}
    [bad] = [r for r in logged if "request-id-null" in r["text"]]
    assert bad["level"] == "ERROR"
    assert [r["level"] for r in logged if "flaky_deploy  error" in r["text"]] == ["INFO"]  # a chain line
    # on exit: where the recording and the report went
    assert [r["text"] for r in logged[-2:]] == [f"mrtr-inspect: recording: {record}", f"mrtr-inspect: report: {rep}"]
    assert out.wait(r"^\[[\d:.]+\] mrtr-inspect: report: ") is not None  # in mitmdump's output, as its own lines
    errors = [f for f in json.loads(rep.read_text())["findings"] if f["severity"] == "error"]
    assert "request-id-null" in {f["rule"] for f in errors}
    assert len([r for r in logged if r["level"] == "ERROR"]) == len(errors)  # each error finding, at ERROR


@pytest.mark.parametrize("tool", ["mitmdump", "mitmweb"])
def test_a_recording_path_that_cannot_be_written_is_one_line_and_exit_status_1(procs, tmp_path, tool):
    extra = ["--set", "web_open_browser=false", "--set", f"web_port={_free_port()}"] if tool == "mitmweb" else []
    r = procs.run([str(BIN / tool), "-s", "addons/mrtr_inspect.py", "--mode", "reverse:http://127.0.0.1:9",
                   "--listen-host", "127.0.0.1", "--listen-port", "0", "--set", f"confdir={tmp_path / 'mitmproxy'}",
                   "--set", f"mrtr_record={tmp_path / 'nonexistent' / 'x'}", *extra], timeout=WAIT)
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == 1, text
    assert "Traceback" not in text
    [line] = [ln for ln in text.splitlines() if "mrtr-inspect" in ln]
    assert line.endswith(f"mrtr-inspect: cannot write recording {tmp_path / 'nonexistent' / 'x'}: No such file or directory")


MITMWEB_DEFAULT = ["tls", "icon", "path", "method", "status", "size", "time"]


@pytest.mark.parametrize("given, shown", [
    ([], MITMWEB_DEFAULT + ["comment"]),  # issue 25 item 15: the comment column without a --set
    (["path", "status"], ["path", "status"]),  # columns the user chose stay as they are
])
def test_mitmweb_shows_the_comment_column_unless_the_user_chose_the_columns(procs, tmp_path, given, shown):
    web_port = _free_port()
    columns = [a for c in given for a in ("--set", f"web_columns={c}")]
    after = tmp_path / "after.py"  # a script loaded after the addon: its running hook comes after the addon's
    after.write_text("import logging\n\n\nclass After:\n    def running(self):\n"
                     "        logging.getLogger('after').warning('after: running')\n\n\naddons = [After()]\n")
    web, out, _ = _mitm(procs, tmp_path, "mitmweb", 9, "-s", str(after), "--set", "web_open_browser=false",
                        "--set", f"web_port={web_port}", "--set", "web_password=test", *columns)
    assert out.wait(r"after: running") is not None, out.rest()  # the addon's running hook is done
    api = httpx2.Client(base_url=f"http://127.0.0.1:{web_port}", headers={"Authorization": "Bearer test"}, timeout=WAIT)
    options = api.get("/options.json").json()
    assert options["web_columns"]["default"] == MITMWEB_DEFAULT  # mitmweb's own default is left as it is
    assert options["web_columns"]["value"] == shown
    _stop(web)
