"""The JSON report has the shape CONTRACTS.md binds (format mrtr-inspect.report/1)."""

from __future__ import annotations

import io
import json

from mrtr_inspect import __version__
from mrtr_inspect.analysis import Analysis
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.rules.registry import REGISTRY
from tests.traffic import ACCEPT, ELICIT, Traffic

OUTCOMES = {"complete", "error", "abandoned", "cancelled", "open", "task"}
LINKS = {"state", "keys", "params", None}


def varied_traffic() -> Traffic:
    """Chains of every outcome, and a few findings of each severity."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(1.5)
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.result(b, {"content": []})
    c = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")  # a replay
    t.error(c, -32602)
    d = t.tool("fail", {})
    t.error(d, -32603)
    e = t.tool("slow", {})
    t.result(e, {"task": {"taskId": "t"}}, result_type="task")
    f = t.tool("asks", {})
    t.irr(f, {"confirm": ELICIT}, state="s2")  # abandoned at the end
    g = t.tool("cancel-me", {})
    t.notify("notifications/cancelled", {"requestId": g})
    t.tool("in-flight", {})  # open at the end
    t.call("tools/list", {"requestState": "x"})
    return t


def build_report() -> dict:
    rb = ReportBuilder(["session.jsonl"])
    insp = Analysis()
    for frame in varied_traffic().frames:
        rb.add_all(insp.feed(frame))
    rb.add_all(insp.close())
    try:
        d = rb.to_dict()
        streamed = io.StringIO()
        rb.write_json(streamed)
    finally:
        rb.close()
    assert json.loads(streamed.getvalue()) == d  # the streamed report is the same report
    return d


def test_report_top_level_and_summary():
    d = build_report()
    assert d["format"] == "mrtr-inspect.report/1"
    assert d["tool"] == {"name": "mrtr-inspect", "version": __version__}
    assert d["inputs"] == ["session.jsonl"]
    s = d["summary"]
    assert set(s) >= {"messages", "chains", "errors", "warnings", "infos"}
    assert s["messages"] == 16
    assert s["chains"] == len(d["chains"]) == 7
    for sev, key in (("error", "errors"), ("warning", "warnings"), ("info", "infos")):
        assert s[key] == sum(1 for f in d["findings"] if f["severity"] == sev)
    assert s["errors"] >= 1 and s["infos"] >= 1


def test_report_chains():
    d = build_report()
    for c in d["chains"]:
        assert set(c) >= {"id", "method", "target", "rounds", "requests", "outcome", "link", "duration_ms"}
        assert c["id"].startswith("c") and c["method"] in ("tools/call", "prompts/get", "resources/read")
        assert type(c["rounds"]) is int and c["rounds"] >= 0
        assert c["outcome"] in OUTCOMES and c["link"] in LINKS
        assert type(c["duration_ms"]) is float and c["duration_ms"] >= 0
        assert all(type(i) in (int, str) for i in c["requests"])
    by_target = {c["target"]: c for c in d["chains"] if c["target"] != "deploy"}
    assert {t: c["outcome"] for t, c in by_target.items()} == {
        "fail": "error", "slow": "task", "asks": "abandoned", "cancel-me": "cancelled", "in-flight": "open"}
    first = next(c for c in d["chains"] if c["id"] == "c1")
    assert (first["requests"], first["rounds"], first["outcome"], first["link"]) == ([1, 2], 1, "complete", "state")
    assert first["duration_ms"] >= 1500
    replay = next(c for c in d["chains"] if c["requests"] == [3])
    assert (replay["target"], replay["rounds"], replay["outcome"], replay["link"]) == ("deploy", 0, "error", "state")


def test_report_findings():
    d = build_report()
    assert d["findings"]
    for f in d["findings"]:
        assert set(f) >= {"rule", "severity", "message", "chain", "messages", "spec", "conformance"}
        assert f["rule"] in REGISTRY
        assert f["severity"] in ("error", "warning", "info")
        assert type(f["message"]) is str and f["message"]
        assert f["chain"] is None or f["chain"].startswith("c")
        assert all(type(i) is int and 0 <= i < d["summary"]["messages"] for i in f["messages"])
        assert f["conformance"] is None or type(f["conformance"]) is str
    rules = {f["rule"] for f in d["findings"]}
    assert {"request-state-replayed", "chain-abandoned", "chain-cancelled", "chain-ended-error"} <= rules
    assert "inspector-error" not in rules
