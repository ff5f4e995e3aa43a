"""The translation of mitmproxy flows: which bodies the addon streams (the import of flow and HAR
files, through this module too, is tested in test_importer.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http

from mrtr_inspect.adapters.flows import STREAM_ABOVE, is_streamed


def test_small_bodies_of_known_length_are_taken_whole_and_the_rest_streamed():
    def msg(*headers) -> http.Response:
        r = http.Response.make(200)
        r.headers = http.Headers([(k.encode(), v.encode()) for k, v in headers])
        return r

    assert not is_streamed(msg(("content-type", "application/json"), ("content-length", "900")))
    assert is_streamed(msg(("content-type", "application/json"), ("content-length", str(STREAM_ABOVE + 1))))
    assert is_streamed(msg(("content-type", "application/json"), ("transfer-encoding", "chunked")))
    assert is_streamed(msg(("content-type", "text/event-stream; charset=utf-8"), ("content-length", "10")))


def test_the_headers_are_read_as_mitmproxy_reads_them():
    """is_streamed reads the fields itself (one pass, no header lookups): the same answer as through
    `headers.get`, for folded duplicates, any case, and bytes that are not UTF-8."""
    from mrtr_inspect.core.framing import media_type

    def through_get(m) -> bool:
        if media_type(m.headers.get("content-type")) == "text/event-stream":
            return True
        n = m.headers.get("content-length", "")
        return not (n.isdigit() and int(n) <= STREAM_ABOVE)

    cases = [
        [], [(b"Content-Length", b"10")], [(b"CONTENT-LENGTH", b"10"), (b"content-length", b"10")],
        [(b"content-length", b"\xb2")], [(b"content-length", b" 10")], [(b"Content-Type", b"Text/Event-Stream")],
        [(b"content-type", b"text/event-stream"), (b"content-type", b"application/json"), (b"content-length", b"5")],
        [(b"content-type", b"application/json"), (b"content-type", b"text/event-stream"), (b"content-length", b"5")],
        [(b"content-typ", b"text/event-stream"), (b"content-lengthx", b"5")], [(b"content-length", b"65536")],
        [(b"content-length", b"65537")], [(b"content-type", b"\xfftext/event-stream"), (b"content-length", b"1")],
    ]
    for fields in cases:
        r = http.Response.make(200)
        r.headers = http.Headers(fields)
        assert is_streamed(r) == through_get(r), fields
    assert not is_streamed(_with([(b"content-length", b"10")]))  # a near miss of the folded duplicate
    assert is_streamed(_with([(b"content-length", b"10"), (b"Content-Length", b"10")]))


def _with(fields) -> http.Response:
    r = http.Response.make(200)
    r.headers = http.Headers(fields)
    return r


_NAMES = [b"Host", b"host", b"HOST", b"Origin", b"origin", b"Content-Type", b"content-length", b"Content-Encoding",
          b"hostx", b"x-host", b"accept"]
_VALUES = [b"127.0.0.1:8788", b"localhost", b"", b"http://localhost:8788", b"caf\xc3\xa9", b"\xff", b"10", b"gzip"]


@settings(max_examples=300, deadline=None)
@given(fields=st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=6).map(tuple),
       value=st.sampled_from(["127.0.0.1:3000", "h\udcff"]))
def test_a_head_is_read_and_its_host_set_as_mitmproxy_does_it(fields, value):
    """`head_values` gives what `headers.get` gives for each name it reads (folded, any case, UTF-8
    with surrogate escapes), and `with_host` leaves the fields as setting an HTTP/1 request's
    `host_header` does (the first Host field's name kept, the others gone, one added when none)."""
    from mitmproxy.test import tutils

    from mrtr_inspect.adapters.flows import (CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, as_text,
                                             head_values, with_host)

    req = tutils.treq()
    req.headers = http.Headers(fields)
    values = head_values(fields)
    for name, i in (("host", HOST), ("origin", ORIGIN), ("content-type", CONTENT_TYPE),
                    ("content-length", CONTENT_LENGTH), ("content-encoding", CONTENT_ENCODING)):
        assert as_text(values[i]) == req.headers.get(name), name
    assert req.host_header == as_text(values[HOST])
    req.host_header = value
    assert with_host(fields, values[-1], value.encode("utf-8", "surrogateescape")) == req.headers.fields
