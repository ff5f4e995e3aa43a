"""The offline runner: a recording's frames fed to the core, the same path a live session takes (`check`,
`show`; the `recording/` package reads and writes the files).

Several recordings are analysed as one capture, in the order given. A session id met again in a
later input names a session of its own there (a recording beside a copy of it, or beside a fixture
exported from it, which keeps its session ids): it is analysed apart, as `ID~N` with N the input's
number (from 1), and a note says so. Without this, the two would be taken for one session that sent
every request twice.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from ..analysis import Analysis
from ..config import Config
from ..core.framing import MAX_MESSAGE_BYTES
from ..recording.reader import ReadNotes, read_frames


def frames_of(paths: Iterable[str], notes: dict[str, ReadNotes] | None = None,
              lines_as_tuples: bool = False, limit: int | None = MAX_MESSAGE_BYTES) -> Iterator:
    """The frames (or line tuples, see `read_frames`) of the recordings in order, a session id that
    an earlier input used renamed in each later one. One input is its reader itself (nothing to
    rename: no generator in between, one step less per record)."""
    paths = list(paths)
    if len(paths) == 1:
        n = ReadNotes()
        if notes is not None:
            notes[str(paths[0])] = n
        return read_frames(paths[0], n, lines_as_tuples, limit)
    return _renamed(paths, notes, lines_as_tuples, limit)


def _renamed(paths: list, notes: dict[str, ReadNotes] | None, lines_as_tuples: bool, limit: int | None) -> Iterator:
    earlier: set[str] = set()  # the session ids of the inputs read so far
    for number, path in enumerate(paths, 1):
        n = ReadNotes()
        if notes is not None:
            notes[str(path)] = n
        items = read_frames(path, n, lines_as_tuples, limit)
        here: set[str] = set()
        renamed: dict[str, str] = {}
        for item in items:
            sid = item[1] if type(item) is tuple else item.session
            if sid not in here:
                here.add(sid)
                if sid in earlier:
                    alias = f"{sid}~{number}"
                    renamed[sid] = alias
                    n.renamed.append((sid, alias))
            alias = renamed.get(sid) if renamed else None
            if alias is None:
                yield item
            elif type(item) is tuple:
                yield (item[0], alias) + item[2:]
            else:
                yield dataclasses.replace(item, session=alias)
        earlier |= here


#: the collector's first threshold while a recording is analysed (Python's default: 2,000)
YOUNG_THRESHOLD = 50_000
_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple | None = None


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The garbage collector's youngest generation collected after 50,000 more container objects
    than were freed, not 2,000, while a recording is analysed (restored after, the last of several
    threads restoring it). The analysis makes almost no cycles (a closed chain is freed by reference
    counting, core/retired.py), but Python counts allocations less frees: once the state index is
    full, its new entries sit in the youngest generation while the old ones it forgets are freed, so
    the count hovers while that generation grows, and each collection the hovering set off walked
    tens of thousands of live objects to free none. The cycles that do form are still collected,
    at most 50,000 objects late."""
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            if _gc_saved[0] and _gc_saved[0] < YOUNG_THRESHOLD:  # (0: collection is off; a higher one is kept)
                gc.set_threshold(YOUNG_THRESHOLD, *_gc_saved[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_saved is not None:
                gc.set_threshold(*_gc_saved)


def replay_outputs(paths: Iterable[str], config: Config | None = None,
                   notes: dict[str, ReadNotes] | None = None, observe: Callable | None = None) -> Iterator:
    """All outputs (messages, chain events, findings) of the recordings, in order, as one capture
    (`observe`: see `Analysis`)."""
    insp = Analysis(config, observe)
    feed = insp.feed
    for frame in frames_of(paths, notes, limit=insp.config.max_message_bytes):
        yield from feed(frame)
    yield from insp.close()


def analyze(paths: Iterable[str], sink: Callable, config: Config | None = None,
            notes: dict[str, ReadNotes] | None = None) -> None:
    for out in replay_outputs(paths, config, notes):
        sink(out)


def analyze_all(paths: Iterable[str], sink_all: Callable[[list], None], config: Config | None = None,
                notes: dict[str, ReadNotes] | None = None, observe: Callable | None = None,
                chain_events: bool = True) -> None:
    """`analyze`, the outputs of each frame handed over as one list (the `check` path: stdio line
    records are fed without frame objects), with fewer collections (`fewer_collections`).
    `chain_events=False`: a sink that reads chains only once they close (a report) gets no other
    chain events (`Inspector`)."""
    with fewer_collections():
        _analyze_all(paths, sink_all, config, notes, observe, chain_events)


def _analyze_all(paths: Iterable[str], sink_all: Callable[[list], None], config: Config | None,
                 notes: dict[str, ReadNotes] | None, observe: Callable | None, chain_events: bool) -> None:
    insp = Analysis(config, observe, chain_events)
    items = frames_of(paths, notes, lines_as_tuples=True, limit=insp.config.max_message_bytes)
    feed = insp.feed
    if observe is not None:
        feed_line = insp.feed_line
        for item in items:
            outs = feed_line(*item) if type(item) is tuple else feed(item)
            if outs:
                sink_all(outs)
    else:  # `Analysis.feed_line` without the call: the inspector, then the rules on what it observed
        step_line, judge = insp.inspector.step_line, insp.engine.judge
        for item in items:
            if type(item) is tuple:
                # the fields by name, not `*item`: a call of known arguments is specialised (and runs in
                # the same interpreter loop), one with `*` is not
                t, session, direction, data = item
                outs, observed = step_line(t, session, direction, data)
                if observed:
                    outs += judge(observed, t)
            else:
                outs = feed(item)
            if outs:
                sink_all(outs)
    sink_all(insp.close())
