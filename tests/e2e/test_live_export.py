"""The live OTLP export of the proxy and the tee (docs/observability.md), against an OTLP/HTTP receiver
of our own that decodes what it gets with opentelemetry-proto (tests/e2e/otlp_receiver.py).

    traced SDK client ──▶ mrtr-inspect --upstream … --otlp-endpoint RX ──▶ SDK server
    (its own TracerProvider:                 └── one span per chain ──▶ RX
     the SDK puts a traceparent in params._meta)

The client runs in a process of its own with a real OpenTelemetry TracerProvider, so the
traceparent each request carries is the one the official SDK injects for its own `MCP send` span;
the proxy's span for the chain must be in that trace, that span its parent.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import anyio
import pytest

from tests.e2e.otlp_receiver import OtlpReceiver
from tests.e2e.test_http_proxy import ROOT, WAIT, child_env
from tests.e2e.test_http_sdk import EXPECTED, TOOLS, proxied_server, run_client


def traced_client(argv: list[str]) -> None:
    """Run the SDK client against argv[0] inside an application span; print the answers and the
    spans the application recorded (its own `MCP send …` spans), as JSON."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    with trace.get_tracer("the-application").start_as_current_span("the application's work"):
        said, _ = anyio.run(run_client, argv[0])
    spans = [{"name": s.name, "trace_id": f"{s.context.trace_id:032x}", "span_id": f"{s.context.span_id:016x}",
              "request_id": (s.attributes or {}).get("jsonrpc.request.id")} for s in memory.get_finished_spans()]
    print(json.dumps({"said": said, "spans": spans}))


def run_traced_client(url: str) -> dict:
    cmd = [sys.executable, "-c", "import sys, tests.e2e.test_live_export as t; t.traced_client(sys.argv[1:])", url]
    r = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, timeout=WAIT * 2)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live-otlp")
    rep = tmp / "report.json"
    with OtlpReceiver() as rx:
        with proxied_server(tmp / "server.jsonl", "--otlp-endpoint", rx.url, "--report", str(rep),
                            "--quiet") as (proxy, port):
            client = run_traced_client(proxy.url)
            spans = rx.wait_spans(len(TOOLS))
        stderr = proxy.err.rest()
        headers = [h for h, _ in rx.requests]
    return {"client": client, "spans": spans, "port": port, "report": json.loads(rep.read_text()),
            "stderr": stderr, "headers": headers}


def test_one_span_per_chain_over_otlp_http_protobuf(live):
    assert len(live["client"]["said"]) == len(TOOLS)
    spans, chains = live["spans"], live["report"]["chains"]
    assert len(spans) == len(chains) == len(TOOLS)
    assert {h[":path"] for h in live["headers"]} == {"/v1/traces"}
    assert {h["content-type"] for h in live["headers"]} == {"application/x-protobuf"}
    assert sorted(s["name"] for s in spans) == sorted(f"tools/call {t}" for t in TOOLS)
    assert {s["scope"] for s in spans} == {"mrtr-inspect"}
    assert {s["resource"]["service.name"] for s in spans} == {"mrtr-inspect"}


@pytest.mark.parametrize("tool", TOOLS)
def test_the_span_carries_the_mcp_conventions_and_the_chain(live, tool):
    c = next(c for c in live["report"]["chains"] if c["target"] == tool)
    s = next(s for s in live["spans"] if s["attrs"]["gen_ai.tool.name"] == tool)
    a = s["attrs"]
    assert s["kind"] == 3  # SPAN_KIND_CLIENT
    assert a["mcp.method.name"] == "tools/call" and a["gen_ai.operation.name"] == "execute_tool"
    assert a["jsonrpc.request.id"] == str(c["requests"][0])  # a plain string, no quotes
    assert a["network.transport"] == "tcp"
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", live["port"])
    rounds, outcome = EXPECTED[tool]
    assert (a["mrtr.rounds"], a["mrtr.outcome"], a["mrtr.link"]) == (rounds, outcome, "state")
    waits = [e["wait_ms"] for e in c["timeline"] if "wait_ms" in e]
    assert a["mrtr.waited_ms"] == pytest.approx(sum(waits), abs=0.002) and a["mrtr.waited_ms"] > 0
    # the chain's true times: the recorded frames', not the moment of export
    assert s["start"] == round(c["start"] * 1e6) * 1000 and s["end"] == round(c["end"] * 1e6) * 1000
    events = [e for e in s["events"] if e[0] == "input_required"]
    assert [e[2]["mrtr.round"] for e in events] == list(range(1, rounds + 1))
    assert all(e[2]["mrtr.answered"] is True for e in events)
    if outcome == "error":
        assert a["error.type"] == str(c["error_code"]) and s["status"][0] == 2  # STATUS_CODE_ERROR
        assert "failed" in s["status"][1]  # the JSON-RPC error's message
    else:
        assert "error.type" not in a and s["status"][0] == 0


