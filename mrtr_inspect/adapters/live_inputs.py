"""What a live session's analysis is handed, turned into frames (live_analysis.LiveAnalysis picks one):
`StdioInput` splits the tee's chunks into lines; `RecordedInput` reads the tee's session back from its
recording as the tee writes it; `HttpInput` decodes the proxy's records or frames steps itself;
`RecordedHttpInput` reads the proxy's session back from its recording as the proxy writes it."""

from __future__ import annotations

import os
from typing import Callable, Iterator

from ..core.events import (CAPTURE_ENDED, Direction, HttpBody, HttpEnd, HttpRequest, SessionEnd, SessionStart, SseEvent,
                           StdioLine)
from ..core.framing import StdioFramer
from ..recording.format import FormatError, decode
from ..recording.reader import Follower
from .flows import FlowFramer


def _appended(follower: Follower, upto: int, final: bool) -> Iterator[tuple[int, int, object]]:
    """(offset, end, item) of each record appended since the follower's last poll, `end` the file's
    size (looked at again every 1,024 records: how far behind the record is); `final`: nothing from
    `upto` on."""
    fd = follower._f.fileno()
    end = max(upto, os.fstat(fd).st_size)
    n = 0
    for offset, _, item in follower.poll():
        if final and offset >= upto:
            return
        n += 1
        if not n & 1023:
            end = max(end, os.fstat(fd).st_size)
        yield offset, end, item


class _Skipping:
    """A follower's skipping ahead: past `backlog` bytes behind the file's end it skips, until it is
    back to half; `began()` as a stretch begins."""

    backlog: int
    began: Callable[[], None]
    skipping = False

    def behind_by(self, n: int) -> bool:
        """Whether to skip, `n` bytes behind."""
        if self.skipping:
            if n <= self.backlog // 2:
                self.skipping = False
        elif n > self.backlog:
            self.skipping = True
            self.began()
        return self.skipping


class StdioInput:
    """The tee's chunks of both pipes, split into lines (`StdioFramer`; a line past the limit is cut,
    not held)."""

    redacted = False  # the analysis redacts its frames
    follows = False  # it reads no recording (`RecordedInput`, `RecordedHttpInput` do)

    def __init__(self, session: str, limit: int | None) -> None:
        self.framer = StdioFramer(session, limit)

    def chunk(self, t: float, direction: str, data: bytes) -> list:
        return self.framer.data(t, direction, data)  # type: ignore[arg-type]

    def skip(self, direction: str, n: int) -> None:
        """`n` bytes of a line past the limit the tee counted and did not send (stdio_tee.Tap)."""
        self.framer.skip(direction, n)  # type: ignore[arg-type]

    def eof(self, t: float, direction: str) -> list:
        return self.framer.close(t, direction)  # type: ignore[arg-type]

    def rest(self, t: float) -> list:
        """The lines the streams ended in: no end of file, so no close frame."""
        return [f for d in Direction for f in self.framer.close(t, d) if type(f) is StdioLine]  # type: ignore[arg-type]


class RecordedInput(_Skipping, StdioInput):
    """The tee's session read back from its recording as the forwarding threads write it (`items`),
    the records decoded as `check` decodes them (`reader.Follower`: whole lines only, a line not yet
    ended waits), so the live analysis is `check`'s of the recording by construction. The tee hands
    over no copy of the bytes, only a notice of how far the writes reached (`upto`).

    Behind by more than `max_backlog_bytes` of the file, it skips ahead: the message records of its
    session it reads, until it is back to half, are counted (`skipped`), not analysed; the other
    records (a stream's close) still are. Records of other sessions (another writer appending to the
    same file) are not its. If the recording stops (it cannot be written), the tee hands chunks
    again (`StdioInput`)."""

    follows = True

    def __init__(self, session: str, limit: int | None, file, start: int, backlog: int,
                 began: Callable[[], None]) -> None:
        super().__init__(session, limit)
        self.session = session
        self.follower = Follower(getattr(file, "name", "recording"), limit, file=file, start=start)
        self.backlog = backlog
        self.began = began  # called as a stretch of skipping begins
        self.skipping = False
        self.skipped = 0
        self.stopped = False  # the recording stopped (the tee hands chunks since: `StdioInput`)
        self.last = start  # the highest offset the tee said its writes reached

    def items(self, upto: int, final: bool = False) -> Iterator:
        """The frames (line tuples, or frames) of the session's records appended since the last call,
        in file order; `final`: the tee's last notice, `upto` its end (nothing after it is the session's)."""
        self.last = max(self.last, upto)
        session = self.session
        for offset, end, item in _appended(self.follower, upto, final):
            if type(item) is tuple:
                if item[1] != session:
                    continue
                line = True
            else:
                if item.session != session or type(item) is SessionEnd:  # (`end` feeds its own)
                    continue
                line = type(item) is StdioLine
            if self.behind_by(end - offset) and line:
                self.skipped += 1
                continue
            yield item


