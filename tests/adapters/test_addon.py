"""The mitmproxy addon in-process: mitmproxy's hooks and stream callbacks → frames → recording and
report; the reasons an exchange breaks off; the flow notes and the "MCP JSON-RPC" contentview."""

from __future__ import annotations

import asyncio
import json

from mitmproxy import http
from mitmproxy.connection import ConnectionState
from mitmproxy.contentviews import Metadata
from mitmproxy.flow import Error
from mitmproxy.test import taddons, tflow

from mrtr_inspect.adapters.contentview import McpJsonRpc, body_messages
from mrtr_inspect.adapters.mitm_addon import NOTES_KEY, MrtrInspect, _Forward
from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SseEvent
from mrtr_inspect.recording.reader import read_frames
from tests.traffic import ELICIT, dumps, meta

CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "deploy", "arguments": {"env": "prod"}, "_meta": meta()}}
IRR = {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required", "inputRequests": {"confirm": ELICIT},
                                             "requestState": "sealed-secret-state"}}
HEADERS = [(b"Content-Type", b"application/json"), (b"Accept", b"application/json, text/event-stream"),
           (b"MCP-Protocol-Version", b"2026-07-28"), (b"Mcp-Method", b"tools/call"), (b"Mcp-Name", b"deploy"),
           (b"X-Note", b"caf\xe9")]


def test_a_stream_callback_returns_each_chunk_unchanged_even_when_queueing_fails():
    seen = []
    ok = _Forward(lambda item: seen.append(item), "step", 3)
    chunk = b"data: {}\n\n"
    assert ok(chunk) is chunk
    assert ok(b"") == b""  # the end marker is not queued
    assert [(step, x, data) for step, (t, x, data) in seen] == [("step", 3, chunk)]

    def broken(item):
        raise MemoryError

    assert _Forward(broken, "step", 3)(chunk) is chunk


def _flow() -> http.HTTPFlow:
    f = tflow.tflow()
    f.response = None
    f.request.method = "POST"
    f.request.path = "/mcp"
    f.request.headers = http.Headers(HEADERS)
    f.client_conn.peername = ("::ffff:10.1.2.3", 53122)
    f.metadata.clear()
    f.request.data.content = b""
    return f


def _request(addon: MrtrInspect, f: http.HTTPFlow, chunks: list[bytes]) -> None:
    addon.requestheaders(f)
    for c in chunks:
        assert f.request.stream(c) is c
    assert f.request.stream(b"") == b""
    addon.request(f)


def _respond(addon: MrtrInspect, f: http.HTTPFlow, chunks: list[bytes], content_type: bytes) -> None:
    """As mitmproxy does: the body through the stream callback if the addon set one, else whole."""
    body = b"".join(chunks)
    f.response = http.Response.make(200)
    f.response.headers = http.Headers([(b"content-type", content_type), (b"content-length", str(len(body)).encode())])
    addon.responseheaders(f)
    if callable(f.response.stream):
        for c in chunks:
            assert f.response.stream(c) is c
    else:
        f.response.raw_content = body
    addon.response(f)


def _stock_addon(tctx, tmp_path, **opts) -> MrtrInspect:
    addon = MrtrInspect()
    tctx.master.addons.add(addon)
    tctx.configure(addon, mrtr_record=str(tmp_path / "s.jsonl"), mrtr_report=str(tmp_path / "r.json"), **opts)
    addon.running()
    return addon


def test_hooks_and_stream_callbacks_become_recorded_frames_and_a_report(tmp_path):
    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            body = dumps(CALL)
            f = _flow()
            _request(addon, f, [body[:10], body[10:]])
            answer = dumps(IRR)
            events = [b"event: message\r\ndata: " + answer[:30], answer[30:] + b"\r\n\r\n"]
            _respond(addon, f, events, b"text/event-stream")
            addon.done()

    asyncio.run(main())
    fs = [f for f in read_frames(tmp_path / "s.jsonl") if type(f) in (HttpRequest, HttpResponse, SseEvent, HttpEnd)]
    req, resp, ev, end = fs
    assert (req.method, req.path, req.body, req.client, req.complete) == ("POST", "/mcp", dumps(CALL), "10.1.2.3", True)
    assert req.headers[-1] == ("X-Note", "café")  # bytes kept one to one (latin-1)
    assert [k for k, _ in req.headers] == [k.decode() for k, _ in HEADERS]
    assert resp.status == 200
    assert ev.raw == b"event: message\r\ndata: " + dumps(IRR) + b"\r\n\r\n"
    assert end.error is None
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["messages"] == 2
    assert [(c["target"], c["outcome"]) for c in report["chains"]] == [("deploy", "abandoned")]


