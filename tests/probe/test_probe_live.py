"""`mrtr-inspect probe` against real servers: a session recorded through the real tee (official SDK
client, the tee, tests/probe/switch_server.py), probed against that server with its switches off
(every probe passes) and with each switch on (its probe fails with its rule); the findings' conformance
ids against RULES.md §8; a server that dies or hangs; the official SDK sample server's sealed state."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.replay.conftest import FIXTURES, ROOT, SAMPLE, cli, running, sdk_server  # noqa: F401 (fixture)
from tests.replay.sdk_client import call

from .switch_server import SWITCHES

SERVER = [sys.executable, "-m", "tests.probe.switch_server"]
#: RULES.md §12: what each mutation's failure reports
FAIL_RULE = {
    "tampered-state": "server-accepted-altered-state",
    "replayed-state": "server-accepted-replayed-state",
    "state-on-other-request": "server-accepted-state-on-other-request",
    "missing-answer": "server-error-instead-of-reask",
    "unknown-answer-key": "server-rejected-unknown-key",
    "invalid-answer": "server-accepted-invalid-input-responses",
    "undeclared-capability": "input-request-undeclared-capability",
    "declined": "server-error-on-decline",
}
SWITCH_OF = {m: s for s, m in SWITCHES.items() if m}


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """One session of the SDK client calling deploy, recorded through `mrtr-inspect stdio --record`."""
    path = tmp_path_factory.mktemp("probe") / "session.jsonl"
    tee = [sys.executable, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(path), "--", *SERVER]
    assert call(tee, "deploy") == ["deploy: deployed to production"]
    return path


def probe(recording: Path, *args: str, server: list[str] = SERVER, switches: str = "") -> tuple[int, dict]:
    cmd = server + (["--break", switches] if switches else [])
    r = cli("probe", str(recording), "--format", "json", *args, "--", *cmd, timeout=300)
    assert r.returncode in (0, 1), r.stderr.decode()
    return r.returncode, json.loads(r.stdout)


def test_every_probe_passes_against_the_correct_server(recording):
    code, report = probe(recording)
    assert code == 0
    assert [(p["chain"], p["mutation"], p["verdict"], p["rule"]) for p in report["probes"]] == [
        ("c1", m, "pass", None) for m in FAIL_RULE]
    for p in report["probes"]:
        assert set(p) == {"chain", "mutation", "verdict", "rule", "messages", "reason"}
        assert len(p["messages"]) >= 2  # the mutated request and its response, in the probe's traffic
    assert [f for f in report["findings"] if f["severity"] != "info"] == []
    assert report["summary"]["probes"] == {"pass": 8, "fail": 0, "skipped": 0}
    assert [c["id"] for c in report["chains"]] == ["c1"]


@pytest.mark.parametrize("mutation", list(FAIL_RULE))
def test_each_switch_fails_its_probe_with_its_rule(recording, mutation, tmp_path):
    traffic = tmp_path / "traffic.jsonl"
    code, report = probe(recording, "--only", mutation, "--record", str(traffic), switches=SWITCH_OF[mutation])
    [p] = report["probes"]
    assert (p["mutation"], p["verdict"], p["rule"]) == (mutation, "fail", FAIL_RULE[mutation]), p["reason"]
    [f] = [f for f in report["findings"] if f["rule"] == FAIL_RULE[mutation]]
    assert f["chain"] == "c1" and f["messages"] == p["messages"]
    assert code == (1 if f["severity"] == "error" else 0)  # --fail-on error, as check
    # the indexes are those of the probe's own traffic, as `check` numbers it
    checked = json.loads(cli("check", str(traffic), "--format", "json", "--fail-on", "never").stdout)
    assert checked["summary"]["messages"] == report["summary"]["messages"]
    mutated_id = _id_at(traffic, p["messages"][-1])
    assert mutated_id is not None and _id_at(traffic, p["messages"][-2]) == mutated_id


def _id_at(path: Path, index: int):
    """The JSON-RPC id of message `index` of a stdio recording (messages in the order `check` counts them)."""
    lines = [ln.split(b"\t", 1)[1] for ln in path.read_bytes().splitlines() if b"\t" in ln]
    return json.loads(lines[index]).get("id")


def _conformance_ids() -> dict[str, str]:
    """rule -> conformance check id, from RULES.md §8 and from §12's table."""
    env = os.environ.get("MRTR_RULES_MD")
    path = Path(env) if env else ROOT.parent / "shared" / "RULES.md"
    if not path.is_file():
        pytest.skip("RULES.md not found (set MRTR_RULES_MD)")
    text = path.read_text(encoding="utf-8")
    s8 = text[text.index("## 8. "):text.index("## 9. ")]
    out: dict[str, str] = {}
    for row in s8.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("sep-"):
            check = cells[0].split()[0]
            for rule in re.findall(r"[a-z][a-z0-9-]+", re.sub(r"\(.*?\)", "", cells[1])):
                out.setdefault(rule, check)
    s12 = text[text.index("## 12. "):text.index("## 13. ")]
    for rule, check in re.findall(r"`([a-z0-9-]+)` \((?:conformance )?`(sep-[a-z0-9-]+)`\)", s12):
        out.setdefault(rule, check)
    return out


