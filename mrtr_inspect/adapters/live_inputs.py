"""What a live session's analysis is handed, turned into frames (live_analysis.LiveAnalysis picks one):
`StdioInput` splits the tee's chunks into lines; `RecordedInput` reads the tee's session back from its
recording as the tee writes it; `HttpInput` decodes the proxy's records or frames steps itself."""

from __future__ import annotations

import os
from typing import Callable, Iterator

from ..core.events import CAPTURE_ENDED, Direction, SessionEnd, StdioLine
from ..core.framing import StdioFramer
from ..recording.format import decode
from ..recording.reader import Follower
from .flows import FlowFramer


class StdioInput:
    """The tee's chunks of both pipes, split into lines (`StdioFramer`; a line past the limit is cut,
    not held)."""

    redacted = False  # the analysis redacts its frames

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


class RecordedInput(StdioInput):
    """The tee's session read back from its recording as the forwarding threads write it (`items`),
    the records decoded as `check` decodes them (`reader.Follower`: whole lines only, a line not yet
    ended waits), so the live analysis is `check`'s of the recording by construction. The tee hands
    over no copy of the bytes, only a notice of how far the writes reached (`upto`).

    Behind by more than `max_backlog_bytes` of the file, it skips ahead: the message records of its
    session it reads, until it is back to half, are counted (`skipped`), not analysed; the other
    records (a stream's close) still are. Records of other sessions (another writer appending to the
    same file) are not its. If the recording stops (it cannot be written), the tee hands chunks
    again (`StdioInput`)."""

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
        follower, session, backlog = self.follower, self.session, self.backlog
        fd = follower._f.fileno()
        end = max(upto, os.fstat(fd).st_size)
        n = 0
        for offset, _, item in follower.poll():
            if final and offset >= upto:
                return
            n += 1
            if not n & 1023:
                end = max(end, os.fstat(fd).st_size)
            if type(item) is tuple:
                if item[1] != session:
                    continue
                line = True
            else:
                if item.session != session or type(item) is SessionEnd:  # (`end` feeds its own)
                    continue
                line = type(item) is StdioLine
            if self.skipping:
                if end - offset <= backlog // 2:
                    self.skipping = False
            elif end - offset > backlog:
                self.skipping = True
                self.began()
            if self.skipping and line:
                self.skipped += 1
                continue
            yield item


class HttpInput:
    """The proxy's (and the addon's) frames: `chunk` has the records the forwarding process appended to
    the recording (`HttpRecorder.records`, redacted there); `step(name, args)` is a step framed here
    (`name` one of the framer's methods: `request_head` … `response_end`, or `exchange`: a whole
    exchange read from a file). The proxy's `eof` means it is ready (`ready`)."""

    redacted = True  # what `chunk` gives was redacted where it was recorded

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
