"""One path syntax into a JSON message: `redact_paths` (recording), `ignore` (replay) and the paths
the tool shows.

    params.arguments.password            a member by name, from the top of the message
    params.inputResponses.*.content      `*`: any one member or array item
    **.token, params.**.password         `**`: any number of levels, none included
    result.content[0].text               an array item by index (also written `result.content.0.text`)

A member whose name holds dots (`io.modelcontextprotocol/related-task`) is written as it is: its
parts match as many segments. A path as the tool shows it (`format_path`) can be given back as is.
"""

from __future__ import annotations

import re
from typing import Iterable

Pattern = tuple  # of str segments ("*", "**", names, indexes as digits)

_INDEX = re.compile(r"\[(\d+)\]")


def parse(path: str) -> Pattern:
    """`"params.items[0].x"` → `("params", "items", "0", "x")`."""
    return tuple(s for s in _INDEX.sub(r".\1", path).split(".") if s != "")


def parse_all(paths: Iterable[str]) -> list[Pattern]:
    return [p for p in (parse(x) for x in paths if x) if p]


def matches(pat: Pattern, path: tuple) -> bool:
    """Whether `pat` names `path` (a tuple of member names and array indexes)."""
    if not pat:
        return not path
    head = pat[0]
    if head == "**":
        return any(matches(pat[1:], path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    seg = path[0]
    if head == "*":
        return matches(pat[1:], path[1:])
    seg = seg if type(seg) is str else str(seg)
    if head == seg:
        return matches(pat[1:], path[1:])
    if "." in seg:  # a member name with dots: its parts, one segment each
        parts = tuple(seg.split("."))
        return pat[:len(parts)] == parts and matches(pat[len(parts):], path[1:])
    return False


def any_match(patterns: list[Pattern], path: tuple) -> bool:
    for p in patterns:
        if matches(p, path):
            return True
    return False


def format_path(path: tuple) -> str:
    """`("params", "items", 0)` → `params.items[0]`; the empty path is the whole message."""
    out = ""
    for p in path:
        out += f"[{p}]" if type(p) is int else (f".{p}" if out else str(p))
    return out or "(the whole message)"
