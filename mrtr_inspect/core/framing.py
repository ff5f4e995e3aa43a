"""Framing: from bytes as they arrive to frames (one protocol unit each).

Sans-IO and incremental. Every decoder here gives the same frames however its input is split, and
never raises on any input: what it cannot frame it passes on as a frame anyway, for the decoder to
judge.

* `LineSplitter`: stdio lines, split on LF only (a CR stays part of the line; RULES.md §4.7).
* `SseDecoder`: server-sent events, lines ended by LF, CR or CRLF (a CR at the end of one chunk and
  an LF at the start of the next are one line end); an event ends at a blank line. Each event is
  kept as its raw bytes; `parse_sse_event` derives its fields.
* `BodyDecoder`: content-encoding (gzip, deflate, br, zstd: mitmproxy's codings, over the libraries
  it brings), incremental, on a copy: the bytes forwarded are never touched.
* `StdioFramer` and `HttpFramer` turn an adapter's chunks into the frames of `events.py`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from .events import (
    Direction,
    Headers,
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SseEvent,
    StdioClose,
    StdioLine,
    header,
)

# ---------------------------------------------------------------------------------------------
# stdio lines


class LineSplitter:
    """Split a byte stream on LF. Keeps the pieces of an unfinished line, never rescans them.

    A line longer than `limit` is not kept: in place of its bytes `feed` (or `close`) gives its
    length, an int, and no more than `limit` bytes of it are ever held."""

    __slots__ = ("_pending", "_pending_len", "limit", "_cut")

    def __init__(self, limit: int | None = None) -> None:
        self._pending: list[bytes] = []
        self._pending_len = 0
        self.limit = limit
        self._cut = 0  # bytes of the unfinished line, past the limit (none of them kept)

    def feed(self, data: bytes) -> list:
        if not data:
            return []
        cut = self._cut
        if cut:
            i = data.find(b"\n")
            if i < 0:
                self._cut = cut + len(data)
                return []
            self._cut = 0
            return [cut + i, *self.feed(data[i + 1:])]
        parts = data.split(b"\n")
        tail = parts.pop()
        if parts and self._pending:
            self._pending.append(parts[0])
            parts[0] = b"".join(self._pending)
            self._pending = []
            self._pending_len = 0
        limit = self.limit
        if limit is not None and parts and (len(data) > limit or len(parts[0]) > limit):
            parts = [p if len(p) <= limit else len(p) for p in parts]
        if tail:
            self._pending.append(tail)
            self._pending_len += len(tail)
            if limit is not None and self._pending_len > limit:
                self._cut = self._pending_len
                self._pending = []
                self._pending_len = 0
        return parts

    def skip(self, n: int) -> None:
        """`n` more bytes of the unfinished line, not handed over: its sender counted them, the line
        being past the limit already (the tee: stdio_tee.Tap). They count as a cut line's bytes."""
        if not self._cut:  # the sender's limit was lower: what is held goes too
            self._cut = self._pending_len
            self._pending = []
            self._pending_len = 0
        self._cut += n

    @property
    def pending(self) -> int:
        """How many bytes wait for their LF."""
        return self._pending_len + self._cut

    def close(self) -> bytes | int | None:
        """The bytes after the last LF, if any (the stream ended without a newline); their length
        when they were past the limit."""
        if self._cut:
            cut, self._cut = self._cut, 0
            return cut
        if not self._pending:
            return None
        rest = b"".join(self._pending)
        self._pending = []
        self._pending_len = 0
        return rest


# ---------------------------------------------------------------------------------------------
# server-sent events


