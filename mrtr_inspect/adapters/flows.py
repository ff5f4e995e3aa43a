"""mitmproxy flows and HAR entries → exchanges → frames: the one translation every adapter uses.

    flow_headers(flow.request.headers), flow_client(flow)   # a live flow's parts, as the addon steps them
    ex = flow_exchange(flow)                                # a whole flow read from a file (None: a body not kept)
    kind, exchanges, notes, left_out = read_exchanges(path) # a HAR (.har, .zhar) or a mitmproxy flow file
    frames(session, x, ex)                                  # the frames the proxy records for one exchange

The addon (mitm_addon.py) hands a live flow to the analysis step by step (`FlowFramer`, the core's
`HttpFramer`, turns the steps into frames); a flow read from a file (`mitmdump -r`, mitmweb's open)
and `import` (importer.py) take each exchange whole, as an `Exchange`, and `frames` gives the frames
the proxy would have recorded for it (`HttpRequest`, `HttpResponse`, `HttpBody`, or one `SseEvent`
per event split by the core's `SseDecoder`, `HttpEnd`), at the times the file gives: the request
when its body was sent, the response head when it came, the events and the end when the response
was over (neither format times each event).

Bodies: a flow keeps the wire bytes, decoded here as the proxy decodes them; a HAR holds them decoded
already (HAR 1.2), which the frame's note says. A HAR entry's page is its `group` (importer.py makes
each a session).

A body mitmproxy streamed is not in its flow unless it ran with `store_streamed_bodies=true` (the
addon streams event streams and large bodies: `is_streamed`), and never when its stream broke off or
was still coming: such an exchange is left out, with a note, rather than analysed with an empty body
(`unkept`). A flow saved while its response was still coming, with no streamed body missing, ends as
`capture-ended`, as the proxy ends the exchanges open when it stops.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import urlsplit

from ..core.events import (CAPTURE_ENDED, CLIENT_DISCONNECTED, UPSTREAM_ERROR, Headers, HttpBody, HttpEnd, HttpRequest,
                           HttpResponse, SseEvent, header)
from ..core.findings import plural
from ..core.framing import HttpFramer, SseDecoder, decode_body, is_event_stream, media_type
from ..errors import UserError
from ..recording import format as fmt

if TYPE_CHECKING:  # mitmproxy takes a quarter of a second to import: only a flow file loads it here
    from mitmproxy import http

STREAM_ABOVE = 64 * 1024  # bytes: a body of known length up to this is taken whole by mitmproxy


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


class FlowFramer(HttpFramer):
    """The core's framer of HTTP steps, and the frames of a whole exchange read from a file."""

    def exchange(self, x: int, ex: Exchange) -> list:
        return frames(self.session, x, ex)


def end_reason(msg: str | None) -> str | None:
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
            ex.error = end_reason(resp.get("_error"))
        except (KeyError, TypeError, ValueError) as err:
            raise ImportFailed(f"HAR entry {n}: {type(err).__name__}: {err}") from None
        out.append(ex)
    return out


# -- mitmproxy flows ------------------------------------------------------------------------------


def flow_headers(h: http.Headers) -> Headers:
    """Headers in wire order, bytes kept one to one (latin-1), as the recording stores them."""
    return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in h.fields)


def flow_client(flow: http.HTTPFlow) -> str:
    """The client's address without its port (RULES.md §10.4); IPv4-mapped IPv6 as plain IPv4."""
    peer = flow.client_conn.peername
    host = str(peer[0]) if peer else ""
    return host[7:] if host.startswith("::ffff:") and "." in host else host


#: the fields `head_values` reads, by their index in what it gives
HOST, ORIGIN, CONTENT_TYPE, CONTENT_LENGTH, CONTENT_ENCODING = range(5)
_READ = {b"host": HOST, b"origin": ORIGIN, b"content-type": CONTENT_TYPE, b"content-length": CONTENT_LENGTH,
         b"content-encoding": CONTENT_ENCODING}
_NAMES: dict[bytes, int] = {}  # a field name as it came (any case) → its index in `_READ`, or -1
_NAMES_HELD = 1024


def head_values(fields: tuple[tuple[bytes, bytes], ...]) -> list:
    """The fields of a head the addon reads (Host, Origin, Content-Type, Content-Length,
    Content-Encoding, by the indexes above), in one pass over mitmproxy's raw fields: each as bytes
    folded as `headers.get` folds it (every field of the name, any case, joined with ", "), or None;
    and, last, where the first Host field is (-1: none; -2: more than one)."""
    out: list = [None, None, None, None, None, -1]
    names = _NAMES
    for i, (k, v) in enumerate(fields):
        j = names.get(k)
        if j is None:
            j = _READ.get(k.lower(), -1)
            if len(k) <= 32:  # (a longer name is none of these, and not remembered)
                if len(names) >= _NAMES_HELD:
                    names.clear()
                names[k] = j
        if j >= 0:
            w = out[j]
            if w is None:
                out[j] = v
                if j == HOST:
                    out[5] = i
            else:
                out[j] = w + b", " + v
                if j == HOST:
                    out[5] = -2
    return out


def as_text(value: bytes | None) -> str | None:
    """A header's value as `headers.get` gives it (UTF-8 with surrogate escapes)."""
    return None if value is None else value.decode("utf-8", "surrogateescape")


