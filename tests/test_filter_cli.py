"""`--filter EXPR` on check, show, stats and export (docs/filter.md): what each keeps, the exit status,
a bad expression (one line naming the term, exit 2), and no filter leaving the output as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SDK = str(FIXTURES / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl")
ERROR = str(FIXTURES / "seed" / "result_collapsed_to_text.jsonl")  # one error finding, on chain c1
HOPS = str(FIXTURES / "hops" / "error-masked.jsonl")  # front c1 -> back c2


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def report(*args: str) -> dict:
    r = run("check", "--format", "json", "--fail-on", "never", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_check_keeps_the_chains_and_findings_the_filter_keeps():
    whole = report(SDK)
    kept = report(SDK, "--filter", "rounds>1")
    assert {c["id"] for c in kept["chains"]} == {c["id"] for c in whole["chains"] if c["rounds"] > 1} != set()
    assert kept["findings"] and all(f["chain"] in {c["id"] for c in kept["chains"]} for f in kept["findings"])
    assert kept["findings"] == [f for f in whole["findings"] if f["chain"] in {c["id"] for c in kept["chains"]}]
    assert kept["filter"] == "rounds>1" and "filter" not in whole
    assert kept["summary"]["chains"] == len(kept["chains"])
    assert kept["summary"]["infos"] == sum(f["severity"] == "info" for f in kept["findings"])
    assert kept["summary"]["messages"] == whole["summary"]["messages"]


def test_id_finds_the_chain_of_a_retry():
    whole = report(SDK)
    retried = next(c for c in whole["chains"] if len(c["requests"]) > 2)
    kept = report(SDK, "--filter", f"id:{retried['requests'][-1]}")
    assert [c["id"] for c in kept["chains"]] == [retried["id"]]


def test_severity_keeps_the_chain_with_the_error_and_only_the_error():
    kept = report(ERROR, "--filter", "severity:error")
    assert [c["id"] for c in kept["chains"]] == ["c1"]
    assert [f["severity"] for f in kept["findings"]] == ["error"]


def test_the_exit_status_counts_the_findings_kept():
    assert run("check", ERROR).exit_code == 1
    assert run("check", ERROR, "--filter", "not severity:error").exit_code == 0
    assert run("check", ERROR, "--filter", "severity:error").exit_code == 1


def test_check_text_says_the_filter():
    r = run("check", SDK, "--filter", "tool:deploy")
    assert r.exit_code == 0
    assert "tools/call deploy" in r.output and "tools/call release" not in r.output
    assert "kept by --filter 'tool:deploy'" in r.output.splitlines()[-1]


@pytest.mark.parametrize("fmt", ["sarif", "junit"])
def test_the_other_check_formats_are_narrowed_too(fmt):
    whole = run("check", ERROR, "--format", fmt, "--fail-on", "never").output
    narrowed = run("check", ERROR, "--format", fmt, "--fail-on", "never", "--filter", "severity:error").output
    assert "tool-result-missing-structured-content" in narrowed
    assert "http-session-id-minted" in whole and "http-session-id-minted" not in narrowed


def test_session_picks_the_chains_of_one_recording_session():
    sessions = [json.loads(Path(p).read_text().splitlines()[0])["session"] for p in (SDK, ERROR)]
    both = report(SDK, ERROR)
    one = report(SDK, ERROR, "--filter", f"session:{sessions[1]}")
    other = report(SDK, ERROR, "--filter", f"not session:{sessions[1][:4]}*")
    assert len(one["chains"]) == 1 and one["chains"][0]["target"] == "github.create_issue"
    assert len(other["chains"]) == len(both["chains"]) - 1


def test_hop_keeps_the_pairs_whose_chains_both_stay():
    both = report(HOPS)
    front = report(HOPS, "--filter", "hop:front")
    assert len(both["hops"]) == 1 and front["hops"] == []
    assert [c["hop"] for c in front["chains"]] == ["front"]
    assert report(HOPS, "--filter", "tool:fail")["hops"] == both["hops"]


def test_show_and_stats_keep_the_chains():
    r = run("show", SDK, "--format", "json", "--filter", "tool:deploy or tool:release")
    assert r.exit_code == 0
    assert sorted(c["target"] for c in json.loads(r.output)["chains"]) == ["deploy", "release"]
    r = run("stats", SDK, "--format", "json", "--filter", "rounds>=2")
    doc = json.loads(r.output)
    assert doc["filter"] == "rounds>=2" and [g["target"] for g in doc["groups"]] == ["release"]
    assert "no chain matches --filter 'tool:nothing'" in run("show", SDK, "--filter", "tool:nothing").output
    assert "no chain matches --filter 'tool:nothing'" in run("stats", SDK, "--filter", "tool:nothing").output


@pytest.mark.parametrize("command", ["check", "show", "stats", "export"])
def test_a_bad_filter_is_one_line_naming_the_term_exit_2(command, tmp_path):
    extra = ["--to", "html", "--output", str(tmp_path / "x.html")] if command == "export" else []
    r = run(command, SDK, *extra, "--filter", "tool:deploy or tol:x")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "'tol:x'" in r.output and r.output.startswith("mrtr-inspect: --filter:")
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("args", [
    ("check", "--format", "json"), ("check",), ("show", "--format", "json"), ("show",), ("stats", "--format", "json"),
])
def test_near_miss_an_empty_filter_changes_nothing(args):
    assert run(*args, SDK, "--filter", " ").output == run(*args, SDK).output


def test_export_fixture_keeps_the_chains_the_filter_keeps(tmp_path):
    out = tmp_path / "fx.jsonl"
    r = run("export", SDK, "--to", "fixture", "--output", str(out), "--filter", "rounds>2")
    assert r.exit_code == 0, r.output
    chains = report(str(out))["chains"]
    assert [c["target"] for c in chains] == ["release"]
    r = run("export", SDK, "--to", "fixture", "--output", str(out), "--filter", "rounds>2", "--chain", "c1")
    assert r.exit_code == 2 and "no chain named by --chain matches" in r.output


def test_export_html_mermaid_otlp_har_are_narrowed(tmp_path):
    md = tmp_path / "x.md"
    assert run("export", SDK, "--to", "mermaid", "--output", str(md), "--filter", "tool:deploy").exit_code == 0
    text = md.read_text()
    assert text.count("```mermaid") == 1 and "deploy" in text and "release" not in text
    otlp = tmp_path / "x.json"
    assert run("export", SDK, "--to", "otlp", "--output", str(otlp), "--filter", "tool:release").exit_code == 0
    spans = [s["name"] for r in json.loads(otlp.read_text())["resourceSpans"] for ss in r["scopeSpans"]
             for s in ss["spans"] if s["name"].startswith("tools/call")]
    assert spans and {s.split(" (")[0] for s in spans} == {"tools/call release"}
    html = tmp_path / "x.html"
    assert run("export", ERROR, "--to", "html", "--output", str(html), "--filter", "severity:error").exit_code == 0
    page = html.read_text()
    assert "tool-result-missing-structured-content" in page and "http-session-id-minted" not in page
    har = tmp_path / "x.har"
    assert run("export", ERROR, "--to", "har", "--output", str(har)).exit_code == 0
    whole = json.loads(har.read_text())["log"]["entries"]
    assert run("export", ERROR, "--to", "har", "--output", str(har), "--filter", "tool:github.*").exit_code == 0
    kept = json.loads(har.read_text())["log"]["entries"]
    assert 0 < len(kept) < len(whole) and all(e["_mrtr"]["chain"] == "c1" for e in kept)
