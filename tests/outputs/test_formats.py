"""`check --format sarif` (validated against the SARIF 2.1.0 schema) and `check --format junit`."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from mrtr_inspect.core.findings import spec_url
from mrtr_inspect.outputs.exporters.capture import load
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.rules.registry import REGISTRY
from tests.outputs.conftest import HTTP_FIXTURE, faulty, run_cli, save

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())


def sarif_of(*paths, fail_on: str = "error") -> tuple[dict, int]:
    r = run_cli("check", *paths, "--format", "sarif", "--fail-on", fail_on)
    return json.loads(r.stdout), r.exit_code


def test_sarif_is_valid_2_1_0_with_the_rules_that_fired(recording):
    log, code = sarif_of(recording)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert code == 1  # the exit status does not depend on the format
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    fired = {r["ruleId"] for r in run["results"]}
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "mrtr-inspect"
    assert [r["id"] for r in rules] == sorted(fired) and {"retry-reused-id", "stdio-framing"} <= fired
    reused = next(r for r in rules if r["id"] == "retry-reused-id")
    reg = REGISTRY["retry-reused-id"]
    assert reused["shortDescription"]["text"] == reg.summary
    assert reused["fullDescription"]["text"].startswith(reg.detects)
    assert reused["helpUri"] == spec_url(reg.spec)
    assert reused["defaultConfiguration"]["level"] == "error"
    assert reused["properties"]["conformance"] == "sep-2322-client-jsonrpc-id-different"
    linked = next(r for r in rules if r["id"] == "chain-linked")
    assert linked["defaultConfiguration"]["level"] == "note"  # info → note
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] == {"error": "error", "warning": "warning", "info": "note"}[res["properties"]["severity"]]


def _frame_at(path: Path, line: int):
    return fmt.decode(path.read_bytes().split(b"\n")[line - 1])


def test_each_result_points_at_the_line_that_holds_its_message(recording):
    log, _ = sarif_of(recording)
    report = json.loads(run_cli("check", recording, "--format", "json").stdout)
    raw = {i: m.raw for i, m in load([str(recording)]).messages.items()}
    for res, finding in zip(log["runs"][0]["results"], report["findings"], strict=True):
        assert res["ruleId"] == finding["rule"] and res["message"]["text"] == finding["message"]
        loc = res["locations"][0]
        assert loc["physicalLocation"]["artifactLocation"]["uri"] == recording.as_uri()  # an absolute path
        primary = max(finding["messages"])
        assert loc["logicalLocations"][0]["fullyQualifiedName"] == f"s1/{finding['chain'] or ''}/message {primary}" \
            .replace("//", "/")
        frame = _frame_at(recording, loc["physicalLocation"]["region"]["startLine"])
        assert frame.data == raw[primary]  # the line holds the very message (stdio: one a line)
        related = res.get("relatedLocations", [])
        assert len(related) == len(set(finding["messages"])) - 1
        for rel, m in zip(related, sorted(set(finding["messages"]) - {primary})):
            assert _frame_at(recording, rel["physicalLocation"]["region"]["startLine"]).data == raw[m]


def test_the_line_is_found_in_the_right_file_of_several(tmp_path):
    """Messages are numbered over all inputs: the second file's findings point into the second file."""
    one = save(faulty(session="a").frames, tmp_path / "one.jsonl")
    two = save(faulty(session="b", start=5000.0).frames, tmp_path / "two.jsonl")
    log, _ = sarif_of(one, two)
    per_file: dict[str, list[int]] = {}
    for res in log["runs"][0]["results"]:
        phys = res["locations"][0]["physicalLocation"]
        uri = log["runs"][0]["artifacts"][phys["artifactLocation"]["index"]]["location"]["uri"]
        assert uri == phys["artifactLocation"]["uri"]
        per_file.setdefault(Path(uri).name, []).append(phys["region"]["startLine"])
        frame = _frame_at(one if uri.endswith("one.jsonl") else two, phys["region"]["startLine"])
        assert frame.session == ("a" if uri.endswith("one.jsonl") else "b")
    assert per_file["one.jsonl"] == per_file["two.jsonl"]  # the same traffic, the same lines


def test_fingerprints_are_stable_across_runs_and_distinct(recording, tmp_path):
    first, _ = sarif_of(recording)
    again, _ = sarif_of(recording)
    prints = [r["partialFingerprints"]["mrtrFinding/v1"] for r in first["runs"][0]["results"]]
    assert prints == [r["partialFingerprints"]["mrtrFinding/v1"] for r in again["runs"][0]["results"]]
    assert len(set(prints)) == len(prints)
    # a session appended before the finding's own does not change it (indexes and lines shift)
    both = save(faulty(session="other").frames + faulty(start=9000.0).frames, tmp_path / "both.jsonl")
    later, _ = sarif_of(both)
    moved = {r["partialFingerprints"]["mrtrFinding/v1"] for r in later["runs"][0]["results"]
             if r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].startswith("s1/")}
    assert set(prints) == moved


def test_sarif_without_findings_is_valid(tmp_path):
    from tests.traffic import Traffic

    t = Traffic()
    a = t.tool("deploy", {})
    t.result(a, {"content": []})
    log, code = sarif_of(save(t.frames, tmp_path / "clean.jsonl"))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert code == 0 and log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


# -- JUnit ------------------------------------------------------------------------------------------


def junit_of(*paths, fail_on: str = "error") -> ET.Element:
    r = run_cli("check", *paths, "--format", "junit", "--fail-on", fail_on)
    assert r.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return ET.fromstring(r.stdout.encode("utf-8"))


def test_junit_has_a_suite_per_input_and_a_case_per_chain(recording, tmp_path):
    clean = HTTP_FIXTURE
    root = junit_of(recording, clean)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(recording), str(clean)]
    mine = suites[0].findall("testcase")
    assert [c.get("name") for c in mine] == [
        "c1 tools/call deploy", "c2 tools/call </script><img src=x onerror=alert(1)>\\u001b[31m",
        "findings outside chains"]
    report = json.loads(run_cli("check", recording, "--format", "json").stdout)
    assert float(mine[0].get("time")) == pytest.approx(report["chains"][0]["duration_ms"] / 1000.0, abs=0.001)
    assert float(mine[0].get("time")) > 1.5  # the user took 1.5 s
    theirs = [c.get("name") for c in suites[1].findall("testcase")]
    assert theirs[0] == "c3 tools/call deploy" and theirs[-1] == "findings outside chains" and len(theirs) == 6
    assert int(root.get("tests")) == 3 + 6


def test_junit_failures_follow_fail_on(recording):
    root = junit_of(recording)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    c1 = cases["c1 tools/call deploy"]
    assert c1.find("failure").get("type") == "retry-reused-id"
    assert "retry-reused-id" in c1.find("failure").text and "chain-linked" in c1.find("system-out").text
    assert cases["findings outside chains"].find("failure").get("type") == "stdio-framing"
    assert root.find("testsuite").get("failures") == "2" and root.get("failures") == "2"
    assert next(c for n, c in cases.items() if n.startswith("c2 ")).find("failure") is None  # an info only
    everything = junit_of(recording, fail_on="info")
    assert everything.get("failures") == "3"
    nothing = junit_of(recording, fail_on="never")
    assert nothing.get("failures") == "0" and nothing.find(".//failure") is None
