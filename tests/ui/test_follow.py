"""`ui --follow`: a recording shown as it is appended to (a tee's, a proxy's); the reader under it."""

from __future__ import annotations

from mrtr_inspect.core.events import SessionStart
from mrtr_inspect.recording.reader import Follower

from .conftest import drive, snapshot
from .recordings import Writer


def test_follow_shows_what_is_appended_and_open_chains_as_they_go(tmp_path):
    rec = tmp_path / "live.jsonl"
    w = Writer("tee")
    w.discover()
    w.wizard(1)
    w.write(rec)

    async def steps(s):
        assert "showing 1 chains" in s.screen and "[following]" in s.screen
        w.call(4, "deploy")
        w.write(rec, "ab")
        await s.until(lambda: "c2      deploy       open" in s.screen)
        w.done(4)
        w.call(5, "wizard", {"n": 5})
        w.ask(5, "name", "name", "st-5")
        line = b"".join(w.lines)
        w.lines = []
        with open(rec, "ab") as f:  # the writer is in the middle of a line: nothing of it yet
            f.write(line[:-10])
        await s.until(lambda: "c2      deploy       complete" in s.screen)
        assert "c3" not in s.screen.split("│")[0]
        with open(rec, "ab") as f:
            f.write(line[-10:])
        await s.until(lambda: "c3      wizard       open      1" in s.screen)
        await s.pilot.press("end", "enter")
        await s.settle()
        assert "← input_required round 1" in s.screen and "round 1: waiting" not in s.screen
        snapshot("follow", s.screen)

    drive([rec], steps, follow=True)


def test_follower_yields_whole_records_with_their_places(tmp_path):
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(b"")
    f = Follower(rec)
    assert list(f.poll()) == []  # the header is not written yet
    w = Writer("a")
    w.discover()
    data = b"".join(w.lines)
    rec.write_bytes(data[:5])
    assert list(f.poll()) == []
    rec.write_bytes(data)
    got = list(f.poll())
    assert [type(item) for _, _, item in got] == [SessionStart, tuple, tuple]
    assert [(off, n) for off, n, _ in got] == [(0, data.index(b"\n") + 1), (got[1][0], got[1][1]),
                                               (got[2][0], len(data) - got[2][0])]
    assert f.record(got[1][0], got[1][1]) == data[got[1][0]:got[2][0]]
    assert list(f.poll()) == []
    f.close()


def test_follower_refuses_a_file_that_is_not_a_recording(tmp_path):
    import pytest

    from mrtr_inspect.recording.reader import UnreadableRecording

    bad = tmp_path / "x.txt"
    bad.write_text("not json\n")
    with pytest.raises(UnreadableRecording, match="not an mrtr-inspect recording"):
        list(Follower(bad).poll())


def test_a_session_id_met_again_in_a_later_input_is_its_own_session(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        w = Writer("same")
        w.discover()
        w.call(1, "deploy")
        w.done(1)
        w.write(path)

    async def steps(s):
        assert "showing 2 chains" in s.screen  # not one session that sent request 1 twice
        assert set(s.store.sessions) == {"same", "same~2"}

    drive([a, b], steps)