def _broken(tmp_path, why) -> list:
    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            f = _flow()
            addon.requestheaders(f)
            f.request.stream(dumps(CALL)[:20])
            why(addon, f)
            f.error = Error("peer closed connection")
            addon.error(f)
            addon.done()

    asyncio.run(main())
    return [f for f in read_frames(tmp_path / "s.jsonl") if type(f) in (HttpRequest, HttpEnd)]


def test_a_client_that_closes_mid_body_is_a_cut_request_and_a_client_disconnect(tmp_path):
    def closed(addon, f):
        f.client_conn.state = ConnectionState.CAN_WRITE  # it stopped sending

    req, end = _broken(tmp_path, closed)
    assert (req.complete, req.body) == (False, dumps(CALL)[:20])
    assert end.error == "client-disconnected"


def test_an_error_with_the_client_still_there_is_the_upstream_failing(tmp_path):
    req, end = _broken(tmp_path, lambda addon, f: None)
    assert end.error == "upstream-error: peer closed connection"


def test_errors_while_the_proxy_stops_are_the_end_of_the_capture(tmp_path):
    def stopping(addon, f):
        addon.stopping = True
        f.client_conn.state = ConnectionState.CLOSED

    req, end = _broken(tmp_path, stopping)
    assert end.error == "capture-ended"


def test_flows_get_notes_and_the_contentview_shows_the_chain(tmp_path):
    flows = []

    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            f = _flow()
            _request(addon, f, [dumps(CALL)])
            _respond(addon, f, [dumps(IRR)], b"application/json")
            flows.append(f)
            addon.done()  # the analysis is over; its notes wait on the loop
            await asyncio.sleep(0)

    asyncio.run(main())
    f = flows[0]
    notes = f.metadata[NOTES_KEY]
    assert [(n["label"], n["chain"], n["step"]) for n in notes["messages"]] == [
        ("tools/call id=2", "c1 tools/call deploy", "first request"),
        ("result id=2", "c1 tools/call deploy", "round 1: input_required")]
    f.response.content = dumps(IRR)  # mitmweb keeps streamed bodies with store_streamed_bodies
    view = McpJsonRpc()
    meta_ = Metadata(flow=f, content_type="application/json", http_message=f.response)
    assert view.render_priority(f.response.content, meta_) > 1
    text = view.prettify(f.response.content, meta_)
    assert text.splitlines()[0] == "# result id=2  ·  chain c1 tools/call deploy, round 1: input_required"
    assert "sealed-secret-state" not in text and "<requestState sha256:" in text
    assert '"confirm"' in text


def test_the_contentview_splits_an_event_stream_and_shows_what_is_not_json_rpc():
    stream = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n: ping\n\n' \
             b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\ndata: {oops\n\n'
    assert body_messages(stream, "text/event-stream; charset=utf-8") == [
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}', b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b"{oops"]
    text = McpJsonRpc().prettify(stream, Metadata(content_type="text/event-stream"))
    heads = [line for line in text.splitlines() if line.startswith("#")]
    assert heads[:2] == ["# notifications/progress", "# result id=1"]
    assert heads[2] == "# invalid" and heads[3].startswith("# not a JSON-RPC message")
    assert McpJsonRpc().render_priority(b"<html>", Metadata(content_type="text/html")) < 0


def test_before_the_analysis_a_response_is_headed_by_what_its_body_says():
    """mitmdump prints a flow as its response ends, before the analysis noted it: an input_required
    result says so from its body alone (near miss: a complete result is headed as before)."""
    view = McpJsonRpc()
    text = view.prettify(dumps(IRR), Metadata(content_type="application/json"))
    assert text.splitlines()[0] == "# result id=2  ·  input_required"
    done = {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "content": []}}
    assert view.prettify(dumps(done), Metadata(content_type="application/json")).splitlines()[0] == "# result id=3"


