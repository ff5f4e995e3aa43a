"""Files mrtr-inspect writes for the user (recordings, exports, reports, fixtures, `check --output`,
`wrap`): created with mode 0600, since they hold the traffic or what was found in it (users' answers,
tokens a rule quotes). Every such file is written here, as the shell's `>` would write it:

- `-` is standard output;
- a path that is a symlink is written through: its target is written, the link stays a link;
- a path that is not a regular file (a FIFO, `/dev/null`) is opened and written to, never replaced;
  `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` are written through that descriptor, as bash does (an
  output appended to, `>> log`, stays appended to);
- a regular file that exists keeps its mode, its owner and its inode's other names (hard links);
  it is replaced whole (a reader finds the old bytes or the new ones, never half) when that keeps
  them: a temporary file with a random name beside the target, created O_EXCL|O_NOFOLLOW (a link
  planted in advance is never written through), renamed over it. Otherwise (another owner, several
  hard links, a folder we cannot create in) it is truncated and written in place, as `>` does.

    with open_private("report.json") as f: ...   # text; replaced when closed, dropped on an exception
    write_private("out.html", data)             # a whole file at once (exports); CannotWrite says why not
    fd = private_opener(path, flags)            # os.open(path, flags, 0o600) (recordings append with it)

`unwritable(path, what)` checks at startup, without leaving a file behind, that a file can be
written at the end of a session, so a long session does not end in `cannot write`.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import IO, Any

from ..errors import UserError

STDOUT = "-"
MODE = 0o600
# a temporary file: made here or not at all, never through a link (O_NOFOLLOW, O_CLOEXEC: 0 where absent)
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class CannotWrite(UserError):
    """A file asked for cannot be written: `cannot write PATH: reason`."""


def private_opener(path: str | os.PathLike, flags: int) -> int:
    """`os.open` with mode 0600 for a file it creates; usable as `open(..., opener=private_opener)`."""
    return os.open(path, flags, MODE)


class Output:
    """An output file open for writing (see the module's rules). `close()` (or the end of a `with`
    block without an exception) makes the bytes the file's; an exception in the block leaves a file
    that was to be replaced as it was. Writes raise OSError."""

    def __init__(self, path: str | os.PathLike, binary: bool = False, folders: bool = False) -> None:
        self.path = os.fspath(path)
        self._folders = folders  # make missing folders
        self._temp: str | None = None  # written here, renamed over self._target when closed
        self._target = ""
        self._utf8: Any = None  # the bytes under a text file this opened, when they are its text as UTF-8
        if self.path == STDOUT:
            sys.stdout.flush()
            self.file: Any = sys.stdout.buffer if binary else sys.stdout
            return
        fd = self._open()
        try:
            self.file = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        except BaseException:
            os.close(fd)
            self._drop()
            raise
        if not binary and os.linesep == "\n":  # (UTF-8, and a line feed written as it is)
            self._utf8 = self.file.buffer

    def _open(self) -> int:
        if (n := _named_descriptor(self.path)) is not None:  # written where it points, as `-` is
            return os.dup(n)
        try:
            st = os.stat(self.path)  # through links, /dev/stdout's too
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO, a device (a folder fails here)
            return os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        target = os.path.realpath(self.path)  # a link's target is written, the link stays
        owner = os.geteuid() if hasattr(os, "geteuid") else None
        if st is not None and (st.st_nlink > 1 or owner not in (None, st.st_uid) or not _same(target, st)):
            return os.open(self.path, os.O_WRONLY | os.O_TRUNC)  # replacing would lose an owner or a name
        folder, name = os.path.split(target)
        if st is None and folder and self._folders:
            os.makedirs(folder, exist_ok=True)
        for _ in range(8):
            temp = os.path.join(folder, f".{name}.{os.urandom(8).hex()}.tmp")
            try:
                fd = os.open(temp, TEMP_FLAGS, MODE)
            except FileExistsError:
                continue
            except PermissionError:
                if st is None:
                    raise
                return os.open(self.path, os.O_WRONLY | os.O_TRUNC)  # a folder we cannot create in
            break
        else:
            raise FileExistsError(f"no free temporary name beside {target}")
        self._temp, self._target = temp, target
        try:
            if st is not None:
                mode = stat.S_IMODE(st.st_mode)  # an existing file keeps its mode
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, mode)
                else:  # Windows before Python 3.13
                    os.chmod(temp, mode)
                if owner is not None and os.fstat(fd).st_gid != st.st_gid:
                    os.fchown(fd, -1, st.st_gid)
        except OSError:
            os.close(fd)
            self._drop()
            return os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        return fd

    def _drop(self) -> None:
        if self._temp is not None:
            try:
                os.unlink(self._temp)
            except OSError:
                pass
            self._temp = None

    def write(self, data: Any) -> int:
        return self.file.write(data)

    def write_utf8(self, data: bytes) -> None:
        """`write(data.decode("utf-8"))`, without decoding and encoding again where the text file
        would write `data` itself: one this opened (UTF-8, its line feeds as they are), the text
        written before flushed first. The report writes its spooled lines so (`outputs/report.py`)."""
        if self._utf8 is None:
            self.file.write(data.decode("utf-8"))
        else:
            self.file.flush()
            self._utf8.write(data)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno… of the file written
        return getattr(self.file, name)

    def close(self) -> None:
        """The bytes written become the file's (standard output: flushed, left open)."""
        if self.path == STDOUT:
            self.file.flush()
            return
        try:
            self.file.close()
            if self._temp is not None:
                os.replace(self._temp, self._target)
                self._temp = None
        finally:
            self._drop()

    def discard(self) -> None:
        """Stop writing; a file that was to be replaced stays as it was."""
        if self.path == STDOUT:
            self.file.flush()
            return
        try:
            self.file.close()
        finally:
            self._drop()

    def __enter__(self) -> "Output":
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()


