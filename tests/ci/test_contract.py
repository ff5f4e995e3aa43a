"""Contracts (`check --contract FILE`, `[tool.mrtr-inspect.contract]`, `[contract]`): each
contract-* rule triggered by one breach and held on a near miss; bad contracts (docs/contracts.md)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main
from tests.outputs.conftest import save
from tests.traffic import ACCEPT, ELICIT, Traffic

CACHE = {"ttlMs": 0, "cacheScope": "private"}
TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("deploy", "search", "delete_repo")]


def recording(path, *, slow: float = 0.0, calls=("deploy", "search"), rounds: int = 1, fail: bool = False):
    """A stdio run: tools/list, then each tool of `calls` called; deploy asks `rounds` questions and
    takes `slow` seconds more of the server's time than the others (each request answered after 10 ms)."""
    t = Traffic()
    t.result(t.call("tools/list", {}), {"tools": TOOLS, **CACHE})
    for name in calls:
        rid = t.tool(name, {})
        for n in range(rounds if name == "deploy" else 0):
            t.tick(0.01)
            t.irr(rid, {f"q{n}": ELICIT}, state=f"s{n}")
            t.tick(0.5)
            rid = t.tool(name, {}, inputResponses={f"q{n}": ACCEPT}, requestState=f"s{n}")
        t.tick(0.01 + (slow if name == "deploy" else 0.0))
        if fail and name == "deploy":
            t.error(rid, -32603, "boom")
        else:
            t.result(rid, {"content": []})
    return save(t.frames, path)


def check(*args, cwd=None):
    r = CliRunner().invoke(main, ["check", *map(str, args), "--format", "json"])
    found = [f for f in json.loads(r.stdout)["findings"] if f["rule"].startswith("contract-")] if r.stdout else []
    return r, found


