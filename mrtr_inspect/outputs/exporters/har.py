"""`export --to har`: the HTTP exchanges of a recording as a HAR 1.2 log.

One page per capture session, one entry per exchange (request, response, headers as recorded,
bodies with their content-encoding removed as the recording keeps them, an event stream as its
events one after the other). Timings come from the frames: the recording takes the request when
its body is whole, so `send` is 0, `wait` runs to the response head and `receive` to the end of
the response. `_mrtr` on each entry says what the exchange is to its chain (chain id, round, the
findings that name its messages); `comment` says the same in a line a HAR viewer shows.

HAR describes HTTP; the stdio sessions of a recording have no exchanges and are left out (an
all-stdio recording is refused).
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ...version import __version__
from ...core.events import Headers, HttpBody, HttpEnd, HttpRequest, HttpResponse, SseEvent, header
from ...core.findings import spec_url
from .capture import Capture


class NoHttp(ValueError):
    """The recording has no HTTP session."""


def har_time(t: float) -> str:
    """ISO 8601 in UTC with microseconds, as HAR's startedDateTime takes it."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _headers(h: Headers) -> list[dict]:
    return [{"name": k, "value": v} for k, v in h]


def _content(data: bytes, key: str = "text") -> dict:
    """A body as HAR text: UTF-8 as it is, anything else in base64 (with `encoding`)."""
    try:
        return {key: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {key: base64.b64encode(data).decode("ascii"), "encoding": "base64"}


class _Exchange:
    __slots__ = ("session", "x", "req", "resp", "body", "events", "end", "last")

    def __init__(self, session: str, x: int) -> None:
        self.session, self.x = session, x
        self.req: HttpRequest | None = None
        self.resp: HttpResponse | None = None
        self.body: list[HttpBody] = []
        self.events: list[SseEvent] = []
        self.end: HttpEnd | None = None
        self.last = 0.0


def _exchanges(cap: Capture) -> list[_Exchange]:
    xs: dict[tuple[str, int], _Exchange] = {}
    for _, _, f in cap.frames:
        t = type(f)
        if t not in (HttpRequest, HttpResponse, HttpBody, SseEvent, HttpEnd):
            continue
        ex = xs.get((f.session, f.exchange))
        if ex is None:
            ex = xs[(f.session, f.exchange)] = _Exchange(f.session, f.exchange)
        ex.last = max(ex.last, f.time)
        if t is HttpRequest:
            ex.req = f
        elif t is HttpResponse:
            ex.resp = f
        elif t is HttpBody:
            ex.body.append(f)
        elif t is SseEvent:
            ex.events.append(f)
        else:
            ex.end = f
    return [ex for ex in xs.values() if ex.req is not None]


def _base_url(cap: Capture, ex: _Exchange) -> str:
    up = cap.starts[ex.session].info.get("upstream") if ex.session in cap.starts else None
    if isinstance(up, str) and "://" in up:
        u = urlsplit(up)
        return f"{u.scheme}://{u.netloc}"
    return "http://" + (header(ex.req.headers, "host") or "localhost")


def _request(cap: Capture, ex: _Exchange) -> dict:
    req = ex.req
    assert req is not None
    r: dict[str, Any] = {
        "method": req.method,
        "url": _base_url(cap, ex) + req.path,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": _headers(req.headers),
        "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(req.path).query, keep_blank_values=True)],
        "headersSize": -1,
        "bodySize": len(req.body) if req.body_note is None else -1,
    }
    if req.body or req.method in ("POST", "PUT", "PATCH"):
        post = {"mimeType": header(req.headers, "content-type") or ""}
        content = _content(req.body)
        post["text"] = content["text"]
        if "encoding" in content:
            post["_encoding"] = "base64"
        r["postData"] = post
    return r


def _response(ex: _Exchange) -> dict:
    resp = ex.resp
    if resp is None:
        out = {"status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [],
               "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1, "bodySize": -1}
        if ex.end is not None and ex.end.error:
            out["_error"] = ex.end.error
        return out
    data = b"".join(e.raw for e in ex.events) + b"".join(b.data for b in ex.body)
    mime = header(resp.headers, "content-type") or ""
    try:
        phrase = HTTPStatus(resp.status).phrase
    except ValueError:
        phrase = ""
    out = {
        "status": resp.status,
        "statusText": phrase,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": _headers(resp.headers),
        "content": {"size": len(data), "mimeType": mime, **_content(data)},
        "redirectURL": header(resp.headers, "location") or "",
        "headersSize": -1,
        "bodySize": -1,
    }
    notes = [b.body_note for b in ex.body if b.body_note]
    if notes:
        out["content"]["comment"] = "; ".join(notes)
    if ex.end is not None and ex.end.error:
        out["_error"] = ex.end.error
    return out


def _mrtr(ex: _Exchange, msgs: list, roles: dict, findings_of: dict[int, list[dict]]) -> tuple[dict, str]:
    notes, seen, findings = [], set(), []
    chain = rnd = None
    for m in msgs:
        role = roles.get(m.index)
        note: dict[str, Any] = {"index": m.index, "direction": m.direction, "label": m.label()}
        if role is not None:
            note["chain"], note["step"] = role.chain["id"], role.step
            if chain is None:
                chain, rnd = role, role.round
        notes.append(note)
        for f in findings_of.get(m.index, ()):
            if id(f) not in seen:
                seen.add(id(f))
                findings.append({"rule": f["rule"], "severity": f["severity"], "message": f["message"],
                                 "spec": spec_url(f.get("spec"))})
    out = {"session": ex.session, "exchange": ex.x, "chain": chain.chain["id"] if chain else None,
           "round": rnd, "messages": notes, "findings": findings}
    comment = "; ".join(f"#{n['index']} {n['label']}" + (f" ({n['chain']}: {n['step']})" if "chain" in n else "")
                        for n in notes)
    if findings:
        comment += f"; {len(findings)} finding{'s' if len(findings) != 1 else ''}: " + ", ".join(
            f"{f['severity']} {f['rule']}" for f in findings)
    return out, comment


def to_har(cap: Capture) -> dict:
    http_sessions = [s for s in cap.starts.values() if s.transport == "http"]
    exchanges = _exchanges(cap)
    if not exchanges and not http_sessions:
        raise NoHttp("it holds stdio sessions only, and HAR describes HTTP exchanges "
                     "(export --to html, otlp or mermaid instead)")
    roles = cap.roles()
    by_exchange: dict[tuple[str, int], list] = {}
    for m in sorted(cap.messages.values(), key=lambda m: m.index):
        if m.exchange is not None:
            by_exchange.setdefault((m.session, m.exchange), []).append(m)
    findings_of: dict[int, list[dict]] = {}
    for f in cap.findings:
        for m in f.get("messages") or ():
            findings_of.setdefault(m, []).append(f)
    pages = [{"startedDateTime": har_time(s.time), "id": s.session,
              "title": str(s.info.get("upstream") or s.session), "pageTimings": {}} for s in http_sessions]
    for ex in exchanges:  # a capture that began mid-way has exchanges without a session header
        if ex.session not in cap.starts and all(p["id"] != ex.session for p in pages):
            pages.append({"startedDateTime": har_time(ex.req.time), "id": ex.session, "title": ex.session,
                          "pageTimings": {}})
    entries = []
    for ex in sorted(exchanges, key=lambda e: (e.req.time, e.session, e.x)):
        t0 = ex.req.time
        head = ex.resp.time if ex.resp is not None else (ex.end.time if ex.end else ex.last)
        end = ex.end.time if ex.end is not None else ex.last
        wait = max(head - t0, 0.0) * 1000.0
        receive = max(end - head, 0.0) * 1000.0 if ex.resp is not None else 0.0
        mrtr, comment = _mrtr(ex, by_exchange.get((ex.session, ex.x), []), roles, findings_of)
        entry = {
            "pageref": ex.session,
            "startedDateTime": har_time(t0),
            "time": round(wait + receive, 3),
            "request": _request(cap, ex),
            "response": _response(ex),
            "cache": {},
            "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0,
                        "wait": round(wait, 3), "receive": round(receive, 3)},
            "_mrtr": mrtr,
        }
        if comment:
            entry["comment"] = comment
        entries.append(entry)
    return {"log": {"version": "1.2", "creator": {"name": "mrtr-inspect", "version": __version__},
                    "pages": pages, "entries": entries}}
