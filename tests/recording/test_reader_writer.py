"""Writing and reading recordings: files, sessions, damage, privacy."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.events import SessionEnd, SessionStart, StdioClose, StdioLine
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.recording.reader import ReadNotes, UnreadableRecording, check_readable, read_frames
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.writer import RecordingError, RecordingWriter
from tests.core.strategies import FUZZ
from tests.recording.strategies import frames

PLAIN = Redactor(b"k")  # the default headers only; the frames below carry none of them

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy"}}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}'


def record(path, frames_, session="s1", t=100.0, info=None, redactor=PLAIN) -> RecordingWriter:
    w = RecordingWriter(path, "stdio", info or {"command": ["server"]}, redactor=redactor, session=session, start_time=t)
    w.write_many(frames_)
    w.close(end_time=t + 9)
    return w


def read(path) -> tuple[list, ReadNotes]:
    notes = ReadNotes()
    return list(read_frames(path, notes)), notes


def stdio(session="s1") -> list:
    return [StdioLine(101.0, session, "c2s", CALL), StdioLine(102.0, session, "s2c", ANSWER),
            StdioLine(103.0, session, "s2c", b"torn", eol=False), StdioClose(104.0, session, "c2s")]


# ---------------------------------------------------------------------------------------------
# writer → reader


def test_writer_then_reader_gives_back_the_frames_fed(tmp_path):
    path = tmp_path / "r.jsonl"
    w = record(path, stdio())
    got, notes = read(path)
    assert got[0] == w.start and got[0].info["command"] == ["server"] and "pid" in got[0].info
    assert got[1:-1] == stdio()
    assert got[-1] == SessionEnd(109.0, "s1", {})
    assert (notes.sessions, notes.frames, notes.torn_tail, notes.skipped) == (1, 6, False, [])
    assert w.frames == 4
    check_readable(path)


@FUZZ
@given(st.lists(frames, max_size=15))
def test_any_frames_survive_a_file(tmp_path_factory, fed):
    path = tmp_path_factory.mktemp("rec") / "r.jsonl"
    record(path, fed, redactor=Redactor(b"k", headers=()))
    got, notes = read(path)
    redacted = [PLAIN.frame(f) for f in fed]  # the strategies' headers are not secret: unchanged
    assert redacted == fed
    assert got[1:-1] == fed and notes.skipped == [] and not notes.torn_tail


def test_a_file_is_created_private(tmp_path):
    old = os.umask(0)
    try:
        path = tmp_path / "private.jsonl"
        record(path, stdio())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_second_session_is_appended_never_overwriting(tmp_path):
    path = tmp_path / "r.jsonl"
    record(path, stdio("s1"), session="s1")
    first = path.read_bytes()
    record(path, stdio("s2"), session="s2", t=200.0)
    assert path.read_bytes().startswith(first)
    got, notes = read(path)
    assert notes.sessions == 2
    starts = [f for f in got if type(f) is SessionStart]
    assert [s.session for s in starts] == ["s1", "s2"]
    assert [f for f in got if type(f) is StdioLine and f.session == "s2"] == stdio("s2")[:3]


def test_two_writers_at_once_keep_their_lines_whole(tmp_path):
    path = tmp_path / "r.jsonl"
    a = RecordingWriter(path, "stdio", {}, redactor=PLAIN, session="a", start_time=1.0)
    b = RecordingWriter(path, "stdio", {}, redactor=PLAIN, session="b", start_time=1.0)
    for fa, fb in zip(stdio("a"), stdio("b")):
        a.write(fa)
        b.write(fb)
    a.close(end_time=2.0)
    b.close(end_time=2.0)
    got, notes = read(path)
    assert notes.skipped == [] and notes.sessions == 2
    for s in ("a", "b"):
        assert [f for f in got if type(f) is not SessionStart and f.session == s][:-1] == stdio(s)


@pytest.mark.parametrize("keep", [10, -5], ids=["torn-in-record", "torn-in-payload"])
def test_a_crashed_recording_is_appended_to_on_a_line_of_its_own(tmp_path, keep):
    path = tmp_path / "r.jsonl"
    w = RecordingWriter(path, "stdio", {}, redactor=PLAIN, session="s1", start_time=1.0)
    w.write(stdio()[0])
    os.close(w._fd)  # killed: no session end, and the last frame only partly written
    with open(path, "ab") as f:
        f.write(fmt.encode(stdio()[1])[:keep])
    record(path, stdio("s2"), session="s2", t=200.0)
    got, notes = read(path)
    assert [f.session for f in got if type(f) is SessionStart] == ["s1", "s2"]
    assert [f for f in got if type(f) is StdioLine and f.session == "s2"] == stdio("s2")[:3]
    assert [f for f in got if type(f) is StdioLine and f.session == "s1"] == stdio()[:1]  # the torn frame is not made up
    assert len(notes.skipped) == 1


def test_refuses_to_append_to_a_file_that_is_not_a_recording(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"my notes\n")
    with pytest.raises(RecordingError, match="not an mrtr-inspect recording"):
        RecordingWriter(path, "stdio", {}, redactor=PLAIN)
    assert path.read_bytes() == b"my notes\n"


def test_an_empty_existing_file_is_fine(tmp_path):
    path = tmp_path / "r.jsonl"
    path.touch()
    record(path, stdio())
    assert read(path)[1].sessions == 1


def test_the_writer_redacts_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "k2")
    from mrtr_inspect.core.events import HttpRequest
    path = tmp_path / "r.jsonl"
    w = RecordingWriter(path, "http", {}, session="h", start_time=1.0)
    w.write(HttpRequest(2.0, "h", 1, "POST", "/mcp", (("Authorization", "Bearer sk-live-123"),), CALL))
    w.close(end_time=3.0)
    text = path.read_text()
    assert "sk-live-123" not in text and "Bearer [redacted:" in text


# ---------------------------------------------------------------------------------------------
# damaged files


def lines_of(frames_) -> list[bytes]:
    return [fmt.encode(f) for f in frames_]


def test_a_torn_last_line_is_skipped_with_a_note(tmp_path):
    path = tmp_path / "r.jsonl"
    good = lines_of([SessionStart(1.0, "s", "stdio", {}), *stdio("s")[:2]])
    for cut in (10, len(good[-1]) - 20, len(good[-1]) - 1):  # in the record, in the payload, just before the LF
        path.write_bytes(b"".join(good[:-1]) + good[-1][:cut])
        got, notes = read(path)
        assert got == [SessionStart(1.0, "s", "stdio", {}), stdio("s")[0]], cut
        assert notes.torn_tail and notes.skipped == []
        assert "torn" in notes.lines(str(path))[0]


def test_a_damaged_middle_line_is_skipped_with_its_line_number(tmp_path):
    path = tmp_path / "r.jsonl"
    good = lines_of([SessionStart(1.0, "s", "stdio", {}), *stdio("s")])
    path.write_bytes(good[0] + good[1] + b'{"t":1,"k":"line"\n' + b"\x00garbage\n" + b"".join(good[2:]))
    got, notes = read(path)
    assert got[1:] == stdio("s")
    assert [n for n, _ in notes.skipped] == [3, 4]
    assert not notes.torn_tail
    assert notes.lines("r.jsonl")[0].startswith("r.jsonl:3: skipped")


def test_many_damaged_lines_are_summarised(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(lines_of([SessionStart(1.0, "s", "stdio", {})])[0] + b"bad\n" * 8)
    _, notes = read(path)
    assert len(notes.skipped) == 8 and notes.lines("p")[-1] == "p: … and 3 more"


@pytest.mark.parametrize("content, why", [
    (b"", "empty file"),
    (b'{"jsonrpc":"2.0","id":1}\n', "not an mrtr-inspect recording"),
    (b"hello\n", "not an mrtr-inspect recording"),
    (b'{"mrtr-inspect":"recording","version":9,"session":"a","transport":"stdio","t":1}\n', "version 9"),
])
def test_not_a_recording_is_refused(tmp_path, content, why):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(UnreadableRecording, match=why):
        read(path)
    with pytest.raises(UnreadableRecording):
        check_readable(path)


def test_a_later_session_of_an_unknown_version_is_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(lines_of([SessionStart(1.0, "s", "stdio", {})])[0]
                     + b'{"mrtr-inspect":"recording","version":2,"session":"b","transport":"stdio","t":2}\n')
    with pytest.raises(UnreadableRecording, match=":2: recording format version 2"):
        read(path)


def test_a_missing_file_is_unreadable(tmp_path):
    with pytest.raises(UnreadableRecording, match="No such file"):
        read(tmp_path / "absent.jsonl")


# ---------------------------------------------------------------------------------------------
# the reader's fast path for stdio line records


_LINE_TIMES = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False))
_LINE_SESSIONS = st.one_of(st.sampled_from(["5e18d04b50bc", "", "a\"b", "a\\b", "é", "x" * 70]),
                           st.text(max_size=8))
_LINE_PAYLOADS = st.one_of(st.binary(max_size=20), st.sampled_from([b"", b"\xff", b"{}\xff", b"a\tb", CALL]))


def _read_lines(tmp_path_factory, lines: list[bytes], **kw) -> tuple[list, ReadNotes]:
    path = tmp_path_factory.mktemp("rec") / "r.jsonl"
    path.write_bytes(fmt.encode(SessionStart(1.0, "s", "stdio", {})) + b"".join(lines))
    notes = ReadNotes()
    return list(read_frames(path, notes, **kw))[1:], notes


def _slow_read(lines: list[bytes]) -> list:
    out = []
    for line in lines:
        try:
            out.append(fmt.decode(line))
        except fmt.FormatError:
            pass
    return out


@FUZZ
@given(st.lists(st.builds(StdioLine, _LINE_TIMES, _LINE_SESSIONS, st.sampled_from(["c2s", "s2c"]), _LINE_PAYLOADS,
                          st.booleans()), max_size=8))
def test_line_records_read_as_format_decode_reads_them(tmp_path_factory, fed):
    lines = [fmt.encode(f) for f in fed]
    got, notes = _read_lines(tmp_path_factory, lines)
    assert repr(got) == repr(_slow_read(lines))  # repr: the time's type (int or float) too
    tuples, _ = _read_lines(tmp_path_factory, lines, lines_as_tuples=True)
    assert [StdioLine(*t) if type(t) is tuple else t for t in tuples] == got
    assert all(type(t) is not tuple or (type(t[0]), t[1:]) == (type(f.time), (f.session, f.direction, f.data))
               for t, f in zip(tuples, got))


@pytest.mark.parametrize("line", [
    b'{"t":01,"s":"a","k":"line","d":"c2s"}\tx\n',  # not JSON: skipped either way
    b'{"t":1.5,"s":"a","k":"line","d":"c2s"}\tx\xff\n',  # a torn line
    b'{"t":1e3,"s":"a","k":"line","d":"c2s"}\tx\n',
    b'{"t":-0,"s":"a","k":"line","d":"s2c"}\t\n',
    b'{"t":2,"s":"a","k":"line","d":"c2s","eol":false}\tx\n',
    b'{"t":2,"s":"a","k":"line","d":"c2s"}\n',
])
def test_odd_line_records_read_as_format_decode_reads_them(tmp_path_factory, line):
    got, notes = _read_lines(tmp_path_factory, [line])
    assert repr(got) == repr(_slow_read([line]))
    assert len(notes.skipped) == 1 - len(got)


@pytest.mark.parametrize("keep", [1, 12, 40])
def test_a_recording_whose_only_line_is_a_torn_header_reads_as_empty_with_the_torn_note(tmp_path, keep):
    """A recorder stopped while writing its first line leaves a cut header and nothing else: a
    recording with nothing in it yet (the torn last line the contract lets a reader accept), not
    'not a recording'. Near misses: another cut first line, and an empty file, are refused."""
    path = tmp_path / "r.jsonl"
    record(path, stdio())
    first = path.read_bytes().split(b"\n", 1)[0]
    path.write_bytes(first[:keep])
    got, notes = read(path)
    assert got == [] and notes.torn_tail
    for not_ours in (b'{"log": {"version": "1.2"', b""):
        path.write_bytes(not_ours)
        with pytest.raises(UnreadableRecording):
            read(path)


def test_a_torn_header_is_appended_to_and_the_new_session_reads(tmp_path):
    """The client starts the server again with the same --record: the new session is appended after
    the cut header (ended, marked torn), and reads back whole; the cut line is skipped with a note."""
    path = tmp_path / "r.jsonl"
    record(path, stdio())
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0][:30])
    record(path, stdio("s2"), session="s2", t=200.0)
    got, notes = read(path)
    assert [f.session for f in got if type(f) is SessionStart] == ["s2"]
    assert [f for f in got if type(f) is StdioLine] == stdio("s2")[:3]
    assert [n for n, _ in notes.skipped] == [1] and not notes.torn_tail


def test_a_writer_gives_its_file_to_read_back_from_the_end_of_its_header(tmp_path):
    """`reader()`: the file open for reading and the offset after the session's header (appended to
    an existing recording: after the new header, not the file's start); None once the name leads to
    another file (replaced since it was opened), where following the name would read someone else's."""
    path = tmp_path / "rec.jsonl"
    RecordingWriter(path, "stdio", {}, session="s0").close({})
    before = path.stat().st_size
    w = RecordingWriter(path, "stdio", {}, session="s1")
    f, start = w.reader()  # type: ignore[misc]
    with f:
        assert start == path.stat().st_size > before
        f.seek(before)
        assert fmt.is_header(f.read(start - before))
    (tmp_path / "other.jsonl").write_bytes(path.read_bytes())
    os.replace(tmp_path / "other.jsonl", path)
    assert w.reader() is None
    w.close({})
