"""The recording, written where the bytes are forwarded (CONTRACTS.md, Recordings: a kill loses at
most the message in flight on each connection, at any rate).

    tee thread:      read chunk ─▶ StdioRecorder.chunk: its complete lines appended (one write) ─▶ write on
    mitmproxy loop:  hook/stream callback ─▶ HttpRecorder.put: the step's frames appended ─▶ forwarded

Each chunk's (each step's) records are appended to the recording in one `write()` (O_APPEND, no
fsync: the promise is about processes killed, not power lost) *before* the bytes are passed on, so
whatever crossed is on file whatever is killed afterwards: the forwarding process alone, or every
process of the tool at once. What may be lost is what had not crossed whole: a line whose end had
not arrived (the tee), a body still streaming (the proxy), and a body that decodes past QUICK_DECODE
bytes, with the steps after it, until the recorder's thread has recorded them just after they
crossed (`HttpRecorder.feed`: no decoding of size in mitmproxy's hooks). The analysis process reads
the tee's recording back as it grows (live_inputs.RecordedInput), or gets the same bytes or
frames through its pipe (the proxy; the tee without a recording it can read back), and no longer
writes the recording; it only ends the session when the forwarding process died before it could
(`RecordingWriter.close(after_kill=True)`).

Both write exactly the frames the analysis judges (redacted by the same `Redactor`), so `check` of
the recording gives the live report. The tee's lines are encoded a chunk at a time
(`format.LineEncoder`), with per-line work only for a line the configured `redact_paths` may touch,
or that holds a secret member's name (`Redactor.may_redact`: one search of the chunk, by RE2). A
message mitmproxy takes whole comes with its raw parts (the path's and header fields' bytes) and
its records are written from them (`format.HttpEncoder`), no frame made, when its headers need no
escaping and no content-encoding is to be removed (`whole.Whole`); other steps are framed and encoded.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
from typing import Any, Callable

from ..core.events import Direction, StdioClose, StdioLine
from ..core.framing import MAX_MESSAGE_BYTES
from ..recording import format as fmt
from ..recording.redaction import Redactor, path_needles
from ..recording.writer import RecordingWriter
from .flows import FlowFramer
from .long_line import LongLine
from .whole import WHOLE, Whole, framer_step


class _Recorder:
    """A recording that cannot be written stops, said once (`failed`); the traffic goes on."""

    writer: RecordingWriter | None
    failed: Callable[[str], None] | None

    def _append(self, data: bytes) -> None:
        writer = self.writer
        if writer is None:
            return
        try:
            writer.append(data)
        except OSError as e:
            self._stopped(writer, e)

    def _stopped(self, writer: RecordingWriter, e: OSError) -> None:
        self.writer = None
        try:
            writer.release()
        except OSError:
            pass
        self._said(writer, e, "; recording stopped (traffic unaffected)")

    def _close(self, info: dict, t: float) -> None:
        """The session's end written, the file closed."""
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close(info, t)
            except OSError as e:
                self._said(writer, e)

    def _said(self, writer: RecordingWriter, e: OSError, more: str = "") -> None:
        if self.failed is not None:
            self.failed(f"cannot write recording {writer.path}: {e.strerror or e}{more}")


#: bytes of an unfinished stdio line the tee holds in memory; a longer one waits in a temporary file
SPILL_ABOVE = 1 << 20

#: bytes a body may decode to on mitmproxy's event loop; a body that decodes further (a large
#: compressed answer, a decompression bomb) is framed and recorded on a thread, after it is forwarded
QUICK_DECODE = 256 * 1024


