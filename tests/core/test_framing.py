"""Framing: the same frames however the bytes are split, and no exception on any input."""

from __future__ import annotations

import dataclasses
import gzip
import re
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SseEvent, StdioClose, StdioLine
from mrtr_inspect.core.framing import (
    BodyDecoder,
    HttpFramer,
    LineSplitter,
    SseDecoder,
    StdioFramer,
    decode_body,
    mib,
    over_limit,
    parse_sse_event,
)
from tests.core.strategies import FUZZ, chunked

BOM = b"\xef\xbb\xbf"
EOLS = (b"\n", b"\r", b"\r\n")

# an event stream as servers write it: fields, comments, blank lines, every line ending, maybe a BOM
_field_value = st.sampled_from([b"", b"x", b" spaced", b'{"jsonrpc":"2.0","id":1,"result":{}}', b"a:b", b"\xc3\xa9"])
_sse_line = st.one_of(
    st.builds(lambda v: b"data: " + v, _field_value),
    st.builds(lambda v: b"data:" + v, _field_value),
    st.just(b"data"),
    st.builds(lambda v: b": " + v, _field_value),
    st.builds(lambda v: b"event: " + v, st.sampled_from([b"message", b"ping"])),
    st.builds(lambda v: b"id: " + v, st.sampled_from([b"7", b"a\x00b", b""])),
    st.builds(lambda v: b"retry: " + v, st.sampled_from([b"1000", b"x"])),
    st.just(b""),  # a blank line: the end of an event
)
sse_streams = st.builds(
    lambda bom, lines: (BOM if bom else b"") + b"".join(line + eol for line, eol in lines),
    st.booleans(),
    st.lists(st.tuples(_sse_line, st.sampled_from(EOLS)), max_size=25),
)


def _retimed(frames: list) -> list:
    return [dataclasses.replace(f, time=0.0) for f in frames]


# ---------------------------------------------------------------------------------------------
# LineSplitter


def _split_all(splitter: LineSplitter, chunks: list[bytes]) -> tuple[list[bytes], bytes | None]:
    lines = [line for c in chunks for line in splitter.feed(c)]
    return lines, splitter.close()


@FUZZ
@given(st.data(), st.binary(max_size=300) | st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b"{}"])).map(b"".join))
def test_line_splitter_any_split_gives_the_lines_of_the_whole(data, stream):
    chunks = data.draw(chunked(stream))
    lines, rest = _split_all(LineSplitter(), chunks)
    *expected, tail = stream.split(b"\n")
    assert lines == expected  # split on LF only: a CR stays in its line
    assert rest == (tail or None)


def test_line_splitter_pending_counts_the_unfinished_line():
    s = LineSplitter()
    assert s.feed(b'{"a":') == [] and s.pending == 5
    assert s.feed(b"1}\r\n{") == [b'{"a":1}\r']
    assert s.pending == 1
    assert s.close() == b"{" and s.pending == 0 and s.close() is None


def test_line_splitter_bytes_skipped_count_as_the_cut_lines_bytes():
    """What the tee counts instead of sending (`skip`) makes the length of a line past the limit,
    whether the splitter had cut the line already or (a sender's lower limit) not yet."""
    s = LineSplitter(limit=4)
    assert s.feed(b"abcdef") == [] and s.pending == 6
    s.skip(10)
    assert s.feed(b"\nok\n") == [16, b"ok"]
    assert s.feed(b"abc") == [] and s.pending == 3  # not past the limit: held
    s.skip(2)
    assert s.pending == 5 and s.close() == 5


# ---------------------------------------------------------------------------------------------
# SseDecoder and parse_sse_event

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)")


def reference_events(stream: bytes) -> list[bytes]:
    """Events per the event-stream grammar, written plainly: lines end at CRLF, CR or LF; an event
    ends with a blank line."""
    events, start = [], 0
    for m in _LINE.finditer(stream):
        if m.group().rstrip(b"\r\n") == b"":
            events.append(stream[start:m.end()])
            start = m.end()
    return events


