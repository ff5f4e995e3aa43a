"""RULES.md §13 in the outputs: `show`, `check`'s chain line, the HTML report and OTLP read a legacy
chain (the server asks while the request is open) and a modern chain of the same tool alike:
rounds, questions, answers, the user's waiting time, the true duration."""

from __future__ import annotations

import json
import re

from tests.core.test_legacy_chains import SAMPLE, SAMPLED, answer, ask, done, legacy_call
from tests.outputs.conftest import run_cli, save
from tests.outputs.test_exporters import assert_otlp, export, report
from tests.rules.test_legacy import legacy_stdio
from tests.traffic import Traffic

WAIT = 1.5  # seconds the user takes to answer, in both eras


def legacy() -> Traffic:
    t = legacy_stdio()
    a = legacy_call(t, "summarize")
    ask(t, 0, "sampling/createMessage", SAMPLE)
    t.tick(WAIT)
    answer(t, 0, SAMPLED)
    done(t, a)
    return t


def modern() -> Traffic:
    t = Traffic()
    a = t.tool("summarize")
    t.irr(a, {"s": {"method": "sampling/createMessage", "params": SAMPLE}}, state="st")
    t.tick(WAIT)
    b = t.tool("summarize", inputResponses={"s": SAMPLED}, requestState="st")
    t.result(b)
    return t


def test_show_text_has_the_question_the_wait_and_the_answer(tmp_path):
    out = run_cli("show", save(legacy().frames, tmp_path / "l.jsonl")).stdout
    lines = [line.strip("│├└─ ") for line in out.splitlines()]
    assert re.match(r"c1 tools/call summarize  complete  1 round  \d+ ms \(waited 1501 ms for input\)  link: time$", lines[0])
    assert lines[1].startswith("→ request id 2 (#3")
    assert lines[2].startswith("← asks round 1: server request id 0 (#4") and "linked via time" in lines[2]
    assert lines[3] == "asks 0: sampling/createMessage 'Summarize this' maxTokens 100"
    assert lines[4] == "… the user took 1501 ms to answer round 1"
    assert lines[5].startswith("→ answer to id 0 (#5") and lines[6] == "answers 0: model m1 a summary"
    assert lines[7].startswith("← complete (#6")
    twin = run_cli("show", save(modern().frames, tmp_path / "m.jsonl")).stdout
    # the modern twin tells the same story: one round, the same question, the same wait and answer
    assert "asks s: sampling/createMessage 'Summarize this' maxTokens 100" in twin
    assert "… the user took 1501 ms to answer round 1" in twin and "answers s: model m1 a summary" in twin


def test_show_mermaid_has_the_servers_request_and_the_clients_answer(tmp_path):
    out = run_cli("show", save(legacy().frames, tmp_path / "l.jsonl"), "--format", "mermaid").stdout
    assert "    S->>C: round 1 (0: sampling/createMessage 'Summarize this' maxTokens 100)\n" in out
    assert "    Note over C: user answered in 1501 ms\n    C-->>S: result (0: model m1 a summary)\n" in out


def test_check_reports_legacy_and_modern_chains_alike(tmp_path):
    lg = report(save(legacy().frames, tmp_path / "l.jsonl"))["chains"][0]
    md = report(save(modern().frames, tmp_path / "m.jsonl"))["chains"][0]
    for c in (lg, md):
        assert (c["rounds"], c["outcome"]) == (1, "complete") and c["duration_ms"] > WAIT * 1000
    assert (lg["link"], md["link"]) == ("time", "state")
    assert lg["round_details"][0]["wait_ms"] == next(e["wait_ms"] for e in md["timeline"] if "wait_ms" in e)


def test_html_shows_the_legacy_round(tmp_path):
    page = export(save(legacy().frames, tmp_path / "l.jsonl"), "html", tmp_path / "r.html")
    assert "round 1: server request id <code>0</code>" in page
    assert "… the user took 1501 ms to answer round 1" in page
    assert "answers 0: model m1 a summary" in page and "1 round ·" in page


def test_otlp_waiting_span_of_a_legacy_round(tmp_path):
    rec = save(legacy().frames, tmp_path / "l.jsonl")
    spans = assert_otlp(json.loads(export(rec, "otlp", tmp_path / "t.json")))
    c = report(rec)["chains"][0]
    root = next(s for s in spans if "parentSpanId" not in s)
    assert root["attrs"]["mrtr.rounds"] == 1 and root["attrs"]["mrtr.link"] == "time"
    wait = next(s for s in spans if s["name"] == "waiting for input (round 1)")
    rd = c["round_details"][0]
    assert int(wait["startTimeUnixNano"]) == round(rd["time"] * 1e6) * 1000
    assert int(wait["endTimeUnixNano"]) == round(rd["response_time"] * 1e6) * 1000
    assert wait["attrs"]["mrtr.answered"] is True and wait["attrs"]["mrtr.wait_ms"] == rd["wait_ms"]
    assert wait["attrs"]["mrtr.asked"] == ["0: sampling/createMessage"] and wait["attrs"]["mrtr.link"] == "time"


def test_the_live_view_follows_a_legacy_round():
    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.outputs.live import LiveView

    lines: list[str] = []
    view = LiveView(write=lambda text, severity: lines.append(text), color=False, min_severity="info")
    insp = Analysis()
    view.start()
    for f in legacy().frames:
        for o in insp.feed(f):
            view.add(o)
    view.stop()
    steps = [line for line in lines if line.startswith("c1 ")]
    assert steps[:3] == ["c1 tools/call summarize: request id=2",
                         "c1 tools/call summarize: round 1 the server asks, asks sampling/createMessage",
                         "c1 tools/call summarize: answered round 1 after 1.5 s waiting for input (link: time)"]
    assert re.match(r"c1 tools/call summarize  complete  1 round  \d+ ms \(waited 1501 ms for input\)  link: time$",
                    steps[3])


def test_stats_count_the_users_wait_of_a_legacy_round_as_of_its_modern_twin(tmp_path):
    """`stats` reads a legacy chain's answering time from its round (the question to the answer),
    and leaves it out of the server's time, as it does for the modern twin's retry."""
    groups = {}
    for name, traffic in (("legacy", legacy()), ("modern", modern())):
        out = run_cli("stats", save(traffic.frames, tmp_path / f"{name}.jsonl"), "--format", "json").stdout
        (g,) = json.loads(out)["groups"]
        groups[name] = g
    for g in groups.values():
        assert g["rounds"] == {"1": 1}
        assert abs(g["waited_ms"]["max"] - WAIT * 1000.0) < 5.0
        assert g["server_ms"]["max"] < 100.0  # the user's 1.5 s is not the server's


def test_the_live_metrics_observe_a_legacy_rounds_wait():
    from prometheus_client import CollectorRegistry

    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.outputs.metrics import Metrics

    registry = CollectorRegistry()
    metrics = Metrics(registry=registry)
    a = Analysis()
    for frame in legacy().frames:
        for out in a.feed(frame):
            metrics.add(out)
    for out in a.close(1e10):
        metrics.add(out)
    assert registry.get_sample_value("mrtr_rounds_sum", {"mcp_method_name": "tools/call"}) == 1.0
    assert registry.get_sample_value("mrtr_user_wait_seconds_count", {"mcp_method_name": "tools/call"}) == 1.0
    assert abs(registry.get_sample_value("mrtr_user_wait_seconds_sum", {"mcp_method_name": "tools/call"}) - WAIT) < 0.005
