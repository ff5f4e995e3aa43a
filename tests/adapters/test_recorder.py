"""The recording written where the bytes are forwarded (adapters/recorder.py): the tee's lean line
records are byte for byte what the analysis would have written frame by frame, however the chunks
are cut, redacted alike; the proxy's steps are recorded as their frames at once; a recording that
cannot be written stops, said once, and nothing raises."""

from __future__ import annotations

import itertools
import os

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_inspect.adapters.recorder import HttpRecorder, StdioRecorder
from mrtr_inspect.core.events import StdioClose, StdioLine
from mrtr_inspect.core.framing import StdioFramer
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.writer import RecordingWriter

LINES = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"password":"hunter2"}}}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"pass\\u0077ord":"s3"}}}',
    b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"caf\xc3\xa9 \\"q\\" \\/"}]}}',
    b'', b'not json\r', b'\xff\xfe broken utf-8', b'{"jsonrpc":"2.0","method":"notifications/progress"}',
]


def _expected(frames, redactor: Redactor) -> bytes:
    return b"".join(fmt.encode(redactor.frame(f)) for f in frames)


def _feed(rec: StdioRecorder, framer: StdioFramer, wire: bytes, cuts: list[int], between: bytes = b"",
          held: int | None = None) -> list:
    """`wire` to the recorder and the framer in chunks of the sizes `cuts` (in turn), `between` on
    stdin after each; the frames. With `held`: the recorder never holds more than that and a chunk."""
    frames, pos = [], 0
    for n, size in enumerate(itertools.cycle(cuts)):
        if pos >= len(wire):
            return frames
        t = 1.0 + n / 8
        rec.chunk(t, "s2c", wire[pos:pos + size])
        frames += framer.data(t, "s2c", wire[pos:pos + size])
        if between:
            rec.chunk(t, "c2s", between)
            frames += framer.data(t, "c2s", between)
        if held is not None:
            assert sum(map(len, rec._pending["s2c"])) <= held + size
        pos += size
    return frames


@settings(max_examples=60, deadline=None)
@given(order=st.lists(st.integers(0, len(LINES) - 1), min_size=1, max_size=20),
       cuts=st.lists(st.integers(1, 90), min_size=1, max_size=10), tail=st.booleans(),
       paths=st.sampled_from([[], ["params.arguments.password"], ["params.arguments.*"], ["params.arguments.**"],
                              ["**.password"]]))
def test_the_tees_lines_are_recorded_as_the_frames_would_be(tmp_path_factory, order, cuts, tail, paths):
    """Chunks cut anywhere, lines of every form (verbatim, CR, not UTF-8, empty, an escaped member
    name), with and without configured paths: the file holds exactly the frames' records, so
    `check` of it judges what the live analysis judged."""
    tmp = tmp_path_factory.mktemp("rec")
    redactor = Redactor(b"k", paths=paths)
    wire = b"".join(LINES[i] + b"\n" for i in order) + (b'{"partial":' if tail else b"")
    w = RecordingWriter(tmp / "r.jsonl", "stdio", {}, redactor, session="s1", start_time=0.0)
    header = (tmp / "r.jsonl").read_bytes()
    rec, framer = StdioRecorder(w), StdioFramer("s1")
    frames = _feed(rec, framer, wire, cuts)
    rec.close(9.0, "s2c")
    frames += framer.close(9.0, "s2c")
    rec.finish({"exit": 0}, 10.0)
    body = (tmp / "r.jsonl").read_bytes()[len(header):]
    assert body.split(b"\n")[:-2] == _expected(frames, redactor).split(b"\n")[:-1]
    assert b'"k":"session-end"' in body.split(b"\n")[-2]
    if paths:
        assert b"hunter2" not in body and b'"s3"' not in body


@settings(max_examples=40, deadline=None)
@given(order=st.lists(st.integers(0, len(LINES) - 1), min_size=1, max_size=12),
       cuts=st.lists(st.integers(1, 90), min_size=1, max_size=10), tail=st.booleans())
