"""`--metrics HOST:PORT` scraped by a real Prometheus server (Debian's `prometheus` package; .ci/run
installs it): started here on loopback with a 1 s scrape interval and a temporary configuration and
storage, and asked through its HTTP API (`/api/v1/query`) until the expected values appear, with a
deadline. The SDK client's six chains behind the proxy are six observations of the chain duration.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import anyio
import pytest

from tests.e2e.test_http_sdk import EXPECTED, TOOLS, proxied_server, run_client
from tests.e2e.test_live_export import free_port

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the Debian package prometheus is not installed "
                                "(.ci/run installs it: apt-get install -y prometheus)")
DEADLINE = 60.0
METRICS = re.compile(r"^mrtr-inspect: metrics on (http://127\.0\.0\.1:(\d+)/metrics)$")


class Prometheus:
    def __init__(self, target: str, tmp) -> None:
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: mrtr-inspect\n    static_configs:\n      - targets: ['{target}']\n")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address={self.url[len('http://'):]}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("wb"))
        self.log = tmp / "prometheus.log"

    def query(self, q: str) -> list[dict]:
        with urllib.request.urlopen(f"{self.url}/api/v1/query?query={urllib.parse.quote(q)}", timeout=5) as r:
            return json.load(r)["data"]["result"]

    def wait(self, q: str, want: float) -> float | None:
        """The query's single value once it is `want` (None at the deadline: the last value seen)."""
        end, last = time.monotonic() + DEADLINE, None
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                res = self.query(q)
            except OSError:  # not listening yet
                res = []
            if res:
                last = float(res[0]["value"][1])
                if last == want:
                    return last
            time.sleep(0.2)  # polling a condition, with the deadline above
        return last

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_prometheus_counts_one_observation_per_chain(tmp_path):
    with proxied_server(tmp_path / "server.jsonl", "--metrics", "127.0.0.1:0", "--quiet") as (proxy, _):
        m = proxy.err.wait(METRICS)
        assert m is not None, proxy.err.lines
        said, _ = anyio.run(run_client, proxy.url)
        assert len(said) == len(TOOLS)
        prom = Prometheus(f"127.0.0.1:{m.group(2)}", tmp_path)
        try:
            n = len(TOOLS)
            assert prom.wait("sum(mcp_client_operation_duration_seconds_count)", n) == n
            errors = sum(1 for r, o in EXPECTED.values() if o == "error")
            assert prom.wait('sum(mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",'
                             'outcome="error"})', errors) == errors
            rounds = sum(r for r, _ in EXPECTED.values())
            assert prom.wait("sum(mrtr_rounds_sum)", rounds) == rounds
            assert prom.wait("sum(mrtr_rounds_count)", n) == n
            assert prom.wait("sum(mrtr_user_wait_seconds_count)", rounds) == rounds  # one per answered round
            labels = {tuple(sorted(r["metric"])) for r in prom.query("mcp_client_operation_duration_seconds_count")}
            assert labels == {("__name__", "instance", "job", "mcp_method_name", "outcome")}
            findings = prom.query("mrtr_findings_total")
            assert all(set(r["metric"]) == {"__name__", "instance", "job", "rule", "severity"} for r in findings)
        finally:
            prom.stop()