def _decode_all(chunks: list[bytes]) -> tuple[list[bytes], bytes | None]:
    dec = SseDecoder()
    events = [ev for c in chunks for ev in dec.feed(c)]
    return events, dec.close()


@FUZZ
@given(st.data(), sse_streams)
def test_sse_decoder_any_split_gives_the_events_of_the_whole(data, stream):
    chunks = data.draw(chunked(stream))
    events, rest = _decode_all(chunks)
    assert (events, rest) == _decode_all([stream])
    assert b"".join(events) + (rest or b"") == stream  # nothing lost, nothing added
    assert events == reference_events(b"".join(events))
    # what stays undispatched holds no finished event, except a CR that may still become a CRLF
    assert rest is None or not reference_events(rest) or rest.endswith(b"\r")


def test_sse_decoder_cr_at_the_end_of_a_chunk_and_lf_at_the_start_of_the_next_are_one_line_end():
    dec = SseDecoder()
    assert dec.feed(b"data: 1\r") == []
    assert dec.feed(b"\n\r") == []  # the blank line's CR may still be the first half of a CRLF
    assert dec.feed(b"\ndata: 2\n\n") == [b"data: 1\r\n\r\n", b"data: 2\n\n"]
    assert dec.close() is None


@FUZZ
@given(st.data(), st.binary(max_size=200))
def test_sse_decoder_never_raises_and_loses_nothing_on_any_bytes(data, stream):
    chunks = data.draw(chunked(stream))
    events, rest = _decode_all(chunks)
    assert b"".join(events) + (rest or b"") == stream
    for raw in [*events, rest or b""]:
        parse_sse_event(raw)


@pytest.mark.parametrize("eol", EOLS, ids=["lf", "cr", "crlf"])
def test_parse_sse_event_fields(eol):
    raw = eol.join([b": keep-alive", b"event: message", b"id: 42", b"retry: 500", b"data: {\"a\":",
                    b"data:1}", b"unknown: x", b"", b""])
    f = parse_sse_event(raw)
    assert (f.data, f.event, f.id, f.retry, f.comments, f.complete) == (b'{"a":\n1}', "message", "42", "500", 1, True)


@pytest.mark.parametrize("raw, data", [
    (b"data\n\n", b""),  # a field name alone: an empty value
    (b"data:\n\n", b""),
    (b"data:  two spaces\n\n", b" two spaces"),  # only one leading space is removed
    (b"data: a\ndata:\ndata: b\n\n", b"a\n\nb"),
    (b": only a comment\n\n", None),
    (b"\n", None),
    (BOM + b"data: x\n\n", b"x"),  # a BOM at the start of the stream is not part of the first field name
])
def test_parse_sse_event_data(raw, data):
    assert parse_sse_event(raw).data == data


def test_parse_sse_event_id_with_nul_is_ignored_and_unfinished_event_is_incomplete():
    assert parse_sse_event(b"id: a\x00b\ndata: x\n\n").id is None
    f = parse_sse_event(b"data: x\n")
    assert f.data == b"x" and not f.complete
    assert not parse_sse_event(b"data: x").complete


@FUZZ
@given(st.binary(max_size=200))
def test_parse_sse_event_never_raises(raw):
    f = parse_sse_event(raw)
    assert f.data is None or isinstance(f.data, bytes)


# ---------------------------------------------------------------------------------------------
# BodyDecoder


def _compress(data: bytes, wbits: int, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, wbits)
    return c.compress(data) + c.flush()


ENCODINGS = {"gzip": 31, "deflate": 15, "deflate-raw": -15}


@FUZZ
@given(st.data(), st.binary(max_size=2000) | st.text(max_size=500).map(str.encode), st.sampled_from(sorted(ENCODINGS)),
       st.integers(0, 9))
def test_body_decoder_any_split_gives_the_original(data, plain, encoding, level):
    wire = _compress(plain, ENCODINGS[encoding], level)
    chunks = data.draw(chunked(wire, max_chunks=20))
    dec = BodyDecoder(encoding.removesuffix("-raw"))
    out = b"".join(dec.feed(c) for c in chunks) + dec.flush()
    assert dec.error is None
    assert out == plain
    assert decode_body(wire, encoding.removesuffix("-raw")) == (plain, f"decoded from content-encoding {dec.encoding}")


