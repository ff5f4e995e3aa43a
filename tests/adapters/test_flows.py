"""The translation of mitmproxy flows: which bodies the addon streams (the import of flow and HAR
files, through this module too, is tested in test_importer.py)."""

from __future__ import annotations

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