def test_a_line_longer_than_the_tee_holds_waits_in_a_file_and_is_recorded_byte_for_byte(tmp_path_factory, order, cuts,
                                                                                         tail):
    """With SPILL_ABOVE at 40 bytes most lines here wait in a temporary file (the other direction's
    lines between their chunks): the recording still reads back as the lines, redacted as any line
    is (they are within max_message_bytes), verbatim ones byte for byte as `encode` writes them, the
    others in base64; the tee never held more than the limit and a chunk."""
    from mrtr_inspect.adapters import recorder

    tmp = tmp_path_factory.mktemp("rec")
    wire = b"".join(LINES[i] + b"\n" for i in order) + (b'{"partial":' + b"x" * 50 if tail else b"")
    redactor = Redactor(b"k")
    w = RecordingWriter(tmp / "r.jsonl", "stdio", {}, redactor, session="s1", start_time=0.0)
    old, recorder.SPILL_ABOVE = recorder.SPILL_ABOVE, 40
    try:
        rec, framer = StdioRecorder(w), StdioFramer("s1", limit=None)
        frames = _feed(rec, framer, wire, cuts, between=b"{}\n", held=40)
        rec.finish({"exit": 0}, 10.0)
        frames += [f for f in framer.close(10.0, "s2c") if type(f) is StdioLine]
    finally:
        recorder.SPILL_ABOVE = old
    frames = [redactor.frame(f) for f in frames]
    got = [f for f in read_frames(tmp / "r.jsonl") if type(f) is StdioLine]
    assert sorted(got, key=lambda f: (f.direction, f.time)) == sorted(frames, key=lambda f: (f.direction, f.time))
    raw = (tmp / "r.jsonl").read_bytes()
    for f in frames:
        if b"\r" not in f.data and f.data.isascii():
            assert fmt.encode(f) in raw  # verbatim, as encode writes it


@pytest.mark.parametrize("limit, redacted", [(1000, True), (50, False)])
def test_a_long_line_is_redacted_within_the_analysis_limit_and_kept_byte_for_byte_past_it(tmp_path, limit, redacted):
    """A line that waited in a file is read back and redacted as any line when the analysis would parse
    it (at most `limit` bytes); past the limit its JSON is never parsed and it is recorded as it came."""
    from mrtr_inspect.adapters import recorder

    line = LINES[0] + b" " * 60
    w = RecordingWriter(tmp_path / "r.jsonl", "stdio", {}, Redactor(b"k"), session="s1", start_time=0.0)
    old, recorder.SPILL_ABOVE = recorder.SPILL_ABOVE, 40
    try:
        rec = StdioRecorder(w, limit=limit)
        for i in range(0, len(line), 30):
            rec.chunk(1.0, "c2s", line[i:i + 30])
        rec.chunk(1.0, "c2s", b"\n")
        rec.finish({"exit": 0}, 2.0)
    finally:
        recorder.SPILL_ABOVE = old
    raw = (tmp_path / "r.jsonl").read_bytes()
    assert (b"hunter2" not in raw) is redacted
    got = [f for f in read_frames(tmp_path / "r.jsonl") if type(f) is StdioLine]
    assert len(got) == 1 and (got[0].data == line) is not redacted


def test_a_line_waiting_for_its_end_is_recorded_at_the_end_of_the_session(tmp_path):
    w = RecordingWriter(tmp_path / "r.jsonl", "stdio", {}, Redactor(b"k"), session="s1", start_time=0.0)
    rec = StdioRecorder(w)
    rec.chunk(1.0, "c2s", b'{"a":1}\n{"b"')
    rec.finish({"exit": 0}, 2.0)
    got = list(read_frames(tmp_path / "r.jsonl"))[1:]
    assert got[0] == StdioLine(1.0, "s1", "c2s", b'{"a":1}')
    assert got[1] == StdioLine(2.0, "s1", "c2s", b'{"b"', eol=False)
    assert not any(type(f) is StdioClose for f in got)


