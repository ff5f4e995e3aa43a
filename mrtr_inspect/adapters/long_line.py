"""An unfinished stdio line too long to hold in memory, as the tee's recorder keeps it (recorder.py)."""

from __future__ import annotations

import codecs
import tempfile
from typing import Iterator

from ..recording import format as fmt


class LongLine:
    """An unfinished stdio line past recorder.SPILL_ABOVE bytes, in an unnamed temporary file (0600, removed
    when closed) until its LF comes: the tee's memory does not grow with a line's length. Whether it
    is UTF-8 without CR is followed as it comes (the record then keeps it verbatim, as `encode`
    would; else in base64)."""

    def __init__(self, first: bytes) -> None:
        self.file = tempfile.TemporaryFile()
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.plain = True
        self.size = 0
        self.add(first)

    def add(self, data: bytes) -> None:
        if self.plain:
            if b"\r" in data:
                self.plain = False
            else:
                try:
                    self.utf8.decode(data)
                except UnicodeDecodeError:
                    self.plain = False
        self.file.write(data)
        self.size += len(data)

    def take(self) -> bytes:
        """All its bytes; the file is closed."""
        try:
            self.file.seek(0)
            return self.file.read()
        finally:
            self.file.close()

    def records(self, t: float, session: str, direction: str, eol: bool) -> Iterator[bytes]:
        """Its record, in pieces; the file is closed at the end."""
        plain = self.plain
        try:
            if plain:
                try:
                    self.utf8.decode(b"", final=True)
                except UnicodeDecodeError:
                    plain = False
            self.file.seek(0)
            yield from fmt.long_line(t, session, direction, eol, plain, self.file.read)
        finally:
            self.file.close()
