"""`--metrics HOST:PORT`: Prometheus metrics of a live session at `/metrics` (prometheus-client;
CONTRACTS.md, Live export; docs/observability.md).

- `mcp_client_operation_duration_seconds` (histogram; labels `mcp_method_name`, `outcome`): one
  observation per chain, its whole duration (first request to end), the buckets of the MCP semantic
  conventions' `mcp.client.operation.duration`;
- `mrtr_rounds` (histogram; label `mcp_method_name`): the chain's `input_required` rounds, one
  observation per chain;
- `mrtr_user_wait_seconds` (histogram; label `mcp_method_name`): one observation per answered round,
  from the `input_required` to the retry that answers it (the user's answering time);
- `mrtr_findings_total` (counter; labels `rule`, `severity`).

Label values are bounded: the chain methods, the outcomes of RULES.md §10, the rule ids of the
registry and the three severities (anything else is `other`); no ids, targets or free text.

`MetricsServer` binds its socket where it is made (so a port in use is a startup error, before the
proxy or the tee forks) and serves from a thread started by `start()`, in the process that analyses:
the analysis process of the tee and the proxy (the socket crosses the fork), the analysis thread's
process in stock mitmproxy. `Metrics` is the live analysis' sink that fills the registry.
"""

from __future__ import annotations

import socket
import threading

from ..core.findings import SEVERITIES as _SEVERITIES, Finding
from ..core.inspector import ChainEvent
from ..core.vocabulary import OUTCOMES as _OUTCOMES, Outcome
from ..hosts import HostPolicy

DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
ROUNDS_BUCKETS = (0, 1, 2, 3, 4, 5, 8, 10, 20)
WAIT_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
OUTCOMES = frozenset(_OUTCOMES)
SEVERITIES = frozenset(_SEVERITIES)


def _bounded(value, allowed) -> str:
    return value if value in allowed else "other"


class Metrics:
    """The registry of one live session's metrics, and the sink that fills it."""

    def __init__(self, registry=None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        from ..rules import load_rules
        from ..rules.registry import REGISTRY

        load_rules()
        self.rules = frozenset(REGISTRY)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.duration = Histogram("mcp_client_operation_duration_seconds",
                                  "A logical request (an MRTR chain), from its first request to its end",
                                  ["mcp_method_name", "outcome"], buckets=DURATION_BUCKETS, registry=r)
        self.rounds = Histogram("mrtr_rounds", "input_required rounds of a chain", ["mcp_method_name"],
                                buckets=ROUNDS_BUCKETS, registry=r)
        self.wait = Histogram("mrtr_user_wait_seconds",
                              "The user's answering time: an input_required to the retry that answers it",
                              ["mcp_method_name"], buckets=WAIT_BUCKETS, registry=r)
        self.findings = Counter("mrtr_findings", "Findings, by rule and severity", ["rule", "severity"], registry=r)

    def add(self, out) -> None:
        t = type(out)
        if t is ChainEvent and out.kind == "closed":
            c = out.chain
            method = _bounded(c.method, METHODS)
            self.duration.labels(method, _bounded(c.outcome or Outcome.OPEN, OUTCOMES)).observe(max(c.end - c.start, 0.0))
            self.rounds.labels(method).observe(len(c.rounds) + len(c.asks))
            wait = self.wait.labels(method)
            for r in c.requests:
                if r.round is not None:
                    wait.observe(max(r.time - r.round.irr_time, 0.0))
            for q in c.asks:  # a legacy round (RULES.md §13): the server's question to the client's answer
                if q.answer_time is not None:
                    wait.observe(max(q.answer_time - q.time, 0.0))
        elif t is Finding:
            self.findings.labels(_bounded(out.rule, self.rules), _bounded(out.severity, SEVERITIES)).inc()


_LOCAL = "mrtr_inspect.local_address"  # the WSGI environ key of the connection's local address


def _guarded(app, policy: HostPolicy):
    """The WSGI app, behind the Host and Origin check of every listener of ours (hosts.py): a scrape
    from a page that rebinds its name to this machine gets 403."""
    def guarded(environ, start_response):
        reason = policy.refusal(environ.get("HTTP_HOST"), environ.get("HTTP_ORIGIN"), environ.get(_LOCAL))
        if reason is None:
            return app(environ, start_response)
        body = f"forbidden: {reason} (DNS rebinding protection)\n".encode()
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]
    return guarded


class MetricsServer:
    """`/metrics` of a registry on HOST:PORT: bound now, served once `start()` runs, to requests whose
    Host and Origin name this listener (loopback names, HOST, the names in `allow`: hosts.py)."""

    def __init__(self, host: str, port: int, metrics: Metrics, allow: tuple[str, ...] = ()) -> None:
        from wsgiref.simple_server import make_server

        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

        class _Handler(_SilentHandler):
            def get_environ(self):
                env = super().get_environ()
                env[_LOCAL] = self.connection.getsockname()[0]
                return env

        self.metrics = metrics
        server_class = ThreadingWSGIServer
        if ":" in host:
            class _V6(ThreadingWSGIServer):
                address_family = socket.AF_INET6
            server_class = _V6
        app = _guarded(make_wsgi_app(metrics.registry), HostPolicy(allow, host))
        self.httpd = make_server(host, port, app, server_class, handler_class=_Handler)
        self.port = self.httpd.server_address[1]
        self.host = host
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="mrtr-inspect-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving (the process that did not start it only closes its copy of the socket)."""
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()
