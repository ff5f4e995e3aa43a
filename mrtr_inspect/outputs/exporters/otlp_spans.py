"""The span of a chain, as `export --to otlp` writes it and the live export sends it (CONTRACTS.md,
Live export; docs/observability.md). No OpenTelemetry import here: `otlp.py` writes these spans as
OTLP/JSON, `otlp_live.py` hands them to the OpenTelemetry SDK's OTLP/HTTP exporter.

One CLIENT span per chain, named `{method} {target}`, from the chain's first request to its end (the
recorded frame times), with the attributes of the OpenTelemetry MCP semantic conventions
(`mcp.method.name`, `gen_ai.tool.name` / `gen_ai.prompt.name` / `mcp.resource.uri`,
`jsonrpc.request.id`, `error.type`, `server.address`, `server.port`, `network.transport`…) and ours
(`mrtr.rounds`, `mrtr.outcome`, `mrtr.link`, `mrtr.waited_ms`…), and an `input_required` event per
round. When the chain's first request carries a W3C `traceparent` in `params._meta`, the span is in
that trace, a child of that span.

Ids are derived from the recording: the chain's own trace id = SHA-256("mrtr-inspect", session,
chain id), used when no traceparent gives one; span ids from that and the span's place, so the same
recording gives the same spans, exported twice or sent live.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from ...core.vocabulary import Outcome

CLIENT, INTERNAL = 3, 1  # Span.SpanKind in OTLP
STATUS_ERROR = 2  # Status.StatusCode in OTLP
TARGET_KEY = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name", "resources/read": "mcp.resource.uri"}
TRANSPORT = {"stdio": "pipe", "http": "tcp"}
TOOL_ERROR = "tool_error"  # error.type of a tools/call result with isError (the MCP conventions' value)
NO_RESPONSE = "no_response"  # error.type of a chain whose exchange ended with no JSON-RPC response
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@dataclass(slots=True)
class Event:
    name: str
    time: float
    attributes: dict[str, Any]


@dataclass(slots=True)
class Span:
    """One span, independent of its encoding: ids in hex, times in seconds (the frames' times)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int
    start: float
    end: float
    attributes: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    status: tuple[int, str] | None = None  # (code, message)
    remote_parent: bool = False  # the parent is the application's span (a traceparent)
    flags: int = 1  # W3C trace flags: the parent's when there is one, else sampled


@dataclass(frozen=True, slots=True)
class Facts:
    """What a chain's span needs of its messages once they are gone: the first request's
    traceparent, the final response's error message and whether a tool result said isError."""

    traceparent: str | None = None
    error_message: str | None = None
    tool_error: bool = False


def facts_of(msg) -> Facts | None:
    """The facts a message gives (None: nothing a span needs). Reads a decoded `Message`."""
    if msg.kind == "request":
        if msg.method not in TARGET_KEY:  # only a chain's first request gives a span its parent
            return None
        p = msg.params
        meta = p.get("_meta") if type(p) is dict else None
        tp = meta.get("traceparent") if type(meta) is dict else None
        return Facts(traceparent=tp) if type(tp) is str else None
    if msg.kind == "error":
        err = msg.error
        m = err.get("message") if type(err) is dict else None
        return Facts(error_message=m) if type(m) is str else None
    if msg.kind == "result":
        r = msg.result
        if type(r) is dict and r.get("isError") is True:
            return Facts(tool_error=True)
    return None


def parse_traceparent(value: str | None) -> tuple[str, str, int] | None:
    """A W3C traceparent (version 00) into (trace id, parent span id, flags); None when it is not
    one, or its ids are all zeros."""
    m = _TRACEPARENT.fullmatch(value.strip()) if type(value) is str else None
    if m is None or m[1] == "0" * 32 or m[2] == "0" * 16:
        return None
    return m[1], m[2], int(m[3], 16)


def plain_id(value: Any) -> str | None:
    """`jsonrpc.request.id`: a string id as it is, a number as JSON writes it; None for null."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def trace_id(session: str, chain: str) -> str:
    return hashlib.sha256(f"mrtr-inspect\0{session}\0{chain}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def span_id(trace: str, place: str) -> str:
    return hashlib.sha256(f"{trace}\0{place}".encode()).hexdigest()[:16]


def server_of(upstream: str | None) -> dict[str, Any]:
    """`server.address` and `server.port` of an upstream URL (the server behind the proxy)."""
    if not upstream:
        return {}
    try:
        u = urlsplit(upstream)
        port = u.port or {"http": 80, "https": 443}.get(u.scheme)
    except ValueError:
        return {}
    return {"server.address": u.hostname, "server.port": port} if u.hostname else {}


def legacy_waits(c: dict) -> list[float]:
    """The user's answering time of each answered legacy round (RULES.md §13): the server's question
    to the client's answer."""
    return [rd["wait_ms"] for rd in c.get("round_details") or ()
            if "server_request" in rd and rd.get("wait_ms") is not None]


def waited_ms(c: dict) -> float:
    """The user's answering time: over the chain's answered rounds, the retry's time minus the
    time of the `input_required` it answers, or for a legacy round the server's question to the
    client's answer."""
    return round(sum(e.get("wait_ms") or 0.0 for e in c.get("timeline") or ()) + sum(legacy_waits(c)), 3)


def server_ms(c: dict) -> float:
    """The server's time: over the chain's requests that got a response, the response's time minus
    the request's; less, for a legacy chain, the time the server waited for the client's answers
    (its request stays open while the user answers)."""
    total = sum((e["response_time"] - e["time"]) * 1000.0 for e in c.get("timeline") or ()
                if e.get("response_time") is not None)
    return round(max(total - sum(legacy_waits(c)), 0.0), 3)


def chain_name(c: dict) -> str:
    method, target = c.get("method"), c.get("target")
    # CONTRACTS.md: `{method} {target}` for every method, resources/read too (the conventions would
    # leave a URI out of the name; a dashboard keyed on the contract's name keeps it)
    return f"{method} {target}" if target is not None else str(method)


def common_attributes(c: dict, session: str, transport: str | None) -> dict[str, Any]:
    method = c.get("method")
    return {"mcp.method.name": method, TARGET_KEY.get(method or "", "mrtr.target"): c.get("target"),
            "gen_ai.operation.name": "execute_tool" if method == "tools/call" else None,
            "network.transport": TRANSPORT.get(transport or ""),
            "mrtr.session": session, "mrtr.chain.id": c["id"]}


def chain_span(c: dict, session: str, transport: str | None, upstream: str | None,
               facts: Callable[[int | None], Facts | None]) -> Span:
    """The chain's span. `facts(message index)` gives what the messages said (`facts_of`)."""
    own = trace_id(session, c["id"])
    timeline = c.get("timeline") or ()
    first = timeline[0] if timeline else {}
    parent = parse_traceparent((facts(first.get("message")) or Facts()).traceparent)
    end = c.get("end") or c.get("start") or 0.0
    final = next((e for e in reversed(timeline) if e.get("response") not in ("input_required", None)), {})
    final_facts = facts(final.get("response_message")) or Facts()
    attrs = {**common_attributes(c, session, transport), "jsonrpc.request.id": plain_id(first.get("id")),
             **server_of(upstream),
             "mrtr.rounds": c.get("rounds"), "mrtr.outcome": c.get("outcome"), "mrtr.link": c.get("link"),
             "mrtr.waited_ms": waited_ms(c), "mrtr.era": c.get("era"),
             "mrtr.requests": [plain_id(i) or "null" for i in c.get("requests") or ()]}
    status = None
    if c.get("outcome") == Outcome.ERROR and c.get("error_code") is not None:
        attrs["error.type"] = attrs["rpc.response.status_code"] = str(c.get("error_code"))
        status = (STATUS_ERROR, final_facts.error_message or f"JSON-RPC error {c.get('error_code')}")
    elif c.get("outcome") == Outcome.ERROR:  # the exchange ended with no JSON-RPC response
        attrs["error.type"] = NO_RESPONSE
        status = (STATUS_ERROR, "no JSON-RPC response")
    elif c.get("outcome") == Outcome.COMPLETE and final_facts.tool_error:
        attrs["error.type"] = TOOL_ERROR
        status = (STATUS_ERROR, "the tool result has isError: true")
    retried = {e["retries_round"]: e for e in timeline if e.get("retries_round")}
    events = []
    for rd in c.get("round_details") or ():
        retry = retried.get(rd["round"])
        asked = [f"{k}: {a.get('method')}" for k, a in (rd.get("asked") or {}).items()]
        if "server_request" in rd:  # a legacy round (RULES.md §13): the server asked, the client answered
            answered, wait = rd.get("response_time") is not None, rd.get("wait_ms", rd.get("unanswered_ms"))
        else:
            answered, wait = retry is not None, retry.get("wait_ms") if retry else rd.get("unanswered_ms")
        events.append(Event("input_required", rd["time"], {
            "mrtr.round": rd["round"], "mrtr.asked": asked, "mrtr.answered": answered, "mrtr.wait_ms": wait}))
    return Span(parent[0] if parent else own, span_id(own, "chain"), parent[1] if parent else None,
                chain_name(c), CLIENT, c.get("start") or end, end, attrs, events, status,
                remote_parent=parent is not None, flags=parent[2] if parent else 1)


def finding_event(f: dict, default_time: float) -> Event:
    return Event(f["rule"], f.get("time") or default_time, {
        "mrtr.severity": f["severity"], "mrtr.message": f["message"], "mrtr.spec": f.get("spec"),
        "mrtr.conformance": f.get("conformance"), "mrtr.messages": list(f.get("messages") or ())})