class SseDecoder:
    """Incremental splitter of an event stream into raw events.

    An event is everything up to and including the blank line that ends it. Blank-line-only and
    comment-only blocks are events too (keep-alives): they cross the wire, so they are kept.
    """

    __slots__ = ("_buf", "_line", "_scan")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._line = 0  # start of the current line in _buf
        self._scan = 0  # where to resume looking for a line end

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        out: list[bytes] = []
        n = len(buf)
        scan = self._scan
        line = self._line
        event_start = 0
        while scan < n:
            i_lf = buf.find(b"\n", scan)
            i_cr = buf.find(b"\r", scan, i_lf if i_lf >= 0 else n)
            if i_cr >= 0:
                if i_cr + 1 == n:  # a CR that may be the first half of a CRLF: wait
                    break
                end = i_cr + 2 if buf[i_cr + 1] == 0x0A else i_cr + 1
                eol_at = i_cr
            elif i_lf >= 0:
                end = i_lf + 1
                eol_at = i_lf
            else:
                scan = n
                break
            blank = eol_at == line
            scan = line = end
            if blank:
                out.append(bytes(buf[event_start:end]))
                event_start = end
        if event_start:
            del buf[:event_start]
            scan -= event_start
            line -= event_start
        self._scan = scan
        self._line = line
        return out

    def close(self) -> bytes | None:
        """Bytes of an event the stream ended in the middle of (not dispatched, per the SSE rules)."""
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = self._line = 0
        return rest or None


@dataclass(frozen=True, slots=True)
class SseFields:
    data: bytes | None  # None: the event had no data field
    event: str | None
    id: str | None
    retry: str | None
    comments: int
    complete: bool  # ended by a blank line


def _split_sse_lines(raw: bytes) -> tuple[list[bytes], bool]:
    """The lines of an event, and whether the last one was ended by a line break."""
    lines: list[bytes] = []
    i = 0
    n = len(raw)
    while i < n:
        j_lf = raw.find(b"\n", i)
        j_cr = raw.find(b"\r", i, j_lf if j_lf >= 0 else n)
        if j_cr >= 0:
            lines.append(raw[i:j_cr])
            i = j_cr + 2 if j_cr + 1 < n and raw[j_cr + 1] == 0x0A else j_cr + 1
        elif j_lf >= 0:
            lines.append(raw[i:j_lf])
            i = j_lf + 1
        else:
            lines.append(raw[i:])
            return lines, False
    return lines, True


def parse_sse_event(raw: bytes) -> SseFields:
    """Interpret one raw event per the HTML event-stream rules (fields, comments, data joining)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    lines, terminated = _split_sse_lines(raw)
    complete = terminated and bool(lines) and lines[-1] == b""
    data: list[bytes] | None = None
    event = ident = retry = None
    comments = 0
    for line in lines:
        if not line:
            continue
        if line[:1] == b":":
            comments += 1
            continue
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            if data is None:
                data = []
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                ident = value.decode("utf-8", "replace")
        elif name == b"retry":
            retry = value.decode("utf-8", "replace")
    return SseFields(
        data=b"\n".join(data) if data is not None else None,
        event=event,
        id=ident,
        retry=retry,
        comments=comments,
        complete=complete,
    )


# ---------------------------------------------------------------------------------------------
# content-encoding
#
# mitmproxy decodes whole bodies (mitmproxy.net.encoding); an event stream is decoded here as it
# arrives, event by event, so the decoders are incremental, over the libraries mitmproxy itself
# brings (zlib; `brotli`; zstd from `compression.zstd`, Python 3.14, else `backports.zstd`), imported
# the first time a body needs one. The codings are mitmproxy's (`gzip` also taking a zlib header,
# `deflate` zlib-wrapped or raw, `deflateraw`, `br`, `zstd`, `identity`, `none`) and `x-gzip`; a
# list (`gzip, br`) is undone in reverse order. The tests check the output against mitmproxy's
# `decode` on every coding, cut anywhere.


def _optional_module(*names: str):
    for name in names:
        try:
            return __import__(name, fromlist=["_"])
        except Exception:  # pragma: no cover - depends on the environment
            continue
    return None


_IDENTITY = ("identity", "none", "")

#: bytes of one message past which it is forwarded and recorded but not analysed; a body's decoding
#: stops there too (`Config.max_message_bytes`, docs/configuration.md)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: how a body note begins when the body was kept as it crossed the wire because its decoding went
#: past the limit (`over_limit`)
OVER_LIMIT = "not decoded: "

STEP = 1 << 20  # bytes a decoder gives per call


def mib(n: int) -> str:
    """A byte count for a person: `64 MiB`, `1.5 GiB`, `700 bytes`."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


