"""`export --to otlp`: the chains as OpenTelemetry traces, in the OTLP/JSON encoding
(an `ExportTraceServiceRequest`: resourceSpans → scopeSpans → spans).

One trace per chain. Its root span covers the chain from the first request to the final response;
under it, a CLIENT span per request/response exchange (the first request and each retry) and an
INTERNAL "waiting for input" span from each `input_required` to the retry that answers it (to the
chain's end when no retry came). Findings are events on the span of the latest message they name
(on the root span when they name none of the chain's). Attributes follow the OpenTelemetry MCP
conventions (`mcp.method.name`, `gen_ai.tool.name`, `jsonrpc.request.id`, …) plus `mrtr.*` for the
chain itself. One resource per capture session (`service.name`: the server's name when it said it).

Ids are derived from the recording: trace id = SHA-256("mrtr-inspect", session, chain id), span ids
from the trace id and the span's place, so exporting the same recording twice gives the same trace.
Times are the frames' times as Unix nanoseconds (decimal strings, as OTLP/JSON writes 64-bit ints).
The file is one JSON object on one line: a JSON document, and a JSON-lines file the collector's
otlpjsonfile receiver reads.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...version import __version__
from ...core.messages import SERVER_INFO_KEY, format_id
from .capture import Capture

CLIENT, INTERNAL = 3, 1  # Span.SpanKind
STATUS_ERROR = 2  # Status.StatusCode
TARGET_KEY = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name", "resources/read": "mcp.resource.uri"}


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


def trace_id(session: str, chain: str) -> str:
    return hashlib.sha256(f"mrtr-inspect\0{session}\0{chain}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def span_id(trace: str, place: str) -> str:
    return hashlib.sha256(f"{trace}\0{place}".encode()).hexdigest()[:16]


def _server_names(cap: Capture) -> dict[str, str]:
    """Each session's server name: the first serverInfo its server sent (result._meta, or the
    result of a legacy initialize)."""
    names: dict[str, str] = {}
    for m in cap.messages.values():
        if m.session not in names and m.direction == "s2c" and type(m.result) is dict:
            meta = m.result.get("_meta")
            info = meta.get(SERVER_INFO_KEY) if type(meta) is dict else None
            info = info if type(info) is dict else m.result.get("serverInfo")
            if type(info) is dict and isinstance(info.get("name"), str):
                names[m.session] = info["name"]
    return names


def _chain_spans(cap: Capture, c: dict, session: str, findings: list[dict]) -> list[dict]:
    tid = trace_id(session, c["id"])
    root = span_id(tid, "chain")
    method, target = c.get("method"), c.get("target")
    name = f"{method} {target}" if target is not None else str(method)
    transport = cap.starts[session].transport if session in cap.starts else None
    common = {"mcp.method.name": method, TARGET_KEY.get(method or "", "mrtr.target"): target,
              "network.transport": {"stdio": "pipe", "http": "tcp"}.get(transport or ""),
              "mrtr.session": session, "mrtr.chain.id": c["id"]}
    end = c.get("end") or c.get("start") or 0.0
    spans = []
    where: dict[int, str] = {}  # message index → the span it belongs to
    rounds = {r["round"]: r for r in c.get("round_details") or ()}
    retried = {}
    for n, e in enumerate(c.get("timeline") or ()):
        sid = span_id(tid, f"exchange {n}")
        where[e["message"]] = sid
        if e.get("response_message") is not None:
            where[e["response_message"]] = sid
        rnd = e.get("retries_round") or 0
        if rnd:
            retried[rnd] = e
        resp = e.get("response") or "pending"
        attrs = {**common, "jsonrpc.request.id": format_id(e["id"]), "mrtr.round": rnd,
                 "mrtr.response": resp, "mrtr.link": e.get("link"),
                 "mrtr.message.request": e["message"], "mrtr.message.response": e.get("response_message")}
        span = {"traceId": tid, "spanId": sid, "parentSpanId": root,
                "name": name + (f" (retry {rnd})" if rnd else ""), "kind": CLIENT,
                "startTimeUnixNano": nanos(e["time"]), "endTimeUnixNano": nanos(e.get("response_time") or end),
                "attributes": None}
        if resp == "error":
            attrs["error.type"] = attrs["rpc.response.status_code"] = str(e.get("error_code"))
            span["status"] = {"code": STATUS_ERROR, "message": f"JSON-RPC error {e.get('error_code')}"}
        span["attributes"] = attributes(attrs)
        spans.append(span)
    for n, rd in rounds.items():
        retry = retried.get(n)
        asked = [f"{k}: {a.get('method')}" for k, a in (rd.get("asked") or {}).items()]
        if "server_request" in rd:  # a legacy round (RULES.md §13): the server's question, the client's answer
            answered, until = rd.get("response_time") is not None, rd.get("response_time") or end
            wait = rd.get("wait_ms", rd.get("unanswered_ms"))
            sid = span_id(tid, f"waiting {n}")
            where[rd["message"]] = sid
            if rd.get("response_message") is not None:
                where[rd["response_message"]] = sid
        else:
            answered, until = retry is not None, retry["time"] if retry else end
            wait = retry.get("wait_ms") if retry else rd.get("unanswered_ms")
        attrs = {**common, "mrtr.round": n, "mrtr.asked": asked, "mrtr.answered": answered, "mrtr.wait_ms": wait}
        if "server_request" in rd:
            attrs["mrtr.link"] = rd.get("link")
        spans.append({"traceId": tid, "spanId": span_id(tid, f"waiting {n}"), "parentSpanId": root,
                      "name": f"waiting for input (round {n})", "kind": INTERNAL,
                      "startTimeUnixNano": nanos(rd["time"]), "endTimeUnixNano": nanos(until),
                      "attributes": attributes(attrs)})
    root_span = {"traceId": tid, "spanId": root, "name": name, "kind": INTERNAL,
                 "startTimeUnixNano": nanos(c.get("start") or end), "endTimeUnixNano": nanos(end),
                 "attributes": attributes({**common, "mrtr.rounds": c.get("rounds"), "mrtr.outcome": c.get("outcome"),
                                           "mrtr.link": c.get("link"), "mrtr.era": c.get("era"),
                                           "mrtr.requests": [format_id(i) for i in c.get("requests") or ()]})}
    if c.get("outcome") == "error":
        root_span["status"] = {"code": STATUS_ERROR, "message": f"the chain ended in JSON-RPC error {c.get('error_code')}"}
    spans.insert(0, root_span)
    by_id = {s["spanId"]: s for s in spans}
    for f in findings:
        mine = [m for m in f.get("messages") or () if m in where]
        span = by_id[where[max(mine)]] if mine else root_span
        span.setdefault("events", []).append({
            "timeUnixNano": nanos(f.get("time") or end), "name": f["rule"],
            "attributes": attributes({"mrtr.severity": f["severity"], "mrtr.message": f["message"],
                                      "mrtr.spec": f.get("spec"), "mrtr.conformance": f.get("conformance"),
                                      "mrtr.messages": list(f.get("messages") or ())})})
    return spans


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
