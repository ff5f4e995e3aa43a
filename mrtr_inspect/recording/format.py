"""Recording format v1: one frame per line (see docs/recording-format.md).

    {"mrtr-inspect":"recording","version":1,"session":"a1b2c3d4","transport":"stdio",…}
    {"t":1795997950.62,"s":"a1b2c3d4","k":"line","d":"c2s"}<TAB>{"jsonrpc":"2.0","id":1,…}

A line is a JSON object (the record), then, when the frame has a payload that is UTF-8 without CR
or LF, a TAB and the payload exactly as it crossed the wire. Other payloads go inside the record:
`"text"` (UTF-8 with line breaks, e.g. an SSE event) or `"b64"` (anything else). Record JSON never
holds a raw TAB, so the first TAB of a line always separates the two.

This module converts between frames and lines, nothing else: no files (see writer.py, reader.py).
"""

from __future__ import annotations

import base64
from typing import Any, Iterator

from ..core.events import (
    Frame,
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SessionEnd,
    SessionStart,
    SseEvent,
    StdioClose,
    StdioLine,
)
from ..core.jsontext import ORJSON_FLOATS_AS_REPR, dumps_with
from ..core.rawjson import loads as _loads
from orjson import dumps as _orjson

FORMAT = "mrtr-inspect"
KIND = "recording"
VERSION = 1

