"""The chain's span (otlp_spans.py), the live OTLP sink (otlp_live.py) fed by a real analysis, and
`export --to otlp` writing the same span (docs/observability.md). The end-to-end run over OTLP/HTTP
is tests/e2e/test_live_export.py."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.events import SessionStart
from mrtr_inspect.outputs.exporters.otlp_live import OtlpExport, endpoint_from
from mrtr_inspect.outputs.exporters.otlp_spans import parse_traceparent, plain_id
from tests.outputs.conftest import run_cli, save
from tests.traffic import ACCEPT, ELICIT, Traffic

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


@pytest.mark.parametrize("option, env, expected", [
    ("http://c:4318", {}, "http://c:4318/v1/traces"),
    ("http://c:4318/", {}, "http://c:4318/v1/traces"),
    ("http://c:4318/v1/traces", {}, "http://c:4318/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, "http://t/x"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}, None),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}, None),
    ("http://c", {"OTEL_SDK_DISABLED": "true"}, "http://c/v1/traces"),  # the option is explicit
    (None, {}, None),
])
def test_where_the_spans_go(option, env, expected):
    assert endpoint_from(option, env) == expected


def test_traceparent_and_ids():
    assert parse_traceparent(TRACEPARENT) == (TRACE, PARENT, 1)
    for bad in (None, 7, "", f"01-{TRACE}-{PARENT}-01", f"00-{'0' * 32}-{PARENT}-01", f"00-{TRACE}-{'0' * 16}-01",
                f"00-{TRACE.upper()}-{PARENT}-01", f"00-{TRACE}-{PARENT}"):
        assert parse_traceparent(bad) is None, bad
    assert (plain_id("req-7"), plain_id(10), plain_id(None), plain_id(1.5)) == ("req-7", "10", None, "1.5")


def traced(session: str = "s1") -> Traffic:
    """c1: an elicitation round then a result with isError, the first request carrying a traceparent
    and a string id; c2: a JSON-RPC error, no traceparent."""
    t = Traffic("stdio", session=session)
    a = t.tool("deploy", {"env": "prod"}, id="first", _meta={"traceparent": TRACEPARENT})
    t.irr(a, {"confirm": ELICIT}, state="st")
    t.tick(2.0)
    b = t.tool("deploy", {"env": "prod"}, id="second", inputResponses={"confirm": ACCEPT}, requestState="st")
    t.result(b, {"content": [], "isError": True})
    c = t.call("prompts/get", {"name": "greet"})
    t.error(c, -32602, "no such prompt")
    return t


class Failing(InMemorySpanExporter):
    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    def export(self, spans):
        return SpanExportResult.FAILURE if self.fail else super().export(spans)


def feed(t: Traffic, sink) -> None:
    """The analysis' outputs of the traffic, into a live sink, as live_analysis hands them."""
    a = Analysis(None)
    for f in t.frames:
        for o in a.feed(f):
            sink.add(o)
    for o in a.close():
        sink.add(o)


def live(t: Traffic, exporter) -> tuple[OtlpExport, list[str]]:
    said: list[str] = []
    start = next(f for f in t.frames if type(f) is SessionStart)
    sink = OtlpExport(start, "http://collector:4318/v1/traces", said.append, exporter=exporter)
    feed(t, sink)
    sink.close()
    return sink, said


def test_the_live_sink_sends_one_span_per_chain_with_the_conventions():
    memory = InMemorySpanExporter()
    sink, said = live(traced(), memory)
    assert said == [] and sink.spans == 2
    c1, c2 = sorted(memory.get_finished_spans(), key=lambda s: s.attributes["mrtr.chain.id"])
    assert c1.name == "tools/call deploy" and c1.kind.name == "CLIENT"
    a = c1.attributes
    assert a["jsonrpc.request.id"] == "first" and a["gen_ai.tool.name"] == "deploy"
    assert a["mrtr.rounds"] == 1 and a["mrtr.outcome"] == "complete" and a["mrtr.link"] == "state"
    assert a["mrtr.waited_ms"] == pytest.approx(2000.0, abs=5) and a["network.transport"] == "pipe"
    assert a["error.type"] == "tool_error" and c1.status.status_code.name == "ERROR"
    assert f"{c1.context.trace_id:032x}" == TRACE and f"{c1.parent.span_id:016x}" == PARENT and c1.parent.is_remote
    assert [e.name for e in c1.events if e.name == "input_required"] == ["input_required"]
    b = c2.attributes
    assert c2.name == "prompts/get greet" and b["gen_ai.prompt.name"] == "greet" and c2.parent is None
    assert b["error.type"] == "-32602" and c2.status.description == "no such prompt"


def test_a_failing_collector_is_one_note_and_a_count():
    exporter = Failing()
    sink, said = live(traced(), exporter)
    assert len([s for s in said if "failed; spans wait in a bounded queue" in s]) == 1
    assert said[-1] == "OTLP export: 2 of 2 spans not delivered to http://collector:4318/v1/traces"


def test_the_file_export_writes_the_live_span(tmp_path):
    """`export --to otlp`: the chain's span is the one the live sink sent (same ids, name, times,
    attributes), with the exchange and waiting spans under it."""
    t = traced()
    memory = InMemorySpanExporter()
    live(t, memory)
    sent = {s.attributes["mrtr.chain.id"]: s for s in memory.get_finished_spans()}
    src = save(t.frames, tmp_path / "r.jsonl")
    r = run_cli("export", src, "--to", "otlp", "--output", tmp_path / "t.json")
    assert r.exit_code == 0, r.stderr
    spans = [s for rs in json.loads((tmp_path / "t.json").read_text())["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    for cid, s in sent.items():
        [root] = [x for x in spans if x["spanId"] == f"{s.context.span_id:016x}"]
        assert root["traceId"] == f"{s.context.trace_id:032x}" and root["name"] == s.name and root["kind"] == 3
        assert (int(root["startTimeUnixNano"]), int(root["endTimeUnixNano"])) == (s.start_time, s.end_time)
        attrs = {a["key"]: next(iter(a["value"].values())) for a in root["attributes"]}
        assert attrs["jsonrpc.request.id"] == s.attributes["jsonrpc.request.id"]
        assert attrs["mrtr.outcome"] == s.attributes["mrtr.outcome"]
        under = [x for x in spans if x.get("parentSpanId") == root["spanId"]]
        assert under and all(x["traceId"] == root["traceId"] for x in under)
    c1 = next(x for x in spans if x["spanId"] == f"{sent['c1'].context.span_id:016x}")
    assert c1["parentSpanId"] == PARENT  # in the application's trace, in the file too
    ids = [a["value"]["stringValue"] for x in spans for a in x["attributes"] if a["key"] == "jsonrpc.request.id"]
    assert "first" in ids and "'first'" not in ids  # the plain string, no quotes


def test_a_collector_that_comes_back_is_said_once_too():
    """Failing, then accepting: one note for each change, none per batch; nothing lost counted."""
    from mrtr_inspect.outputs.exporters.otlp_live import _Watched

    notes: list[str] = []
    inner = Failing()
    w = _Watched(inner, "http://c/v1/traces", notes)
    assert [w.export([object()]) for _ in range(3)] == [SpanExportResult.FAILURE] * 3
    inner.fail = False
    assert w.export([]) is SpanExportResult.SUCCESS and w.export([]) is SpanExportResult.SUCCESS
    assert len(notes) == 2 and "failed" in notes[0] and notes[1] == "OTLP export to http://c/v1/traces works again"
    assert (w.failed, w.failing) == (3, False)
