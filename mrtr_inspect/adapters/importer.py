"""`import PATH --output PATH`: a HAR file or a mitmproxy flow file into a recording.

    import_file("session.har", "session.jsonl")     # HAR 1.2 (.har, or zlib-compressed .zhar)
    import_file("flows", "session.jsonl")           # as written by `mitmdump -w flows`

Each HTTP exchange becomes the frames the proxy records for it (`HttpRequest`, `HttpResponse`,
`HttpBody`, or one `SseEvent` per event split by the core's `SseDecoder`, `HttpEnd`), at the times
the file gives: the request when its body was sent, the response head when it came, the events and
the end when the response was over (neither format times each event). Frames are written in time
order, through the recording writer: redacted as a live recording is, appended as a new session.

Bodies: a flow file keeps the wire bytes, decoded here as the proxy decodes them; a HAR holds them
decoded already (HAR 1.2), which the frame's note says. A HAR's pages become sessions (an export of
a recording with several sessions imports as those sessions); a HAR without pages is one session.

A body mitmproxy streamed is not in its flow file unless it ran with `store_streamed_bodies=true`
(the addon streams event streams and large bodies), and never when its stream broke off or was still
coming: such an exchange is left out, with a note, rather than analysed with an empty body
(`unkept`). A flow saved while its response was still coming, with no streamed body missing, ends
as `capture-ended`, as the proxy ends the exchanges open when it stops.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable
from urllib.parse import urlsplit

from ..config import Config
from ..core.events import (CAPTURE_ENDED, CLIENT_DISCONNECTED, UPSTREAM_ERROR, Headers, HttpBody, HttpEnd, HttpRequest,
                           HttpResponse, SseEvent, header)
from ..core.framing import SseDecoder, decode_body, is_event_stream
from ..errors import UserError
from ..recording import format as fmt
from ..recording.writer import RecordingError, RecordingWriter, redactor_for


class ImportFailed(UserError):
    """The file cannot be imported (the one-line reason)."""


@dataclass
class Exchange:
    """One HTTP exchange as a capture file describes it."""

    group: str  # the session it belongs to (a HAR page)
    t_request: float  # the request is sent, body and all
    t_head: float  # the response head arrived
    t_end: float  # the response is over
    method: str
    path: str
    headers: Headers
    body: bytes
    body_note: str | None
    client: str = ""
    status: int | None = None  # None: no response
    response_headers: Headers = ()
    response_body: bytes = b""
    response_note: str | None = None
    error: str | None = None
    url: str = ""
    complete: bool = True  # the request body arrived whole


def frames(session: str, x: int, ex: Exchange) -> list:
    """The frames the proxy records for this exchange."""
    t_head = max(ex.t_head, ex.t_request)  # a clock that went back must not put the response first
    t_end = max(ex.t_end, t_head)
    out: list = [HttpRequest(ex.t_request, session, x, ex.method, ex.path, ex.headers, ex.body, ex.client,
                             ex.complete, ex.body_note)]
    if ex.status is not None:
        out.append(HttpResponse(t_head, session, x, ex.status, ex.response_headers))
        note = ex.response_note
        if is_event_stream(ex.response_headers) and (note is None or note.startswith("decoded from")):
            dec = SseDecoder()
            events = dec.feed(ex.response_body)
            rest = dec.close()
            out += [SseEvent(t_end, session, x, ev) for ev in events + ([rest] if rest else [])]
        elif ex.response_body or note:
            sse = is_event_stream(ex.response_headers)
            out.append(HttpBody(t_end, session, x, ex.response_body, not sse,
                                f"{note}; the event stream as it arrived" if sse else note))
    out.append(HttpEnd(t_end, session, x, ex.error))
    return out


def _error(msg: str | None) -> str | None:
    """A capture tool's error text in the words of `HttpEnd.error`."""
    if not msg:
        return None
    if msg == CLIENT_DISCONNECTED or msg.startswith(UPSTREAM_ERROR) or msg == CAPTURE_ENDED:
        return msg  # written by mrtr-inspect (export --to har)
    return CLIENT_DISCONNECTED if "client disconnected" in msg.lower() else UPSTREAM_ERROR + msg


# -- HAR ------------------------------------------------------------------------------------------