MITMPROXY_CODINGS = ["gzip", "deflate", "deflateraw", "br", "zstd"]


@FUZZ
@given(st.data(), st.binary(max_size=3000) | st.text(max_size=800).map(str.encode), st.sampled_from(MITMPROXY_CODINGS))
def test_every_coding_mitmproxy_knows_is_decoded_as_mitmproxy_decodes_it_cut_anywhere(data, plain, coding):
    """mitmproxy's own encoders and decoders (mitmproxy.net.encoding) are the reference: what its
    `encode` gives, cut anywhere, our incremental decoder gives back as its `decode` does."""
    from mitmproxy.net import encoding

    wire = encoding.encode(plain, coding)
    dec = BodyDecoder(coding)
    out = b"".join(dec.feed(c) for c in data.draw(chunked(wire, max_chunks=20))) + dec.flush()
    assert dec.error is None and not dec.cut_short
    assert out == encoding.decode(wire, coding) == plain


def test_zstd_and_br_need_no_module_beyond_mitmproxys():
    """zstd comes from `compression.zstd` (Python 3.14) or `backports.zstd` (mitmproxy's dependency
    before it), br from `brotli`: both decoded here, not 'not decoded' for want of `zstandard`."""
    import brotli
    from mitmproxy.net import encoding

    for coding in ("zstd", "br"):
        assert decode_body(encoding.encode(b'{"a":1}', coding), coding) == (b'{"a":1}', f"decoded from content-encoding {coding}")
    assert decode_body(brotli.compress(b'{"a":1}')[:-2], "br")[1].endswith("(the compressed body was cut short)")


def test_zstd_frames_one_after_the_other_and_codings_in_a_list():
    from mitmproxy.net import encoding

    two = encoding.encode(b'{"a":', "zstd") + encoding.encode(b"1}", "zstd")
    dec = BodyDecoder("zstd")
    assert b"".join(dec.feed(two[i:i + 3]) for i in range(0, len(two), 3)) == b'{"a":1}' and not dec.cut_short
    stacked = encoding.encode(encoding.encode(b'{"a":1}', "gzip"), "br")  # gzip first, then br
    assert decode_body(stacked, "gzip, br") == (b'{"a":1}', "decoded from content-encoding gzip, br")
    assert decode_body(b"\x00", "gzip, compress") == (b"\x00", "content-encoding 'gzip, compress' not decoded ('compress')")


def test_no_body_is_no_compressed_body():
    assert decode_body(b"", "gzip") == (b"", None)
    assert decode_body(b"", "zstd") == (b"", None)


def test_body_decoder_gzip_module_output_and_identity():
    assert decode_body(gzip.compress(b'{"a":1}'), "GZIP ") == (b'{"a":1}', "decoded from content-encoding gzip")
    assert decode_body(b"plain", None) == (b"plain", None)
    assert decode_body(b"plain", "identity") == (b"plain", None)
    assert decode_body(b"plain", "none") == (b"plain", None)
    assert decode_body(zlib.compress(b'{"a":1}'), "gzip") == (b'{"a":1}', "decoded from content-encoding gzip")  # a zlib header, as mitmproxy takes it


def test_body_decoder_unknown_encoding_keeps_the_wire_bytes_and_says_why():
    body, note = decode_body(b"\x00\x01", "compress")
    assert body == b"\x00\x01" and "compress" in note
    dec = BodyDecoder("compress")
    assert dec.error and dec.feed(b"abc") == b"" and dec.flush() == b""


@FUZZ
@given(st.data(), st.binary(max_size=300), st.sampled_from(["gzip", "deflate", "x-gzip", "br", "zstd", "bogus"]))
def test_body_decoder_never_raises_on_garbage(data, wire, encoding):
    dec = BodyDecoder(encoding)
    for c in data.draw(chunked(wire)):
        assert isinstance(dec.feed(c), bytes)
    assert isinstance(dec.flush(), bytes)
    body, note = decode_body(wire, encoding)
    assert isinstance(body, bytes) and (note is None or isinstance(note, str))


