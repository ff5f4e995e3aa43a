"""The addon in stock mitmproxy: `mitmdump -s addons/mrtr_inspect.py --mode reverse:…`, with the
official SDK server and client on either side. mitmdump is given port 0 and says the port it got."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio

from tests.e2e.test_http_proxy import ROOT, WAIT, LineReader, child_env
from tests.e2e.test_http_sdk import EXPECTED, TOOLS, run_client, start_server

MITMDUMP = Path(__import__("sys").executable).with_name("mitmdump")


def mitmdump(tmp_path, port: int, *sets: str) -> tuple[subprocess.Popen, LineReader]:
    """mitmdump with the addon in front of 127.0.0.1:PORT, `--set` each of `sets`; its output read."""
    args = [a for kv in sets for a in ("--set", kv)]
    dump = subprocess.Popen(
        [str(MITMDUMP), "-s", "addons/mrtr_inspect.py", "--mode", f"reverse:http://127.0.0.1:{port}",
         "--listen-host", "127.0.0.1", "--listen-port", "0", "--set", f"confdir={tmp_path / 'mitmproxy'}", *args],
        cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return dump, LineReader(dump.stdout)


def test_the_addon_records_and_stitches_under_plain_mitmdump(tmp_path):
    record, rep = tmp_path / "session.jsonl", tmp_path / "report.json"
    server, port = start_server(tmp_path / "server.jsonl")
    dump, out = mitmdump(tmp_path, port, f"mrtr_record={record}", f"mrtr_report={rep}", "mrtr_hop=front")
    try:
        m = out.wait(r"listening at 127\.0\.0\.1:(\d+)")
        assert m is not None, out.rest()
        said, _ = anyio.run(run_client, f"http://127.0.0.1:{m.group(1)}/mcp")
        assert out.wait(r"c6 tools/call flaky_deploy  error") is not None  # its event log shows the chains
        dump.send_signal(signal.SIGTERM)
        assert dump.wait(WAIT) == 0
    finally:
        for p in (dump, server):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert said[0] == "deploy: deployed to production"
    report = json.loads(rep.read_text())
    assert {c["target"]: (c["rounds"], c["outcome"]) for c in report["chains"]} == EXPECTED
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert report["inputs"] == [str(record)]
    check = subprocess.run([__import__("sys").executable, "-m", "mrtr_inspect", "check", str(record), "--format", "json"],
                           cwd=ROOT, env=child_env(), capture_output=True, timeout=WAIT)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["chains"] == report["chains"]
    assert len(report["chains"]) == len(TOOLS)
    # mrtr_hop names the hop in the session's header, and so each chain; one hop alone ties nothing
    header = json.loads(record.read_text().splitlines()[0])
    assert header["hop"] == "front" and {c["hop"] for c in report["chains"]} == {"front"}
    assert report["hops"] == []
