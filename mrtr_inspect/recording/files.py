"""Files mrtr-inspect writes for the user (recordings, exports, reports, `check --output`): created
with mode 0600, since they hold the traffic or what was found in it (users' answers, tokens a rule
quotes). An existing file keeps its mode.

    with open_private("report.json") as f: ...
    fd = os.open(path, flags, 0o600)   # is what `private_opener(path, flags)` does
    write_private("out.html", data)    # a whole file at once (exports); CannotWrite says why not

`unwritable(path, what)` checks at startup, without leaving a file behind, that a file can be
written at the end of a session, so a long session does not end in `cannot write`.
"""

from __future__ import annotations

import os
from typing import IO

from ..errors import UserError

MODE = 0o600


class CannotWrite(UserError):
    """A file asked for cannot be written: `cannot write PATH: reason`."""


def private_opener(path: str | os.PathLike, flags: int) -> int:
    """`os.open` with mode 0600 for a file it creates; usable as `open(..., opener=private_opener)`."""
    return os.open(path, flags, MODE)


def open_private(path: str | os.PathLike) -> IO[str]:
    """`path` opened for writing text (UTF-8), truncated; created 0600 when new."""
    return open(path, "w", encoding="utf-8", opener=private_opener)


def why(e: OSError) -> str:
    """An OSError's reason as a user reads it (`No such file or directory`)."""
    return e.strerror or str(e)


def unwritable(path: str | os.PathLike, what: str) -> str | None:
    """None when `path` can be opened for writing; else the one-line reason (`cannot write report
    PATH: No such file or directory`). Neither changes an existing file nor leaves a new one."""
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MODE)
            created = True
        except FileExistsError:  # also a directory or a dangling link: the open below says why
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no O_TRUNC; a FIFO without reader fails, not hangs
            created = False
        os.close(fd)
        if created:
            os.unlink(path)
    except OSError as e:
        return f"cannot write {what} {os.fspath(path)}: {why(e)}"
    return None


def write_private(path: str, data: bytes) -> None:
    """`data` as the whole of `path`: written to a temporary file beside it (0600 when new), then
    renamed over it, so no reader finds half a file; missing folders are made. Raises CannotWrite."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = private_opener(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        raise CannotWrite(f"cannot write {path}: {why(e)}") from None