def contract(tmp_path, text: str, name: str = "contract.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


LATENCY = '[tools.deploy]\np95_ms = 1000\nserver_max_ms = 100\n'


def test_a_latency_budget_breaks_on_a_slow_run_and_holds_on_a_normal_one(tmp_path):
    c = contract(tmp_path, LATENCY)
    r, found = check(recording(tmp_path / "normal.jsonl"), "--contract", c)
    assert r.exit_code == 0 and found == []
    r, found = check(recording(tmp_path / "slow.jsonl", slow=0.3), "--contract", c)
    assert r.exit_code == 1
    assert [(f["rule"], f["severity"]) for f in found] == [("contract-latency-exceeded", "error")]
    f = found[0]
    assert f["message"].startswith("tools/call deploy: max of the server's time is 322 ms, over its budget of 100 ms")
    assert f["details"]["figure"] == pytest.approx(322.0, abs=0.5) and f["details"]["budget"] == 100.0
    assert f["details"]["key"] == "server_max_ms" and f["chain"] == "c1"
    # the whole chain holds the user's 0.5 s of answering too: 823 ms, within 900, over 800
    assert check(tmp_path / "slow.jsonl", "--contract", contract(tmp_path, "[tools.deploy]\np95_ms = 900\n", "c2.toml"))[1] == []
    r, found = check(tmp_path / "slow.jsonl", "--contract", contract(tmp_path, "[tools.deploy]\np95_ms = 800\n", "c3.toml"))
    assert [f["message"].split(" (1 chain)")[0] for f in found] == [
        "tools/call deploy: p95 of the whole chain is 823 ms, over its budget of 800 ms"]


def test_a_budget_from_pyproject_and_from_the_dedicated_file(tmp_path, monkeypatch):
    rec = recording(tmp_path / "slow.jsonl", slow=0.3)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[tool.mrtr-inspect.contract.tools.deploy]\nserver_max_ms = 100\n')
    monkeypatch.chdir(proj)
    r, found = check(rec)
    assert r.exit_code == 1 and [f["rule"] for f in found] == ["contract-latency-exceeded"]
    assert "(contract: " in found[0]["message"] and "pyproject.toml: [tool.mrtr-inspect] contract)" in found[0]["message"]
    (proj / "pyproject.toml").write_text('[tool.mrtr-inspect.contract.tools.deploy]\nserver_max_ms = 1000\n')
    assert check(rec)[1] == []
    other = tmp_path / "other"
    other.mkdir()
    (other / ".mrtr-inspect.toml").write_text('[contract.tools."dep*"]\nserver_p50_ms = 50\n')
    monkeypatch.chdir(other)
    r, found = check(rec)
    assert [f["rule"] for f in found] == ["contract-latency-exceeded"] and "p50 of the server's time" in found[0]["message"]
    # --contract replaces the settings' contract
    assert check(rec, "--contract", contract(tmp_path, "max_rounds = 5\n"))[1] == []
    # without any contract: nothing of it
    monkeypatch.chdir(tmp_path)
    assert check(rec)[1] == []


def test_expected_and_forbidden_tools(tmp_path):
    c = contract(tmp_path, 'offered = ["deploy", "publish"]\ncalled = ["deploy", "delete_repo"]\nforbidden = ["search", "drop_*"]\n')
    r, found = check(recording(tmp_path / "r.jsonl"), "--contract", c)
    assert [(f["rule"], f["message"].split(" (contract")[0]) for f in found] == [
        ("contract-tool-not-offered", "tool 'publish' is not offered"),
        ("contract-tool-not-called", "tool 'delete_repo' was never called"),
        ("contract-tool-forbidden", "tool 'search' was called 1 time (c2), forbidden by 'search'"),
    ]
    assert found[2]["chain"] == "c2" and found[2]["details"]["figure"] == 1
    near = contract(tmp_path, 'offered = ["deploy", "delete_repo"]\ncalled = ["deploy"]\nforbidden = ["delete_*"]\n', "n.toml")
    assert check(recording(tmp_path / "r2.jsonl"), "--contract", near)[1] == []


def test_rounds_outcomes_and_findings(tmp_path):
    rec = recording(tmp_path / "r.jsonl", rounds=3, fail=True)
    c = contract(tmp_path, 'max_rounds = 2\noutcomes = ["complete"]\nmax_findings = {warning = 0}\n')
    r, found = check(rec, "--contract", c)
    rules = [f["rule"] for f in found]
    assert rules[:2] == ["contract-rounds-exceeded", "contract-outcome-not-allowed"]
    assert found[0]["message"].startswith("tools/call deploy: chain c1 took 3 rounds, more than the 2 allowed")
    assert found[1]["message"].startswith("tools/call deploy: 1 chain ended error (c1); allowed: complete")
    # a tool's own max_rounds replaces the contract's
    near = contract(tmp_path, 'max_rounds = 2\noutcomes = ["complete", "error"]\n[tools.deploy]\nmax_rounds = 3\n', "n.toml")
    assert check(rec, "--contract", near)[1] == []


def test_findings_budget_counts_the_reports_findings(tmp_path):
    t = Traffic()
    t.result(t.call("tools/list", {}), {"tools": TOOLS})  # no ttlMs, cacheScope: one error
    rec = save(t.frames, tmp_path / "r.jsonl")
    r, found = check(rec, "--contract", contract(tmp_path, "max_findings = {error = 0}\n"), "--fail-on", "never")
    assert [f["rule"] for f in found] == ["contract-findings-exceeded"]
    assert found[0]["message"].startswith("1 error, more than the 0 allowed")
    assert check(rec, "--contract", contract(tmp_path, "max_findings = {error = 1}\n", "n.toml"))[1] == []


@pytest.mark.parametrize("text, said", [
    ("max_round = 3\n", "max_round: unknown key (did you mean 'max_rounds'?)"),
    ("max_rounds = -1\n", "max_rounds: must be a whole number of rounds"),
    ('outcomes = ["done"]\n', "outcomes: must be a list of complete, error"),
    ("max_findings = {errors = 1}\n", "max_findings.errors: unknown key (did you mean 'error'?)"),
    ("[tools.deploy]\np95 = 3\n", "tools.deploy.p95: unknown key (did you mean 'p95_ms'?)"),
    ('[tools.deploy]\nmax_ms = "fast"\n', "tools.deploy.max_ms: must be a number of milliseconds"),
    ("max_rounds = [\n", "not valid TOML"),
])
def test_a_bad_contract_is_one_line_naming_the_file_and_the_key(tmp_path, text, said):
    c = contract(tmp_path, text)
    r = CliRunner().invoke(main, ["check", str(recording(tmp_path / "r.jsonl")), "--contract", str(c)])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert str(c) in r.stderr and said in r.stderr, r.stderr


def test_a_bad_contract_in_the_settings_names_the_table(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.mrtr-inspect.contract]\nforbiden = ['x']\n")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["check", str(recording(tmp_path / "r.jsonl"))])
    assert r.exit_code == 2
    assert "pyproject.toml: [tool.mrtr-inspect] contract.forbiden: unknown key (did you mean 'forbidden'?)" in r.stderr