def _har_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _har_body(holder: dict, headers: Headers, key: str = "text") -> tuple[bytes, str | None]:
    text = holder.get(key) or ""
    if holder.get("encoding") == "base64" or holder.get("_encoding") == "base64":
        data = base64.b64decode(text)
    else:
        data = text.encode("utf-8", "surrogatepass")
    enc = (header(headers, "content-encoding") or "identity").strip().lower()
    note = f"decoded from content-encoding {enc} (by the HAR writer)" if data and enc != "identity" else None
    return data, note


def _har_headers(items: Iterable[Any]) -> Headers:
    """Name/value pairs in order; HTTP/2 pseudo-headers (`:authority`…) are not headers on the wire
    the proxy sees, and are left out."""
    out = []
    for h in items or ():
        name, value = (h.get("name"), h.get("value")) if isinstance(h, dict) else (h[0], h[1])
        if not str(name).startswith(":"):
            out.append((str(name), str(value)))
    return tuple(out)


def _ms(timings: dict, key: str) -> float:
    v = timings.get(key)
    return float(v) / 1000.0 if isinstance(v, (int, float)) and v > 0 else 0.0


def har_exchanges(doc: Any) -> list[Exchange]:
    try:
        entries = doc["log"]["entries"]
    except (KeyError, TypeError):
        raise ImportFailed("not a HAR file (no log.entries)") from None
    out = []
    for n, e in enumerate(entries):
        try:
            t0 = _har_time(e["startedDateTime"])
            timings = e.get("timings") or {}
            req, resp = e["request"], e.get("response") or {}
            t_request = t0 + sum(_ms(timings, k) for k in ("blocked", "dns", "connect", "send"))
            t_head = t_request + _ms(timings, "wait")
            t_end = t_head + _ms(timings, "receive")
            if not timings:
                t_head = t_end = t0 + max(float(e.get("time") or 0.0), 0.0) / 1000.0
            url = urlsplit(req["url"])
            headers = _har_headers(req.get("headers"))
            body, note = _har_body(req.get("postData") or {}, headers)
            ex = Exchange(str(e.get("pageref") or ""), t_request, t_head, t_end, req["method"],
                          (url.path or "/") + (f"?{url.query}" if url.query else ""), headers, body, note,
                          url=f"{url.scheme}://{url.netloc}{url.path}")
            status = int(resp.get("status") or 0)
            if status > 0:
                ex.status = status
                ex.response_headers = _har_headers(resp.get("headers"))
                ex.response_body, ex.response_note = _har_body(resp.get("content") or {}, ex.response_headers)
            ex.error = _error(resp.get("_error"))
        except (KeyError, TypeError, ValueError) as err:
            raise ImportFailed(f"HAR entry {n}: {type(err).__name__}: {err}") from None
        out.append(ex)
    return out


# -- mitmproxy flows ------------------------------------------------------------------------------


def unkept(flow) -> bool:
    """Whether the flow lacks a body that went by, whole or in part: mitmproxy leaves `raw_content`
    None for a body it streamed unless `store_streamed_bodies` is on, and even then for a stream that
    broke off (a client that closes an event stream on its last event races the server's end of it;
    the addon puts such a body back, mitmproxy alone does not) or was still coming when the file was
    saved. A body that never ended and was not streamed is
    None too, but nothing of it went by: mitmproxy forwards such a body only whole."""
    from .mitm_addon import _streamed

    def lacks(m) -> bool:
        return m.raw_content is None and (m.timestamp_end is not None or _streamed(m))

    return lacks(flow.request) or (flow.response is not None and lacks(flow.response))


def unkept_note(n: int, done: str = "left out", source: str = "the flow file") -> str:
    return (f"{done} {n} exchange(s) whose body {source} does not hold: mitmproxy keeps no body it streamed "
            "(the mrtr-inspect addon streams event streams and large bodies) unless run with "
            "--set store_streamed_bodies=true, and none of a stream that broke off or was still coming; "
            "analysed, such a body would count as empty")