def with_host(fields: tuple[tuple[bytes, bytes], ...], at: int, value: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The fields with Host set to `value` as mitmproxy sets it on an HTTP/1 request (`host_header`):
    the first Host field's name keeps its case and takes the value, the others go; none, a Host field
    added last. `at`: where the first one is (`head_values`)."""
    if at >= 0:
        return fields[:at] + ((fields[at][0], value),) + fields[at + 1:]
    out, done = [], False
    for k, v in fields:
        if k.lower() == b"host":
            if not done:
                out.append((k, value))
                done = True
        else:
            out.append((k, v))
    if not done:
        out.append((b"Host", value))
    return tuple(out)


def streamed(content_type: bytes | None, content_length: bytes | None) -> bool:
    """`is_streamed`'s answer from a head's Content-Type and Content-Length (`head_values`)."""
    # (no text/event-stream without these bytes: of the characters outside ASCII only U+0130 and U+212A lower-case
    # to an ASCII letter, i and k, neither of them here)
    if (content_type is not None and content_type.lower().find(b"event-stream") >= 0
            and media_type(content_type.decode("utf-8", "surrogateescape")) == "text/event-stream"):
        return True
    if content_length is not None and content_length.isdigit():  # ASCII digits: the common case, at less cost
        return int(content_length) > STREAM_ABOVE
    text = content_length.decode("utf-8", "surrogateescape") if content_length is not None else ""
    return not (text.isdigit() and int(text) <= STREAM_ABOVE)


def is_streamed(m: http.Message) -> bool:
    """Whether a body goes through a stream callback, chunk by chunk as it comes: always for an event
    stream, a body of unknown length, or one over STREAM_ABOVE bytes. A small body of known length is
    taken whole by mitmproxy (its stream path costs more per request than the bytes take to arrive).
    The headers are read as `m.headers.get` reads them (every field of the name, folded with ", ",
    UTF-8 with surrogate escapes), in one pass over the fields (`head_values`)."""
    values = head_values(m.headers.fields)
    return streamed(values[CONTENT_TYPE], values[CONTENT_LENGTH])


def unkept(flow: http.HTTPFlow) -> bool:
    """Whether the flow lacks a body that went by, whole or in part: mitmproxy leaves `raw_content`
    None for a body it streamed unless `store_streamed_bodies` is on, and even then for a stream that
    broke off (a client that closes an event stream on its last event races the server's end of it;
    the addon puts such a body back, mitmproxy alone does not) or was still coming when the file was
    saved. A body that never ended and was not streamed is
    None too, but nothing of it went by: mitmproxy forwards such a body only whole."""

    def lacks(m) -> bool:
        return m.raw_content is None and (m.timestamp_end is not None or is_streamed(m))

    return lacks(flow.request) or (flow.response is not None and lacks(flow.response))


def unkept_note(n: int, done: str = "left out", source: str = "the flow file") -> str:
    return (f"{done} {plural(n, 'exchange')} whose body {source} does not hold: mitmproxy keeps no body it streamed "
            "(the mrtr-inspect addon streams event streams and large bodies) unless run with "
            "--set store_streamed_bodies=true, and none of a stream that broke off or was still coming; "
            "analysed, such a body would count as empty")


def flow_exchange(flow: http.HTTPFlow) -> Exchange | None:
    """The exchange of one HTTP flow, or None when a body of it was not kept (`unkept`)."""
    if unkept(flow):
        return None
    req, resp = flow.request, flow.response
    headers = flow_headers(req.headers)
    body, note = decode_body(req.raw_content or b"", header(headers, "content-encoding"))
    t_request = req.timestamp_end or req.timestamp_start
    t_end = (resp.timestamp_end or resp.timestamp_start) if resp is not None else None
    if t_end is None:
        t_end = flow.error.timestamp if flow.error is not None else t_request
    ex = Exchange("", t_request, resp.timestamp_start if resp is not None else t_end, t_end, req.method,
                  req.data.path.decode("latin-1"), headers, body, note, flow_client(flow),
                  url=req.url.split("?")[0], complete=req.raw_content is not None)
    if resp is not None:
        ex.status = resp.status_code
        ex.response_headers = flow_headers(resp.headers)
        ex.response_body, ex.response_note = decode_body(
            resp.raw_content or b"", header(ex.response_headers, "content-encoding"))
    if flow.error is not None:
        ex.error = end_reason(flow.error.msg)
    elif resp is None or resp.timestamp_end is None:
        ex.error = CAPTURE_ENDED  # saved while the exchange was under way (mitmdump -w at exit)
    return ex


def flow_exchanges(f) -> tuple[list[Exchange], int, int]:
    """The HTTP flows of a flow file, how many other flows were skipped, and how many HTTP flows
    were left out for a body the file does not hold."""
    from mitmproxy.exceptions import FlowReadException  # a flow file needs mitmproxy; a HAR does not
    from mitmproxy.http import HTTPFlow
    from mitmproxy.io import FlowReader

    out, skipped, left_out = [], 0, 0
    try:
        for flow in FlowReader(f).stream():
            if not isinstance(flow, HTTPFlow) or flow.websocket is not None:
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


# -- capture files --------------------------------------------------------------------------------


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
            notes = [f"skipped {plural(skipped, 'flow')} that are not HTTP request/response flows"] if skipped else []
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
