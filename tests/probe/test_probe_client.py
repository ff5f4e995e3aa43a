"""probe-client (RULES.md §14): the recorded server, changed on purpose, played to a live client.

The client under test is our own small client (tests/probe/mrtr_client.py), correct by default and
broken on purpose with --bug: each client bug of §14's table is caught by its mutation with its rule,
and the correct client gets no fail and no error or warning, over HTTP and over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main
from mrtr_inspect.probe.client_command import probe_client
from mrtr_inspect.probe.client_mutations import DIRECTORS
from mrtr_inspect.probe.client_runner import ClientOptions, expand
from mrtr_inspect.probe.stop import StopSignals

ROOT = Path(__file__).resolve().parents[2]
HTTP_REC = str(ROOT / "fixtures/test_sdk_http/test_the_client_completes_every_chain.jsonl")
STDIO_REC = str(ROOT / "fixtures/test_sdk_stdio/test_the_client_completes_every_chain.jsonl")
CLIENT = [sys.executable, "-m", "tests.probe.mrtr_client"]


def run(rec: str, cmd: list[str], only: tuple[str, ...] = (), timeout: float = 30.0, window: float = 2.0, **kw):
    import io

    out = io.StringIO()
    code, r, doc = probe_client(rec, tuple(cmd), options=ClientOptions(only, None, timeout, window, **kw),
                                fmt="json", out=out, err=io.StringIO())
    assert json.loads(out.getvalue()) == json.loads(json.dumps(doc, default=str))
    return code, doc


def verdicts(doc: dict) -> dict[str, tuple]:
    return {p["mutation"]: (p["verdict"], p["rule"]) for p in doc["probes"]}


def bad(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] != "info"]


def test_a_correct_client_over_http_fails_nothing():
    code, doc = run(HTTP_REC, CLIENT + ["http", "{url}", "--parallel"])
    v = verdicts(doc)
    assert list(v) == list(DIRECTORS)  # all thirteen, in the table's order
    assert all(verdict == "pass" for verdict, _ in v.values()), doc["probes"]
    assert not bad(doc) and code == 0
    assert doc["notes"] and "left out" in doc["notes"][0]  # the probe server's own answers are not the client's


def test_a_correct_client_over_stdio_fails_nothing():
    code, doc = run(STDIO_REC, CLIENT + ["stdio", "--", "{server}"], window=0.5)
    v = verdicts(doc)
    assert v.pop("parallel") == ("skipped", None)  # one call at a time: said, not failed
    assert all(verdict == "pass" for verdict, _ in v.values()), doc["probes"]
    assert not bad(doc) and code == 0


@pytest.mark.parametrize("mutation,bug,rule", [
    ("state-rotated", "alter-state", "request-state-altered"),
    ("state-rotated", "drop-state", "request-state-dropped"),
    ("state-only", "ignore-state-only", "client-ignored-state-only"),
    ("state-only", "drop-state", "request-state-dropped"),
    ("extra-round", "reuse-id", "retry-reused-id"),
    ("extra-round", "missing-key", "input-responses-missing-key"),
    ("many-rounds", "storm", "client-retry-storm"),
    ("all-kinds", "missing-key", "input-responses-missing-key"),
    ("undeclared-kind", "answer-undeclared", "client-answered-undeclared"),
    ("large-state", "truncate-state", "request-state-altered"),
    ("missing-capability", "resend-32021", "client-retried-after-32021"),
    ("parallel", "swap-state", "mrtr-fields-parallel-misuse"),
    ("fault-delay", "hang", "client-hung"),
])
def test_each_client_bug_is_caught_by_its_mutation(mutation, bug, rule):
    code, doc = run(HTTP_REC, CLIENT + ["http", "{url}", "--parallel", "--bug", bug], (mutation,),
                    timeout=5.0 if bug == "hang" else 30.0)  # a hung client costs the whole timeout
    assert verdicts(doc) == {mutation: ("fail", rule)}, doc["probes"]
    assert rule in {f["rule"] for f in doc["findings"]}
    f = next(f for f in doc["findings"] if f["rule"] == rule)
    assert f["details"]["probe"] == mutation and f["messages"]
    assert code == (1 if f["severity"] == "error" else 0)


def test_the_hung_client_over_stdio_too():
    code, doc = run(STDIO_REC, CLIENT + ["stdio", "--bug", "hang", "--", "{server}"], ("fault-delay", "fault-disconnect"),
                    timeout=4.0)
    assert verdicts(doc) == {"fault-delay": ("fail", "client-hung"), "fault-disconnect": ("pass", None)}
    assert code == 1


def test_the_near_misses_pass():
    """What the new rules must not report: a client that leaves an undeclared kind out, resends once
    after -32021 at most, stops within 50 rounds, cancels a held-back request, retries a state-only
    result."""
    code, doc = run(HTTP_REC, CLIENT + ["http", "{url}", "--request-timeout", "1"],
                    ("state-only", "many-rounds", "undeclared-kind", "missing-capability", "fault-delay"))
    assert {v for v, _ in verdicts(doc).values()} == {"pass"}, doc["probes"]
    assert not doc["findings"] or not bad(doc)


def test_the_official_sdk_client(tmp_path):
    """The official Python SDK's client (the sample client): it echoes states, but waits for ever on a
    held-back answer (no default request timeout: cancellation.mdx#timeouts SHOULD)."""
    pytest.importorskip("mcp")
    cmd = [sys.executable, "-m", "mrtr_inspect.samples.client", "http", "{url}", "--tools", "deploy"]
    code, doc = run(HTTP_REC, cmd, ("state-rotated", "unicode-state", "fault-delay"), timeout=8.0,
                    record=str(tmp_path / "traffic"))
    assert verdicts(doc) == {"state-rotated": ("pass", None), "unicode-state": ("pass", None),
                             "fault-delay": ("fail", "client-hung")}
    kept = sorted(p.name for p in (tmp_path / "traffic").iterdir())
    assert kept == ["01-state-rotated.jsonl", "02-unicode-state.jsonl", "03-fault-delay.jsonl"]
    assert [p["traffic"] for p in doc["probes"]] == [str(tmp_path / "traffic" / k) for k in kept]
    r = CliRunner().invoke(main, ["show", str(tmp_path / "traffic" / kept[0])])
    assert r.exit_code == 0 and "deploy" in r.output


@pytest.mark.parametrize("cmd,why", [
    (["/nonexistent/mrtr-client", "{url}"], "the client command cannot start: /nonexistent/mrtr-client: No such file"),
    (["sh", "-c", "echo it broke >&2; exit 3", "{url}"], "the client exited with status 3 before calling anything; "
                                                        "its last stderr lines: it broke"),
    ([sys.executable, "-c", "import time; time.sleep(30)", "{url}"], "the client made no request within --timeout 2 s"),
])
def test_a_client_that_cannot_be_driven_is_skipped_once_per_mutation(cmd, why):
    code, doc = run(HTTP_REC, cmd, ("state-only", "fault-delay", "parallel"), timeout=2.0)
    assert [p["verdict"] for p in doc["probes"]] == ["skipped"] * 3
    assert all(p["reason"].startswith(why) for p in doc["probes"]), doc["probes"]
    assert code == 2


def test_command_line_formats_and_loopback(tmp_path):
    base = ["probe-client", HTTP_REC, "--mutation", "state-only", "--timeout", "5"]
    client = ["--", *CLIENT, "http", "{url}", "--bug", "ignore-state-only"]
    r = CliRunner().invoke(main, base + client)
    assert r.exit_code == 1, r.output
    assert "fail     state-only" in r.output and "client-ignored-state-only" in r.output
    sarif = tmp_path / "out.sarif"
    r = CliRunner().invoke(main, base + ["--format", "sarif", "--output", str(sarif), "--record", str(tmp_path / "t")]
                           + client)
    res = json.loads(sarif.read_text())["runs"][0]["results"]
    assert [x["ruleId"] for x in res] == ["client-ignored-state-only"]
    junit = tmp_path / "out.xml"
    CliRunner().invoke(main, base + ["--format", "junit", "--output", str(junit)] + client)
    assert '<testsuites name="mrtr-inspect probe-client"' in junit.read_text()
    r = CliRunner().invoke(main, base + ["--listen", "0.0.0.0"] + client)
    assert r.exit_code == 2 and "--allow-remote" in r.output
    r = CliRunner().invoke(main, ["probe-client", HTTP_REC, "--mutation", "nope"] + client)
    assert r.exit_code == 2 and "unknown mutation nope" in r.output


def test_server_fields_expand():
    server = ["py", "-m", "srv", "a b"]
    assert expand(["c", "{server}", "--url={url}"], "http://x", server) == ["c", "py", "-m", "srv", "a b", "--url=http://x"]
    assert expand(["sh", "-c", "run {server}"], None, server) == ["sh", "-c", "run py -m srv 'a b'"]


# probe-client started with SIGINT as given (then exec'd: the pid the test signals is probe-client's)
STARTED_WITH = ("import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
                "os.execv(sys.executable, [sys.executable, '-m', 'mrtr_inspect', *sys.argv[2:]])")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the client under test in /proc (Linux)")
@pytest.mark.parametrize("sig, inherited", [("SIGINT", "SIG_DFL"), ("SIGINT", "SIG_IGN"), ("SIGTERM", "SIG_DFL")],
                         ids=["ctrl-c", "ctrl-c-inherited-ignored", "sigterm"])
def test_ctrl_c_stops_the_client_and_writes_what_was_judged(tmp_path, sig, inherited):
    """SIG_IGN: how a shell without job control starts a background command (`make test &`, a
    script's `cmd &`); Python then installs no KeyboardInterrupt handler, and probe-client takes
    SIGINT itself. SIGTERM (what CI runners and process managers send) does the same, exit 143."""
    import signal
    import time

    traffic = tmp_path / "t"
    p = subprocess.Popen([sys.executable, "-c", STARTED_WITH, inherited, "probe-client", HTTP_REC, "--mutation",
                          "state-only,fault-delay,state-rotated", "--timeout", "120", "--record", str(traffic), "--",
                          *CLIENT, "http", "{url}", "--bug", "hang"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    try:
        held = traffic / "02-fault-delay.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and b'tools/call' not in (held.read_bytes() if held.exists() else b""):
            time.sleep(0.1)  # until the held-back call is in flight
        clients = _children(p.pid)
        assert len(clients) == 1  # the client under test (the HTTP probe server is a thread of probe-client)
        p.send_signal(getattr(signal, sig))
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 128 + getattr(signal, sig), err
    assert "pass     state-only" in out and "fault-delay" not in out.split("note:")[0], out
    assert "note: interrupted: the mutations not run are not reported" in out
    assert "Traceback" not in err
    with pytest.raises(ProcessLookupError):
        os.killpg(clients[0], 0)  # the client's process group (its own session) is gone


def test_stop_signals_raise_once_are_held_when_asked_and_the_handlers_come_back():
    import signal
    import threading

    me = threading.main_thread().ident
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background command of a shell inherits it
    try:
        with StopSignals() as stop:
            with pytest.raises(KeyboardInterrupt):
                signal.pthread_kill(me, signal.SIGINT)
            signal.pthread_kill(me, signal.SIGTERM)  # a second one is noted: the clean-up is not cut short
            assert stop.signum == signal.SIGINT
            with pytest.raises(KeyboardInterrupt):
                stop.check()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        with StopSignals() as stop:
            with stop.held():
                signal.pthread_kill(me, signal.SIGTERM)  # while the client starts: taken at the next check
            assert stop.signum == signal.SIGTERM
            with pytest.raises(KeyboardInterrupt):
                stop.check()
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_recording_without_a_chain_is_skipped_with_the_reason(tmp_path):
    rec = tmp_path / "discover-only.jsonl"
    lines = Path(STDIO_REC).read_text().splitlines(keepends=True)
    rec.write_text("".join(lines[:3]))  # the header, server/discover and its answer
    code, doc = run(str(rec), CLIENT + ["stdio", "--", "{server}"], ("state-rotated", "fault-delay"))
    assert [(p["verdict"], p["reason"]) for p in doc["probes"]] == [
        ("skipped", "the recording has no chain with an input_required round: there is nothing to change")] * 2
    assert code == 0