def test_a_recording_that_cannot_be_written_stops_and_is_said_once(tmp_path):
    said: list[str] = []
    w = RecordingWriter(tmp_path / "r.jsonl", "stdio", {}, Redactor(b"k"), session="s1")
    os.close(w._fd)  # the file is gone from under the writer: every write fails
    w._fd = os.open(os.devnull, os.O_RDONLY)
    rec = StdioRecorder(w, failed=said.append)
    rec.chunk(1.0, "c2s", b"x\n")
    rec.chunk(2.0, "c2s", b"y\n")
    rec.finish({}, 3.0)
    assert len(said) == 1 and "recording stopped (traffic unaffected)" in said[0]


def test_the_proxys_steps_are_recorded_when_they_are_put(tmp_path):
    """The request's frame is on file once its `request_end` step is put (before mitmproxy sends it
    upstream), the response's once its end is put; a step that cannot be framed raises nothing."""
    w = RecordingWriter(tmp_path / "r.jsonl", "http", {}, Redactor(b"k"), session="h", start_time=0.0)
    said: list[str] = []
    rec = HttpRecorder("h", w.redactor, w, failed=said.append)
    n = lambda: len((tmp_path / "r.jsonl").read_bytes().splitlines())  # noqa: E731
    assert rec.put(("request_head", (1.0, 1, "POST", "/mcp", (("authorization", "Bearer s3cret"),), "127.0.0.1"))) == []
    rec.put(("request_data", (1.0, 1, b'{"jsonrpc":"2.0","id":1,"method":"ping"}')))
    assert n() == 1
    [req] = rec.put(("request_end", (1.1, 1, True)))
    assert n() == 2 and req.headers[0][1].startswith("Bearer [redacted:")
    rec.put(("response_head", (1.2, 1, 200, (("content-type", "application/json"),))))
    rec.put(("response_data", (1.2, 1, b'{"jsonrpc":"2.0","id":1,"result":{}}')))
    assert n() == 3
    assert [type(f).__name__ for f in rec.put(("response_end", (1.3, 1, None)))] == ["HttpBody", "HttpEnd"]
    assert n() == 5 and b"s3cret" not in (tmp_path / "r.jsonl").read_bytes()
    assert rec.put(("no_such_step", ())) == [] and said and "internal recording error" in said[0]
    rec.put(("request_head", (2.0, 2, "POST", "/mcp", (), "")))
    [end] = rec.end_open(3.0, "capture-ended")
    data = rec.records(end)  # what the analysis process is sent: the records appended
    assert (tmp_path / "r.jsonl").read_bytes().endswith(data) and fmt.decode(data).error == "capture-ended"
    rec.finish({"exchanges": 2}, 3.0)
    assert b'"k":"session-end"' in (tmp_path / "r.jsonl").read_bytes().splitlines()[-1]


def test_the_analysis_ends_a_session_its_killed_forwarder_left_mid_line(tmp_path):
    """The forwarding process killed in the middle of a write: the analysis process, which outlives
    it, ends that line as torn before the session's end, so both read back (the torn line skipped
    with a note, the session ended)."""
    path = tmp_path / "r.jsonl"
    w = RecordingWriter(path, "stdio", {}, Redactor(b"k"), session="s1", start_time=0.0)
    w.append(fmt.encode(StdioLine(1.0, "s1", "c2s", b'{"a":1}')) + b'{"t":2.0,"s":"s1","k":"li')  # cut here
    w.close({}, 3.0, after_kill=True)
    from mrtr_inspect.recording.reader import ReadNotes

    notes = ReadNotes()
    got = list(read_frames(path, notes))
    assert [type(f).__name__ for f in got] == ["SessionStart", "StdioLine", "SessionEnd"]
    assert len(notes.skipped) == 1 and not notes.torn_tail
    clean = tmp_path / "clean.jsonl"
    w = RecordingWriter(clean, "stdio", {}, Redactor(b"k"), session="s2", start_time=0.0)
    w.close({}, 1.0, after_kill=True)  # nothing torn: nothing added
    assert fmt.TORN not in clean.read_bytes()