class StdioRecorder(_Recorder):
    """The tee's recording, fed on its forwarding threads (`chunk`, `close`, `finish`; the caller
    holds one lock around each call and the matching hand-off to the analysis, so the file and the
    analysis see the chunks in one order). A line longer than SPILL_ABOVE waits in a `LongLine`
    until its LF comes; then one up to `limit` bytes (what the analysis parses: `max_message_bytes`)
    is read back and recorded as any line is, redacted, and a longer one byte for byte (its JSON is
    never parsed, so nothing in it can be redacted)."""

    def __init__(self, writer: RecordingWriter, failed: Callable[[str], None] | None = None,
                 limit: int | None = MAX_MESSAGE_BYTES) -> None:
        self.writer = writer
        self.limit = limit
        self.failed = failed
        self.session = writer.session
        self.redact = writer.redactor.frame
        self._needles = path_needles(writer.redactor)
        self._plain = self._needles == ()  # no path configured: only a secret member's name is searched for
        self._members = getattr(writer.redactor, "may_redact", None)  # a secret member's name: one bytes search
        self._enc = {d: fmt.LineEncoder(self.session, d) for d in Direction}
        self._pending: dict[str, list[bytes]] = {d: [] for d in Direction}
        self._held = {d: 0 for d in Direction}  # bytes in _pending
        self._long: dict[str, LongLine | None] = {d: None for d in Direction}

    def chunk(self, t: float, direction: str, data: bytes) -> None:
        """Append the lines `data` completes (one write; a long line's record in pieces)."""
        writer = self.writer
        if writer is None:  # the recording stopped
            return
        long = self._long[direction]
        if long is not None:
            j = data.find(b"\n")
            if j < 0:
                long.add(data)
                return
            long.add(data[:j])
            self._long[direction] = None
            self._write_long(long, t, direction, True)
            data = data[j + 1:]
        i = data.rfind(b"\n") + 1  # the end of the last complete line
        pending = self._pending[direction]
        if not i:
            if data:
                pending.append(data)
                self._held[direction] += len(data)
                if self._held[direction] > SPILL_ABOVE:
                    self._long[direction] = LongLine(b"".join(pending))
                    pending.clear()
                    self._held[direction] = 0
            return
        if pending:
            pending.append(data[:i])
            text = b"".join(pending)
            pending.clear()
        else:
            text = data if i == len(data) else data[:i]  # (a chunk that ends its last line: as it is)
        if i < len(data):
            pending.append(data[i:])
        self._held[direction] = len(data) - i
        # `_lines`' way, inline for the default settings (no redact_paths; a name found is searched twice)
        plain = self._plain and (self._members is None or not self._members(text))
        records = self._enc[direction].records(t, text) if plain else self._lines(t, direction, text)
        try:  # `_append`, inline (a call less a chunk), without the writer's lock: the Tap's is held
            writer.append_serial(records)
        except OSError as e:
            self._stopped(writer, e)

    def open(self, direction: str) -> bool:
        """Whether a line of `direction` has begun and not ended (its bytes wait here for its LF)."""
        return bool(self._pending[direction]) or self._long[direction] is not None

    def _write_long(self, long: LongLine, t: float, direction: str, eol: bool) -> None:
        if self.limit is None or long.size <= self.limit:  # parsed by the analysis: redacted as any line
            line = long.take()
            self._append(self._lines(t, direction, line + b"\n") if eol else
                         fmt.encode(self.redact(StdioLine(t, self.session, direction, line, eol=False))))  # type: ignore[arg-type]
            return
        for piece in long.records(t, self.session, direction, eol):
            self._append(piece)

    def _lines(self, t: float, direction: str, text: bytes) -> bytes:
        """The records of the complete lines `text` holds (each ending in LF)."""
        needles, members = self._needles, self._members
        # (find, not `in`: `in` on bytes first tries the needle as an int, a caught TypeError each time;
        # no needle holds an LF, and a name's search never ends in the last LF: as on the lines alone)
        if (needles is not None and (not needles or not (text.find(b"\\u") >= 0 or text.find(b"\\/") >= 0
                                                         or any(text.find(n) >= 0 for n in needles)))
                and (members is None or not members(text))):
            return self._enc[direction].records(t, text)
        s, redact, encode = self.session, self.redact, fmt.encode
        return b"".join(encode(redact(StdioLine(t, s, direction, line))) for line in text[:-1].split(b"\n"))  # type: ignore[arg-type]

    def _rest(self, t: float, direction: str) -> bytes:
        long = self._long[direction]
        if long is not None:  # written here, in pieces
            self._long[direction] = None
            self._write_long(long, t, direction, False)
            return b""
        pending = self._pending[direction]
        if not pending:
            return b""
        rest = b"".join(pending)
        pending.clear()
        self._held[direction] = 0
        return fmt.encode(self.redact(StdioLine(t, self.session, direction, rest, eol=False)))  # type: ignore[arg-type]

    def close(self, t: float, direction: str) -> None:
        """End of file on `direction`: the bytes after its last LF, then the close (one write)."""
        self._append(self._rest(t, direction) + fmt.encode(StdioClose(t, self.session, direction)))  # type: ignore[arg-type]

    def finish(self, info: dict, t: float) -> None:
        """The session is over: what waits for an LF, as lines of their own, then the session's end."""
        self._append(self._rest(t, Direction.C2S) + self._rest(t, Direction.S2C))
        self._close(info, t)