def test_the_contentview_shows_what_a_terminal_would_act_on_escaped():
    """mitmdump prints the view on the terminal: controls from the traffic are escaped, in the
    headings, the body and what is not JSON-RPC; the body keeps its layout."""
    hostile = {"jsonrpc": "2.0", "id": 1, "method": "tools/\x1b]0;pwned\x07",
               "params": {"name": "a\u2028b\x9b2J", "arguments": {}}}
    text = McpJsonRpc().prettify(dumps(hostile) + b"\n", Metadata(content_type="application/json"))
    lines = text.split("\n")
    assert not any(c in text for c in "\x1b\x07\x9b\u2028")
    assert lines[0] == "# tools/\\x1b]0;pwned\\x07 id=1" and '"name": "a\\u2028b\\x9b2J",' in text
    assert lines[1] == "{" and len(lines) > 5
    raw = McpJsonRpc().prettify(b'data: {"x\x1b[2J\n\n', Metadata(content_type="text/event-stream"))
    assert "\x1b" not in raw and "\\x1b[2J" in raw


# -- flows read from a file (mitmdump -r): the same hooks, no stream callback ---------------------------


def _saved(t: float, body: bytes | None, content_type: bytes = b"text/event-stream") -> http.HTTPFlow:
    """A flow as mitmdump -w saved it: whole, over, not live; `body` None when it was streamed and not kept."""
    f = _flow()
    f.request.data.content = dumps(CALL)
    f.request.timestamp_start, f.request.timestamp_end = t, t + 0.001
    f.response = http.Response.make(200)
    f.response.headers = http.Headers([(b"content-type", content_type)])  # no length: live, it would stream
    f.response.raw_content = body
    f.response.timestamp_start, f.response.timestamp_end = t + 0.01, t + 0.5
    f.live = False
    return f


def test_a_flow_read_from_a_file_is_analysed_from_the_bodies_it_holds(tmp_path):
    """mitmproxy runs the hooks of a flow it reads (readfile → `master.load_flow`) but calls no stream
    callback: the body the file holds is analysed, at the times the file gives, and the flow gets its
    notes. Near miss: a flow whose body was streamed and not kept is left out, with a note saying the
    remedy, not analysed as a call with an empty answer."""
    event = b"event: message\r\ndata: " + dumps(IRR) + b"\r\n\r\n"
    kept, lost = _saved(100.0, event), _saved(200.0, None)

    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            await tctx.master.load_flow(kept)
            await tctx.master.load_flow(lost)
            addon.done()
            await asyncio.sleep(0)

    asyncio.run(main())
    fs = [f for f in read_frames(tmp_path / "s.jsonl") if type(f) in (HttpRequest, HttpResponse, SseEvent, HttpEnd)]
    assert [(type(f).__name__, f.time) for f in fs] == [
        ("HttpRequest", 100.001), ("HttpResponse", 100.01), ("SseEvent", 100.5), ("HttpEnd", 100.5)]
    assert fs[0].body == dumps(CALL) and fs[2].raw == event and fs[3].error is None
    assert not kept.response.stream  # no callback left on a flow that will not stream
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["messages"] == 2 and report["summary"]["errors"] == 0
    assert [(c["target"], c["rounds"]) for c in report["chains"]] == [("deploy", 1)]
    assert "did not analyse 1 exchange " in report["notes"][0] and "store_streamed_bodies=true" in report["notes"][0]
    assert [n["step"] for n in kept.metadata[NOTES_KEY]["messages"]] == ["first request", "round 1: input_required"]
    assert NOTES_KEY not in lost.metadata


# -- stock mitmproxy reads the project's settings, as the command line does --------------------------


def _record_one_call(tmp_path, **opts) -> HttpRequest:
    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path, **opts)
            f = _flow()
            _request(addon, f, [dumps(CALL)])
            _respond(addon, f, [dumps(IRR)], b"application/json")
            addon.done()

    asyncio.run(main())
    return next(f for f in read_frames(tmp_path / "s.jsonl") if type(f) is HttpRequest)


SETTINGS = 'redact_headers = ["X-Note"]\nredact_paths = ["params.arguments.env"]\n'


def test_the_settings_file_found_from_the_current_directory_redacts(tmp_path, monkeypatch):
    (tmp_path / ".mrtr-inspect.toml").write_text(SETTINGS)
    monkeypatch.chdir(tmp_path)
    req = _record_one_call(tmp_path)
    assert dict(req.headers)["X-Note"].startswith("[redacted:")
    assert b'"env":"[redacted:' in req.body
    assert dict(req.headers)["Mcp-Name"] == "deploy"  # the near miss: other headers stay


def test_mrtr_config_names_the_settings_file(tmp_path, monkeypatch):
    conf = tmp_path / "elsewhere.toml"
    conf.write_text(SETTINGS)
    monkeypatch.chdir(tmp_path)  # no settings file here: only the option's
    req = _record_one_call(tmp_path, mrtr_config=str(conf))
    assert dict(req.headers)["X-Note"].startswith("[redacted:")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert dict(_record_one_call(plain).headers)["X-Note"] == "café"  # without it, the defaults only