def test_a_body_that_decodes_far_is_framed_off_the_event_loop_and_the_steps_keep_their_order(tmp_path):
    """A compressed answer that decodes past QUICK_DECODE (a bomb, say) is not decoded in mitmproxy's
    hook: `feed` returns at once and the answer is framed, recorded and delivered by the recorder's
    thread; the steps fed after it (another exchange) wait for it, so the analysis and the file see
    the steps in the order they were fed. A small compressed body is framed on the loop, as before."""
    import asyncio
    import gzip

    from mrtr_inspect.adapters.recorder import QUICK_DECODE

    w = RecordingWriter(tmp_path / "r.jsonl", "http", {}, Redactor(b"k"), session="h", start_time=0.0)
    rec = HttpRecorder("h", w.redactor, w)
    far = gzip.compress(b"\0" * (QUICK_DECODE * 8))
    small = gzip.compress(b'{"jsonrpc":"2.0","id":2,"result":{}}')
    gz = (("content-type", "application/json"), ("content-encoding", "gzip"))

    async def run() -> tuple[list, list, list]:
        got: list = []
        all_in = asyncio.Event()

        def deliver(frames: list) -> None:
            got.extend(frames)
            if any(f.exchange == 3 for f in frames):
                all_in.set()

        for x in (1, 2):
            rec.feed(("request_head", (1.0, x, "POST", "/mcp", (), "")), deliver)
            rec.feed(("request_data", (1.0, x, b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % x)), deliver)
            rec.feed(("request_end", (1.0, x, True)), deliver)
        rec.feed(("response_head", (1.1, 2, 200, gz)), deliver)
        rec.feed(("response_data", (1.1, 2, small)), deliver)
        rec.feed(("response_end", (1.2, 2, None)), deliver)  # small: framed here and now
        at_once = [type(f).__name__ for f in got]
        rec.feed(("response_head", (1.3, 1, 200, gz)), deliver)
        rec.feed(("response_data", (1.3, 1, far)), deliver)
        rec.feed(("response_end", (1.4, 1, None)), deliver)  # far: to the thread
        rec.feed(("request_head", (1.5, 3, "DELETE", "/mcp", (), "")), deliver)  # after it, in order
        rec.feed(("request_end", (1.5, 3, True)), deliver)
        not_yet = [type(f).__name__ for f in got]
        await asyncio.wait_for(all_in.wait(), 60)
        return at_once, not_yet, got

    at_once, not_yet, got = asyncio.run(run())
    assert at_once == ["HttpRequest", "HttpRequest", "HttpResponse", "HttpBody", "HttpEnd"]
    assert not_yet == at_once + ["HttpResponse"]  # the head came before the body that decodes far
    kinds = [(type(f).__name__, f.exchange) for f in got]
    assert kinds[len(not_yet):] == [("HttpBody", 1), ("HttpEnd", 1), ("HttpRequest", 3)]
    body = got[len(not_yet)]
    assert body.data == b"\0" * (QUICK_DECODE * 8) and body.body_note == "decoded from content-encoding gzip"
    rec.finish({}, 2.0)
    on_file = [(type(f).__name__, getattr(f, "exchange", None)) for f in read_frames(tmp_path / "r.jsonl")]
    assert [k for k in on_file if k[0].startswith("Http")] == kinds


