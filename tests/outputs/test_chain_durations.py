"""The duration of chains the capture ended (RULES.md §10.3 `open`, `abandoned`): the live proxy's
final line, its report and `check` of its recording agree, and tell how long the chain had waited."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from mrtr_inspect.adapters.live_analysis import new_analysis
from mrtr_inspect.cli import main
from mrtr_inspect.config import Config
from mrtr_inspect.outputs.live import LiveView
from mrtr_inspect.outputs.text import chain_line
from mrtr_inspect.recording.writer import RecordingWriter
from tests.traffic import ELICIT, HTTP_HEADERS, meta

T0 = 1_800_000_000.0


def _call(n: int, name: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
        "name": name, "arguments": {}, "_meta": {**meta(), "progressToken": n}}}).encode()


def _event(msg: dict) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(msg).encode() + b"\r\n\r\n"


def test_a_proxy_stopped_mid_chain_reports_what_was_waiting_as_check_does(tmp_path):
    """c1 `ask` got input_required and no retry; c2 `slow` streamed 5 progress events and was still
    in flight when the proxy was stopped (SIGTERM) 6.2 s after c1's question."""
    rec, report = tmp_path / "live.jsonl", tmp_path / "report.json"
    lines: list[str] = []
    writer = RecordingWriter(rec, "http", {}, start_time=T0)
    a = new_analysis(writer.start, Config(), writer, str(report), view=LiveView(write=lambda s, _: lines.append(s)))
    head = HTTP_HEADERS + (("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"))
    for x, name, t in ((1, "ask", T0 + 0.01), (2, "slow", T0 + 0.02)):
        a.step("request_head", (t, x, "POST", "/mcp", head + (("mcp-name", name),), "127.0.0.1:5000"))
        a.step("request_data", (t, x, _call(x, name)))
        a.step("request_end", (t, x))
    a.step("response_head", (T0 + 0.05, 1, 200, (("content-type", "application/json"),)))
    a.step("response_data", (T0 + 0.05, 1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "input_required", "inputRequests": {"confirm": ELICIT}, "requestState": "s1"}}).encode()))
    a.step("response_end", (T0 + 0.05, 1, None))
    a.step("response_head", (T0 + 0.1, 2, 200, (("content-type", "text/event-stream"),)))
    for n in range(5):
        a.step("response_data", (T0 + 0.1 + 0.15 * n, 2, _event({"jsonrpc": "2.0", "method": "notifications/progress",
                                                                  "params": {"progressToken": 2, "progress": n}})))
    stop = T0 + 6.25
    assert a.end({}, stop) == 0

    live = {m.group(1): m.group(0) for s in lines if (m := re.match(r"(c\d) tools/call \S+  (open|abandoned)\b.*", s))}
    assert live["c2"] == "c2 tools/call slow  open  0 rounds  6230 ms"
    assert live["c1"] == "c1 tools/call ask  abandoned  1 round  6240 ms (waited 6200 ms for input)"

    r = CliRunner().invoke(main, ["check", str(rec), "--format", "json", "--fail-on", "never"])
    checked = {c["id"]: c for c in json.loads(r.stdout)["chains"]}
    reported = {c["id"]: c for c in json.loads(report.read_text())["chains"]}
    for cid in ("c1", "c2"):
        assert checked[cid]["duration_ms"] == reported[cid]["duration_ms"]
        assert checked[cid]["end"] == reported[cid]["end"] == stop
    shown = CliRunner().invoke(main, ["show", str(rec), "--format", "json"])
    assert [chain_line(c) for c in json.loads(shown.stdout)["chains"]] == [live["c1"], live["c2"]]

    # the trace: the unanswered round's "waiting for input" span runs to the stop, its wait with it
    out = tmp_path / "trace.json"
    assert CliRunner().invoke(main, ["export", str(rec), "--to", "otlp", "--output", str(out)]).exit_code == 0
    spans = [sp for rs in json.loads(out.read_text())["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    waiting = [sp for sp in spans if sp["name"] == "waiting for input (round 1)"]
    assert len(waiting) == 1 and abs(int(waiting[0]["endTimeUnixNano"]) - stop * 1e9) < 1e3
    attrs = {a["key"]: a["value"] for a in waiting[0]["attributes"]}
    assert attrs["mrtr.wait_ms"] == {"doubleValue": 6200.0}


def test_the_chain_line_counts_answered_and_unanswered_waits():
    answered = {"id": "c1", "method": "tools/call", "target": "x", "outcome": "complete", "rounds": 1,
                "duration_ms": 3000.0, "timeline": [{"id": 1}, {"id": 2, "wait_ms": 2000.0}],
                "round_details": [{"round": 1}]}
    assert chain_line(answered).endswith("3000 ms (waited 2000 ms for input)")
    abandoned = {**answered, "outcome": "abandoned", "duration_ms": 9000.0,
                 "timeline": [{"id": 1}, {"id": 2, "wait_ms": 2000.0}, {"id": 3}],
                 "round_details": [{"round": 1}, {"round": 2, "unanswered_ms": 5000.0}]}
    assert chain_line(abandoned).endswith("9000 ms (waited 7000 ms for input)")
    plain = {**answered, "timeline": [{"id": 1}], "round_details": []}
    assert "waited" not in chain_line(plain)
