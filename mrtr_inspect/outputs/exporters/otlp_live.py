"""The live OTLP export: each chain, as it ends, one span (otlp_spans.chain_span) sent over OTLP/HTTP
(protobuf) by the OpenTelemetry SDK's exporter, batched (docs/observability.md).

It is a sink of the live analysis (adapters/live_analysis.py), so it runs where the analysis runs:
in the analysis process of the tee and of the proxy, on the analysis thread of the stock-mitmproxy
addon; never on the forwarding path. `add` only turns a closed chain into a span and appends it to
the batch processor's queue (bounded: `OTEL_BSP_MAX_QUEUE_SIZE`, 2048 by default, the oldest dropped
past it); the processor's own thread sends. A collector that is down or refuses costs one note (and
one when it accepts again), the queue, and at the session's end at most `SHUTDOWN_MS`.

Where to send: `--otlp-endpoint URL` (a base URL as `OTEL_EXPORTER_OTLP_ENDPOINT` takes, `/v1/traces`
appended unless the URL ends with it), else the standard variables `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
(the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT`; `OTEL_EXPORTER_OTLP_HEADERS` (and `_TRACES_HEADERS`),
`_TIMEOUT`, `_COMPRESSION`, the certificates and `OTEL_BSP_*` apply as the SDK reads them.
`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` name the resource (`service.name` default
`mrtr-inspect`). The OpenTelemetry packages are imported only when the export is on.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Callable

from ...core.events import SessionStart
from ...core.findings import Finding
from ...core.inspector import ChainEvent
from ...core.messages import Message
from ...version import __version__
from .otlp_spans import Facts, Span, chain_span, facts_of, finding_event

SHUTDOWN_MS = 2000  # what a collector that is down may cost the session's end
SCHEDULE_DELAY_MS = 1000  # the batch processor's delay unless OTEL_BSP_SCHEDULE_DELAY says otherwise
KEPT = 10_000  # messages' facts and chains' findings held for the chains still open (oldest dropped)
FINDINGS_PER_CHAIN = 32
TRACES_PATH = "/v1/traces"


def endpoint_from(option: str | None, env: dict | None = None) -> str | None:
    """The traces URL to send to: the option's (a base URL, /v1/traces appended), else the standard
    variables'; None when the live export is off."""
    env = os.environ if env is None else env
    if option:
        base = option.rstrip("/")
        return base if base.endswith(TRACES_PATH) else base + TRACES_PATH
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return endpoint_from(base, {}) if base else None


def _quiet_sdk_logs() -> None:
    """The SDK logs each failed batch; the export says it once (its notes) instead."""
    for name in ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal", "opentelemetry.sdk.trace.export"):
        log = logging.getLogger(name)
        log.addHandler(logging.NullHandler())
        log.propagate = False


class _Watched:
    """The OTLP exporter, its failures and recoveries turned into notes (taken by the analysis)."""

    def __init__(self, inner, endpoint: str, notes: list[str]) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.notes = notes
        self.failing = False
        self.sent = self.failed = 0

    def export(self, spans) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception:  # pragma: no cover - the exporter returns FAILURE
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.sent += len(spans)
            if self.failing:
                self.failing = False
                self.notes.append(f"OTLP export to {self.endpoint} works again")
        else:
            self.failed += len(spans)
            if not self.failing:
                self.failing = True
                self.notes.append(f"OTLP export to {self.endpoint} failed; spans wait in a bounded queue "
                                  "(the oldest dropped past it); the traffic is unaffected")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _readable(s: Span, resource, scope):
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def attrs(d: dict) -> dict:
        return {k: v for k, v in d.items() if v is not None}

    flags = TraceFlags(TraceFlags.SAMPLED)
    trace = int(s.trace_id, 16)
    ctx = SpanContext(trace, int(s.span_id, 16), is_remote=False, trace_flags=flags)
    parent = SpanContext(trace, int(s.parent_id, 16), is_remote=s.remote_parent, trace_flags=flags) \
        if s.parent_id is not None else None
    status = Status(StatusCode.ERROR, s.status[1]) if s.status is not None else Status(StatusCode.UNSET)
    return ReadableSpan(s.name, context=ctx, parent=parent, resource=resource, attributes=attrs(s.attributes),
                        events=[Event(e.name, attrs(e.attributes), round(e.time * 1e6) * 1000) for e in s.events],
                        kind=SpanKind.CLIENT, status=status, start_time=round(s.start * 1e6) * 1000,
                        end_time=round(s.end * 1e6) * 1000, instrumentation_scope=scope)


