"""The recording adapter: a recording's frames fed to the core, the same path a live session takes."""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from ..config import Config
from ..core.inspector import Inspector
from ..recording.reader import ReadNotes, read_frames


def replay_outputs(paths: Iterable[str], config: Config | None = None,
                   notes: dict[str, ReadNotes] | None = None) -> Iterator:
    """All outputs (messages, chain events, findings) of the recordings, in order, as one capture."""
    insp = Inspector(config)
    for path in paths:
        n = ReadNotes()
        if notes is not None:
            notes[str(path)] = n
        feed = insp.feed
        for frame in read_frames(path, n):
            yield from feed(frame)
    yield from insp.close()


def analyze(paths: Iterable[str], sink: Callable, config: Config | None = None,
            notes: dict[str, ReadNotes] | None = None) -> None:
    for out in replay_outputs(paths, config, notes):
        sink(out)


def analyze_all(paths: Iterable[str], sink_all: Callable[[list], None], config: Config | None = None,
                notes: dict[str, ReadNotes] | None = None) -> None:
    """`analyze`, the outputs of each frame handed over as one list (the `check` path: stdio line
    records are fed without frame objects)."""
    insp = Inspector(config)
    for path in paths:
        n = ReadNotes()
        if notes is not None:
            notes[str(path)] = n
        feed, feed_line = insp.feed, insp.feed_line
        for item in read_frames(path, n, lines_as_tuples=True):
            outs = feed_line(*item) if type(item) is tuple else feed(item)
            if outs:
                sink_all(outs)
    sink_all(insp.close())