_dumps = dumps_with(ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # a C encoder made once


_STAMPS_AS_REPR = ORJSON_FLOATS_AS_REPR  # `stamp` takes orjson's way only with one that writes floats so


def stamp(t: float) -> bytes:
    """A float as the JSON encoder writes a finite one (`float.__repr__`): by orjson from 1e-4 to below
    1e16, where both write the shortest digits that read back as `t`, in the same notation (a time
    is always there; tests/recording/test_format.py holds the two equal), at a seventh of the cost;
    elsewhere, or with an orjson that writes floats otherwise, by `float.__repr__` (orjson writes
    1e-05 as 0.00001)."""
    if 1e-4 <= t < 1e16 and _STAMPS_AS_REPR:
        return _orjson(t)
    return float.__repr__(t).encode("ascii")


def _record(rec: dict) -> bytes:
    """`_dumps(rec).encode("utf-8")` for a record whose first member is its time `t` and whose other
    values are strings, ints, bools and lists or tuples of strings (no float, no dict): by orjson,
    at less cost, when the time is a finite float (written as the JSON encoder writes a float:
    `stamp`). orjson writes every string as the JSON encoder does with `ensure_ascii=False`
    (the escapes JSON requires, the rest as UTF-8: tests/recording/test_format.py holds it to that
    for every code point), ints and bools alike; what it does not write (a lone surrogate, an int
    past 64 bits) goes to `_dumps`, which says what is wrong with it as before."""
    t = rec["t"]
    if type(t) is float and t - t == 0.0:
        del rec["t"]
        try:
            return b'{"t":' + stamp(t) + b"," + _orjson(rec)[1:]
        except TypeError:
            rec = {"t": t, **rec}
    return _dumps(rec).encode("utf-8")


class FormatError(ValueError):
    pass


#: the byte a writer ends the torn last line of a recording with before it appends to it: 0xFF is
#: never UTF-8, so never the end of a record or of a verbatim payload
TORN = b"\xff"


def _payload(rec: dict, data: bytes) -> bytes:
    """Serialise `rec` with `data` as its payload."""
    if data.find(b"\n") < 0 and data.find(b"\r") < 0:  # (find: `in` on bytes costs a caught TypeError)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return _record(rec) + b"\t" + data + b"\n"
    try:
        rec["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        rec["b64"] = base64.b64encode(data).decode("ascii")
    return _record(rec) + b"\n"


def _plain(rec: dict) -> bytes:
    return _record(rec) + b"\n"


def encode(frame: Frame) -> bytes:
    """One frame as one line of the recording (with its trailing LF)."""
    t = type(frame)
    if t is StdioLine:
        if frame.cut:  # the analysis kept none of it: the forwarding side recorded it (`LongLine`)
            raise ValueError(f"a line of {len(frame.data) + frame.cut} bytes past the size limit, not held")
        rec: dict[str, Any] = {"t": frame.time, "s": frame.session, "k": "line", "d": frame.direction}
        if not frame.eol:
            rec["eol"] = False
        return _payload(rec, frame.data)
    if t is SseEvent:
        return _payload({"t": frame.time, "s": frame.session, "k": "sse", "x": frame.exchange}, frame.raw)
    if t is HttpRequest:
        rec = {"t": frame.time, "s": frame.session, "k": "req", "x": frame.exchange, "method": frame.method,
               "path": frame.path, "headers": frame.headers, "client": frame.client}
        if not frame.complete:
            rec["complete"] = False
        if frame.body_note:
            rec["note"] = frame.body_note
        return _payload(rec, frame.body) if frame.body else _plain(rec)
    if t is HttpResponse:
        return _plain({"t": frame.time, "s": frame.session, "k": "resp", "x": frame.exchange, "status": frame.status,
                       "headers": frame.headers})
    if t is HttpBody:
        rec = {"t": frame.time, "s": frame.session, "k": "body", "x": frame.exchange}
        if not frame.complete:
            rec["complete"] = False
        if frame.body_note:
            rec["note"] = frame.body_note
        return _payload(rec, frame.data)
    if t is HttpEnd:
        rec = {"t": frame.time, "s": frame.session, "k": "end", "x": frame.exchange}
        if frame.error:
            rec["error"] = frame.error
        return _plain(rec)
    if t is StdioClose:
        return _plain({"t": frame.time, "s": frame.session, "k": "close", "d": frame.direction})
    if t is SessionStart:
        rec = {FORMAT: KIND, "version": VERSION, "session": frame.session, "transport": frame.transport,
               "t": frame.time}
        rec.update({k: v for k, v in frame.info.items() if k not in rec})
        return _dumps(rec).encode("utf-8") + b"\n"  # (its time is not its first member)
    if t is SessionEnd:  # (its info may hold floats: the JSON encoder)
        return _dumps({"t": frame.time, "s": frame.session, "k": "session-end", "info": frame.info}).encode("utf-8") + b"\n"
    raise TypeError(f"not a frame: {frame!r}")


class LineEncoder:
    """The `line` records of one session and direction, many lines at once: exactly the bytes
    `encode` gives for each `StdioLine`, made with a few bytes operations per chunk however many
    lines it holds (the tee writes its recording with it on its forwarding threads)."""

    __slots__ = ("session", "direction", "_tail")

    def __init__(self, session: str, direction: str) -> None:
        self.session = session
        self.direction = direction
        self._tail = b"," + _dumps({"s": session, "k": "line", "d": direction}).encode("utf-8")[1:] + b"\t"

    def lines(self, t: float, body: bytes) -> bytes:
        """The records of the complete lines `body` holds (joined by LF, without the last LF), all
        at time `t`."""
        return self.records(t, body + b"\n")

    def records(self, t: float, text: bytes) -> bytes:
        """The records of the complete lines `text` holds (each ending in LF), all at time `t`: a
        chunk of one line is its record's end as it is (one concatenation, no copy of the line)."""
        if text.find(b"\r") < 0 and (text.isascii() or _is_utf8(text)):
            # the time as the JSON encoder writes it (`stamp`, inline: a call less a chunk)
            at = (_orjson(t) if 1e-4 <= t < 1e16 and _STAMPS_AS_REPR else stamp(t)) if type(t) is float else \
                _dumps(t).encode("ascii")
            prefix = b'{"t":' + at + self._tail
            if text.find(b"\n") + 1 == len(text):  # one line (memchr: cheaper than counting them)
                return prefix + text
            return prefix + text[:-1].replace(b"\n", b"\n" + prefix) + b"\n"
        s, d = self.session, self.direction
        return b"".join(encode(StdioLine(t, s, d, line)) for line in text[:-1].split(b"\n"))  # type: ignore[arg-type]


class HttpEncoder:
    """The records of one session's HTTP frames made from their parts, the JSON text of their strings
    and headers given: exactly the bytes `encode` gives for the frame (tests/recording/test_format.py),
    with a few bytes operations (the proxy's recorder writes the messages mitmproxy takes whole with
    it: recorder.HttpRecorder). None for a time that is not a finite float or an exchange or status
    that is not an int (`encode` writes those)."""

    __slots__ = ("_s",)

    def __init__(self, session: str) -> None:
        self._s = b',"s":' + _orjson(session) + b',"k":"'  # (TypeError for a session orjson does not write)

    def _open(self, t: float, kind: bytes, x: int) -> bytes | None:
        if type(t) is not float or t - t != 0.0 or type(x) is not int:
            return None
        return b'{"t":' + stamp(t) + self._s + kind + b'","x":' + b"%d" % x

    def request(self, t: float, x: int, method: bytes, path: bytes, headers: bytes, client: bytes, body: bytes,
                complete: bool = True) -> bytes | None:
        """An `HttpRequest` without a body note: `method`, `path`, `headers` and `client` as JSON text."""
        rec = self._open(t, b"req", x)
        if rec is None:
            return None
        rec += b',"method":' + method + b',"path":' + path + b',"headers":' + headers + b',"client":' + client
        if not complete:
            rec += b',"complete":false'
        return _with_payload(rec, body) if body else rec + b"}\n"

    def response(self, t: float, x: int, status: int, headers: bytes) -> bytes | None:
        """An `HttpResponse`, `headers` as JSON text."""
        rec = self._open(t, b"resp", x)
        if rec is None or type(status) is not int:
            return None
        return rec + b',"status":' + b"%d" % status + b',"headers":' + headers + b"}\n"

    def body(self, t: float, x: int, data: bytes, complete: bool = True) -> bytes | None:
        """An `HttpBody` without a body note."""
        rec = self._open(t, b"body", x)
        if rec is None:
            return None
        return _with_payload(rec if complete else rec + b',"complete":false', data)

    def end(self, t: float, x: int, error: bytes | None = None) -> bytes | None:
        """An `HttpEnd`, `error` (when there is one) as JSON text."""
        rec = self._open(t, b"end", x)
        if rec is None:
            return None
        return rec + (b',"error":' + error if error else b"") + b"}\n"


def _with_payload(rec: bytes, data: bytes) -> bytes:
    """The record so far (its members, without the closing brace) with `data` as its payload, as `_payload`."""
    if data.find(b"\n") < 0 and data.find(b"\r") < 0 and (data.isascii() or _is_utf8(data)):
        return rec + b"}\t" + data + b"\n"
    try:
        return rec + b',"text":' + _orjson(data.decode("utf-8")) + b"}\n"
    except UnicodeDecodeError:
        return rec + b',"b64":"' + base64.b64encode(data) + b'"}\n'


def long_line(t: float, session: str, direction: str, eol: bool, plain: bool, read) -> Iterator[bytes]:
    """The record of a stdio line too long to hold, in pieces, its bytes read in pieces (`read(n)`,
    b"" at their end): with `plain` (the line is UTF-8 without CR) exactly what `encode` gives for
    it, the payload after a TAB; else the bytes in base64 inside the record, which `decode` reads
    as it reads `encode`'s."""
    rec: dict[str, Any] = {"t": t, "s": session, "k": "line", "d": direction}
    if not eol:
        rec["eol"] = False
    head = _dumps(rec).encode("utf-8")
    if plain:
        yield head + b"\t"
        while piece := read(1 << 20):
            yield piece
        yield b"\n"
    else:
        yield head[:-1] + b',"b64":"'
        while piece := read(3 << 18):  # whole groups of 3 bytes: the pieces' base64 joins into one
            yield base64.b64encode(piece)
        yield b'"}\n'


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _data(rec: dict, tail: bytes | None) -> bytes:
    if tail is not None:
        return tail
    if "text" in rec:
        return rec["text"].encode("utf-8", "surrogatepass")
    if "b64" in rec:
        return base64.b64decode(rec["b64"], validate=True)
    return b""


def _headers(rec: dict) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in rec.get("headers") or ())


def decode(line: bytes) -> Frame:
    """One line (with or without its LF) back into its frame. Raises FormatError."""
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(TORN):
        raise FormatError("a line cut short (its recorder stopped mid-write)")
    head, sep, tail = line.partition(b"\t")
    try:
        rec = _loads(head)
    except ValueError as e:
        raise FormatError(f"not a record: {e}") from None
    if type(rec) is not dict:
        raise FormatError("not a record")
    payload = tail if sep else None
    try:
        if rec.get(FORMAT) == KIND:  # a header first: its session info may hold any key, even "k"
            v = rec.get("version")
            if v != VERSION:
                raise FormatError(f"recording format version {v!r} is not supported (this mrtr-inspect reads version {VERSION})")
            info = {k: v for k, v in rec.items() if k not in (FORMAT, "version", "session", "transport", "t")}
            return SessionStart(rec.get("t", 0.0), rec["session"], rec["transport"], info)
        k = rec.get("k")
        if k == "line":
            return StdioLine(rec["t"], rec["s"], rec["d"], _data(rec, payload), rec.get("eol", True))
        if k == "sse":
            return SseEvent(rec["t"], rec["s"], rec["x"], _data(rec, payload))
        if k == "req":
            return HttpRequest(rec["t"], rec["s"], rec["x"], rec["method"], rec["path"], _headers(rec),
                               _data(rec, payload), rec.get("client", ""), rec.get("complete", True), rec.get("note"))
        if k == "resp":
            return HttpResponse(rec["t"], rec["s"], rec["x"], int(rec["status"]), _headers(rec))
        if k == "body":
            return HttpBody(rec["t"], rec["s"], rec["x"], _data(rec, payload), rec.get("complete", True), rec.get("note"))
        if k == "end":
            return HttpEnd(rec["t"], rec["s"], rec["x"], rec.get("error"))
        if k == "close":
            return StdioClose(rec["t"], rec["s"], rec["d"])
        if k == "session-end":
            return SessionEnd(rec["t"], rec["s"], rec.get("info") or {})
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"bad {rec.get('k', 'record')!r} record: {type(e).__name__}: {e}") from None
    raise FormatError(f"unknown record kind {rec.get('k')!r}")


_HEADER_START = b'{"' + FORMAT.encode() + b'":"' + KIND.encode() + b'"'


def is_torn_header(line: bytes) -> bool:
    """Whether a line (without its end) is a session header cut short: the first line of a file
    whose writer was stopped while writing it, so a recording with nothing in it yet."""
    return line.startswith(_HEADER_START) or _HEADER_START.startswith(line)


def is_header(line: bytes) -> bool:
    """Whether a line starts a session of this format (any version)."""
    head = line.split(b"\t", 1)[0]
    try:
        rec = _loads(head)
    except ValueError:
        return False
    return type(rec) is dict and rec.get(FORMAT) == KIND
