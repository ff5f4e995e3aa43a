"""The proxy's command-line values: the upstream URL split into mitmproxy's reverse spec and the path
that passes through, and the listen address."""

from __future__ import annotations

import pytest

from mrtr_inspect.adapters.proxy import parse_listen, split_upstream


@pytest.mark.parametrize("url, origin, path", [
    ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000", "/mcp"),
    ("https://mcp.example.com/api/v2/mcp", "https://mcp.example.com", "/api/v2/mcp"),
    ("http://localhost:3000", "http://localhost:3000", "/"),
    ("http://[::1]:3000/mcp?tenant=a", "http://[::1]:3000", "/mcp?tenant=a"),
])
def test_an_upstream_url_is_an_origin_and_a_path(url, origin, path):
    assert split_upstream(url) == (origin, path)


@pytest.mark.parametrize("url, why", [
    ("ftp://127.0.0.1/mcp", "http:// or https://"),
    ("127.0.0.1:3000/mcp", "http:// or https://"),
    ("http:///mcp", "with a host"),
    ("http://127.0.0.1:70000/mcp", "bad --upstream URL"),
    ("http://me:pw@127.0.0.1:3000/mcp", "credentials"),
])
def test_a_bad_upstream_url_says_why(url, why):
    with pytest.raises(ValueError, match=why):
        split_upstream(url)


@pytest.mark.parametrize("text, addr", [
    ("127.0.0.1:8788", ("127.0.0.1", 8788)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:9000", ("::1", 9000)),
    ("9000", ("127.0.0.1", 9000)), (":9000", ("127.0.0.1", 9000)),
])
def test_a_listen_address(text, addr):
    assert parse_listen(text) == addr


@pytest.mark.parametrize("text", ["127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1"])
def test_a_bad_listen_address(text):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(text)


@pytest.mark.parametrize("whole", [False, True], ids=["stepped", "whole messages"])
def test_a_proxy_analysis_behind_by_the_backlog_gets_no_new_exchange_until_it_is_back_to_half(tmp_path, monkeypatch, whole):
    """max_backlog_bytes at 2 KiB and an analysis that takes nothing: the exchanges that begin once
    more is held are recorded whole and not handed over (an exchange already begun is handed over
    whole), their messages counted (a request body and a response body each), BEHIND said as the
    stretch begins; once the analysis is back to half, new exchanges are handed over again (until it
    is behind again: it takes nothing here). Near
    miss: with the default backlog every exchange is handed over."""
    import asyncio

    from mrtr_inspect.adapters import analysis_process as ap
    from mrtr_inspect.adapters import proxy
    from mrtr_inspect.adapters.recorder import HttpRecorder
    from mrtr_inspect.recording import format as fmt
    from mrtr_inspect.recording.reader import read_frames
    from mrtr_inspect.recording.redaction import Redactor
    from mrtr_inspect.recording.writer import RecordingWriter

    class Spool:
        def __init__(self) -> None:
            self.items: list = []
            self.queued = self.written = 0

        def put(self, kind, t, data=b""):
            self.queued += len(data)
            self.items.append((kind, data))

    def run(backlog: int | None, path):
        spool = Spool()
        monkeypatch.setattr(proxy, "fork_analysis", lambda make: (0, spool))
        w = RecordingWriter(path, "http", {}, Redactor(b"k"), session="h", start_time=0.0)
        a = proxy.AnalysisProcess(None, HttpRecorder("h", w.redactor, w), backlog)

        async def feed() -> None:
            json_ = (("content-type", "application/json"),)
            for x in range(1, 41):
                request, answer = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % x, b'{"jsonrpc":"2.0","id":%d,"result":{}}' % x
                if whole:  # as the addon steps a message mitmproxy takes whole
                    a.put(("request_message", (1.0, x, "POST", "/mcp", json_, "", request, True)))
                    a.put(("response_message", (1.1, x, 200, json_, answer, 1.2, None)))
                else:
                    a.put(("request_head", (1.0, x, "POST", "/mcp", json_, "")))
                    a.put(("request_data", (1.0, x, request)))
                    a.put(("request_end", (1.0, x, True)))
                    a.put(("response_head", (1.1, x, 200, json_)))
                    a.put(("response_data", (1.1, x, answer)))
                    a.put(("response_end", (1.2, x, None)))
                a._flush()
                if x == 30:
                    spool.written = spool.queued  # the analysis caught up
        asyncio.run(feed())
        handed = {fmt.decode(line).exchange for k, data in spool.items if k == ap.C2S
                  for line in data.split(b"\n")[:-1]}
        recorded = {f.exchange for f in read_frames(path) if hasattr(f, "exchange")}
        return a, spool, handed, recorded

    a, spool, handed, recorded = run(2048, tmp_path / "r.jsonl")
    assert recorded == set(range(1, 41))
    skipped = set(range(1, 41)) - handed
    assert {1, 31} <= handed  # the first, and the first once it caught up
    assert skipped & set(range(2, 31)) and skipped & set(range(32, 41))  # two stretches
    assert a.skipped == 2 * len(skipped)
    behind = [ap.SKIPPED.unpack(d)[0] for k, d in spool.items if k == ap.BEHIND]
    assert behind == [0, 2 * len(skipped & set(range(2, 31)))]  # as each stretch began

    a, spool, handed, recorded = run(None, tmp_path / "near.jsonl")
    assert handed == recorded == set(range(1, 41)) and a.skipped == 0
