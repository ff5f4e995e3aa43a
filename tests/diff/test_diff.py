"""`mrtr-inspect diff A B` on real recordings: the sample client (official SDK) through the tee,
against the sample server twice (the same: exit 0, although ids line up by chance only and every
sealed requestState is fresh) and against tests/diff/changed_server.py (each kind of change)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import ROOT, env, tee_cmd

SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
CHANGED = [sys.executable, "-m", "tests.diff.changed_server"]


def _client(tools: str, server: list[str], record) -> list[str]:
    return [sys.executable, "-m", "mrtr_inspect.samples.client", "stdio", "--tools", tools, "--",
            *tee_cmd("--quiet", "--record", str(record), cmd=server)]


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diff")
    runs = {"a1": ("deploy,release,summarize,workspace", SAMPLE),
            "a2": ("deploy,release,summarize,workspace", SAMPLE),
            "b": ("deploy,release,summarize,workspace,rollback", CHANGED)}
    procs = {k: subprocess.Popen(_client(tools, server, tmp / f"{k}.jsonl"), cwd=ROOT, env=env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k, (tools, server) in runs.items()}
    try:
        for k, p in procs.items():
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, (k, err.decode())
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return {k: tmp / f"{k}.jsonl" for k in runs}


def diff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", "diff", *map(str, args)], cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=120)


def changes(*args) -> tuple[int, list[dict]]:
    done = diff(*args, "--format", "json")
    doc = json.loads(done.stdout)
    assert doc["format"] == "mrtr-inspect.diff/1"
    return done.returncode, doc["changes"]


def kinds(found: list[dict]) -> set[tuple[str, str]]:
    return {(c["kind"], c["target"]) for c in found}


def test_two_runs_of_the_same_client_and_server_are_the_same(rec):
    a1, a2 = rec["a1"].read_bytes(), rec["a2"].read_bytes()
    states = [line for line in a1.splitlines() if b'"requestState":"v1.' in line]
    assert states and not any(s.split(b"\t", 1)[1] in a2 for s in states)  # every sealed state is fresh
    code, found = changes(rec["a1"], rec["a2"])
    assert (code, found) == (0, [])
    text = diff(rec["a1"], rec["a2"])
    assert text.returncode == 0 and "no change" in text.stdout


def test_a_changed_server_shows_each_kind_of_change(rec):
    code, found = changes(rec["a1"], rec["b"])
    assert code == 1
    assert kinds(found) == {
        ("tool-changed", "deploy"), ("tool-added", "rollback"),
        ("chain-rounds-changed", "deploy"), ("question-changed", "deploy"),
        ("result-changed", "summarize"), ("outcome-changed", "workspace"), ("chain-added", "rollback")}
    by = {c["kind"]: c for c in found}
    assert [d["field"] for d in by["tool-changed"]["differences"]] == ["inputSchema.properties.region"]
    assert by["tool-changed"]["differences"][0]["absent"] == ["a"]
    assert "1 round → 2 rounds" in by["chain-rounds-changed"]["detail"]
    assert "reason" in by["chain-rounds-changed"]["detail"]
    assert by["question-changed"]["differences"] == [{"field": "confirm.params.message", "a": "Deploy to production?",
                                                      "b": "Deploy to production now?", "absent": []}]
    assert by["outcome-changed"]["detail"] == "complete → error (-32603)"
    assert {d["field"] for d in by["result-changed"]["differences"]} == {"content[0].text", "structuredContent.result"}
    assert (by["chain-added"]["chain_a"], by["chain-added"]["method"]) == (None, "tools/call")


def test_the_other_way_round_tools_and_chains_are_removed(rec):
    code, found = changes(rec["b"], rec["a1"])
    assert code == 1
    assert {("tool-removed", "rollback"), ("chain-removed", "rollback")} <= kinds(found)
    assert not {k for k, _ in kinds(found)} & {"tool-added", "chain-added"}


def test_text_is_grouped_by_what_changed(rec):
    done = diff(rec["a1"], rec["b"])
    assert done.returncode == 1
    out = done.stdout
    assert "7 changes" in out.splitlines()[0]
    assert out.index("tools offered") < out.index("+ rollback tool-added") < out.index("chains")
    assert "~ tools/call workspace [c4 → c4] outcome-changed" in out


def test_ignored_paths_are_not_changes(rec):
    code, found = changes(rec["a1"], rec["b"], "--ignore", "result.content", "--ignore", "result.structuredContent",
                          "--ignore", "result.tools.*.inputSchema.properties.region",
                          "--ignore", "result.inputRequests.*.params.message")
    assert code == 1
    assert not {k for k, _ in kinds(found)} & {"result-changed", "tool-changed", "question-changed"}
    assert ("chain-rounds-changed", "deploy") in kinds(found)


def test_bad_input_exits_2(rec, tmp_path):
    missing = diff(rec["a1"], tmp_path / "missing.jsonl")
    assert missing.returncode == 2 and missing.stderr.startswith("mrtr-inspect: ")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not a recording\n")
    assert diff(junk, rec["a1"]).returncode == 2