def test_a_bad_settings_file_or_report_path_is_one_error_line_at_startup(tmp_path, monkeypatch, caplog):
    """At startup (`running`) it is one ERROR line, which mitmproxy's startup check turns into its
    exit (tests/e2e/test_addon_mitmweb.py runs it); while mitmproxy runs, an option error."""
    import pytest
    from mitmproxy import exceptions

    (tmp_path / ".mrtr-inspect.toml").write_text('redact_paths = "params.x"\n')
    monkeypatch.chdir(tmp_path)

    async def start(report: str):
        with taddons.context() as tctx:
            addon = MrtrInspect()
            tctx.master.addons.add(addon)
            tctx.configure(addon, mrtr_record=str(tmp_path / "s.jsonl"), mrtr_report=report)
            caplog.clear()
            addon.running()
            assert addon.analysis is None
            return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mrtr_inspect"]

    async def change():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            with pytest.raises(exceptions.OptionsError, match="cannot write report"):
                tctx.configure(addon, mrtr_report=str(tmp_path / "missing" / "r.json"))
            addon.done()

    async def main():  # one loop: mitmproxy's log handlers outlive a test master
        [(level, line)] = await start(str(tmp_path / "r.json"))
        assert level == "ERROR" and "redact_paths: must be a list of strings" in line
        (tmp_path / ".mrtr-inspect.toml").unlink()
        [(level, line)] = await start(str(tmp_path / "missing" / "r.json"))
        assert level == "ERROR" and line.startswith("mrtr-inspect: cannot write report ") and "No such file" in line
        assert not (tmp_path / "s.jsonl").exists()  # checked before the recording began
        await change()

    asyncio.run(main())


def test_a_bad_option_while_mitmproxy_runs_keeps_the_session_and_a_good_one_begins_another(tmp_path):
    """As mitmproxy's own addons: a bad value set while it runs is an `OptionsError`, mitmproxy puts
    the option back and the session goes on, recording into the same file; a good value ends the
    session (its end in its recording) and begins another with the new settings."""
    import pytest
    from mitmproxy import exceptions

    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            first = addon.analysis
            with pytest.raises(exceptions.OptionsError, match="cannot write report"):
                tctx.configure(addon, mrtr_report=str(tmp_path / "missing" / "r.json"))
            assert tctx.options.mrtr_report == str(tmp_path / "r.json") and addon.analysis is first
            _request(addon, _flow(), [dumps(CALL)])
            tctx.configure(addon, mrtr_record=str(tmp_path / "next.jsonl"))
            assert addon.analysis is not first
            addon.done()

    asyncio.run(main())
    first = list(read_frames(tmp_path / "s.jsonl"))
    assert [type(f).__name__ for f in first] == ["SessionStart", "HttpRequest", "HttpEnd", "SessionEnd"]
    assert [type(f).__name__ for f in read_frames(tmp_path / "next.jsonl")] == ["SessionStart", "SessionEnd"]


class _Save:
    """What HeldSaves needs of mitmproxy's Save addon: `save_flow`, and `stream` while a file is open."""

    def __init__(self) -> None:
        self.stream = object()
        self.saved: list = []

    def save_flow(self, flow) -> None:
        self.saved.append(flow.id)


def test_a_flow_file_waits_for_a_flow_s_notes_and_other_flows_are_saved_at_once():
    from mrtr_inspect.adapters.flow_notes import HeldSaves

    save, waiting = _Save(), []
    original = save.save_flow
    held = HeldSaves(save, lambda write, flow: waiting.append((write, flow)) is None)
    ours, other = _flow(), _flow()
    held.ended_flow(ours)
    save.save_flow(ours)  # as Save's `response` hook does, right after ours
    save.save_flow(other)
    assert save.saved == [other.id]  # ours waits for the analysis
    [(write, flow)] = waiting
    write(flow)  # the analysis noted it
    assert save.saved == [other.id, ours.id]
    save.save_flow(ours)  # saved again later (mitmweb's edit, say): at once
    assert save.saved == [other.id, ours.id, ours.id] and len(waiting) == 1
    save.stream = None  # no file open: nothing waits
    held.ended_flow(ours)
    save.save_flow(ours)
    assert len(waiting) == 1
    held.release()
    assert save.save_flow == original