def over_limit(note: str | None) -> bool:
    """Whether a body note says the body is its wire bytes because it decodes past the limit."""
    return note is not None and note.startswith(OVER_LIMIT)


class BodyDecoder:
    """Removes a content-encoding incrementally. Never raises: a failure is kept in `error`.

    `limit`: the most bytes the decoding may give (every coding of a stack, counted apart): past
    it `over` is set and nothing more is decoded, however the input was compressed (a gzip or zstd
    body of a few KiB may decode to GiBs). With `per_feed` the limit holds for each `feed` (an
    event stream decoded as it comes), else for the whole body."""

    __slots__ = ("encoding", "_chain", "error", "limit", "over", "per_feed", "_made", "count_only")

    def __init__(self, encoding: str | None, limit: int | None = None, per_feed: bool = False) -> None:
        enc = (encoding or "identity").strip().lower()
        self.encoding = enc
        self.error: str | None = None
        self.limit = limit
        self.over = False
        self.per_feed = per_feed
        self.count_only = False  # the decoded bytes are counted, not kept (`decode_body`'s first pass)
        self._chain: list = []  # the decoders, the last coding applied first
        codings = [c.strip() for c in enc.split(",")]
        try:
            for c in reversed(codings):
                if c in _IDENTITY:
                    continue
                dec = _decoder(c)
                if dec is None:
                    self.error = f"content-encoding {enc!r} not decoded" + ("" if c == enc else f" ({c!r})")
                    self._chain = []
                    return
                self._chain.append(dec)
        except Exception as e:  # pragma: no cover
            self.error = f"content-encoding {enc!r}: {e}"
            self._chain = []
        self._made = [0] * len(self._chain)  # bytes each decoder gave so far

    @property
    def identity(self) -> bool:
        return not self._chain and self.error is None

    def _pass(self, data: bytes, final: bool) -> bytes:
        """`data` through every decoder, each giving at most what is left of the limit, a step at
        a time (one large output buffer costs several times more than steps of it)."""
        limit = self.limit
        made = self._made
        last = len(self._chain) - 1 if self.count_only else -1
        for i, dec in enumerate(self._chain):
            if limit is None:
                data = dec.decompress(data, -1) if data else b""
            else:
                budget = limit + 1 - made[i]
                step = min(STEP, budget)
                piece = dec.decompress(data, step) if data or final else b""
                pieces, n = [piece], len(piece)
                while n < budget and dec.more():  # output waits in the decoder
                    step = min(STEP, budget - n)
                    piece = dec.decompress(b"", step)
                    if i == last:
                        pieces[0] = piece  # counted, not kept: no memory to map for a bomb's output
                    else:
                        pieces.append(piece)
                    n += len(piece)
                data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                if i == last:
                    made[i] += n - len(data)
            if final:
                data += dec.flush()
            made[i] += len(data)
            if limit is not None and made[i] > limit:
                self.over = True
                return b""
        if self.per_feed:
            self._made = [0] * len(made)
        return data

    def feed(self, data: bytes) -> bytes:
        if not self._chain or self.error is not None or self.over:
            return data if self.error is None and not self.over else b""
        try:
            return self._pass(data, False)
        except Exception as e:
            self.error = f"content-encoding {self.encoding!r} could not be decoded: {e}"
            return b""

    def flush(self) -> bytes:
        if not self._chain or self.error is not None or self.over:
            return b""
        try:
            return self._pass(b"", True)
        except Exception as e:
            self.error = f"content-encoding {self.encoding!r} could not be decoded: {e}"
            return b""

    @property
    def cut_short(self) -> bool:
        """After flush: the compressed stream ended before its end marker."""
        return bool(self._chain) and self.error is None and not self.over and not all(d.eof for d in self._chain)

    def over_note(self, wire: int) -> str:
        """The note of a body kept as its wire bytes, its decoding past the limit (`over_limit`)."""
        return (f"{OVER_LIMIT}content-encoding {self.encoding} decodes to more than {mib(self.limit or 0)} "
                f"(max_message_bytes) from {mib(wire)} on the wire; the bytes as they crossed")


