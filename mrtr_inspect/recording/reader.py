"""Reading recordings back into frames, streaming (memory does not grow with the file).

A torn last line (the writer was killed mid-write) is skipped with a note; so is any other line
that does not decode, so one damaged record does not hide the rest. A file that does not start
with a recording header, or whose version this reader does not know, is refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterator

from ..core.events import Direction, Frame, SessionStart, StdioLine
from ..core.framing import MAX_MESSAGE_BYTES
from ..errors import UserError
from . import format as fmt

# A stdio line record exactly as the writer writes it (format.encode: compact JSON, these members in
# this order, a plain session id, a JSON number for the time), up to its TAB. Such a record is read
# without parsing its JSON; any other line takes format.decode.
_LINE_RECORD = re.compile(
    rb'\{"t":(-?(?:0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?),"s":"([\x20\x21\x23-\x5b\x5d-\x7e]{0,64})",'
    rb'"k":"line","d":"(c2s|s2c)"\}\t')
_DIRECTIONS = {d.value.encode(): d.value for d in Direction}  # the plain strings format.decode gives


class UnreadableRecording(UserError):
    """The file cannot be read as a recording (one-line reason)."""


@dataclass
class ReadNotes:
    torn_tail: bool = False
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    sessions: int = 0
    frames: int = 0
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (session id, as analysed): see adapters/offline.py

    def lines(self, path: str) -> list[str]:
        out = []
        if self.torn_tail:
            out.append(f"{path}: the last line was torn (the recorder stopped mid-write); it was skipped")
        for n, why in self.skipped[:5]:
            out.append(f"{path}:{n}: skipped a record that does not decode: {why}")
        if len(self.skipped) > 5:
            out.append(f"{path}: … and {len(self.skipped) - 5} more")
        for sid, alias in self.renamed:
            out.append(f"{path}: session {sid} is also in an earlier input; analysed apart, as {alias}")
        return out


#: bytes of a record beyond its payload's that a long record is read with (its JSON head)
HEAD_ROOM = 64 * 1024


def _long_record(head: bytes, rest: int) -> Frame | None:
    """The frame of a record too long to hold, from its first bytes (`head`) and the count of the
    others (`rest`, its LF included): a stdio line without its bytes (`cut`: their count, about
    for a line kept in base64 or as text); None for another kind (the reader skips it, said)."""
    tab = head.find(b"\t")
    if tab >= 0:
        rec, size = head[:tab], len(head) - tab - 1 + rest - 1
    else:
        for member, ratio in ((b',"b64":"', 0.75), (b',"text":"', 1.0)):
            i = head.find(member)
            if i >= 0:
                rec, size = head[:i] + b"}", int((len(head) - i - len(member) + rest - 3) * ratio)
                break
        else:
            return None
    frame = fmt.decode(rec)
    if type(frame) is not StdioLine:
        return None
    return StdioLine(frame.time, frame.session, frame.direction, b"", frame.eol, cut=max(size, 1))


def _rest(f) -> tuple[int, bool]:
    """Read the rest of a line a piece at a time, keeping nothing: (its length, whether an LF ends it)."""
    rest = 0
    while piece := f.readline(1 << 20):
        rest += len(piece)
        if piece.endswith(b"\n"):
            return rest, True
    return rest, False


def read_frames(path: str | os.PathLike, notes: ReadNotes | None = None, lines_as_tuples: bool = False,
                limit: int | None = MAX_MESSAGE_BYTES) -> Iterator:
    """Yield the frames of a recording in file order.

    With `lines_as_tuples`, a stdio line record of the common form (a complete line, no `eol`
    member) comes as the tuple (time, session, direction, data) of its StdioLine, without the frame
    object (`Inspector.feed_line` takes it). A record longer than `limit` (and its head) is not
    held: a stdio line comes without its bytes (`StdioLine.cut`, which the analysis reports as
    `message-too-large`), another record is skipped, said in `notes`."""
    notes = notes if notes is not None else ReadNotes()
    match = _LINE_RECORD.match
    directions = _DIRECTIONS
    sessions: dict[bytes, str] = {}
    try:
        f = open(path, "rb")
    except OSError as e:
        raise UnreadableRecording(f"{path}: {e.strerror}") from None
    decode = fmt.decode
    with f:
        first = f.readline()
        if not first:
            raise UnreadableRecording(f"{path}: empty file, not a recording")
        if not first.endswith(b"\n") and fmt.is_torn_header(first):  # stopped while writing its first line
            notes.torn_tail = True
            return
        n = 1
        if first.endswith(fmt.TORN + b"\n") and fmt.is_torn_header(first[:-2]):  # ...then appended to
            notes.skipped.append((1, "a session header cut short (the recorder stopped while writing it)"))
            first, n = f.readline(), 2
            if not first:
                return
        if not fmt.is_header(first):
            raise UnreadableRecording(f"{path}: not an mrtr-inspect recording (no recording header on the first line)")
        try:
            frame = decode(first)
        except fmt.FormatError as e:
            raise UnreadableRecording(f"{path}: {e}") from None
        notes.sessions += 1
        notes.frames += 1
        yield frame
        readline, cap = f.readline, limit + HEAD_ROOM if limit is not None else -1
        while line := readline(cap):
            n += 1
            if not line.endswith(b"\n"):
                rest, ended = _rest(f) if len(line) == cap else (0, False)
                if not ended:  # the writer was stopped mid-line: even if it decodes, it is cut
                    notes.torn_tail = True
                    continue
                try:
                    frame = _long_record(line, rest)
                except fmt.FormatError as e:
                    frame, why = None, str(e)
                else:
                    why = f"a record of {len(line) + rest} bytes, past max_message_bytes, not read"
                if frame is None:
                    notes.skipped.append((n, why))
                    continue
                notes.frames += 1
                yield frame
                continue
            m = match(line)
            if m is not None and not line.endswith(b"\xff\n"):  # (a torn line ends with 0xFF: format.decode says so)
                t, fraction, sid, d = m.groups()
                session = sessions.get(sid)
                if session is None:
                    if len(sessions) > 1024:
                        sessions.clear()
                    session = sessions[sid] = sid.decode("ascii")
                item = (float(t) if fraction else int(t), session, directions[d], line[m.end():-1])
                notes.frames += 1
                yield item if lines_as_tuples else StdioLine(*item)
                continue
            try:
                frame = decode(line)
            except fmt.FormatError as e:
                if "version" in str(e):
                    raise UnreadableRecording(f"{path}:{n}: {e}") from None
                notes.skipped.append((n, str(e)))
                continue
            notes.frames += 1
            if type(frame) is SessionStart:
                notes.sessions += 1
            yield frame


def check_readable(path: str | os.PathLike) -> None:
    """Raise UnreadableRecording unless the file starts like a recording this reader knows."""
    it = read_frames(path)
    try:
        next(it)
    except StopIteration:  # nothing in it yet (a torn header)
        pass
    finally:
        it.close()


class Follower:
    """A recording read as it grows (`ui --follow`: a tee or a proxy appends to it): each `poll()`
    yields what was appended since the last one, as (offset, length, item) with the byte offset and
    length of the record's line, the item a line tuple (`read_frames(lines_as_tuples=True)`) or a
    frame. A line not yet ended (the writer is in the middle of it) waits for the next poll. An empty
    file waits for its header; a first line that is not one raises UnreadableRecording.

    `file` and `start`: a file already open, read from the offset `start` on, where a session's
    header ended (the tee's analysis process follows its own session: live_inputs.RecordedInput)."""

    def __init__(self, path: str | os.PathLike, limit: int | None = MAX_MESSAGE_BYTES, *, file=None,
                 start: int = 0) -> None:
        self.path = path
        self.notes = ReadNotes()
        self.pos = start
        self._cap = limit + HEAD_ROOM if limit is not None else -1
        self._sessions: dict[bytes, str] = {}
        self._line = 0
        self._want_header = not start
        if file is not None:
            self._f = file
            return
        try:
            self._f = open(path, "rb")
        except OSError as e:
            raise UnreadableRecording(f"{path}: {e.strerror}") from None

    def close(self) -> None:
        self._f.close()

    def size(self) -> int:
        """The file's size now (how far the writer's appends reached), -1 if it cannot be told."""
        try:
            return os.fstat(self._f.fileno()).st_size
        except (OSError, ValueError):
            return -1

    def poll(self) -> Iterator[tuple[int, int, object]]:
        f, cap = self._f, self._cap
        f.seek(self.pos)
        while line := f.readline(cap):
            start, size = self.pos, len(line)
            if not line.endswith(b"\n"):
                if size != cap:
                    return  # the writer is in the middle of this line
                rest, ended = _rest(f)
                if not ended:
                    return
                self.pos += size + rest
                self._line += 1
                try:
                    frame = _long_record(line, rest)
                except fmt.FormatError:
                    frame = None
                if frame is None:
                    self.notes.skipped.append((self._line, f"a record of {size + rest} bytes, not read"))
                else:
                    yield start, size + rest, frame
                f.seek(self.pos)
                continue
            self.pos += size
            self._line += 1
            item = self._item(line)
            if item is not None:
                self.notes.frames += 1
                yield start, size, item

    def _item(self, line: bytes) -> object | None:
        if self._want_header:
            if line.endswith(fmt.TORN + b"\n") and fmt.is_torn_header(line[:-2]):
                self.notes.skipped.append((self._line, "a session header cut short (the recorder stopped while "
                                                       "writing it)"))
                return None
            self._want_header = False
            if not fmt.is_header(line):
                raise UnreadableRecording(f"{self.path}: not an mrtr-inspect recording (no recording header on "
                                          "the first line)")
        m = _LINE_RECORD.match(line)
        if m is not None and not line.endswith(b"\xff\n"):
            t, fraction, sid, d = m.groups()
            session = self._sessions.get(sid)
            if session is None:
                if len(self._sessions) > 1024:
                    self._sessions.clear()
                session = self._sessions[sid] = sid.decode("ascii")
            return (float(t) if fraction else int(t), session, _DIRECTIONS[d], line[m.end():-1])
        try:
            frame = fmt.decode(line)
        except fmt.FormatError as e:
            if "version" in str(e):
                raise UnreadableRecording(f"{self.path}:{self._line}: {e}") from None
            self.notes.skipped.append((self._line, str(e)))
            return None
        if type(frame) is SessionStart:
            self.notes.sessions += 1
        return frame

    def record(self, offset: int, length: int) -> bytes:
        """The line of a record `poll` yielded (for the raw bytes of a message)."""
        return os.pread(self._f.fileno(), length, offset)
