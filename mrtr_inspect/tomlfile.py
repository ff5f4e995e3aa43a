"""TOML files the user names (settings, contracts): read as UTF-8, with or without a byte order
mark; any other encoding, or text that is not TOML, is one line naming the file."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


# byte order marks of the encodings TOML is not written in (the UTF-32 ones first: they begin as UTF-16's)
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
               (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _toml_text(path: Path, data: bytes, error: type[Exception]) -> str:
    """A TOML file's text: UTF-8, with or without the byte order mark Windows editors write (as
    `utf-8-sig` reads it). Any other encoding is one line that names it."""
    save = "save it as UTF-8, as TOML files are"
    for bom, name in _OTHER_BOMS:
        if data.startswith(bom):
            raise error(f"{path}: not UTF-8 but {name} (it starts with a {name} byte order mark): {save}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}): {save}") from None
    if "\0" in text:
        raise error(f"{path}: holds NUL bytes (UTF-16 without a byte order mark?): {save}")
    return text


def read_toml(path: Path, error: type[Exception]) -> dict[str, Any]:
    """The TOML file at `path`; `error` (a UserError) names the file and what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        return tomllib.loads(_toml_text(path, data, error))
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None