def _decoder(coding: str):
    """A fresh incremental decoder of one content coding, or None when it is not known (or its
    library is missing). Each one's `decompress(data, max_length)` gives at most `max_length`
    bytes (-1: no bound) and keeps what is left of its input for the next call, so a few bytes
    that decode to GiBs make no more than `max_length` of them."""
    if coding in ("gzip", "x-gzip"):
        return _Zlib(zlib.decompressobj(32 + zlib.MAX_WBITS))  # gzip, or a zlib header (as mitmproxy)
    if coding in ("deflate", "deflateraw"):
        return _Deflate()
    if coding == "br":
        brotli = _optional_module("brotli")
        return _Brotli(brotli.Decompressor()) if brotli is not None else None
    if coding == "zstd":
        zstd = _optional_module("compression.zstd", "backports.zstd")
        return _Zstd(zstd) if zstd is not None else None
    return None


class _Zlib:
    __slots__ = ("_obj", "_full")

    def __init__(self, obj) -> None:
        self._obj = obj
        self._full = False  # the last call gave all it was allowed to: more may wait

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        obj = self._obj
        if obj.unconsumed_tail:  # input a bounded call left
            data = obj.unconsumed_tail + data
        out = obj.decompress(data, max(max_length, 0))  # zlib: 0 means no bound
        self._full = 0 < max_length <= len(out)
        return out

    def more(self) -> bool:
        return self._full

    def flush(self) -> bytes:
        return b"" if self._obj.unconsumed_tail else self._obj.flush()

    @property
    def eof(self) -> bool:
        return self._obj.eof