def test_a_whole_message_that_decodes_far_is_framed_off_the_event_loop_too(tmp_path):
    """The steps of a message mitmproxy took whole (`request_message`, `response_message`): one that
    decodes past QUICK_DECODE goes to the recorder's thread with what follows it; a small one (or
    one without a content-encoding) is framed on the loop."""
    import asyncio
    import gzip

    from mrtr_inspect.adapters.recorder import QUICK_DECODE

    w = RecordingWriter(tmp_path / "r.jsonl", "http", {}, Redactor(b"k"), session="h", start_time=0.0)
    rec = HttpRecorder("h", w.redactor, w)
    far = gzip.compress(b"\0" * (QUICK_DECODE * 8))
    gz = (("content-type", "application/json"), ("content-encoding", "gzip"))
    plain = (("content-type", "application/json"),)

    async def run() -> tuple[list, list]:
        got: list = []
        done = asyncio.Event()

        def deliver(frames: list) -> None:
            got.extend(frames)
            if any(f.exchange == 3 for f in frames):
                done.set()

        rec.feed(("request_message", (1.0, 1, "POST", "/mcp", gz, "", gzip.compress(b'{"id":1}'), True)), deliver)
        rec.feed(("response_message", (1.1, 1, 200, plain, b'{"id":1}', 1.2, None)), deliver)
        at_once = [(type(f).__name__, f.exchange) for f in got]
        rec.feed(("request_message", (1.3, 2, "POST", "/mcp", gz, "", far, True)), deliver)  # far: to the thread
        rec.feed(("request_message", (1.4, 3, "POST", "/mcp", plain, "", b'{"id":3}', True)), deliver)  # after it
        not_yet = [(type(f).__name__, f.exchange) for f in got]
        await asyncio.wait_for(done.wait(), 60)
        assert not_yet == at_once  # neither the far one nor the one after it framed in the hook
        return at_once, got

    at_once, got = asyncio.run(run())
    assert at_once == [("HttpRequest", 1), ("HttpResponse", 1), ("HttpBody", 1), ("HttpEnd", 1)]
    assert got[0].body == b'{"id":1}' and got[0].body_note == "decoded from content-encoding gzip"
    assert [(type(f).__name__, f.exchange) for f in got[4:]] == [("HttpRequest", 2), ("HttpRequest", 3)]
    assert got[4].body == b"\0" * (QUICK_DECODE * 8)
    rec.finish({}, 2.0)


_NAMES = [b"Host", b"content-type", b"Content-Type", b"content-length", b"Content-Encoding", b"Authorization",
          b"authorization", b"mcp-session-id", b"Location", b"link", b"Cookie", b"x-api-key", b"X-Trace", b'x"q',
          b"x\\y", b"caf\xe9", b"x\x01", b"accept"]
_BYTES = st.lists(st.sampled_from([b"a", b"Z", b"0", b" ", b"/", b"?", b"=", b"&", b";", b"<", b">", b'"', b"\\",
                                   b"\x00", b"\x1f", b"\x7f", b"\xe9", b"\xff", b"\t", b"Bearer sk-live-1234567890abcdef",
                                   b"text/event-stream", b"application/json", b"token=abc", b"https://h/p?key=s3cret"]),
                  max_size=6).map(b"".join)
_FIELDS = st.lists(st.tuples(st.sampled_from(_NAMES), _BYTES), max_size=7).map(tuple)
_BODIES = st.sampled_from([b"", b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"password":"hunter2","a":[1,2]}',
                           b'{"a":\n1}', b'{"a":"\r"}', b"\xff\xfe not utf-8", b'{"t":"caf\xc3\xa9 \\"q\\""}',
                           b'{"params":{"arguments":{"token":"s3"}}}'])
_TEXTS = st.sampled_from(["", "127.0.0.1", "POST", "pöst", "G\"ET", "\udcff", "x\ny"])


@settings(max_examples=300, deadline=None)
@given(fields=_FIELDS, resp_fields=_FIELDS, path=_BYTES.map(lambda b: b"/mcp" + b), method=_TEXTS, client=_TEXTS,
       body=_BODIES, answer=_BODIES, complete=st.booleans(),
       error=st.sampled_from([None, "", "upstream-error: peer closed", "capture-ended", "\udcff"]),
       paths=st.sampled_from([[], ["params.arguments.token"], ["**.a"]]), status=st.sampled_from([200, 404, 202]))
