"""Flow files written by mitmdump while the addon runs (`mitmdump -s addons/mrtr_inspect.py -w FILE`),
read again by `import` and by the addon itself (`mitmdump -n -r FILE -s addons/mrtr_inspect.py`).

The official SDK server and client on either side of a real mitmdump; the client asks for progress,
so slow_deploy's calls are answered with event streams, which the addon streams. Without
`store_streamed_bodies` mitmproxy keeps no streamed body: those exchanges are left out, with a note,
and nothing else is mistaken; with it, both readings give the addon's live analysis."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
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


def chains(rep: dict) -> list[tuple]:
    return [tuple(c[k] for k in KEYS) for c in rep["chains"]]


def findings(rep: dict) -> list[tuple]:
    return sorted((f["rule"], f["severity"], tuple(f["messages"])) for f in rep["findings"])


@pytest.mark.parametrize("store", [False, True], ids=["streamed-bodies-not-kept", "store_streamed_bodies"])
def test_a_flow_file_of_the_addon_reads_back_as_the_live_analysis_or_says_what_it_lacks(procs, tmp_path, store):
    live, flows = _live(procs, tmp_path, *(["--set", "store_streamed_bodies=true"] if store else []))
    rep, said = _imported(tmp_path, flows)
    back = _reread(tmp_path, flows)
    if store:  # every body is in the file: the live analysis, both ways
        for got in (rep, back):
            assert chains(got) == chains(live) and findings(got) == findings(live)
            assert got["summary"] == live["summary"] and "notes" not in got
        assert "left out" not in said
        return
    # the two slow_deploy exchanges are left out, said once with the remedy; nothing else is mistaken
    assert "left out 2 exchange(s) whose body the flow file does not hold" in said
    assert "--set store_streamed_bodies=true" in said
    [note] = back["notes"]
    assert note.startswith("did not analyse 2 exchange(s) whose body the file read") and "store_streamed_bodies" in note
    kept = [c for c in chains(live) if c[0] != STREAMED]
    for got in (rep, back):
        assert chains(got) == kept
        assert got["summary"]["errors"] == got["summary"]["warnings"] == 0
