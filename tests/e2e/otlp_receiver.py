"""An OTLP/HTTP trace receiver of our own for the tests: `POST /v1/traces` bodies decoded with
opentelemetry-proto (`ExportTraceServiceRequest`), kept with the request headers.

    with OtlpReceiver() as rx:
        ... --otlp-endpoint rx.url ...
        spans = rx.wait_spans(6)        # a condition with a deadline, not a sleep
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)


def value(v):
    """An AnyValue as Python."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attrs(kvs) -> dict:
    return {kv.key: value(kv.value) for kv in kvs}


class OtlpReceiver:
    def __init__(self) -> None:
        self.requests: list[tuple[dict, ExportTraceServiceRequest]] = []
        self.cond = threading.Condition()
        rx = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                with rx.cond:
                    rx.requests.append(({k.lower(): v for k, v in self.headers.items()} | {":path": self.path}, req))
                    rx.cond.notify_all()
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def spans(self) -> list[dict]:
        """Every span received: its fields, attributes and events as Python, with its resource's."""
        out = []
        for _, req in self.requests:
            for rs in req.resource_spans:
                res = attrs(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append({"trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                    "parent": s.parent_span_id.hex() or None, "name": s.name, "kind": s.kind,
                                    "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                                    "attrs": attrs(s.attributes), "status": (s.status.code, s.status.message),
                                    "events": [(e.name, e.time_unix_nano, attrs(e.attributes)) for e in s.events],
                                    "resource": res, "scope": ss.scope.name})
        return out

    def wait_spans(self, n: int, deadline: float = 30.0) -> list[dict]:
        end = time.monotonic() + deadline
        with self.cond:
            while len(self.spans()) < n and time.monotonic() < end:
                self.cond.wait(end - time.monotonic())
            return self.spans()
