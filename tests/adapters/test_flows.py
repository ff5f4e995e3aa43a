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