def test_a_flow_s_comment_and_mark_follow_its_notes_and_leave_the_user_s_own():
    from mrtr_inspect.adapters.flow_notes import apply_note

    f = _flow()
    apply_note(f, "messages", {"index": 0, "label": "tools/call id=6", "direction": "c2s",
                                "chain": "c2 tools/call release", "step": "retry of round 1"})
    assert (f.comment, f.marked) == ("c2 tools/call release · retry of round 1", "")
    apply_note(f, "messages", {"index": 1, "label": "result id=6", "direction": "s2c",
                                "chain": "c2 tools/call release", "step": "round 2: input_required"})
    apply_note(f, "findings", {"rule": "chain-linked", "severity": "info", "message": "…"})
    assert (f.comment, f.marked) == ("c2 tools/call release · retry of round 1 → round 2: input_required", "")
    apply_note(f, "findings", {"rule": "irr-missing-input-requests", "severity": "warning", "message": "…"})
    assert f.marked == ":warning:" and f.comment.endswith(" · warning irr-missing-input-requests")
    apply_note(f, "findings", {"rule": "retry-reused-id", "severity": "error", "message": "…"})
    assert f.marked == ":red_circle:"  # the worst finding
    g = _flow()
    g.comment, g.marked = "mine", ":star:"
    apply_note(g, "findings", {"rule": "retry-reused-id", "severity": "error", "message": "…"})
    assert (g.comment, g.marked) == ("mine", ":star:")


def test_a_message_taken_whole_is_framed_in_one_step_with_its_head_s_time(tmp_path, monkeypatch):
    """A request and a response mitmproxy takes whole (small JSON of known length) are recorded when
    their body is in, head and body in one step (`request_message`, `response_message`): the same
    frames as step by step, the response head at the time its headers came; a response that breaks
    off after its head is its head and the error. Near miss: a streamed response is stepped as it comes."""
    from types import SimpleNamespace

    from mrtr_inspect.adapters import mitm_addon

    clock = iter(range(1, 100))
    monkeypatch.setattr(mitm_addon, "time", SimpleNamespace(time=lambda: float(next(clock))))  # the addon's clock
    steps: list[str] = []

    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tctx, tmp_path)
            put = addon.analysis.put
            addon.analysis.put = lambda step: (steps.append(step[0]), put(step))
            whole, broken, streamed = _flow(), _flow(), _flow()
            for f in (whole, broken, streamed):
                f.request.headers["content-length"] = str(len(dumps(CALL)))
                addon.requestheaders(f)
                f.request.raw_content = dumps(CALL)
                addon.request(f)
            _respond(addon, whole, [dumps(IRR)], b"application/json")
            broken.response = http.Response.make(200)
            broken.response.headers = http.Headers([(b"content-type", b"application/json"), (b"content-length", b"900")])
            addon.responseheaders(broken)
            broken.error = Error("peer closed connection")
            addon.error(broken)
            _respond(addon, streamed, [b"data: " + dumps(IRR) + b"\n\n"], b"text/event-stream")
            addon.done()

    asyncio.run(main())
    assert steps == ["request_message"] * 3 + ["response_message"] * 2 + ["response_head", "response_data", "response_end"]
    fs = [f for f in read_frames(tmp_path / "s.jsonl") if type(f) in (HttpRequest, HttpResponse, HttpBody, SseEvent, HttpEnd)]
    kinds = [(type(f).__name__, f.exchange) for f in fs]
    assert kinds == [("HttpRequest", 1), ("HttpRequest", 2), ("HttpRequest", 3), ("HttpResponse", 1), ("HttpBody", 1),
                     ("HttpEnd", 1), ("HttpResponse", 2), ("HttpEnd", 2), ("HttpResponse", 3), ("SseEvent", 3), ("HttpEnd", 3)]
    req, resp, body, end = fs[0], fs[3], fs[4], fs[5]
    assert (req.body, req.complete, req.time) == (dumps(CALL), True, 1.0)  # the time its body was in (no clock before)
    assert (resp.status, resp.time, body.data, body.complete, body.time, end.error) == (200, 4.0, dumps(IRR), True, 5.0, None)
    assert (fs[6].time, fs[7].time, fs[7].error) == (6.0, 7.0, "upstream-error: peer closed connection")


def _exchange(a, x: int) -> None:
    """One exchange taken whole, as the addon steps it."""
    json_ = (("content-type", "application/json"),)
    a.put(("request_message", (1.0, x, "POST", "/mcp", json_, "", b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % x, True)))
    a.put(("response_message", (1.1, x, 200, json_, b'{"jsonrpc":"2.0","id":%d,"result":{}}' % x, 1.2, None)))