def test_probe_findings_carry_the_conformance_ids_of_rules_md(recording):
    expected = _conformance_ids()
    _, report = probe(recording, switches=",".join(SWITCH_OF.values()))
    failed = {p["rule"] for p in report["probes"] if p["verdict"] == "fail"}
    assert failed >= set(FAIL_RULE.values())
    for f in report["findings"]:
        if f["rule"] in expected:
            assert f["conformance"] == expected[f["rule"]], f["rule"]
    by_rule = {f["rule"]: f["conformance"] for f in report["findings"]}
    assert by_rule["server-accepted-altered-state"] == "sep-2322-reject-tampered-state"
    assert by_rule["server-error-instead-of-reask"] == "sep-2322-missing-response-rerequests"
    assert by_rule["server-rejected-unknown-key"] == "sep-2322-ignore-unexpected-params"
    assert by_rule["server-accepted-invalid-input-responses"] == "sep-2322-validate-input-responses"
    assert by_rule["input-request-undeclared-capability"] == "sep-2322-respect-client-capabilities"


def test_a_server_that_dies_fails_its_probe_and_the_next_one_runs(recording):
    code, report = probe(recording, "--only", "tampered-state,undeclared-capability", switches="die-on-retry")
    died, other = report["probes"]
    assert (died["mutation"], died["verdict"], died["rule"]) == ("tampered-state", "fail", "upstream-error")
    assert "exit status 3" in died["reason"]
    assert (other["mutation"], other["verdict"]) == ("undeclared-capability", "pass")  # a fresh process


def test_a_server_that_hangs_fails_its_probe_within_the_timeout(recording):
    code, report = probe(recording, "--only", "declined,undeclared-capability", "--timeout", "10",
                         switches="hang-on-retry")
    hung, other = report["probes"]
    assert (hung["verdict"], hung["rule"]) == ("fail", "upstream-error")
    assert "within 10 s" in hung["reason"]
    assert other["verdict"] == "pass"


def test_reuse_plays_every_probe_against_one_process(recording):
    code, report = probe(recording, "--reuse", "--only", "tampered-state,missing-answer,declined")
    assert [p["verdict"] for p in report["probes"]] == ["pass"] * 3


def test_a_server_that_cannot_start_is_exit_2(recording):
    r = cli("probe", str(recording), "--", sys.executable, "-c", "raise SystemExit(4)")
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1 and "before answering any request" in r.stderr.decode()


