"""`import PATH --output PATH`: a HAR file or a mitmproxy flow file into a recording.

    import_file("session.har", "session.jsonl")     # HAR 1.2 (.har, or zlib-compressed .zhar)
    import_file("flows", "session.jsonl")           # as written by `mitmdump -w flows`

The file is read into exchanges, each into the frames the proxy records for it, by flows.py (what
the times, bodies and left-out exchanges become is said there). Frames are written in time order,
through the recording writer: redacted as a live recording is, appended as a new session. A HAR's
pages become sessions (an export of a recording with several sessions imports as those sessions); a
HAR without pages, or a flow file, is one session.
"""

from __future__ import annotations

import os
from typing import Any

from ..config import Config
from ..recording.files import named
from ..recording.writer import RecordingError, RecordingWriter, redactor_for
from .flows import Exchange, ImportFailed, frames, read_exchanges

__all__ = ["ImportFailed", "import_file"]


def import_file(path: str, output: str, config: Config | None = None, written: Any = None) -> list[str]:
    """Write the exchanges of `path` to the recording `output`, redacted as a live recording is
    (`redactor_for(config)`); returns the lines to tell the user. `written`: an
    outputs.progress.Tally counting the exchanges written (for the progress bar)."""
    try:
        kind, exchanges, notes, left_out = read_exchanges(path)
    except ImportFailed as e:
        raise ImportFailed(f"{path}: {e}") from None
    if not exchanges:
        raise ImportFailed(f"{path}: no HTTP exchange to import" + "".join(f" ({n})" for n in notes))
    groups: dict[str, list[Exchange]] = {}
    for ex in sorted(exchanges, key=lambda e: e.t_request):
        groups.setdefault(ex.group, []).append(ex)
    sessions = 0
    for group in groups.values():
        info = {"upstream": group[0].url, "imported": {"from": os.path.basename(path), "format": kind}}
        if left_out:  # the capture has holes: the analysis must not take what fell in one for never sent
            info["imported"]["left_out"] = left_out
        try:
            writer = RecordingWriter(output, "http", info, redactor_for(config), start_time=group[0].t_request)
        except RecordingError as e:
            raise ImportFailed(str(e)) from None
        timed = []
        for x, ex in enumerate(group, 1):
            for k, fr in enumerate(frames(writer.session, x, ex)):
                timed.append((fr.time, x, k, fr))
        timed.sort(key=lambda item: item[:3])
        with writer:
            for *_, fr in timed:
                writer.write(fr)
            if written is not None:
                written.n += len(group)
            writer.close(end_time=max(t for t, *_ in timed))
        sessions += 1
    return notes + [f"wrote {named(output)}: {len(exchanges)} exchange{'s' if len(exchanges) != 1 else ''} from the "
                    f"{kind} in {sessions} session{'s' if sessions != 1 else ''}"]
