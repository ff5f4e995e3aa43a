"""Reading recordings back into frames, streaming (memory does not grow with the file).

A torn last line (the writer was killed mid-write) is skipped with a note; so is any other line
that does not decode, so one damaged record does not hide the rest. A file that does not start
with a recording header, or whose version this reader does not know, is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

from ..core.events import Frame
from . import format as fmt


class UnreadableRecording(Exception):
    """The file cannot be read as a recording (one-line reason)."""


@dataclass
class ReadNotes:
    torn_tail: bool = False
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    sessions: int = 0
    frames: int = 0

    def lines(self, path: str) -> list[str]:
        out = []
        if self.torn_tail:
            out.append(f"{path}: the last line was torn (the recorder stopped mid-write); it was skipped")
        for n, why in self.skipped[:5]:
            out.append(f"{path}:{n}: skipped a record that does not decode: {why}")
        if len(self.skipped) > 5:
            out.append(f"{path}: … and {len(self.skipped) - 5} more")
        return out


def read_frames(path: str | os.PathLike, notes: ReadNotes | None = None) -> Iterator[Frame]:
    """Yield the frames of a recording in file order."""
    notes = notes if notes is not None else ReadNotes()
    try:
        f = open(path, "rb")
    except OSError as e:
        raise UnreadableRecording(f"{path}: {e.strerror}") from None
    decode = fmt.decode
    with f:
        first = f.readline()
        if not first:
            raise UnreadableRecording(f"{path}: empty file, not a recording")
        if not fmt.is_header(first):
            raise UnreadableRecording(f"{path}: not an mrtr-inspect recording (no recording header on the first line)")
        try:
            frame = decode(first)
        except fmt.FormatError as e:
            raise UnreadableRecording(f"{path}: {e}") from None
        notes.sessions += 1
        notes.frames += 1
        yield frame
        n = 1
        for line in f:
            n += 1
            if not line.endswith(b"\n"):  # the writer was stopped mid-line: even if it decodes, it is cut
                notes.torn_tail = True
                continue
            try:
                frame = decode(line)
            except fmt.FormatError as e:
                if "version" in str(e):
                    raise UnreadableRecording(f"{path}:{n}: {e}") from None
                notes.skipped.append((n, str(e)))
                continue
            notes.frames += 1
            if type(frame).__name__ == "SessionStart":
                notes.sessions += 1
            yield frame


def check_readable(path: str | os.PathLike) -> None:
    """Raise UnreadableRecording unless the file starts like a recording this reader knows."""
    it = read_frames(path)
    try:
        next(it)
    except StopIteration:  # pragma: no cover
        pass
    finally:
        it.close()