class HttpInput:
    """The proxy's (and the addon's) frames: `chunk` has the records the forwarding process appended to
    the recording (`HttpRecorder.records`, redacted there); `step(name, args)` is a step framed here
    (`name` one of the framer's methods: `request_head` … `response_end`, or `exchange`: a whole
    exchange read from a file). The proxy's `eof` means it is ready (`ready`)."""

    redacted = True  # what `chunk` gives was redacted where it was recorded
    follows = False

    def __init__(self, session: str, limit: int | None, ready: Callable[[], None]) -> None:
        self.framer = FlowFramer(session, limit)
        self.ready = ready

    def chunk(self, t: float, direction: str, data: bytes) -> list:
        return [decode(line) for line in data.split(b"\n")[:-1]]

    def skip(self, direction: str, n: int) -> None:  # pragma: no cover - the proxy sends no CUT item
        pass

    def eof(self, t: float, direction: str) -> list:
        """The proxy says it is ready (its ready line is out, the recording's header written)."""
        self.ready()
        return []

    def step(self, name: str, args: tuple) -> list:
        return getattr(self.framer, name)(*args)

    def rest(self, t: float) -> list:
        """The exchanges still open (of the steps framed here) end with the capture."""
        return [f for x in self.framer.open_exchanges() for f in self.framer.response_end(t, x, CAPTURE_ENDED)]


class _HttpFollower(Follower):
    """A `Follower` of the proxy's session, whose records are HTTP records: each decoded as `check`
    decodes one (`format.decode`) without first being tried as a stdio line record (one of another
    writer's session decodes to a `StdioLine` of that session, which is not read)."""

    def _item(self, line: bytes) -> object | None:
        try:
            return decode(line)
        except FormatError:  # a torn or unreadable line: the reader notes why, as for `check`
            return super()._item(line)


class RecordedHttpInput(_Skipping, HttpInput):
    """The proxy's session read back from its recording as mitmproxy's event loop writes it (`items`),
    the records decoded as `check` decodes them (`reader.Follower`), so the live analysis is `check`'s
    of the recording by construction. The proxy hands over no copy of the records, only a notice of
    how far its writes reached (`upto`); it says where its session's header ended once it listens
    (`start`: before that nothing is read).

    Behind by more than `max_backlog_bytes` of the file, it skips ahead by exchange, as the proxy's
    hand-off without a recording does: an exchange whose first record it reads while behind (until it
    is back to half) is skipped whole, its messages (a POST's request, a response body, an event)
    counted (`skipped`); an exchange begun before is analysed whole. If the recording stops (it
    cannot be written), the proxy hands over the records again (`HttpInput.chunk`)."""

    follows = True

    def __init__(self, session: str, limit: int | None, ready: Callable[[], None], file, backlog: int,
                 began: Callable[[], None]) -> None:
        super().__init__(session, limit, ready)
        self.session = session
        self.limit = limit
        self.file = file
        self.follower: _HttpFollower | None = None  # from `start` on
        self.backlog = backlog
        self.began = began  # called as a stretch of skipping begins
        self.skipping = False
        self.skipped = 0
        self.stopped = False  # the recording stopped (the proxy hands records since)
        self.last = 0  # the highest offset the proxy said its writes reached
        self._open: set[int] = set()  # the exchanges analysed, not yet ended
        self._skipped: set[int] = set()  # the exchanges skipped, not yet ended

    def start(self, offset: int) -> None:
        """The proxy's session begins at `offset` (where its header ended)."""
        self.follower = _HttpFollower(getattr(self.file, "name", "recording"), self.limit, file=self.file, start=offset)
        self.last = max(self.last, offset)

    def items(self, upto: int, final: bool = False) -> Iterator:
        """The frames of the session's records appended since the last call, in file order; `final`:
        the proxy's last notice, `upto` its end (nothing after it is the session's)."""
        self.last = max(self.last, upto)
        follower = self.follower
        if follower is None:  # the proxy never listened
            return
        session, opened, skipped = self.session, self._open, self._skipped
        for offset, end, item in _appended(follower, upto, final):
            if type(item) is tuple or item.session != session:  # another writer's session
                continue
            k = type(item)
            if k is SessionEnd or k is SessionStart:  # (the analysis has its own)
                continue
            x = item.exchange
            if x in opened:
                if k is HttpEnd:
                    opened.discard(x)
                yield item
                continue
            if x not in skipped:  # the exchange's first record
                if not self.behind_by(end - offset):
                    if k is not HttpEnd:
                        opened.add(x)
                    yield item
                    continue
                skipped.add(x)
            if k is HttpEnd:
                skipped.discard(x)
            elif k is HttpBody or k is SseEvent or (k is HttpRequest and item.method == "POST"):
                self.skipped += 1
