"""The live analysis that reads the recording yields to the traffic (analysis_process.Yielding): it
works at a pause in the traffic, or once it has waited `live_yield_seconds` for one; 0 works at once."""

from __future__ import annotations

import os
import threading

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters.live_analysis import LOOK_AFTER, LiveAnalysis
from mrtr_inspect.adapters.recorder import HttpRecorder
from mrtr_inspect.config import Config
from mrtr_inspect.core.messages import Message
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.writer import RecordingWriter
from mrtr_inspect.settings import FIELDS
from tests.adapters.test_proxy_follow import _ping


def test_it_waits_for_a_pause_or_at_most_its_seconds_then_waits_anew():
    y = ap.Yielding(5.0)
    assert [y.news(t) for t in (100.0, 101.0, 104.9)] == [False, False, False]
    assert y.news(105.0)  # waited its most: works, though the traffic still flows
    assert not y.news(105.1)  # the next news begins a new wait
    y.paused()  # a pause: it works; the wait after it begins at the next news
    assert not y.news(200.0) and not y.news(204.0) and y.news(205.0)
    now = ap.Yielding(0.0)
    assert all(now.news(t) for t in (1.0, 1.0, 2.0))


def test_the_setting_is_seconds_zero_or_more():
    accepts, _ = FIELDS["live_yield_seconds"]
    assert accepts(0) and accepts(0.5) and accepts(5)
    assert not any(accepts(v) for v in (-1, float("inf"), float("nan"), "5", True))
    assert Config().live_yield_seconds == 5.0


class Seen:
    def __init__(self) -> None:
        self.messages = 0

    def add(self, out) -> None:
        self.messages += type(out) is Message

    def observe(self, *args) -> None:
        pass


def _follower(tmp_path, most: float):
    """A proxy's recording and the live analysis that follows it: (writer, analysis, recorder, what it
    saw, where the session's header ended)."""
    writer = RecordingWriter(tmp_path / "rec.jsonl", "http", {}, Redactor(b"k"), session="h")
    file, start = writer.reader()  # type: ignore[misc]
    seen = Seen()
    a = LiveAnalysis(writer.start, Config(live_yield_seconds=most), writer, None, None, notes=seen,
                     forwarder_records=True, follow=(file, None))
    return writer, a, HttpRecorder("h", writer.redactor), seen, start


def test_the_proxy_follower_looks_at_the_recording_itself_soon_while_it_grows(tmp_path):
    """No notice is sent while the proxy writes: `look` reads what is whole and asks to look again
    soon while the file grows, twice as late each time it did not, up to the most; before the
    proxy listens (no FOLLOW) and for the tee's follower it asks for nothing. (It works at once:
    live_yield_seconds 0; below, it waits for a pause.)"""
    writer, a, recorder, seen, start = _follower(tmp_path, 0)
    assert a.look() is None  # the proxy does not listen yet
    a.follow(0.0, start)
    assert a.look() == 2 * LOOK_AFTER[0] and seen.messages == 0  # nothing yet: later
    for step in _ping(1):
        writer.append(recorder.records(step))
    assert a.look() == LOOK_AFTER[0] and seen.messages == 2
    waits = [a.look() for _ in range(8)]
    assert waits[:4] == [LOOK_AFTER[0] * 2 ** n for n in range(1, 5)] and waits[-1] == LOOK_AFTER[1]

    tee = RecordingWriter(tmp_path / "tee.jsonl", "stdio", {}, session="s1")
    t = LiveAnalysis(tee.start, Config(), tee, None, None, forwarder_records=True, follow=tee.reader())
    assert t.look() is None


def test_the_proxy_follower_reads_at_a_pause_and_not_while_the_recording_grows(tmp_path):
    """While the file grew since the last look, the follower reads nothing and looks again QUIET
    later; a look that finds it as it was (a pause) reads all that is whole."""
    writer, a, recorder, seen, start = _follower(tmp_path, 60)
    a.follow(0.0, start)
    a.look()  # (the header: the first size it sees)
    for x in (1, 2, 3):
        for step in _ping(x):
            writer.append(recorder.records(step))
        assert a.look() == ap.QUIET and seen.messages == 0  # grown: the traffic flows, the analysis waits
    assert a.look() == LOOK_AFTER[0] and seen.messages == 6  # as it was: a pause, all of it read
    assert a.look() == 2 * LOOK_AFTER[0] and seen.messages == 6


def test_the_proxy_follower_with_zero_reads_as_soon_as_anything_is_written(tmp_path):
    writer, a, recorder, seen, start = _follower(tmp_path, 0)
    a.follow(0.0, start)
    for x in (1, 2):
        for step in _ping(x):
            writer.append(recorder.records(step))
        assert a.look() == LOOK_AFTER[0] and seen.messages == 2 * x


class Notices:
    """An analysis that keeps the offsets it is told the recording reached (`upto`), and when."""

    def __init__(self, most: float) -> None:
        self.yielding = ap.Yielding(most)
        self.upto_calls: list[int] = []
        self.acted = threading.Event()
        self.ended_after: list[int] | None = None

    def upto(self, t: float, offset: int) -> None:
        self.upto_calls.append(offset)
        self.acted.set()

    def end(self, info: dict, t: float, gone: bool = False) -> int:
        self.ended_after = list(self.upto_calls)
        return 0


def _send(w: int, *items: tuple[int, bytes]) -> None:
    os.write(w, b"".join(ap.HEAD.pack(kind, 0.0, len(data)) + data for kind, data in items))


def _upto(offset: int) -> tuple[int, bytes]:
    return ap.UPTO, ap.SKIPPED.pack(offset)


def _run(most: float):
    r, w = os.pipe()
    consumer = Notices(most)
    done: list[int] = []
    main = threading.Thread(target=lambda: done.append(ap.analysis_main(r, lambda: consumer)))
    main.start()
    return w, consumer, main, done


def test_the_tee_follower_acts_on_the_last_notice_at_a_pause():
    """Notices while the traffic flows wait (the latest one counts); at a pause (no notice for QUIET)
    the analysis reads to the latest; END acts on one still waiting first. Its most (60 s) is far
    from reached: what made it act is the pause."""
    w, consumer, main, done = _run(60.0)
    _send(w, _upto(100), _upto(200), _upto(300))
    assert consumer.acted.wait(30)  # the pause after them (no more notices)
    assert consumer.upto_calls[-1] == 300 and consumer.upto_calls == sorted(set(consumer.upto_calls))
    _send(w, _upto(400), (ap.END, b"{}"))
    main.join(30)
    os.close(w)
    assert done == [0] and consumer.ended_after is not None and consumer.ended_after[-1] == 400


def test_the_tee_follower_with_zero_acts_on_every_notice():
    w, consumer, main, done = _run(0.0)
    _send(w, _upto(100), _upto(200), _upto(300), (ap.END, b"{}"))
    main.join(30)
    os.close(w)
    assert done == [0] and consumer.ended_after == [100, 200, 300]
