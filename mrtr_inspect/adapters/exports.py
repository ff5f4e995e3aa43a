"""The live exports of the tee, the proxy and the addon: `--otlp-endpoint` (and the OTEL_EXPORTER_OTLP_*
variables) and `--metrics HOST:PORT` (docs/observability.md).

`Exports.open` runs where the options are read, before the analysis process is forked: it resolves
the OTLP endpoint and binds the metrics socket, so a bad address or a port in use is a startup error
(one line, exit 2). `sinks` runs where the session is analysed (the analysis process, or the addon's
process): it starts serving `/metrics` and makes the OTLP sink; both are sinks of the live analysis
(live_analysis.py), off the forwarding path. `close` flushes the spans (bounded) and stops serving.
"""

from __future__ import annotations

from typing import Callable

from ..core.events import SessionStart


def parse_host_port(text: str, option: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `PORT` → (host, port); ValueError with a reason naming `option`."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{option} takes HOST:PORT (port 0 picks a free one), not {text!r}")
    return host, int(port)


class Exports:
    def __init__(self, otlp_endpoint: str | None = None, metrics=None) -> None:
        self.otlp_endpoint = otlp_endpoint
        self.metrics = metrics  # outputs.metrics.MetricsServer, bound
        self.otlp = None

    @classmethod
    def open(cls, otlp_endpoint: str | None = None, metrics: str | None = None,
             allow_host: tuple[str, ...] = ()) -> "Exports | None":
        """The exports the options (and the environment) ask for, or None; ValueError with a reason.
        `allow_host`: names the metrics server answers to besides the loopback ones (hosts.py)."""
        from ..outputs.exporters.otlp_live import endpoint_from

        endpoint = endpoint_from(otlp_endpoint)
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"--otlp-endpoint takes an http:// or https:// URL, not {endpoint!r}")
        server = None
        if metrics:
            from ..outputs.metrics import Metrics, MetricsServer

            host, port = parse_host_port(metrics, "--metrics")
            try:
                server = MetricsServer(host, port, Metrics(), allow_host)
            except OSError as e:
                raise ValueError(f"cannot serve metrics on {metrics}: {(e.strerror or str(e)).lower()}") from None
        if endpoint is None and server is None:
            return None
        return cls(endpoint, server)

    def sinks(self, start: SessionStart, say: Callable[[str], None]) -> list:
        out: list = []
        if self.metrics is not None:
            self.metrics.start()
            out.append(self.metrics.metrics)
        if self.otlp_endpoint is not None:
            from ..outputs.exporters.otlp_live import OtlpExport

            self.otlp = OtlpExport(start, self.otlp_endpoint, say)
            out.append(self.otlp)
        return out

    def close(self) -> None:
        try:
            if self.otlp is not None:
                self.otlp.close()
        finally:
            if self.metrics is not None:
                self.metrics.close()

    def forked(self) -> None:
        """In the process that forwards, once the analysis process is forked: the metrics socket is
        the analysis process' alone."""
        if self.metrics is not None:
            self.metrics.close()