def test_body_decoder_corrupt_gzip_reports_an_error():
    body, note = decode_body(b"\x1f\x8b\x08\x00garbage-garbage", "gzip")
    assert body == b"\x1f\x8b\x08\x00garbage-garbage"
    assert note.startswith("content-encoding 'gzip' could not be decoded")


# ---------------------------------------------------------------------------------------------
# StdioFramer

stdio_streams = st.lists(st.sampled_from([b'{"jsonrpc":"2.0","id":1}', b"\n", b"\r\n", b"\xff", b"x"]),
                         max_size=30).map(b"".join)


@FUZZ
@given(st.data(), stdio_streams, stdio_streams)
def test_stdio_framer_any_split_and_interleaving_gives_the_same_lines(data, c2s, s2c):
    pieces = {"c2s": data.draw(chunked(c2s)), "s2c": data.draw(chunked(s2c))}
    order = data.draw(st.permutations(["c2s"] * len(pieces["c2s"]) + ["s2c"] * len(pieces["s2c"])))
    framer = StdioFramer("s")
    frames, t = [], 0.0
    for d in order:
        t += 1.0
        frames += framer.data(t, d, pieces[d].pop(0))
    for d in ("c2s", "s2c"):
        frames += framer.close(t, d)

    whole = StdioFramer("s")
    expected = whole.data(0.0, "c2s", c2s) + whole.close(0.0, "c2s") + whole.data(0.0, "s2c", s2c) + whole.close(0.0, "s2c")
    for d in ("c2s", "s2c"):
        assert _retimed([f for f in frames if f.direction == d]) == _retimed([f for f in expected if f.direction == d])
    lines = [f for f in expected if type(f) is StdioLine and f.direction == "c2s"]
    assert [f.data for f in lines if f.eol] == c2s.split(b"\n")[:-1]
    tail = c2s.split(b"\n")[-1]
    assert [f.data for f in lines if not f.eol] == ([tail] if tail else [])
    assert type(expected[-1]) is StdioClose


# ---------------------------------------------------------------------------------------------
# HttpFramer

REQUEST_BODY = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy","arguments":{"env":"\xc3\xa9"}}}'
JSON_BODY = b'{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}'


def _encode(plain: bytes, encoding: str | None) -> tuple[bytes, tuple]:
    if encoding is None:
        return plain, ()
    return _compress(plain, ENCODINGS[encoding], 6), (("content-encoding", encoding),)


exchanges = st.tuples(
    st.sampled_from([None, "gzip", "deflate"]),  # request content-encoding
    st.sampled_from(["json", "sse", "empty"]),  # response kind
    st.sampled_from([None, "gzip", "deflate"]),  # response content-encoding
    sse_streams,
    st.sampled_from([None, "client-disconnected"]),
)


def _run_http(data, xs: list, split: bool) -> list:
    """Feed exchanges through one HttpFramer, interleaved in exchange order, each payload in chunks
    when `split` (drawn from `data`)."""
    framer = HttpFramer("h")
    out = []
    t = 0.0
    for n, (req_enc, kind, resp_enc, stream, end_error) in enumerate(xs, 1):
        t += 1
        body, req_h = _encode(REQUEST_BODY, req_enc)
        out += framer.request_head(t, n, "POST", "/mcp", (("content-type", "application/json"), *req_h), "127.0.0.1")
        for c in data.draw(chunked(body)) if split else [body]:
            out += framer.request_data(t, n, c)
        out += framer.request_end(t, n)
        plain = {"json": JSON_BODY, "sse": stream, "empty": b""}[kind]
        wire, resp_h = _encode(plain, resp_enc)
        ctype = "text/event-stream" if kind == "sse" else "application/json"
        out += framer.response_head(t, n, 200, (("content-type", ctype), *resp_h))
        for c in data.draw(chunked(wire)) if split else [wire]:
            t += 1
            out += framer.response_data(t, n, c)
        out += framer.response_end(t, n, end_error)
    assert framer.open_exchanges() == []
    return out


