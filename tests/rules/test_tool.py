"""Rules of the tool itself (rules/tool.py): `inspector-error`, the pipeline failing on a frame."""

from __future__ import annotations

import gzip

from mrtr_inspect.config import Config
from mrtr_inspect.core import chains
from mrtr_inspect.core.events import HttpBody
from tests.traffic import Traffic


def _call() -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    return t


def test_a_frame_the_pipeline_fails_on_is_an_inspector_error_and_the_analysis_goes_on(monkeypatch):
    def broken(self, msg, peer, covered):
        raise RuntimeError("stitching broke")

    monkeypatch.setattr(chains.Stitcher, "on_request", broken)
    r = _call().run()
    [f] = r.of("inspector-error")
    assert f.severity == "warning" and f.chain is None and f.messages == []
    assert f.message == ("could not analyse a StdioLine frame: RuntimeError: stitching broke; the traffic was not "
                         "affected, analysis goes on")
    assert f.time == r.messages[0].time  # the time of the frame it failed on
    assert [m.label() for m in r.messages] == ["tools/call id=1", "result id=1"]  # the next frame is analysed


def test_a_failure_while_closing_says_so(monkeypatch):
    def broken(self, now, session=None):
        raise RuntimeError("closing broke")

    monkeypatch.setattr(chains.Stitcher, "close_all", broken)
    [f] = _call().run().of("inspector-error")
    assert f.message == "could not close the analysis: RuntimeError: closing broke"


def test_near_miss_the_same_traffic_analysed_whole_is_no_inspector_error():
    r = _call().run()
    assert r.of("inspector-error") == [] and [c["outcome"] for c in r.chains] == ["complete"]


def test_near_miss_a_disabled_inspector_error_reports_nothing(monkeypatch):
    monkeypatch.setattr(chains.Stitcher, "on_request", lambda self, msg, peer, covered: 1 / 0)
    assert _call().run(Config(disabled={"inspector-error"})).of("inspector-error") == []


# -- message-too-large -------------------------------------------------------------------------------------


def _big_result(size: int) -> Traffic:
    t = Traffic()
    a = t.tool("dump")
    t.result(a, {"content": [{"type": "text", "text": "x" * size}]})
    return t


def test_a_stdio_line_past_the_limit_is_message_too_large_and_not_parsed():
    t = _big_result(5000)
    size = len(t.frames[-1].data)  # the result's line
    r = t.run(Config(max_message_bytes=4096))
    [f] = r.of("message-too-large")
    assert f.severity == "warning" and f.messages == [1]
    assert f.message == (f"message #1 from the server (stdout) is {size / 1024:.1f} KiB ({size} bytes), more than 4 KiB: "
                         "forwarded and recorded unchanged, not analysed (max_message_bytes)")
    assert r.messages[1].raw == b"" and r.messages[1].problem_reason == "size"  # nothing of it kept
    assert "stdio-framing" not in r.rules() and "jsonrpc-envelope-invalid" not in r.rules()


def test_a_line_the_framer_cut_is_message_too_large_by_its_whole_size():
    from mrtr_inspect.core.events import StdioLine

    t = Traffic()
    t.frames.append(StdioLine(t.tick(), t.session, "s2c", b"", cut=500 << 20))
    [f] = t.run().of("message-too-large")
    assert "is 500 MiB (524288000 bytes), more than 64 MiB" in f.message


def test_a_body_that_decodes_past_the_limit_is_message_too_large_not_an_invalid_envelope():
    from mrtr_inspect.core.framing import decode_body

    bomb = gzip.compress(b"\0" * (1 << 20))
    body, note = decode_body(bomb, "gzip", limit=4096)
    t = Traffic("http")
    a = t.tool("dump")
    t.respond(t._x, 200, b"", headers=(("content-type", "application/json"), ("content-encoding", "gzip")))
    t.frames.insert(-1, HttpBody(t.tick(), t.session, t._x, body, True, note))
    r = t.run(Config(max_message_bytes=4096))
    [f] = r.of("message-too-large")
    assert f.message == (f"message #1 from the server (HTTP exchange 1) decodes to more than 4 KiB (content-encoding; "
                         f"{len(bomb) / 1024:.1f} KiB on the wire): forwarded and recorded unchanged, not analysed "
                         "(max_message_bytes)")
    assert "jsonrpc-envelope-invalid" not in r.rules() and a is not None


def test_near_miss_a_message_at_the_limit_is_analysed():
    t = _big_result(0)
    r = t.run(Config(max_message_bytes=max(len(f.data) for f in t.frames[1:])))  # the longer line: at the limit
    assert not r.of("message-too-large") and r.messages[1].kind == "result"