#: the steps whose framing decodes a body (`FlowFramer.step_decodes_past`)
_MAY_DECODE = frozenset({"request_end", "response_end", "response_data", "request_message", "response_message"})
def _same(item: Any) -> Any:
    return item


class HttpRecorder(_Recorder):
    """The proxy's (and the addon's) frames, made from mitmproxy's steps where it forwards them.

    `put(step)` frames the step (`FlowFramer`: content-encoding removed on a copy, event streams split
    into events), redacts the frames and, with a writer, appends them (one write) before the hook or
    stream callback returns; the frames (`put`), or their records (`records`), are returned for the
    analysis. `end_open` gives the steps that end the exchanges still open, `finish` ends the file.
    The steps of a message mitmproxy took whole (`request_message`, `response_message`) may carry
    its raw parts (the path as bytes, the header fields as mitmproxy's (name, value) bytes), read as
    `flows.flow_headers` reads them; fed for records, they are written from those (`whole.Whole`).
    """

    def __init__(self, session: str, redactor: Redactor, writer: RecordingWriter | None = None,
                 failed: Callable[[str], None] | None = None, limit: int | None = MAX_MESSAGE_BYTES) -> None:
        self.framer = FlowFramer(session, limit)  # a body decodes to `limit` bytes at most (max_message_bytes)
        self.redactor = redactor
        self.redact = redactor.frame
        try:  # the messages mitmproxy takes whole, from its raw parts
            self._whole: Whole | None = Whole(session, redactor) if isinstance(redactor, Redactor) else None
        except TypeError:  # a session id orjson does not write
            self._whole = None
        self.writer = writer
        self.failed = failed  # told once when the recording cannot be written (then it stops)
        self.errors = 0
        # `feed`'s thread: the steps given to it, what it made for the loop, counted on the loop
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._ready: collections.deque = collections.deque()
        self._sent = self._done = 0

    def feed(self, step: tuple, deliver: Callable[[Any], None], as_records: bool = False) -> None:
        """`put` (or `records`, `as_records`) the step and `deliver` what it gives, in the order of the
        steps, on the event loop. A step whose framing would decode more than QUICK_DECODE bytes is
        not done here: it goes to a thread of the recorder's, and every step after it follows it
        there until the thread has caught up, so the forwarding never waits for a decoding and the
        recording keeps the order of the steps. Such a body is recorded just after it crossed (the
        promise of this module holds for it as for a body still streaming)."""
        if as_records and step[0] in WHOLE and self._sent == self._done:
            out = self._whole_records(step)
            if out is not None:
                if out:
                    deliver(out)
                return
        step = framer_step(step)
        do = self.records if as_records else self.put
        if self._sent == self._done and not self._heavy(step):
            out = do(step)
            if out:
                deliver(out)
            return
        if self._thread is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # not on an event loop (a test, a file read whole): no one waits
                self.drain()
                out = do(step)
                if out:
                    deliver(out)
                return
            self._thread = threading.Thread(target=self._work, name="mrtr-inspect-decode", daemon=True)
            self._thread.start()
        self._sent += 1
        self._jobs.put((do, step, deliver))

    def _whole_records(self, step: tuple) -> bytes | None:
        """The records of a message mitmproxy took whole (`records`' bytes), made from its raw parts
        (`whole.Whole`), recorded; None: the general way. Never raises."""
        w = self._whole
        if w is None:
            return None
        try:  # (the redaction counts what the configured paths matched: from here on, this way or none)
            data = w.records(step, self.redactor.redact_json, self.framer)
        except Exception as exc:
            self._said_failed(exc)
            return b""
        if data is not None and self.writer is not None:
            self._append(data)
        return data

    def in_order(self, item: Any, deliver: Callable[[Any], None]) -> None:
        """`deliver(item)` after what the steps fed before it gave."""
        if self._sent == self._done:
            deliver(item)
        else:
            self._sent += 1
            self._jobs.put((_same, item, deliver))

    def _heavy(self, step: tuple) -> bool:
        name, args = step
        if name not in _MAY_DECODE:
            return False
        try:
            return self.framer.step_decodes_past(name, args, QUICK_DECODE)
        except Exception:  # judged by `_frames`, which says what went wrong
            return False

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            do, step, deliver = job
            self._ready.append((do(step), deliver))
            loop = self._loop
            try:
                if loop is not None:
                    loop.call_soon_threadsafe(self._pump)
            except RuntimeError:  # the loop closed: `drain` delivers
                pass

    def _pump(self) -> None:
        """On the loop: what the thread made, delivered in order."""
        ready = self._ready
        while ready:
            out, deliver = ready.popleft()
            self._done += 1
            if out:
                try:
                    deliver(out)
                except Exception as e:  # pragma: no cover - the deliverers never raise
                    self._said_failed(e)

    def drain(self) -> None:
        """Wait for the thread to be done with what it was given, and deliver that (on the loop, or
        once the loop stopped)."""
        if self._thread is not None and self._sent != self._done:
            done = threading.Event()
            self._jobs.put(done)
            done.wait()
        self._pump()

    def _said_failed(self, e: Exception) -> None:
        self.errors += 1
        if self.errors <= 3 and self.failed is not None:
            self.failed(f"internal recording error (traffic unaffected): {type(e).__name__}: {e}")

    def put(self, step: tuple) -> list:
        """The step's frames (redacted), recorded when there is a writer."""
        frames = self._frames(step)
        if frames and self.writer is not None:
            self._append(b"".join(map(fmt.encode, frames)))
        return frames

    def records(self, step: tuple) -> bytes:
        """The step's frames as the records appended to the recording (recorded when there is a
        writer): what an analysis process reads back (`format.decode`), cheaper to send than the
        frames themselves."""
        data = b"".join(map(fmt.encode, self._frames(step)))
        if data and self.writer is not None:
            self._append(data)
        return data

    def _frames(self, step: tuple) -> list:
        """Never raises (it runs in mitmproxy's hooks): a step that cannot be framed or redacted goes
        nowhere, said (the first few times)."""
        try:
            name, args = framer_step(step)
            return [self.redact(f) for f in getattr(self.framer, name)(*args)]
        except Exception as e:
            self._said_failed(e)
            return []

    def end_open(self, t: float, reason: str) -> list[tuple]:
        """The steps that end the exchanges still open (`reason`), for `put` or `records`."""
        return [("response_end", (t, x, reason)) for x in self.framer.open_exchanges()]

    def finish(self, info: dict, t: float) -> None:
        """The session's end written, the file closed (after the `end_open` steps); the thread ends."""
        self.drain()
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
        self._close(info, t)
