"""The `--metrics` registry (outputs/metrics.py) fed by a real analysis, scraped over HTTP; the
option's startup errors. A real Prometheus scrapes it in tests/e2e/test_metrics_prometheus.py."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from mrtr_inspect.adapters.exports import Exports
from tests.outputs.conftest import run_cli
from tests.outputs.test_otlp_live import feed, traced


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_one_observation_per_chain_and_bounded_labels():
    exports = Exports.open(None, "127.0.0.1:0")
    t = traced()
    [metrics] = exports.sinks(t.frames[0], print)
    try:
        feed(t, metrics)
        got = scrape(exports.metrics.url)
    finally:
        exports.close()
    dur = "mcp_client_operation_duration_seconds_count"
    assert got[(dur, (("mcp_method_name", "tools/call"), ("outcome", "complete")))] == 1
    assert got[(dur, (("mcp_method_name", "prompts/get"), ("outcome", "error")))] == 1
    assert got[("mrtr_rounds_sum", (("mcp_method_name", "tools/call"),))] == 1
    wait = (("mcp_method_name", "tools/call"),)
    assert got[("mrtr_user_wait_seconds_count", wait)] == 1 and 1.9 < got[("mrtr_user_wait_seconds_sum", wait)] < 2.1
    findings = {k[1] for k in got if k[0] == "mrtr_findings_total"}
    assert findings and all(dict(k).keys() == {"rule", "severity"} for k in findings)
    # no ids, targets or free text among the label values
    values = {v for k in got for _, v in k[1]}
    assert not values & {"deploy", "greet", "first", "second", "c1", "c2", "s1"}


def test_a_metrics_port_in_use_is_one_line_and_exit_2(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("stdio", "--metrics", f"127.0.0.1:{port}", "--", "true")
    assert r.exit_code == 2
    assert r.stderr == f"mrtr-inspect: cannot serve metrics on 127.0.0.1:{port}: address already in use\n"
    r = run_cli("stdio", "--metrics", "nowhere", "--", "true")
    assert r.exit_code == 2 and "--metrics takes HOST:PORT" in r.stderr
    r = run_cli("stdio", "--otlp-endpoint", "collector:4318", "--", "true")
    assert r.exit_code == 2 and "--otlp-endpoint takes an http:// or https:// URL" in r.stderr


def test_where_metrics_are_served_is_said_unless_quiet(tmp_path):
    """The tee says `metrics on URL`; under --quiet only when port 0 chose the port (else nothing of
    its own on stderr)."""
    import subprocess
    import sys

    from tests.e2e.test_live_export import free_port

    def stderr(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "mrtr_inspect", "stdio", *args, "--", "true"],
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stderr.decode()

    port = free_port()
    assert stderr("--quiet", "--metrics", f"127.0.0.1:{port}") == ""
    assert stderr("--metrics", f"127.0.0.1:{port}") == f"mrtr-inspect: metrics on http://127.0.0.1:{port}/metrics\n"
    said = stderr("--quiet", "--metrics", "127.0.0.1:0")
    assert said.startswith("mrtr-inspect: metrics on http://127.0.0.1:") and ":0/" not in said