def test_a_message_taken_whole_is_recorded_from_mitmproxy_s_raw_parts_as_its_frames_would_be(
        fields, resp_fields, path, method, client, body, answer, complete, error, paths, status):
    """The steps of messages mitmproxy took whole carry its raw parts (the path's bytes, the header
    fields' bytes); the recorder writes their records from them, without frames (`whole.Whole`), or the
    general way (a byte JSON escapes, a content-encoding, an event stream, a lone surrogate): the
    bytes are exactly those of the frames the framer makes of the same parts decoded as
    `flows.flow_headers` decodes them, redacted and encoded; the redaction counts the same paths
    matched, and the exchange is open from its request to its response's end."""
    from mrtr_inspect.adapters.flows import FlowFramer

    def text(fs):
        return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in fs)

    ref_redactor, redactor = Redactor(b"k", paths=paths), Redactor(b"k", paths=paths)
    framer, rec = FlowFramer("s1"), HttpRecorder("s1", redactor)
    steps = [(("request_message", (1.5, 7, method, path, fields, client, body, complete)),
              lambda: framer.request_message(1.5, 7, method, path.decode("latin-1"), text(fields), client, body, complete)),
             (("response_message", (2.25, 7, status, resp_fields, answer, 3.0, error)),
              lambda: framer.response_message(2.25, 7, status, text(resp_fields), answer, 3.0, error))]
    for (step, frames), still_open in zip(steps, ([7], [])):
        try:
            want = [b"".join(fmt.encode(ref_redactor.frame(f)) for f in frames())]
        except UnicodeEncodeError:  # a lone surrogate (a method or client not UTF-8): it cannot be written either way
            with pytest.raises(UnicodeEncodeError):
                rec.feed(step, print, as_records=True)
        else:
            got: list[bytes] = []
            rec.feed(step, got.append, as_records=True)
            assert got == want
        assert rec.framer.open_exchanges() == still_open
    assert redactor.hits == ref_redactor.hits


def test_the_messages_of_an_mcp_session_are_recorded_from_mitmproxy_s_raw_parts(tmp_path):
    """Near miss of the general way: a JSON request and answer with plain headers, a session id and a
    bearer token are written by `whole.Whole` (no frame made), the session id's field (kept: it is no
    credential) and the token's (redacted) judged once and remembered; a gzip body goes the general way."""
    import gzip

    from mrtr_inspect.adapters import recorder

    w = RecordingWriter(tmp_path / "r.jsonl", "http", {}, Redactor(b"k"), session="h", start_time=0.0)
    rec = HttpRecorder("h", w.redactor, w)
    made = []
    frames = rec.framer.request_message
    rec.framer.request_message = lambda *a: made.append(a) or frames(*a)
    head = ((b"Host", b"127.0.0.1:3000"), (b"Content-Type", b"application/json"), (b"Mcp-Session-Id", b"abc123"),
            (b"Authorization", b"Bearer sk-live-1234567890abcdef"))
    out: list[bytes] = []
    for x in (1, 2):
        rec.feed(("request_message", (1.0, x, "POST", b"/mcp", head, "127.0.0.1", b'{"id":%d}' % x, True)), out.append,
                 as_records=True)
    assert made == [] and len(rec._whole._redacted) == 2
    assert b"sk-live" not in b"".join(out) and b'["Mcp-Session-Id","abc123"]' in out[0]
    gz = head[:2] + ((b"content-encoding", b"gzip"),)
    rec.feed(("request_message", (1.0, 3, "POST", b"/mcp", gz, "", gzip.compress(b'{"id":3}'), True)), out.append,
             as_records=True)
    assert len(made) == 1 and recorder.fmt.decode(out[2]).body == b'{"id":3}'
    rec.finish({}, 2.0)
    assert [f.exchange for f in read_frames(tmp_path / "r.jsonl") if hasattr(f, "exchange")] == [1, 2, 3]


def test_what_the_whole_messages_way_remembers_is_bounded():
    """A long value of a redacted field (a large cookie) and a long header name are not remembered
    (`_HELD_SIZE`): the bytes are the same, the long name's message goes the general way."""
    from mrtr_inspect.adapters.flows import FlowFramer

    rec, framer, redactor = HttpRecorder("h", Redactor(b"k")), FlowFramer("h"), Redactor(b"k")
    for x, fields in enumerate([((b"Cookie", b"c=" + b"v" * 5000),), ((b"X-" + b"n" * 5000, b"1"),)], 1):
        got: list[bytes] = []
        rec.feed(("request_message", (1.0, x, "POST", b"/mcp", fields, "", b"{}", True)), got.append, as_records=True)
        text = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in fields)
        assert got == [b"".join(fmt.encode(redactor.frame(f)) for f in framer.request_message(1.0, x, "POST", "/mcp", text,
                                                                                              "", b"{}", True))]
    assert rec._whole._redacted == {} and all(len(k) < 100 for k in rec._whole._kinds)
