"""Frames of every kind, with awkward payloads (not UTF-8, CR, LF, TAB), for the recording tests."""

from __future__ import annotations

from hypothesis import strategies as st

from mrtr_inspect.core.events import (
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

payloads = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=40).map(lambda s: s.encode("utf-8")),
    st.lists(st.sampled_from([b'{"jsonrpc":"2.0","id":1}', b"\t", b"\r", b"\n", b"\r\n", b"\xff", b"\xc3\xa9", b" ", b'"']),
             max_size=10).map(b"".join),
)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False, allow_infinity=False)
sessions = st.sampled_from(["5e18d04b50bc", "s", "é\t"])
exchanges = st.integers(0, 10**6)
texts = st.text(max_size=12)
headers = st.lists(st.tuples(st.sampled_from(["content-type", "x-trace", "mcp-method"]), texts), max_size=4).map(tuple)
notes = st.none() | st.sampled_from(["decoded from content-encoding gzip", "content-encoding 'br' not decoded"])
infos = st.dictionaries(st.sampled_from(["command", "upstream", "pid", "tool", "exit", "k", "s", "d", "x"]),
                        st.one_of(st.integers(), texts, st.lists(texts, max_size=3)), max_size=4)

frames = st.one_of(
    st.builds(StdioLine, times, sessions, st.sampled_from(["c2s", "s2c"]), payloads, st.booleans()),
    st.builds(StdioClose, times, sessions, st.sampled_from(["c2s", "s2c"])),
    st.builds(HttpRequest, times, sessions, exchanges, st.sampled_from(["POST", "GET", "DELETE"]), texts, headers,
              payloads, texts, st.booleans(), notes),
    st.builds(HttpResponse, times, sessions, exchanges, st.integers(100, 599), headers),
    st.builds(HttpBody, times, sessions, exchanges, payloads, st.booleans(), notes),
    st.builds(SseEvent, times, sessions, exchanges, payloads),
    st.builds(HttpEnd, times, sessions, exchanges, st.none() | st.sampled_from(["client-disconnected", "upstream-error: x"])),
    st.builds(SessionStart, times, sessions, st.sampled_from(["stdio", "http"]), infos),
    st.builds(SessionEnd, times, sessions, infos),
)