@FUZZ
@given(st.data(), st.lists(exchanges, min_size=1, max_size=4))
def test_http_framer_any_split_gives_the_same_frames(data, xs):
    split = _run_http(data, xs, split=True)
    whole = _run_http(data, xs, split=False)
    assert _retimed(split) == _retimed(whole)
    # and those frames carry the plain bytes, content-encoding removed
    for n, (req_enc, kind, resp_enc, stream, end_error) in enumerate(xs, 1):
        mine = [f for f in whole if f.exchange == n]
        req = mine[0]
        assert type(req) is HttpRequest and req.body == REQUEST_BODY
        assert (req.body_note is None) == (req_enc is None)
        assert type(mine[1]) is HttpResponse
        assert type(mine[-1]) is HttpEnd and mine[-1].error == end_error
        middle = mine[2:-1]
        if kind == "sse":
            assert all(type(f) is SseEvent for f in middle)
            assert b"".join(f.raw for f in middle) == stream
        elif kind == "json":
            assert [type(f) for f in middle] == [HttpBody]
            assert middle[0].data == JSON_BODY and middle[0].complete == (end_error is None)
        else:  # an empty body: a frame only when it travelled compressed (the note says so)
            assert [(type(f), f.data) for f in middle] == [(HttpBody, b"")] * (resp_enc is not None)


def test_http_framer_end_without_head_still_ends_the_exchange():
    framer = HttpFramer("h")
    assert framer.response_end(1.0, 9, "upstream-error: refused") == [HttpEnd(1.0, "h", 9, "upstream-error: refused")]


# ---------------------------------------------------------------------------------------------
# decompression bombs: the decoding stops at the limit


def _bomb(coding: str, size: int = 8 << 20) -> bytes:
    """A few KiB that decode to `size` bytes (every stacked coding applied in turn)."""
    from mitmproxy.net import encoding

    data = b"\0" * size
    for c in [c.strip() for c in coding.split(",")]:
        data = encoding.encode(data, c)
    return data


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "br", "gzip, gzip", "zstd, br"])
def test_a_body_that_decodes_past_the_limit_is_kept_as_its_wire_bytes(coding):
    wire = _bomb(coding)
    assert len(wire) < 64 * 1024
    body, note = decode_body(wire, coding, limit=64 * 1024)
    assert body == wire and over_limit(note)
    assert note == (f"not decoded: content-encoding {coding} decodes to more than 64 KiB (max_message_bytes) "
                    f"from {mib(len(wire))} on the wire; the bytes as they crossed")
    assert decode_body(wire, coding, limit=8 << 20) == (b"\0" * (8 << 20), f"decoded from content-encoding {coding}")


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "br", "gzip, gzip"])
def test_the_decoder_never_gives_more_than_its_limit_whatever_the_pieces(coding):
    wire = _bomb(coding)
    dec = BodyDecoder(coding, limit=4096)
    made = [dec.feed(wire[i:i + 100]) for i in range(0, len(wire), 100)]
    made.append(dec.flush())
    assert dec.over and sum(map(len, made)) <= 4096
    assert dec.feed(b"more") == b"" and dec.flush() == b""


def test_an_event_stream_is_held_to_the_limit_per_chunk_not_in_all():
    events = b"".join(b'data: {"n":%d}\n\n' % i for i in range(2000))
    wire = gzip.compress(events)
    dec = BodyDecoder("gzip", limit=len(events) // 4, per_feed=True)
    out = b"".join(dec.feed(wire[i:i + 64]) for i in range(0, len(wire), 64)) + dec.flush()
    assert out == events and not dec.over
    framer = HttpFramer("h", limit=64 * 1024)
    framer.response_head(1.0, 1, 200, (("Content-Type", "text/event-stream"), ("Content-Encoding", "zstd")))
    bomb = _bomb("zstd")
    assert framer.response_data(1.0, 1, bomb) == []
    *_, body, end = framer.response_end(2.0, 1)
    assert body.data == bomb and over_limit(body.body_note) and body.body_note.endswith("the rest of the event stream as it arrived")