def test_the_addon_s_analysis_thread_behind_by_the_backlog_gets_no_new_exchange_until_it_is_back_to_half(tmp_path):
    """max_backlog_bytes at 2 KiB and an analysis that takes nothing until let go: the exchanges that
    begin once more is queued are recorded whole and not queued (one already queued is queued whole),
    their messages counted (a request and a response body each), `behind` heard as each stretch
    begins and once more before the end; back to half, new exchanges are queued again. Near miss:
    with the default backlog every exchange is queued."""
    import threading

    from mrtr_inspect.adapters.mitm_thread import AnalysisThread
    from mrtr_inspect.adapters.recorder import HttpRecorder
    from mrtr_inspect.recording.redaction import Redactor
    from mrtr_inspect.recording.writer import RecordingWriter

    class Held:  # an analysis that takes frames only while `gate` is open
        def __init__(self) -> None:
            self.gate = threading.Event()
            self.got: set[int] = set()
            self.said: list[int] = []
            self.ended = False

        def ready(self) -> None:
            pass

        def frames(self, frames: list) -> None:
            self.gate.wait()
            self.got |= {f.exchange for f in frames}

        def behind(self, t: float, n: int) -> None:
            self.said.append(n)

        def end(self, info: dict, t: float) -> int:
            self.ended = True
            return 0

    def run(backlog: int | None, path):
        w = RecordingWriter(path, "http", {}, Redactor(b"k"), session="h", start_time=0.0)
        held = Held()
        a = AnalysisThread(held, HttpRecorder("h", w.redactor, w), backlog)  # type: ignore[arg-type]
        for x in range(1, 21):
            _exchange(a, x)
        caught_up = threading.Event()
        a.after(caught_up.set)
        held.gate.set()  # let go: it takes everything queued
        assert caught_up.wait(30)
        held.gate.clear()  # and holds again
        for x in range(21, 41):
            _exchange(a, x)
        held.gate.set()
        a.finish({})
        recorded = {f.exchange for f in read_frames(path) if hasattr(f, "exchange")}
        return a, held, recorded

    a, held, recorded = run(2048, tmp_path / "r.jsonl")
    assert recorded == set(range(1, 41)) and held.ended
    skipped = set(range(1, 41)) - held.got
    assert {1, 21} <= held.got  # the first, and the first once it caught up
    assert skipped & set(range(2, 21)) and skipped & set(range(22, 41))  # two stretches
    assert a.skipped == 2 * len(skipped)
    assert held.said == [0, 2 * len(skipped & set(range(2, 21))), a.skipped]  # as each began, and at the end

    a, held, recorded = run(None, tmp_path / "near.jsonl")
    assert held.got == recorded == set(range(1, 41)) and a.skipped == 0 and held.said == []


def test_the_addon_says_what_its_analysis_skipped_live_and_in_the_report(tmp_path, monkeypatch, caplog):
    """The settings file's max_backlog_bytes bounds the addon's queue in stock mitmproxy: behind, the
    log says so as it begins, and the report's notes how many messages were not analysed and that
    check of the recording gives the full verdict; the recording keeps every exchange."""
    import threading

    from mrtr_inspect.adapters.live_analysis import LiveAnalysis

    gate = threading.Event()
    frames = LiveAnalysis.frames
    monkeypatch.setattr(LiveAnalysis, "frames", lambda self, fs: (gate.wait(), frames(self, fs)))
    (tmp_path / "s.toml").write_text("max_backlog_bytes = 2048\n")

    async def main():
        with taddons.context() as tctx:
            addon = _stock_addon(tmp_path=tmp_path, tctx=tctx, mrtr_config=str(tmp_path / "s.toml"))
            for x in range(1, 21):
                _exchange(addon.analysis, x)
            gate.set()
            addon.done()

    asyncio.run(main())
    report = json.loads((tmp_path / "r.json").read_text())
    notes = [n for n in report["notes"] if "skipped" in n]
    assert len(notes) == 1 and "check " in notes[0] and str(tmp_path / "s.jsonl") in notes[0]
    n = int(notes[0].split("skipped ")[1].split()[0])
    assert 0 < n < 40 and report["summary"]["messages"] == 40 - n
    assert any("it skips ahead, whole messages" in r.getMessage() for r in caplog.records)  # the live line
    assert {f.exchange for f in read_frames(tmp_path / "s.jsonl") if hasattr(f, "exchange")} == set(range(1, 21))