def _named_descriptor(path: str) -> int | None:
    """The descriptor `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/self/fd/N` names. Written
    through it, as bash writes them: opening the path instead would truncate a file that standard
    output appends to (`>> log`), and resolving it would replace that file."""
    fixed = {"/dev/stdout": 1, "/dev/stderr": 2}
    if path in fixed:
        return fixed[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        if path.startswith(prefix) and path[len(prefix):].isdigit():
            return int(path[len(prefix):])
    return None


def _same(path: str, st: os.stat_result) -> bool:
    try:
        return os.path.samestat(os.stat(path), st)
    except OSError:
        return False


def open_private(path: str | os.PathLike) -> IO[str]:
    """`path` opened for writing text (UTF-8) as an `Output`: created 0600 when new; `-` is stdout."""
    return Output(path)  # type: ignore[return-value]


def named(path: str | os.PathLike) -> str:
    """An output's path as a message names it (`-`: standard output)."""
    return "standard output" if os.fspath(path) == STDOUT else os.fspath(path)


def why(e: OSError) -> str:
    """An OSError's reason as a user reads it (`No such file or directory`)."""
    return e.strerror or str(e)


def unwritable(path: str | os.PathLike, what: str) -> str | None:
    """None when `path` can be opened for writing; else the one-line reason (`cannot write report
    PATH: No such file or directory`). Neither changes an existing file nor leaves a new one; a FIFO
    is not opened (that would wait for a reader, or fail without one): its permission is checked."""
    if os.fspath(path) == STDOUT:
        return None
    named = os.fspath(path)
    if os.path.islink(path) and not os.path.exists(path):
        path = os.path.realpath(path)  # a dangling link: writing creates its target
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MODE)
            created = True
        except FileExistsError:  # also a directory: the open below says why
            if stat.S_ISFIFO(os.stat(path).st_mode):  # opening it would wait for (or, O_NONBLOCK, fail without) a reader
                if os.access(path, os.W_OK):
                    return None
                raise PermissionError(13, os.strerror(13)) from None
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no O_TRUNC
            created = False
        os.close(fd)
        if created:
            os.unlink(path)
    except OSError as e:
        return f"cannot write {what} {named}: {why(e)}"
    return None


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """`data` as the whole of `path` (an `Output`: `-` is stdout, links written through, special
    files written to, a regular file replaced whole); missing folders are made. Raises CannotWrite."""
    try:
        with Output(path, binary=True, folders=True) as f:
            f.write(data)
    except OSError as e:
        raise CannotWrite(f"cannot write {os.fspath(path)}: {why(e)}") from None
