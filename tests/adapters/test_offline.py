"""Several recordings in one `check`: a session id met again in a later input is another session."""

from __future__ import annotations

from pathlib import Path

from mrtr_inspect.adapters.offline import analyze_all, frames_of
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.recording.reader import ReadNotes
from tests.traffic import ACCEPT, ELICIT, Traffic


def _clean(session: str, transport: str = "stdio") -> list:
    """One complete two-round chain, nothing wrong in it."""
    t = Traffic(transport, session=session)
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="st-1")
    t.tick(0.5)
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="st-1")
    t.result(b, {"content": []})
    return t.frames


def _save(frames: list, path: Path) -> str:
    path.write_bytes(b"".join(fmt.encode(f) for f in frames))
    return str(path)


def _report(paths: list[str]) -> tuple[dict, dict[str, ReadNotes]]:
    builder = ReportBuilder(paths)
    notes: dict[str, ReadNotes] = {}
    analyze_all(paths, builder.add_all, None, notes)
    return builder.to_dict(), notes


def _serious(report: dict) -> list:
    return [f for f in report["findings"] if f["severity"] != "info"]


def test_a_copy_beside_its_recording_is_a_session_of_its_own(tmp_path):
    one = _save(_clean("s1"), tmp_path / "a.jsonl")
    two = _save(_clean("s1"), tmp_path / "b.jsonl")
    alone, _ = _report([one])
    assert alone["summary"]["chains"] == 1 and not _serious(alone)
    both, notes = _report([one, two])
    # taken for one session, the second file's retry reused ids and replayed the first's state
    assert both["summary"]["chains"] == 2
    assert [c["outcome"] for c in both["chains"]] == ["complete", "complete"]
    assert not _serious(both), both["findings"]
    assert notes[one].renamed == [] and notes[two].renamed == [("s1", "s1~2")]
    assert "session s1 is also in an earlier input; analysed apart, as s1~2" in notes[two].lines(two)[0]


def test_http_frames_are_renamed_too(tmp_path):
    one = _save(_clean("h1", "http"), tmp_path / "a.jsonl")
    two = _save(_clean("h1", "http"), tmp_path / "b.jsonl")
    both, _ = _report([one, two])
    assert both["summary"]["chains"] == 2
    assert not _serious(both), both["findings"]
    sessions = {getattr(f, "session", None) for f in frames_of([one, two])}
    assert sessions == {"h1", "h1~2"}


def test_near_miss_distinct_sessions_are_left_as_they_are(tmp_path):
    one = _save(_clean("s1"), tmp_path / "a.jsonl")
    two = _save(_clean("s2"), tmp_path / "b.jsonl")
    both, notes = _report([one, two])
    assert both["summary"]["chains"] == 2 and not _serious(both)
    assert notes[one].renamed == notes[two].renamed == []
    assert {f[1] if type(f) is tuple else f.session for f in frames_of([one, two], lines_as_tuples=True)} == {"s1", "s2"}


def test_sessions_within_one_input_are_not_renamed(tmp_path):
    """Two sessions of one file keep their ids, even when a later file repeats only one of them."""
    one = _save(_clean("s1") + _clean("s2"), tmp_path / "a.jsonl")
    two = _save(_clean("s2"), tmp_path / "b.jsonl")
    got = [f[1] if type(f) is tuple else f.session for f in frames_of([one, two], lines_as_tuples=True)]
    assert got[: len(got) * 2 // 3] and set(got) == {"s1", "s2", "s2~2"}
    assert got.count("s2~2") == len(_clean("s2"))


def test_the_collector_runs_less_often_during_the_analysis_and_as_before_after(tmp_path):
    import gc
    import threading

    from mrtr_inspect.adapters.offline import YOUNG_THRESHOLD, fewer_collections

    path = _save(_clean("s1"), tmp_path / "a.jsonl")
    before = gc.get_threshold()
    seen = []
    analyze_all([path], lambda outs: seen.append(gc.get_threshold()))
    assert seen and all(t[0] == YOUNG_THRESHOLD and t[1:] == before[1:] for t in seen)
    assert gc.get_threshold() == before
    # overlapping analyses (two threads): the threshold comes back when the last one ends, not before
    first_in, leave = threading.Event(), threading.Event()

    def first() -> None:
        with fewer_collections():
            first_in.set()
            leave.wait(10)

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(10)
    with fewer_collections():
        pass
    during = gc.get_threshold()
    leave.set()
    t.join(10)
    assert during[0] == YOUNG_THRESHOLD and gc.get_threshold() == before
    # a collector the program switched off (threshold 0) or set higher is left as it is
    gc.set_threshold(0)
    try:
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


def test_a_report_gets_the_same_outputs_without_the_chain_events_it_does_not_read(tmp_path):
    """`chain_events=False` (what `check` analyses with): the outputs are those of the full run less
    the chain events other than `closed`, the closed ones and the findings unchanged."""
    from mrtr_inspect.core.inspector import ChainEvent
    from mrtr_inspect.core.findings import Finding

    paths = [_save(_clean("s1"), tmp_path / "a.jsonl"), _save(_clean("h1", "http"), tmp_path / "b.jsonl")]

    def outputs(**kw) -> list:
        got: list = []
        analyze_all(paths, got.extend, **kw)
        return [(type(o).__name__, o.kind, o.chain.id, o.time) if type(o) is ChainEvent
                else ("Finding", o.to_json()) if type(o) is Finding else (type(o).__name__, getattr(o, "index", None))
                for o in got]

    every, report = outputs(), outputs(chain_events=False)
    kinds = {o[1] for o in every if o[0] == "ChainEvent"}
    assert kinds == {"opened", "retry", "round", "closed"}  # (so the filter below has something to leave out)
    assert report == [o for o in every if o[0] != "ChainEvent" or o[1] == "closed"]
    assert sum(o[0] == "ChainEvent" for o in report) == 2
