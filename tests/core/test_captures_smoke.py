"""Every real capture decodes and stitches; the clean ones give no error finding; recorded and read
back, each gives exactly what it gave live."""

import pytest

from mrtr_inspect.adapters.offline import analyze_all, replay_outputs
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from mrtr_inspect.recording.reader import ReadNotes, read_frames
from mrtr_inspect.recording.writer import RecordingWriter
from tests.captures import capture_frames, capture_names
from tests.core.pipeline import Outputs, analyse, digest

NAMES = capture_names()


@pytest.mark.skipif(not NAMES, reason="shared/captures not present")
@pytest.mark.parametrize("name", NAMES)
def test_capture_decodes_and_stitches(name):
    outs = analyse(capture_frames(name))
    msgs = [o for o in outs if type(o) is Message]
    assert msgs and all(m.kind != "invalid" for m in msgs), [m.problem for m in msgs if m.kind == "invalid"]
    chains = [o.chain for o in outs if type(o) is ChainEvent and o.kind == "closed"]
    tool_calls = [m for m in msgs if m.kind == "request" and m.method == "tools/call"]
    if "legacy" not in name:
        assert chains, name
        assert sum(len(c.requests) for c in chains) == len(tool_calls)
    inspector_errors = [o for o in outs if type(o) is Finding and o.rule == "inspector-error"]
    assert not inspector_errors, inspector_errors


@pytest.mark.skipif(not NAMES, reason="shared/captures not present")
@pytest.mark.parametrize("name", NAMES)
def test_a_recorded_capture_reads_back_to_the_same_analysis(name, tmp_path):
    frames = capture_frames(name)
    start, *middle, end = frames
    path = tmp_path / "rec.jsonl"
    writer = RecordingWriter(path, start.transport, dict(start.info), session=start.session, start_time=start.time)
    writer.write_many(middle)  # redacted by default, as a user's recording is
    writer.close(dict(end.info), end_time=end.time)
    notes = ReadNotes()
    back = list(read_frames(path, notes))
    assert notes.skipped == [] and not notes.torn_tail and notes.frames == len(frames)
    assert digest(analyse(back)) == digest(analyse(frames))
    # the check path (line records fed without frames, outputs handed over per frame) gives the same
    got, want = Outputs(), Outputs()
    analyze_all([path], got.extend, observe=got.observe)
    want.extend(replay_outputs([path], observe=want.observe))
    assert digest(got) == digest(want)