def test_the_span_is_inside_the_applications_trace(live):
    """The SDK client injected its own `MCP send tools/call X` span as traceparent: the proxy's span
    for the chain is in the application's trace, that span its parent."""
    app = live["client"]["spans"]
    [root] = [s for s in app if s["name"] == "the application's work"]
    for tool in TOOLS:
        c = next(c for c in live["report"]["chains"] if c["target"] == tool)
        [first] = [s for s in app if s["name"] == f"MCP send tools/call {tool}" and s["request_id"] == str(c["requests"][0])]
        s = next(s for s in live["spans"] if s["attrs"]["gen_ai.tool.name"] == tool)
        assert s["trace_id"] == root["trace_id"] == first["trace_id"]
        assert s["parent"] == first["span_id"]
    assert len({s["span_id"] for s in live["spans"]}) == len(TOOLS)


def test_the_export_said_nothing_when_it_worked(live):
    assert "OTLP" not in live["stderr"]


def test_a_collector_that_is_down_costs_a_note_never_the_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the note comes once the first batch gave up
    down = f"http://127.0.0.1:{free_port()}"
    with proxied_server(tmp_path / "server.jsonl", "--otlp-endpoint", down, "--quiet") as (proxy, _):
        said, _ = anyio.run(run_client, proxy.url)
        assert len(said) == len(TOOLS) and not any(": error:" in x for x in said[:-1])
    err = proxy.err.rest()
    assert f"OTLP export to {down}/v1/traces failed" in err and "the traffic is unaffected" in err
    assert f"spans not delivered to {down}/v1/traces" in err


def test_the_tee_exports_where_the_standard_variables_say(tmp_path, monkeypatch):
    """`mrtr-inspect stdio` with no option: OTEL_EXPORTER_OTLP_ENDPOINT (a base URL) and
    OTEL_EXPORTER_OTLP_HEADERS, as every OpenTelemetry SDK reads them; stdio spans are `pipe`, with
    no server address."""
    from tests.e2e import helper, tee_cmd
    from tests.e2e.conftest import Processes
    from tests.e2e.test_stdio_sdk import CLIENT_SAYS, ROUNDS, SERVER
    from tests.e2e.test_stdio_sdk import TOOLS as STDIO_TOOLS

    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-fleet=east,x-team=mcp")
        client = helper("sdk_client", ",".join(STDIO_TOOLS), "--", *tee_cmd(cmd=[sys.executable, *SERVER]))
        ps = Processes()
        try:
            done = ps.run(client, timeout=120)
        finally:
            ps.close()
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().splitlines() == CLIENT_SAYS
        spans = rx.wait_spans(len(STDIO_TOOLS))
        headers = [h for h, _ in rx.requests]
    assert sorted(s["name"] for s in spans) == sorted(f"tools/call {t}" for t in STDIO_TOOLS)
    assert {(h[":path"], h["x-fleet"], h["x-team"]) for h in headers} == {("/v1/traces", "east", "mcp")}
    for s in spans:
        a = s["attrs"]
        assert a["network.transport"] == "pipe" and "server.address" not in a and s["parent"] is None
        assert a["mrtr.rounds"] == ROUNDS[a["gen_ai.tool.name"]] and a["mrtr.outcome"] == "complete"
    assert {s["resource"]["mrtr.transport"] for s in spans} == {"stdio"}


def test_the_addon_exports_under_plain_mitmdump(tmp_path):
    """`mitmdump -s addons/mrtr_inspect.py --set mrtr_otlp_endpoint=… --set mrtr_metrics=…`: the
    addon's options of the same names, the export on mitmproxy's process (its analysis thread)."""
    import signal
    import urllib.request

    from tests.e2e.test_http_addon import mitmdump
    from tests.e2e.test_http_sdk import start_server

    metrics = f"127.0.0.1:{free_port()}"
    server, port = start_server(tmp_path / "server.jsonl")
    with OtlpReceiver() as rx:
        dump, out = mitmdump(tmp_path, port, f"mrtr_otlp_endpoint={rx.url}", f"mrtr_metrics={metrics}")
        try:
            m = out.wait(r"listening at 127\.0\.0\.1:(\d+)")
            assert m is not None, out.rest()
            said, _ = anyio.run(run_client, f"http://127.0.0.1:{m.group(1)}/mcp")
            assert len(said) == len(TOOLS)
            spans = rx.wait_spans(len(TOOLS))
            with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as r:
                text = r.read().decode()
            dump.send_signal(signal.SIGTERM)
            assert dump.wait(WAIT) == 0
        finally:
            for p in (dump, server):
                if p.poll() is None:
                    p.kill()
                    p.wait()
    assert sorted(s["name"] for s in spans) == sorted(f"tools/call {t}" for t in TOOLS)
    assert {(s["attrs"]["server.address"], s["attrs"]["server.port"]) for s in spans} == {("127.0.0.1", port)}
    total = sum(float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("mcp_client_operation_duration_seconds_count{"))
    assert total == len(TOOLS)