class OtlpExport:
    """A sink of the live analysis: a span per closed chain to the OTLP/HTTP endpoint.

    `say(text)` is how its notes reach the user; they are said from `add` and `close` (the analysis
    thread), never from the exporter's thread."""

    def __init__(self, start: SessionStart, endpoint: str, say: Callable[[str], None],
                 exporter=None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        _quiet_sdk_logs()
        self.session = start.session
        self.transport = start.transport
        up = start.info.get("upstream")
        self.upstream = up if isinstance(up, str) else None
        self.say = say
        self.notes: list[str] = []
        own = {"mrtr.session": start.session, "mrtr.transport": start.transport}
        if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            own["service.name"] = "mrtr-inspect"
        self.resource = Resource.create(own)
        self.scope = InstrumentationScope("mrtr-inspect", __version__)
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self.exporter = _Watched(exporter, endpoint, self.notes)
        delay = None if os.environ.get("OTEL_BSP_SCHEDULE_DELAY") else SCHEDULE_DELAY_MS
        self.processor = BatchSpanProcessor(self.exporter, schedule_delay_millis=delay)  # type: ignore[arg-type]
        self._facts: OrderedDict[int, Facts] = OrderedDict()
        self._findings: OrderedDict[str, list[dict]] = OrderedDict()
        self.spans = 0

    def add(self, out) -> None:
        t = type(out)
        if t is Message:
            f = facts_of(out)
            if f is not None:
                self._keep(self._facts, out.index, f)
        elif t is Finding:
            if out.chain:
                lst = self._findings.get(out.chain)
                if lst is None:
                    self._keep(self._findings, out.chain, lst := [])
                if len(lst) < FINDINGS_PER_CHAIN:
                    lst.append(out.to_json())
        elif t is ChainEvent and out.kind == "closed":
            self._send(out.chain.summary())
        if self.notes:
            self._say_notes()

    @staticmethod
    def _keep(od: OrderedDict, key, value) -> None:
        od[key] = value
        if len(od) > KEPT:
            od.popitem(last=False)

    def _send(self, c: dict) -> None:
        facts = self._facts
        span = chain_span(c, self.session, self.transport, self.upstream, lambda i: facts.get(i) if i is not None else None)
        for f in self._findings.pop(c["id"], ()):
            span.events.append(finding_event(f, span.end))
        for e in c.get("timeline") or ():
            facts.pop(e["message"], None)
            if e.get("response_message") is not None:
                facts.pop(e["response_message"], None)
        self.processor.on_end(_readable(span, self.resource, self.scope))
        self.spans += 1

    def _say_notes(self) -> None:
        while self.notes:
            self.say(self.notes.pop(0))

    def close(self) -> None:
        """Send what is queued, waiting at most SHUTDOWN_MS."""
        done = threading.Thread(target=self.processor.shutdown, name="mrtr-inspect-otlp-end", daemon=True)
        done.start()
        try:
            done.join(SHUTDOWN_MS / 1000)
            if done.is_alive():  # the exporter is still retrying: stop it (its thread dies with the process)
                self.exporter.shutdown()
        finally:
            self._say_notes()
            lost = self.spans - self.exporter.sent
            if lost > 0 and (self.exporter.failing or self.exporter.failed):
                self.say(f"OTLP export: {lost} of {self.spans} spans not delivered to {self.exporter.endpoint}")
