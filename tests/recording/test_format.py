"""Recording format v1: frames ⇄ lines (docs/recording-format.md)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SessionEnd, SessionStart, SseEvent, StdioLine
from mrtr_inspect.recording import format as fmt
from tests.core.strategies import FUZZ
from tests.recording.strategies import frames


def split(line: bytes) -> tuple[dict, bytes | None]:
    """A line as (record, payload after the first TAB or None)."""
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    head, sep, tail = line[:-1].partition(b"\t")
    return json.loads(head), (tail if sep else None)


@FUZZ
@given(frames)
def test_every_frame_round_trips_through_one_line(frame):
    line = fmt.encode(frame)
    rec, _ = split(line)  # one line, LF-terminated, the record JSON before any TAB
    assert type(rec) is dict
    back = fmt.decode(line)
    assert back == frame and type(back) is type(frame)
    if type(frame) in (SessionStart, SessionEnd):
        assert back.info == frame.info  # not part of equality: compared here
    assert fmt.decode(line[:-1]) == frame  # the LF is optional


@pytest.mark.parametrize("data, where", [
    (b'{"jsonrpc":"2.0","id":1,"method":"x"}', "tail"),
    (b'{"a":"tab\there"}', "tail"),  # a TAB in the payload stays verbatim after the separator
    (b"", "tail"),
    (b'{"a":1}\r', "text"),
    (b"two\nlines", "text"),
    (b'{"a":"\xff"}', "b64"),
])
def test_payload_placement(data, where):
    rec, tail = split(fmt.encode(StdioLine(1.5, "s", "c2s", data)))
    assert {"t": 1.5, "s": "s", "k": "line", "d": "c2s"}.items() <= rec.items()
    if where == "tail":
        assert tail == data and "text" not in rec and "b64" not in rec
    elif where == "text":
        assert tail is None and rec["text"].encode() == data
    else:
        assert tail is None and base64.b64decode(rec["b64"]) == data


def test_lines_look_as_documented():
    assert fmt.encode(StdioLine(1796001866.254, "5e18d04b50bc", "c2s", b'{"jsonrpc":"2.0","id":2}')) == (
        b'{"t":1796001866.254,"s":"5e18d04b50bc","k":"line","d":"c2s"}\t{"jsonrpc":"2.0","id":2}\n')
    assert fmt.encode(StdioLine(1.0, "s", "s2c", b"{", eol=False)) == b'{"t":1.0,"s":"s","k":"line","d":"s2c","eol":false}\t{\n'
    sse = fmt.encode(SseEvent(2.0, "s", 3, b"event: message\r\ndata: {}\r\n\r\n"))
    assert split(sse) == ({"t": 2.0, "s": "s", "k": "sse", "x": 3, "text": "event: message\r\ndata: {}\r\n\r\n"}, None)
    req = fmt.encode(HttpRequest(3.0, "s", 1, "POST", "/mcp", (("Content-Type", "application/json"), ("X-A", "1")),
                                 b"{}", "10.0.0.1", False, "decoded from content-encoding gzip"))
    assert split(req) == ({"t": 3.0, "s": "s", "k": "req", "x": 1, "method": "POST", "path": "/mcp",
                           "headers": [["Content-Type", "application/json"], ["X-A", "1"]], "client": "10.0.0.1",
                           "complete": False, "note": "decoded from content-encoding gzip"}, b"{}")
    assert split(fmt.encode(HttpResponse(4.0, "s", 1, 200, ()))) == (
        {"t": 4.0, "s": "s", "k": "resp", "x": 1, "status": 200, "headers": []}, None)
    assert split(fmt.encode(HttpBody(5.0, "s", 1, b"", True))) == ({"t": 5.0, "s": "s", "k": "body", "x": 1}, b"")
    assert split(fmt.encode(HttpEnd(6.0, "s", 1, "client-disconnected"))) == (
        {"t": 6.0, "s": "s", "k": "end", "x": 1, "error": "client-disconnected"}, None)


def test_the_header_line_carries_format_and_version():
    line = fmt.encode(SessionStart(1.0, "abc", "stdio", {"tool": "mrtr-inspect 0.1.0", "pid": 7, "command": ["python", "s.py"]}))
    rec, tail = split(line)
    assert tail is None
    assert rec == {"mrtr-inspect": "recording", "version": 1, "session": "abc", "transport": "stdio", "t": 1.0,
                   "tool": "mrtr-inspect 0.1.0", "pid": 7, "command": ["python", "s.py"]}
    assert list(rec)[:2] == ["mrtr-inspect", "version"]
    assert fmt.is_header(line)
    assert not fmt.is_header(fmt.encode(SessionEnd(2.0, "abc", {})))
    assert not fmt.is_header(b"not json\n") and not fmt.is_header(b"[1]\n")


def test_session_info_cannot_pose_as_a_frame():
    start = SessionStart(1.0, "abc", "http", {"k": "line", "d": "c2s", "s": "other", "upstream": "http://x"})
    back = fmt.decode(fmt.encode(start))
    assert type(back) is SessionStart and back.session == "abc" and back.info == start.info


def test_an_unknown_version_is_refused():
    line = json.dumps({"mrtr-inspect": "recording", "version": 2, "session": "a", "transport": "stdio", "t": 1}).encode()
    with pytest.raises(fmt.FormatError, match="version 2 is not supported"):
        fmt.decode(line)
    assert fmt.is_header(line)


@pytest.mark.parametrize("line", [
    b"", b"not json", b"[1,2]", b'{"k":"line"}', b'{"t":1,"s":"s","k":"nope"}', b'{"t":1,"s":"s","k":"resp","x":1,"status":"x"}',
    b'{"t":1,"s":"s","k":"line","d":"c2s","b64":"***"}', b"\xff\xfe", b'{"mrtr-inspect":"recording","version":1}',
])
def test_undecodable_lines_raise_format_error(line):
    with pytest.raises(fmt.FormatError):
        fmt.decode(line)


def test_encode_refuses_what_is_not_a_frame():
    with pytest.raises(TypeError):
        fmt.encode("frame")  # type: ignore[arg-type]


def test_a_time_is_stamped_as_the_json_encoder_writes_it():
    """`stamp` (orjson where it writes a float as `float.__repr__` does) gives the encoder's bytes: for
    times of today and of any year, floats drawn from every bit pattern, the ends of orjson's range
    and around them, and what it leaves to `float.__repr__` (below 1e-4, from 1e16, negative, not
    finite); the tee's line records (`LineEncoder`) are `encode`'s with it."""
    import random
    import struct

    r = random.Random(27)
    edges = [1e-4, 1e16, 1e15, 9999999999999998.0, 0.0001000000000000001, 0.0, -0.0, -1.5, 1e-5, 5e-324,
             1.7976931348623157e308, float("inf"), float("-inf"), 1.0, 0.1, 1796000000.0, 1796000000.123456]
    edges += [x for e in (1e-4, 1e16) for x in (e - e * 1e-15, e + e * 1e-15)]
    drawn = [r.uniform(0, 4.1e9) for _ in range(100_000)]
    drawn += [struct.unpack("<d", struct.pack("<Q", r.getrandbits(64)))[0] for _ in range(100_000)]
    for t in edges + drawn + [float("nan")]:
        finite = t - t == 0.0
        assert fmt.stamp(t) == (fmt._dumps(t) if finite else float.__repr__(t)).encode("ascii"), t
    enc = fmt.LineEncoder("s1", "c2s")
    for t in edges[:12] + drawn[:50] + [float("nan")]:
        body = b'{"jsonrpc":"2.0","id":1}\n{"jsonrpc":"2.0","id":2}'
        if t - t == 0.0:
            assert enc.lines(t, body) == b"".join(fmt.encode(StdioLine(t, "s1", "c2s", line)) for line in body.split(b"\n")), t
        else:  # (never a time: written as before, by float.__repr__)
            assert enc.lines(t, body).startswith(b'{"t":' + float.__repr__(t).encode() + b",")


def test_an_orjson_that_writes_floats_otherwise_is_not_used_for_times(monkeypatch):
    """With an orjson whose float writer fails the probe (`_STAMPS_AS_REPR`), times are written by
    `float.__repr__`."""
    assert fmt._STAMPS_AS_REPR  # the orjson the tests run with passes it
    monkeypatch.setattr(fmt, "_orjson", lambda x: b"written by orjson")
    assert fmt.stamp(1796000000.5) == b"written by orjson"
    monkeypatch.setattr(fmt, "_STAMPS_AS_REPR", False)
    assert fmt.stamp(1796000000.5) == b"1796000000.5"


def test_records_written_by_orjson_are_the_bytes_the_json_encoder_writes():
    """`_record` writes a record by orjson: the same bytes as the JSON encoder (`_dumps`), for every
    code point (orjson escapes what JSON requires, as the encoder does with ensure_ascii=False), and
    for records drawn at random from every ASCII character, non-ASCII, a lone surrogate, ints past 64
    bits and times of every magnitude (what orjson cannot write goes to the encoder, whose failures
    stay the same failures)."""
    import random

    from mrtr_inspect.core.events import Direction

    every = "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000)
    assert fmt._record({"t": 1.5, "s": every}) == fmt._dumps({"t": 1.5, "s": every}).encode("utf-8")
    r = random.Random(27)
    alphabet = [chr(i) for i in range(128)] + ["é", "\u2028", "\ud800", "€", "\x7f", "\U0001f600"]

    def text() -> str:
        return "".join(r.choice(alphabet) for _ in range(r.randrange(12)))

    def written(write, rec):
        try:
            return write(dict(rec))
        except (UnicodeEncodeError, ValueError) as e:
            return type(e)

    for _ in range(5000):
        t = r.choice([r.uniform(0, 2e9), 1e16, 1e-5, 123.0, 1796000000.123456, r.uniform(-1e20, 1e20), 7,
                      float("inf"), float("nan")])
        rec = {"t": t, "s": text(), "k": "req", "x": r.choice([r.randrange(1 << 40), 1 << 70]), "method": text(),
               "path": text(), "headers": tuple((text(), text()) for _ in range(r.randrange(4))), "client": text(),
               "d": r.choice(list(Direction))}
        if r.random() < 0.3:
            rec["complete"] = False
        assert written(fmt._record, rec) == written(lambda d: fmt._dumps(d).encode("utf-8"), rec), rec


@FUZZ
@given(frames)
def test_the_http_encoder_writes_from_a_frame_s_parts_what_encode_writes_for_it(frame):
    """`HttpEncoder` (the proxy's messages taken whole) writes each HTTP frame without a body note
    from its parts, the strings and headers given as JSON text (orjson's): exactly `encode`'s bytes,
    payloads of every form (verbatim, in `text`, in base64); a time that is not a float goes to
    `encode` (None)."""
    from orjson import dumps

    t = type(frame)
    if t not in (HttpRequest, HttpResponse, HttpBody, HttpEnd) or getattr(frame, "body_note", None):
        return
    try:
        enc = fmt.HttpEncoder(frame.session)
        if t is HttpRequest:
            got = enc.request(frame.time, frame.exchange, dumps(frame.method), dumps(frame.path), dumps(frame.headers),
                              dumps(frame.client), frame.body, frame.complete)
        elif t is HttpResponse:
            got = enc.response(frame.time, frame.exchange, frame.status, dumps(frame.headers))
        elif t is HttpBody:
            got = enc.body(frame.time, frame.exchange, frame.data, frame.complete)
        else:
            got = enc.end(frame.time, frame.exchange, dumps(frame.error) if frame.error else None)
    except TypeError:  # a lone surrogate orjson does not write: the general way (`encode`) says it
        return
    assert got == (fmt.encode(frame) if type(frame.time) is float else None)
    assert enc.end(1, 1) is None and enc.end(1.0, True) is None and enc.response(1.0, 1, 2.0, b"[]") is None