class _Deflate(_Zlib):
    """`deflate` is zlib-wrapped by the RFC, raw deflate in practice: accept both."""

    __slots__ = ("_first",)

    def __init__(self) -> None:
        super().__init__(None)
        self._first = b""

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._obj is None:
            if not data:
                return b""
            self._first += data
            if len(self._first) < 2:
                return b""
            data, self._first = self._first, b""
            zlib_header = (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0
            self._obj = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return super().decompress(data, max_length)

    def flush(self) -> bytes:
        return super().flush() if self._obj is not None else b""

    @property
    def eof(self) -> bool:
        return self._obj.eof if self._obj is not None else False


class _Brotli:
    __slots__ = ("_obj",)

    def __init__(self, obj) -> None:
        self._obj = obj

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        f = getattr(self._obj, "process", None)  # google's brotli; brotlicffi names it decompress
        more = getattr(self._obj, "can_accept_more_data", None)
        if not data and (more is None or more()):
            return b""
        if f is None:
            return self._obj.decompress(data)
        if max_length < 0:
            return f(data)
        try:  # brotli >= 1.2: the output stops growing at the limit, the rest comes with b""
            return f(data, output_buffer_limit=max(max_length, 1))
        except TypeError:  # an older brotli: small pieces of input, the output counted after each
            out, n = [], 0
            for i in range(0, len(data), 256):
                out.append(f(data[i:i + 256]))
                n += len(out[-1])
                if n >= max_length:
                    break
            return b"".join(out)

    def flush(self) -> bytes:
        return b""

    def more(self) -> bool:
        more = getattr(self._obj, "can_accept_more_data", None)
        return more is not None and not more()

    @property
    def eof(self) -> bool:
        done = getattr(self._obj, "is_finished", None)
        return bool(done()) if done is not None else True


class _Zstd:
    """zstd frames one after the other (as `zstd.decompress` reads them): a decoder per frame."""

    __slots__ = ("_module", "_obj", "eof", "_rest")

    def __init__(self, module) -> None:
        self._module = module
        self._obj = None
        self.eof = False  # at the end of a frame, with nothing of the next one yet
        self._rest = b""  # input of the next frame, not read yet (a call ended at its max_length)

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        out = []
        left = max_length
        if self._rest:
            data, self._rest = self._rest + data, b""
        while True:
            obj = self._obj
            if obj is None:
                if not data:
                    break
                obj = self._obj = self._module.ZstdDecompressor()
                self.eof = False
            elif not data and obj.needs_input:
                break
            piece = obj.decompress(data, left)
            data = b""
            out.append(piece)
            if obj.eof:
                data, self._obj, self.eof = obj.unused_data, None, True
            if left >= 0:
                left -= len(piece)
                if left <= 0:  # at the limit: the rest waits for the next call
                    self._rest = data
                    break
            if self._obj is not None and self._obj.needs_input:
                break
        return b"".join(out)

    def flush(self) -> bytes:
        return b""

    def more(self) -> bool:
        return bool(self._rest) or (self._obj is not None and not self._obj.needs_input)


def media_type(content_type: str | None) -> str:
    """`application/json; charset=utf-8` → `application/json` (lower-case, no parameters)."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for part in content_type.split(";")[1:]:
        k, _, v = part.partition("=")
        if k.strip().lower() == "charset":
            return v.strip().strip('"').lower()
    return None


def is_event_stream(headers: Headers) -> bool:
    return media_type(header(headers, "content-type")) == "text/event-stream"


def decode_body(data: bytes, encoding: str | None, limit: int | None = MAX_MESSAGE_BYTES) -> tuple[bytes, str | None]:
    """Decode a whole body, to at most `limit` bytes. Returns (bytes, note); on failure, or past the
    limit, the wire bytes and why."""
    if encoding is None:  # no content-encoding: the bytes as they are (BodyDecoder's identity), at no cost
        return data, None
    dec = BodyDecoder(encoding, limit)
    if dec.identity or (not data and dec.error is None):  # no body is no compressed body (as mitmproxy)
        return data, None
    if limit is not None and dec.error is None:  # first counted, nothing kept: a bomb costs no memory
        size = BodyDecoder(encoding, limit)
        size.count_only = True
        size.feed(data)
        size.flush()
        if size.over:
            return data, size.over_note(len(data))
    out = dec.feed(data)
    out += dec.flush()
    if dec.over:
        return data, dec.over_note(len(data))
    if dec.error is not None:
        return data, dec.error
    note = f"decoded from content-encoding {dec.encoding}"
    if dec.cut_short:
        note += " (the compressed body was cut short)"
    return out, note


# ---------------------------------------------------------------------------------------------
# framers: chunks in, frames out


class StdioFramer:
    """Frames both directions of one stdio session. A line past `limit` bytes comes as a
    `StdioLine` without its bytes (`cut`: its length), none of them held."""

    __slots__ = ("session", "_split")

    def __init__(self, session: str, limit: int | None = MAX_MESSAGE_BYTES) -> None:
        self.session = session
        self._split = {"c2s": LineSplitter(limit), "s2c": LineSplitter(limit)}

    def data(self, time: float, direction: Direction, chunk: bytes) -> list[StdioLine]:
        s = self.session
        return [StdioLine(time, s, direction, line) if type(line) is bytes else StdioLine(time, s, direction, b"", cut=line)
                for line in self._split[direction].feed(chunk)]

    def skip(self, direction: Direction, n: int) -> None:
        """`n` bytes of a line past the limit that the adapter counted instead of passing them."""
        self._split[direction].skip(n)

    def close(self, time: float, direction: Direction) -> list[StdioLine | StdioClose]:
        out: list[StdioLine | StdioClose] = []
        rest = self._split[direction].close()
        if type(rest) is int:
            out.append(StdioLine(time, self.session, direction, b"", eol=False, cut=rest))
        elif rest is not None:
            out.append(StdioLine(time, self.session, direction, rest, eol=False))
        out.append(StdioClose(time, self.session, direction))
        return out


class _Exchange:
    __slots__ = (
        "method", "path", "headers", "client", "req_chunks",
        "resp_sse", "resp_decoder", "resp_chunks", "resp_head_seen", "req_time",
    )

    def __init__(self) -> None:
        self.method = ""
        self.path = ""
        self.headers: Headers = ()
        self.client = ""
        self.req_chunks: list[bytes] = []
        self.resp_sse: SseDecoder | None = None
        self.resp_decoder: BodyDecoder | None = None
        self.resp_chunks: list[bytes] = []
        self.resp_head_seen = False
        self.req_time = 0.0


class HttpFramer:
    """Frames the exchanges of one HTTP capture session.

    Request bodies are collected until they end (a request carries one message); event-stream
    responses are split into events as bytes arrive; other bodies are collected whole.
    """

    def __init__(self, session: str, limit: int | None = MAX_MESSAGE_BYTES) -> None:
        self.session = session
        self.limit = limit  # the most bytes a body decodes to (an event stream: each chunk of it)
        self._x: dict[int, _Exchange | None] = {}  # the exchanges open (None: open, nothing held yet)

    def _get(self, exchange: int) -> _Exchange:
        x = self._x.get(exchange)
        if x is None:
            x = self._x[exchange] = _Exchange()
        return x

    def request_head(self, time: float, exchange: int, method: str, path: str, headers: Headers, client: str = "") -> list:
        x = self._get(exchange)
        x.method, x.path, x.headers, x.client, x.req_time = method, path, headers, client, time
        return []

    def request_data(self, time: float, exchange: int, data: bytes) -> list:
        if data:
            self._get(exchange).req_chunks.append(data)
        return []

    def request_end(self, time: float, exchange: int, complete: bool = True) -> list[HttpRequest]:
        x = self._get(exchange)
        wire = b"".join(x.req_chunks)
        x.req_chunks = []
        body, note = decode_body(wire, header(x.headers, "content-encoding"), self.limit)
        return [HttpRequest(time, self.session, exchange, x.method, x.path, x.headers, body, x.client, complete, note)]

    def response_head(self, time: float, exchange: int, status: int, headers: Headers) -> list[HttpResponse]:
        x = self._get(exchange)
        x.resp_head_seen = True
        sse = is_event_stream(headers)
        x.resp_decoder = BodyDecoder(header(headers, "content-encoding"), self.limit, per_feed=sse)
        if sse:
            x.resp_sse = SseDecoder()
        return [HttpResponse(time, self.session, exchange, status, headers)]

    def response_data(self, time: float, exchange: int, data: bytes) -> list[SseEvent]:
        x = self._get(exchange)
        if not data:
            return []
        if x.resp_sse is None:
            x.resp_chunks.append(data)
            return []
        dec = x.resp_decoder
        if dec is None or dec.identity:
            return [SseEvent(time, self.session, exchange, ev) for ev in x.resp_sse.feed(data)]
        if dec.error is None and not dec.over:
            plain = dec.feed(data)
            if dec.error is None and not dec.over:
                return [SseEvent(time, self.session, exchange, ev) for ev in x.resp_sse.feed(plain)]
        # the stream cannot be decoded (or a chunk of it decodes past the limit): keep its wire
        # bytes, they end up in one body frame
        x.resp_chunks.append(data)
        return []

    def response_end(self, time: float, exchange: int, error: str | None = None) -> list:
        x = self._x.pop(exchange, None)
        out: list = []
        if x is None:
            return [HttpEnd(time, self.session, exchange, error)]
        if x.resp_sse is not None:
            dec = x.resp_decoder
            if dec is not None and not dec.identity and dec.error is None and not dec.over:
                tail = dec.flush()
                if tail:
                    out.extend(SseEvent(time, self.session, exchange, ev) for ev in x.resp_sse.feed(tail))
            rest = x.resp_sse.close()
            if rest is not None:
                out.append(SseEvent(time, self.session, exchange, rest))
            if x.resp_chunks and dec is not None:
                wire = b"".join(x.resp_chunks)
                why = dec.over_note(len(wire)) if dec.over else dec.error
                out.append(HttpBody(time, self.session, exchange, wire, False,
                                    f"{why}; the rest of the event stream as it arrived"))
        elif x.resp_head_seen:
            wire = b"".join(x.resp_chunks)
            enc = x.resp_decoder.encoding if x.resp_decoder is not None else None
            body, note = decode_body(wire, enc, self.limit)
            if body or note:
                out.append(HttpBody(time, self.session, exchange, body, error is None, note))
        out.append(HttpEnd(time, self.session, exchange, error))
        return out

    def request_message(self, time: float, exchange: int, method: str, path: str, headers: Headers, client: str,
                        body: bytes, complete: bool = True) -> list[HttpRequest]:
        """A request whose body came whole, in one step: `request_head`, `request_data` and
        `request_end` at `time` (the frames they give)."""
        self.request_head(time, exchange, method, path, headers, client)
        self.request_data(time, exchange, body)
        return self.request_end(time, exchange, complete)

    def response_message(self, time: float, exchange: int, status: int, headers: Headers, body: bytes,
                         end_time: float, error: str | None = None) -> list:
        """A response whose body came whole, in one step: `response_head` at `time`, then
        `response_data` and `response_end` at `end_time` (the frames they give)."""
        out: list = self.response_head(time, exchange, status, headers)
        out += self.response_data(end_time, exchange, body)
        out += self.response_end(end_time, exchange, error)
        return out

    def open_exchanges(self) -> list[int]:
        return list(self._x)

    def opened(self, exchange: int) -> None:
        """An exchange whose request was framed whole elsewhere (what `request_message` leaves): open
        until its response ends (nothing held for it until a step of it needs something: `_get`)."""
        self._x.setdefault(exchange, None)

    def closed(self, exchange: int) -> None:
        """An exchange whose response was framed whole elsewhere (what `response_message` leaves)."""
        self._x.pop(exchange, None)

    def step_decodes_past(self, name: str, args: tuple, quick: int) -> bool:
        """`decodes_past` for a step (`name`, its arguments), the whole-message steps included."""
        if name == "request_message":
            return _decodes_past(header(args[4], "content-encoding"), (args[6],), quick)
        if name == "response_message":
            enc = header(args[3], "content-encoding")
            if enc is not None and is_event_stream(args[3]) and not BodyDecoder(enc, quick).identity:
                return True  # a compressed event stream is decoded as it comes (as `response_data`)
            return _decodes_past(enc, (args[4],), quick)
        if name in ("request_end", "response_end", "response_data"):
            return self.decodes_past(name, args[1], quick)
        return False

    def decodes_past(self, name: str, exchange: int, quick: int) -> bool:
        """Whether framing step `name` of `exchange` would decode more than `quick` bytes: the end of
        a body that decodes further, or any chunk of a compressed event stream (decoded as it
        comes). Costs at most `quick` bytes of decoding, none of them kept."""
        x = self._x.get(exchange)
        if x is None:
            return False
        if name == "response_data":
            return x.resp_sse is not None and x.resp_decoder is not None and not x.resp_decoder.identity
        if name == "request_end":
            enc, chunks = header(x.headers, "content-encoding"), x.req_chunks
        elif name == "response_end" and x.resp_sse is None and x.resp_decoder is not None:
            if x.resp_decoder.identity:
                return False
            enc, chunks = x.resp_decoder.encoding, x.resp_chunks
        else:
            return False
        return _decodes_past(enc, chunks, quick)


def _decodes_past(enc: str | None, chunks: list[bytes] | tuple[bytes, ...], quick: int) -> bool:
    """Whether `chunks` with content-encoding `enc` decode to more than `quick` bytes (counted, not kept)."""
    if enc is None or not any(chunks):  # no content-encoding: nothing decodes (the common case, at no cost)
        return False
    probe = BodyDecoder(enc, quick)
    if probe.identity or probe.error is not None:
        return False
    probe.count_only = True
    for chunk in chunks:
        probe.feed(chunk)
    probe.flush()
    return probe.over
