"""`export --to otlp`: the chains as OpenTelemetry traces, in the OTLP/JSON encoding
(an `ExportTraceServiceRequest`: resourceSpans → scopeSpans → spans).

Per chain, the span the live export sends (`otlp_spans.chain_span`: CLIENT, the chain from its first
request to its end, the MCP semantic conventions' attributes, an event per round, in the
application's trace when the first request carried a traceparent); under it, a CLIENT span per
request/response exchange (the first request and each retry) and an INTERNAL "waiting for input"
span from each `input_required` to the retry that answers it (to the chain's end when no retry came).
Findings are events on the span of the latest message they name (on the chain's span when they name
none of the chain's). One resource per capture session (`service.name`: the server's name when it
said it).

Ids are derived from the recording (otlp_spans.py), so exporting the same recording twice gives the
same trace, and the chain's span is the one the live export sent. Times are the frames' times as Unix
nanoseconds (decimal strings, as OTLP/JSON writes 64-bit ints). The file is one JSON object on one
line: a JSON document, and a JSON-lines file the collector's otlpjsonfile receiver reads.
"""

from __future__ import annotations

from typing import Any

from ...version import __version__
from ...core.events import Direction
from ...core.messages import SERVER_INFO_KEY
from .capture import Capture
from .otlp_spans import (CLIENT, INTERNAL, STATUS_ERROR, Event, Facts, Span, chain_span, common_attributes, facts_of,
                         finding_event, plain_id, span_id, trace_id)


def nanos(t: float) -> str:
    return str(round(t * 1_000_000) * 1000)


def _value(v: Any) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def attributes(d: dict) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in d.items() if v is not None]


def _event_json(ev: Event) -> dict:
    return {"timeUnixNano": nanos(ev.time), "name": ev.name, "attributes": attributes(ev.attributes)}


def span_json(s: Span) -> dict:
    """A span in OTLP/JSON (hex ids, integer enums, 64-bit integers as strings)."""
    out: dict[str, Any] = {"traceId": s.trace_id, "spanId": s.span_id}
    if s.parent_id is not None:
        out["parentSpanId"] = s.parent_id
    out.update({"name": s.name, "kind": s.kind, "startTimeUnixNano": nanos(s.start), "endTimeUnixNano": nanos(s.end),
                "attributes": attributes(s.attributes)})
    if s.events:
        out["events"] = [_event_json(ev) for ev in s.events]
    if s.status is not None:
        out["status"] = {"code": s.status[0], "message": s.status[1]}
    return out


def _server_names(cap: Capture) -> dict[str, str]:
    """Each session's server name: the first serverInfo its server sent (result._meta, or the
    result of a legacy initialize)."""
    names: dict[str, str] = {}
    for m in cap.messages.values():
        if m.session not in names and m.direction == Direction.S2C and type(m.result) is dict:
            meta = m.result.get("_meta")
            info = meta.get(SERVER_INFO_KEY) if type(meta) is dict else None
            info = info if type(info) is dict else m.result.get("serverInfo")
            if type(info) is dict and isinstance(info.get("name"), str):
                names[m.session] = info["name"]
    return names


def _facts(cap: Capture):
    def facts(index: int | None) -> Facts | None:
        m = cap.messages.get(index) if index is not None else None
        return facts_of(m) if m is not None else None
    return facts


def _chain_spans(cap: Capture, c: dict, session: str, findings: list[dict]) -> list[dict]:
    start = cap.starts.get(session)
    transport = start.transport if start is not None else None
    upstream = start.info.get("upstream") if start is not None else None
    root = chain_span(c, session, transport, upstream if isinstance(upstream, str) else None, _facts(cap))
    own = trace_id(session, c["id"])
    common = common_attributes(c, session, transport)
    del common["gen_ai.operation.name"]
    end = root.end
    spans: list[Span] = []
    where: dict[int, Span] = {}  # message index → the span it belongs to
    retried = {}
    for n, e in enumerate(c.get("timeline") or ()):
        rnd = e.get("retries_round") or 0
        if rnd:
            retried[rnd] = e
        resp = e.get("response") or "pending"
        attrs = {**common, "jsonrpc.request.id": plain_id(e["id"]), "mrtr.round": rnd,
                 "mrtr.response": resp, "mrtr.link": e.get("link"),
                 "mrtr.message.request": e["message"], "mrtr.message.response": e.get("response_message")}
        status = None
        if resp == "error":
            attrs["error.type"] = attrs["rpc.response.status_code"] = str(e.get("error_code"))
            status = (STATUS_ERROR, f"JSON-RPC error {e.get('error_code')}")
        span = Span(root.trace_id, span_id(own, f"exchange {n}"), root.span_id, root.name + (f" (retry {rnd})" if rnd else ""),
                    CLIENT, e["time"], e.get("response_time") or end, attrs, status=status)
        where[e["message"]] = span
        if e.get("response_message") is not None:
            where[e["response_message"]] = span
        spans.append(span)
    for rd in c.get("round_details") or ():
        n = rd["round"]
        retry = retried.get(n)
        asked = [f"{k}: {a.get('method')}" for k, a in (rd.get("asked") or {}).items()]
        legacy = "server_request" in rd  # a legacy round (RULES.md §13): the server's question, the client's answer
        if legacy:
            answered, until = rd.get("response_time") is not None, rd.get("response_time") or end
            wait = rd.get("wait_ms", rd.get("unanswered_ms"))
        else:
            answered, until = retry is not None, retry["time"] if retry else end
            wait = retry.get("wait_ms") if retry else rd.get("unanswered_ms")
        attrs = {**common, "mrtr.round": n, "mrtr.asked": asked, "mrtr.answered": answered, "mrtr.wait_ms": wait}
        if legacy:
            attrs["mrtr.link"] = rd.get("link")
        span = Span(root.trace_id, span_id(own, f"waiting {n}"), root.span_id, f"waiting for input (round {n})",
                    INTERNAL, rd["time"], until, attrs)
        if legacy:
            where[rd["message"]] = span
            if rd.get("response_message") is not None:
                where[rd["response_message"]] = span
        spans.append(span)
    for f in findings:
        mine = [m for m in f.get("messages") or () if m in where]
        (where[max(mine)] if mine else root).events.append(finding_event(f, end))
    return [span_json(s) for s in [root, *spans]]


def to_otlp(cap: Capture) -> dict:
    by_chain: dict[str, list[dict]] = {}
    for f in cap.findings:
        if f.get("chain"):
            by_chain.setdefault(f["chain"], []).append(f)
    per_session: dict[str, list[dict]] = {}
    for c in cap.chains:
        session = cap.session_of_chain(c)
        per_session.setdefault(session, []).extend(_chain_spans(cap, c, session, by_chain.get(c["id"], [])))
    resources = []
    names = _server_names(cap)
    for session, spans in per_session.items():
        start = cap.starts.get(session)
        info = start.info if start is not None else {}
        command = info.get("command")
        resources.append({
            "resource": {"attributes": attributes({
                "service.name": names.get(session, "mcp-server"),
                "mrtr.session": session, "mrtr.transport": start.transport if start else None,
                "mrtr.upstream": info.get("upstream"),
                "mrtr.command": [str(a) for a in command] if isinstance(command, list) else None})},
            "scopeSpans": [{"scope": {"name": "mrtr-inspect", "version": __version__}, "spans": spans}],
        })
    return {"resourceSpans": resources}
