"""Writing recordings: as frames flow, one write per frame, mode 0600, appending.

A crash or `kill -9` loses at most the frame being written: each frame is one `write()` on a file
opened with O_APPEND, so lines of concurrent writers (a client that starts the same stdio command
twice) stay whole. An existing recording is appended to as a new session, never overwritten.

Live sessions write from where the bytes are forwarded (adapters/recorder.py): the tee's threads
and mitmproxy's event loop `append` each chunk's or step's records (one write, under the writer's
lock) before passing the bytes on; the analysis process only ends the session (`close(…,
after_kill=True)`) when the forwarding process was killed before it could.
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Iterable

from ..version import __version__
from ..config import Config
from ..core.events import Frame, SessionEnd, SessionStart
from ..errors import UserError
from . import format as fmt
from .files import STDOUT, private_opener
from .redaction import Redactor


class RecordingError(UserError):
    """A recording that cannot be opened or written (the one-line reason)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mrtr-inspect"


def redaction_key() -> bytes:
    """The key of the redaction placeholders: $MRTR_INSPECT_REDACTION_KEY, else a random key kept
    (0600) in the user's cache folder, so placeholders stay the same across recordings."""
    env = os.environ.get("MRTR_INSPECT_REDACTION_KEY")
    if env:
        return env.encode("utf-8")
    path = cache_dir() / "redaction.key"
    try:
        return path.read_bytes().strip()
    except OSError:
        pass
    key = secrets.token_hex(32).encode("ascii")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = private_opener(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
    except FileExistsError:
        return path.read_bytes().strip()
    except OSError:
        pass  # an unwritable cache: placeholders are stable within this run only
    return key


def redactor_for(config: Config | None) -> Redactor:
    """The redaction of live recordings: the defaults, plus the configuration's `redact_headers`,
    `redact_paths`, `redact_query`, `redact_args`, `redact_members`, less its `redact_keep`
    (docs/configuration.md)."""
    c = config if config is not None else Config()
    return Redactor(redaction_key(), c.redact_headers, c.redact_paths, c.redact_query, c.redact_args, c.redact_keep,
                    c.redact_members)


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


def _regular_or_new(path: Path) -> bool:
    """Whether `path` is a regular file or none yet (reading a FIFO or a terminal to check it would hang)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


class RecordingWriter:
    """Appends one session to a recording file."""

    def __init__(self, path: str | os.PathLike, transport: str, info: dict | None = None,
                 redactor: Redactor | None = None, session: str | None = None, start_time: float | None = None,
                 deferred: bool = False) -> None:
        """`deferred`: the header is written by `begin()`, not here (the proxy begins once it listens);
        a writer closed before it began writes nothing, and removes the file if it made it."""
        self.path = Path(path)
        self.session = session or new_session_id()
        self.transport = transport
        self.redactor = redactor if redactor is not None else Redactor(redaction_key())
        # `-` is standard output; a link is written through, a FIFO or a device written to (files.py)
        self.regular = str(path) != STDOUT and _regular_or_new(self.path)
        self._made = self.regular and not os.path.lexists(self.path)
        torn = self._check_existing() if self.regular else False
        try:
            self._fd = (os.dup(1) if str(path) == STDOUT
                        else private_opener(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
        except OSError as e:
            raise RecordingError(f"cannot write recording {self.path}: {e.strerror}") from None
        self.frames = 0
        self.lock = threading.Lock()  # the forwarding threads append under it; close takes it too
        t = time.time() if start_time is None else start_time
        meta = {"tool": f"mrtr-inspect {__version__}", "pid": os.getpid()}
        meta.update(info or {})
        # the command line and URLs of the header redacted too, with the key's id (replay compares it)
        self.start = self.redactor.frame(SessionStart(t, self.session, transport, meta))  # type: ignore[arg-type]
        # after a recorder killed mid-line, that line is ended (marked torn) and the session starts on its own
        self._header: bytes | None = (fmt.TORN + b"\n" if torn else b"") + fmt.encode(self.start)
        self.closed = False
        if not deferred:
            self.begin()

    def begin(self) -> None:
        """Write the session's header (once; at once unless the writer was made `deferred`)."""
        with self.lock:
            header, self._header = self._header, None
            if header is not None and not self.closed:
                self._write(header)

    def began(self) -> None:
        """Another process wrote the header (a forked copy of this writer learns it began)."""
        self._header = None

    def _check_existing(self) -> bool:
        """Refuse a file that is not a recording; True when it ends in the middle of a line."""
        try:
            with open(self.path, "rb") as f:
                first = f.readline()
                f.seek(max(f.seek(0, os.SEEK_END) - 1, 0))
                last = f.read(1)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise RecordingError(f"cannot read {self.path}: {e.strerror}") from None
        if first and not fmt.is_header(first) and not (not first.endswith(b"\n") and fmt.is_torn_header(first)):
            raise RecordingError(f"{self.path} exists and is not an mrtr-inspect recording; not appending to it")
        return last not in (b"", b"\n")

    def _write(self, data: bytes) -> None:
        n = os.write(self._fd, data)
        if n < len(data):  # (a short write, as to a pipe: the rest from where it stopped)
            view = memoryview(data)[n:]
            while view:
                n = os.write(self._fd, view)
                view = view[n:]

    def write(self, frame: Frame) -> None:
        """Redact and append one frame."""
        self.write_redacted(self.redactor.frame(frame))

    def write_redacted(self, frame: Frame) -> None:
        """Append one frame that `self.redactor` has already redacted (a live session redacts each
        frame once, for its recording and its analysis alike)."""
        if self._header is not None:
            self.begin()
        self._write(fmt.encode(frame))
        self.frames += 1

    def write_many(self, frames: Iterable[Frame]) -> None:
        for f in frames:
            self.write(f)

    def append(self, data: bytes) -> None:
        """Append records already encoded (`format.encode`, `format.line_records`) in one write,
        under the lock; nothing once the writer is closed. Raises OSError."""
        if data:
            with self.lock:
                if not self.closed:
                    if self._header is not None:  # the first records begin the session
                        data, self._header = self._header + data, None
                    self._write(data)

    def append_serial(self, data: bytes) -> None:
        """`append` for a caller that makes each of its calls to this writer under a lock of its own
        (the tee's forwarding threads hold the Tap's, stdio_tee.Tap), so this one is not taken."""
        if data and not self.closed:
            if self._header is not None:
                data, self._header = self._header + data, None
            n = os.write(self._fd, data)  # (`_write`, its first write inline)
            if n < len(data):
                self._write(data[n:])

    def close(self, info: dict | None = None, end_time: float | None = None, after_kill: bool = False) -> None:
        """End the session (its `session-end` line) and close the file. `after_kill`: the process
        that was writing it was killed, perhaps in the middle of a line, which is then ended as torn
        (`format.TORN`) so the session's end stays a line of its own."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self._header is not None:  # never began (the proxy could not listen): nothing is written
                os.close(self._fd)
                self._forget()
                return
            try:
                end = fmt.encode(SessionEnd(time.time() if end_time is None else end_time, self.session, info or {}))
                self._write((fmt.TORN + b"\n" if after_kill and self._torn() else b"") + end)
            finally:
                os.close(self._fd)

    def _forget(self) -> None:
        """Remove the file this writer made and never wrote to."""
        try:
            if self._made and self.path.stat().st_size == 0:
                self.path.unlink()
        except OSError:
            pass

    def fileno(self) -> int:
        return self._fd

    def reader(self) -> tuple | None:
        """(a file open for reading on this recording, the offset its writes reached: after the
        header, once it began): what the tee's analysis process follows (live_inputs.RecordedInput);
        None for what cannot be read back as it grows (standard output, a FIFO, a device), or when
        the name no longer leads to the file written (replaced since)."""
        if not self.regular or self.closed:
            return None
        try:
            f = open(self.path, "rb")
        except OSError:
            return None
        try:
            mine, theirs = os.fstat(self._fd), os.fstat(f.fileno())
            if (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino) and stat.S_ISREG(theirs.st_mode):
                return f, os.lseek(self._fd, 0, os.SEEK_CUR)
        except OSError:
            pass
        f.close()
        return None

    def release(self) -> None:
        """Close this process' descriptor of the file without writing (another process ends the session)."""
        with self.lock:
            if not self.closed:
                self.closed = True
                os.close(self._fd)

    def _torn(self) -> bool:
        """Whether the file ends in the middle of a line (never known of a FIFO or standard output)."""
        if not self.regular:
            return False
        try:
            with open(self.path, "rb") as f:
                if f.seek(0, os.SEEK_END) == 0:
                    return False
                f.seek(-1, os.SEEK_END)
                return f.read(1) != b"\n"
        except OSError:
            return False

    def __enter__(self) -> "RecordingWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