def flow_exchange(flow) -> Exchange | None:
    """The exchange of one HTTP flow, or None when a body of it was not kept (`unkept`)."""
    from .mitm_addon import _client, _headers

    if unkept(flow):
        return None
    req, resp = flow.request, flow.response
    headers = _headers(req.headers)
    body, note = decode_body(req.raw_content or b"", header(headers, "content-encoding"))
    t_request = req.timestamp_end or req.timestamp_start
    t_end = (resp.timestamp_end or resp.timestamp_start) if resp is not None else None
    if t_end is None:
        t_end = flow.error.timestamp if flow.error is not None else t_request
    ex = Exchange("", t_request, resp.timestamp_start if resp is not None else t_end, t_end, req.method,
                  req.data.path.decode("latin-1"), headers, body, note, _client(flow),
                  url=req.url.split("?")[0], complete=req.raw_content is not None)
    if resp is not None:
        ex.status = resp.status_code
        ex.response_headers = _headers(resp.headers)
        ex.response_body, ex.response_note = decode_body(
            resp.raw_content or b"", header(ex.response_headers, "content-encoding"))
    if flow.error is not None:
        ex.error = _error(flow.error.msg)
    elif resp is None or resp.timestamp_end is None:
        ex.error = CAPTURE_ENDED  # saved while the exchange was under way (mitmdump -w at exit)
    return ex


def flow_exchanges(f) -> tuple[list[Exchange], int, int]:
    """The HTTP flows of a flow file, how many other flows were skipped, and how many HTTP flows
    were left out for a body the file does not hold."""
    from mitmproxy import http
    from mitmproxy.exceptions import FlowReadException
    from mitmproxy.io import FlowReader

    out, skipped, left_out = [], 0, 0
    try:
        for flow in FlowReader(f).stream():
            if not isinstance(flow, http.HTTPFlow) or flow.websocket is not None:
                skipped += 1
                continue
            ex = flow_exchange(flow)
            if ex is None:
                left_out += 1
            else:
                out.append(ex)
    except FlowReadException as e:
        raise ImportFailed(f"not a HAR file nor a mitmproxy flow file: {e}") from None
    return out, skipped, left_out


# -- the command ----------------------------------------------------------------------------------


def read_exchanges(path: str) -> tuple[str, list[Exchange], list[str], int]:
    """(what the file is, its exchanges, notes, how many exchanges were left out). Raises ImportFailed."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
            f.seek(0)
            if fmt.is_header(first):
                raise ImportFailed("this is an mrtr-inspect recording already (check, show and export read it)")
            head = first.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
            if head == b"{":
                return "HAR", har_exchanges(_json(f.read())), [], 0
            if head == b"\x78":  # mitmproxy's .zhar: zlib-compressed HAR
                try:
                    return "HAR", har_exchanges(_json(zlib.decompress(f.read()))), [], 0
                except zlib.error:
                    f.seek(0)
            exchanges, skipped, left_out = flow_exchanges(f)
            notes = [f"skipped {skipped} flow(s) that are not HTTP request/response flows"] if skipped else []
            if left_out:
                notes.append(unkept_note(left_out))
            return "mitmproxy flows", exchanges, notes, left_out
    except OSError as e:
        raise ImportFailed(str(e.strerror or e)) from None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ImportFailed(f"not a HAR file: {e}") from None


def import_file(path: str, output: str, config: Config | None = None) -> list[str]:
    """Write the exchanges of `path` to the recording `output`, redacted as a live recording is
    (`redactor_for(config)`); returns the lines to tell the user."""
    try:
        kind, exchanges, notes, left_out = read_exchanges(path)
    except ImportFailed as e:
        raise ImportFailed(f"{path}: {e}") from None
    if not exchanges:
        raise ImportFailed(f"{path}: no HTTP exchange to import" + "".join(f" ({n})" for n in notes))
    groups: dict[str, list[Exchange]] = {}
    for ex in sorted(exchanges, key=lambda e: e.t_request):
        groups.setdefault(ex.group, []).append(ex)
    sessions = 0
    for group in groups.values():
        info = {"upstream": group[0].url, "imported": {"from": os.path.basename(path), "format": kind}}
        if left_out:  # the capture has holes: the analysis must not take what fell in one for never sent
            info["imported"]["left_out"] = left_out
        try:
            writer = RecordingWriter(output, "http", info, redactor_for(config), start_time=group[0].t_request)
        except RecordingError as e:
            raise ImportFailed(str(e)) from None
        timed = []
        for x, ex in enumerate(group, 1):
            for k, fr in enumerate(frames(writer.session, x, ex)):
                timed.append((fr.time, x, k, fr))
        timed.sort(key=lambda item: item[:3])
        with writer:
            for *_, fr in timed:
                writer.write(fr)
            writer.close(end_time=max(t for t, *_ in timed))
        sessions += 1
    return notes + [f"wrote {output}: {len(exchanges)} exchange{'s' if len(exchanges) != 1 else ''} from the "
                    f"{kind} in {sessions} session{'s' if sessions != 1 else ''}"]