def test_the_sdk_sample_server_rejects_every_tampered_state():
    """The official SDK seals requestState: on a recording of the sample server's tools, tampered-state
    passes on every chain that has a state, and no probe finding is an error (one process for all:
    the sealing key is the process's, and a fresh process per probe is what the other tests show)."""
    rec = FIXTURES / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"
    r = cli("probe", str(rec), "--format", "json", "--reuse", "--only", "tampered-state,state-on-other-request", "--",
            *SAMPLE, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    tampered = [p for p in report["probes"] if p["mutation"] == "tampered-state"]
    assert [p["chain"] for p in tampered] == ["c1", "c2", "c3", "c4", "c5"]
    assert all(p["verdict"] == "pass" for p in report["probes"]), report["probes"]
    assert [f for f in report["findings"] if f["severity"] == "error"] == []


def test_the_text_report_and_dry_run(recording):
    r = cli("probe", str(recording), "--dry-run", "--only", "tampered-state", "--", *SERVER)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "nothing is sent" in out
    mutated = [ln for ln in out.splitlines() if ln.strip().startswith("mutated ")]
    assert len(mutated) == 1 and '"requestState"' in mutated[0]
    r = cli("probe", str(recording), "--only", "declined", "--", *SERVER)
    assert r.returncode == 0
    assert "pass     declined" in r.stdout.decode() and "1 pass, 0 fail, 0 skipped" in r.stdout.decode()


def test_junit_has_a_case_per_probe(recording, tmp_path):
    out = tmp_path / "probe.xml"
    r = cli("probe", str(recording), "--format", "junit", "--output", str(out), "--fail-on", "warning",
            "--only", "tampered-state,declined", "--", *SERVER, "--break", "unsealed")
    assert r.returncode == 1
    text = out.read_text()
    assert text.count("<testcase ") == 2 and text.count("<failure ") == 1
    assert 'type="server-accepted-altered-state"' in text


def test_sarif_locates_findings_in_the_probe_traffic(recording, tmp_path):
    traffic = tmp_path / "t.jsonl"
    r = cli("probe", str(recording), "--format", "sarif", "--record", str(traffic), "--only", "tampered-state",
            "--", *SERVER, "--break", "unsealed")
    log = json.loads(r.stdout)
    [res] = [x for x in log["runs"][0]["results"] if x["ruleId"] == "server-accepted-altered-state"]
    assert res["properties"]["conformance"] == "sep-2322-reject-tampered-state"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("t.jsonl") and loc["region"]["startLine"] > 1


def test_a_remote_upstream_is_refused_unless_allowed(recording):
    r = cli("probe", str(recording), "--upstream", "http://example.com/mcp")
    assert r.returncode == 2 and "--allow-remote" in r.stderr.decode()
    r = cli("probe", str(recording), "--upstream", "http://192.0.2.1:9/mcp", "--allow-remote", "--timeout", "2")
    assert r.returncode == 2 and "cannot reach" in r.stderr.decode()  # allowed: tried, and not there


def test_an_unknown_mutation_is_exit_2(recording):
    r = cli("probe", str(recording), "--only", "tampered", "--", *SERVER)
    assert r.returncode == 2 and "unknown mutation tampered" in r.stderr.decode()


def test_probe_over_http(running):
    """Over Streamable HTTP, every mutation: the sample server (official SDK, sealed state) behind its
    URL rejects every tampered state, and no finding is an error (its state is not single-use: the
    replayed-state probes fail, with a warning)."""
    rec = FIXTURES / "test_sdk_http" / "test_the_client_completes_every_chain.jsonl"
    server = running(sdk_server("--http"))
    r = cli("probe", str(rec), "--upstream", server.url, "--format", "json", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    tampered = [p for p in report["probes"] if p["mutation"] == "tampered-state"]
    assert len(tampered) == 5 and all(p["verdict"] == "pass" for p in tampered), tampered
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert {p["verdict"] for p in report["probes"] if p["mutation"] == "replayed-state"} == {"fail"}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the server under test in /proc (Linux)")
@pytest.mark.parametrize("sig, inherited", [("SIGINT", "SIG_DFL"), ("SIGINT", "SIG_IGN"), ("SIGTERM", "SIG_DFL")],
                         ids=["ctrl-c", "ctrl-c-inherited-ignored", "sigterm"])
def test_ctrl_c_stops_the_server_and_writes_what_was_judged(recording, tmp_path, sig, inherited):
    """A stop signal while a probe waits on a hung server: that server stops, the probes judged
    before are written with a note, exit 128 + the signal. Before, SIGTERM killed probe with no report,
    and a SIGINT inherited as ignored (a shell's background command) never reached it."""
    import signal
    import subprocess
    import time

    from tests.probe.test_probe_client import STARTED_WITH, _children

    traffic = tmp_path / "traffic.jsonl"
    p = subprocess.Popen([sys.executable, "-c", STARTED_WITH, inherited, "probe", str(recording), "--only",
                          "undeclared-capability,declined", "--timeout", "120", "--record", str(traffic), "--",
                          *SERVER, "--break", "hang-on-retry"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the second probe's retry is in flight (it hangs)
            text = traffic.read_bytes() if traffic.exists() else b""
            at = text.find(b'"declined"')
            if at >= 0 and b"inputResponses" in text[at:]:
                break
            time.sleep(0.1)
        servers = _children(p.pid)
        assert len(servers) == 1  # the hung probe's server (each probe starts its own)
        p.send_signal(getattr(signal, sig))
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 128 + getattr(signal, sig), err
    assert "pass     undeclared-capability" in out and "declined" not in out, out
    assert "note: interrupted: the probes not run are not reported" in out
    assert "Traceback" not in err
    with pytest.raises(ProcessLookupError):
        os.kill(servers[0], 0)  # stopped and reaped
