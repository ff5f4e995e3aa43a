"""Raw-preserving JSON: what `json.loads` hides.

* strict UTF-8 (a message that is not UTF-8 is not JSON-RPC: transports/index.mdx);
* duplicate member names, anywhere, with the path of the object that repeats them (Python keeps the
  last value, other parsers the first: RULES.md §7.23, §9);
* `NaN`, `Infinity` and `-Infinity` refused (not JSON, though Python accepts them);
* nesting depth bounded, so a hostile message cannot exhaust the stack;
* the raw token of a string member (`requestState`), to tell an escape-form change from a value
  change (`request-state-reencoded` against `request-state-altered`).

The common path (`parse_value`) is orjson's parse, then the exact-bytes proof: orjson writes the
value back and the result is used only when that gives the message's bytes back unchanged. orjson's
form is compact and canonical (no whitespace, each member once, only the escapes it must write,
numbers in their shortest form), so equal bytes prove there is no repeated member, no unusual escape
and no number written another way, and that Python's parser reads the same value from these bytes.
Anything else (a message written by another encoder, with spaces, `\\/`, `1E5`...) takes the
raw-preserving parser below: one C-speed parse whose object hook only counts members, and, only
when a duplicate is seen, a second parse to find where. Results are the same either way; only the
cost differs (docs/performance.md, issue 27: orjson won against msgspec).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from orjson import dumps as _canonical
from orjson import loads as _fast_loads

MAX_DEPTH = 200

Path = tuple  # of str (member names) and int (array indexes)


class ParseError(Exception):
    """Why bytes are not one JSON value. `reason` is one of: utf8, json, extra-data, constant, depth,
    empty."""

    def __init__(self, reason: str, detail: str, position: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.position = position


@dataclass(frozen=True, slots=True)
class Duplicate:
    path: Path  # the object holding the repeated names
    name: str  # the repeated member name
    count: int  # how many times it appears
    values: tuple = field(default=(), repr=False, compare=False)  # each occurrence's value, in order


@dataclass(frozen=True, slots=True)
class Parsed:
    value: Any
    duplicates: tuple[Duplicate, ...] = ()


class _Dup(Exception):
    pass


def _strict_pairs(pairs: list) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Dup
    return d


def _refuse_constant(name: str) -> Any:
    raise ParseError("constant", f"{name} is not a JSON value")


_FAST = json.JSONDecoder(object_pairs_hook=_strict_pairs, parse_constant=_refuse_constant)


class _Pairs(list):
    """An object as its member list, so the slow path can see repeats."""

    __slots__ = ()


_SLOW = json.JSONDecoder(object_pairs_hook=_Pairs, parse_constant=_refuse_constant)


def _rebuild(node: Any, path: Path, dups: list[Duplicate]) -> Any:
    if type(node) is _Pairs:
        seen: dict[str, list] = {}
        out: dict = {}
        for k, v in node:
            v = out[k] = _rebuild(v, path + (k,), dups)
            if k in seen:
                seen[k].append(v)
            else:
                seen[k] = [v]
        for k, vs in seen.items():
            if len(vs) > 1:
                dups.append(Duplicate(path, k, len(vs), tuple(vs)))
        return out
    if type(node) is list:
        return [_rebuild(v, path + (i,), dups) for i, v in enumerate(node)]
    return node


_STRUCT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def nesting_depth(text: str) -> int:
    depth = best = 0
    for m in _STRUCT_OR_STRING.finditer(text):
        c = m.group()
        if c == "{" or c == "[":
            depth += 1
            if depth > best:
                best = depth
        elif c == "}" or c == "]":
            depth -= 1
    return best


def decode_utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError("utf8", f"invalid UTF-8 at byte {e.start}: {raw[e.start:e.start + 4]!r}", e.start) from None


def parse_text(text: str, max_depth: int = MAX_DEPTH) -> Parsed:
    if not text.strip():
        raise ParseError("empty", "empty message")
    if text.count("{") + text.count("[") > max_depth:
        depth = nesting_depth(text)
        if depth > max_depth:
            raise ParseError("depth", f"nesting depth {depth} exceeds {max_depth}")
    try:
        return Parsed(_decode(_FAST, text))
    except _Dup:
        pass
    dups: list[Duplicate] = []
    try:  # the slow pass meets the errors the fast one stopped short of (extra data after a duplicate)
        value = _rebuild(_decode(_SLOW, text), (), dups)
    except RecursionError:  # a max_depth beyond what Python's stack holds
        raise ParseError("depth", "nesting too deep") from None
    return Parsed(value, tuple(dups))


def _decode(decoder: json.JSONDecoder, text: str) -> Any:
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        if e.msg.startswith("Extra data"):
            raise ParseError("extra-data", f"more than one JSON value (extra data at char {e.pos})", e.pos) from None
        raise ParseError("json", f"{e.msg} at char {e.pos}", e.pos) from None
    except ValueError:  # a number longer than Python converts (sys.get_int_max_str_digits)
        raise ParseError("json", "a number with more digits than Python converts") from None
    except RecursionError:  # a max_depth beyond what Python's stack holds
        raise ParseError("depth", "nesting too deep") from None


def parse(raw: bytes, max_depth: int = MAX_DEPTH) -> Parsed:
    """Parse one message's bytes. Raises `ParseError`, never anything else."""
    return parse_text(decode_utf8(raw), max_depth)


_SCAN = _FAST.scan_once


def parse_value(raw: bytes, max_depth: int = MAX_DEPTH) -> tuple[Any, tuple[Duplicate, ...]]:
    """`parse(raw)` as (value, duplicates), for the pipeline (`parse_message` says how)."""
    value, duplicates, _ = parse_message(raw, max_depth)
    return value, duplicates


def parse_message(raw: bytes, max_depth: int = MAX_DEPTH) -> tuple[Any, tuple[Duplicate, ...], bool]:
    """`parse(raw)` as (value, duplicates, canonical): `canonical` when `raw` is orjson's canonical
    form of `value` (then `canonical_token` gives its raw tokens). The common case (bytes in that
    form, nesting within the bound) is orjson's parse and the exact-bytes proof (the module's
    docstring); then the common case of the raw-preserving parser (one value, no surrounding
    whitespace, no repeated names) is one scan of the strict decoder, without the decoder's Python
    wrappers; anything else takes `parse_text`. Each gives the same value, or the same error."""
    # `max_depth` bounds the parse (orjson's own limit is higher): the fast path is taken only when the
    # bytes cannot nest deeper (`_shallow`)
    n = len(raw)
    if n <= 2 * max_depth + 1 or _shallow(raw, n, max_depth):
        try:
            value = _fast_loads(raw)
            if _canonical(value) == raw:
                return value, (), True
        except (ValueError, TypeError):  # not JSON, or beyond what orjson reads (64-bit integers): the parser below says
            pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = decode_utf8(raw)  # raises the ParseError
    if text.count("{") + text.count("[") <= max_depth:
        try:
            value, end = _SCAN(text, 0)
        except Exception:  # no value at 0 (empty, whitespace), a duplicate, an error: the full path says which
            pass
        else:
            if end == len(text):
                return value, (), False
    p = parse_text(text, max_depth)
    return p.value, p.duplicates, False


def _shallow(raw: bytes, n: int, max_depth: int) -> bool:
    """Whether `raw`, if it is JSON at all, nests `max_depth` deep at most, judged without a parse.

    A JSON text nested `d` deep is at least `2d` bytes long (`[]` inside `[...]`, each level a pair
    of brackets): one of at most `2 * max_depth + 1` bytes needs no look (the caller's test). Longer,
    a level that is an object costs at least five bytes (`{"":` before the level inside it and `}`
    after), an array two, the innermost container two; so with `a` array levels on the way down,
    `n >= 5d - 3a - 3`, and `a` is at most the number of `[` bytes in the text (those in strings
    counted too). So `n + 3 * count("[") + 3 <= 5 * max_depth` bounds the depth: one `find` (memchr)
    when there is no `[` at all (a third of an MCP recording's messages, which are mostly objects:
    about 5k instructions fewer than counting both brackets), one count of `[` else; only a text
    past that bound (about 1 KB at the default bound) counts the `{` too (each bracket is a level
    at most). Each test is a bound, never a guess: a text it lets through cannot be too deep."""
    a = raw.count(b"[") if raw.find(b"[") >= 0 else 0
    return n + 3 * a + 3 <= 5 * max_depth or a + raw.count(b"{") <= max_depth


def canonical_token(value: Any, path: Path) -> str | None:
    """`raw_member_token(text, path)` of a `text` that is orjson's canonical form of `value`
    (`parse_message` said so): there each token is orjson's form of its value, so no search."""
    for name in path:
        if type(value) is not dict:
            return None
        value = value.get(name, _ABSENT)
    if value is _ABSENT or type(value) is dict or type(value) is list:
        return None
    return _canonical(value).decode("utf-8")


_ABSENT = object()


def loads(data: bytes) -> Any:
    """`json.loads(data)`, faster for bytes in orjson's canonical form (the exact-bytes proof), for
    JSON this package writes itself (a recording's record heads): the same value, the same errors."""
    try:
        value = _fast_loads(data)
        if _canonical(value) == data:
            return value
    except (ValueError, TypeError):
        pass
    return json.loads(data)


# ---------------------------------------------------------------------------------------------
# raw tokens

# one JSON token: a string (quotes and escapes as sent), a bracket, a colon or a comma, or a bare
# scalar (`scalar_tokens` walks it)
JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+', re.S)


_SCALAR_AFTER_NAME = re.compile(r'\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*"|[^\s\[\]{}:,"]+)', re.S)


def raw_member_token(text: str, path: Path, value: Any = None) -> str | None:
    """The raw JSON token (quotes and escapes as sent) of the scalar at `path`, where `path` names
    object members only, e.g. ("params", "requestState"). None when absent or not a scalar.

    With repeated member names the last one is returned, as Python's parser keeps the last value.
    `value`, the parsed `text`, allows a shortcut: when the scalar is there and its name appears once
    in a text without `\\u` escapes (so the name is spelled as is), that one place is its name.
    """
    if value is not None and "\\u" not in text:
        name = '"' + path[-1] + '"'
        at = text.find(name)
        if at >= 0 and text.find(name, at + 1) < 0 and _is_scalar_at(value, path):
            p = at + len(name)
            if text.startswith(':"', p):  # the compact form of a string: up to the next quote, if no escape comes first
                end = text.find('"', p + 2)
                if end > 0 and text.find("\\", p + 2, end) < 0:
                    return text[p + 1:end + 1]
            m = _SCALAR_AFTER_NAME.match(text, p)
            if m is not None:
                return m.group(1)
    span = raw_member_span(text, path)
    return text[span[0]:span[1]] if span is not None else None


def _is_scalar_at(value: Any, path: Path) -> bool:
    for name in path:
        if type(value) is not dict or name not in value:
            return False
        value = value[name]
    return type(value) is not dict and type(value) is not list


def raw_member_span(text: str, path: Path) -> tuple[int, int] | None:
    """Where the raw token of `raw_member_token` lies in `text` (start, end), to replace it in place."""
    parent, name = list(path[:-1]), path[-1]
    found: tuple[int, int] | None = None
    for stack, slot, m in scalar_tokens(text):
        if slot == name and stack == parent:
            found = m.span()
    return found


def scalar_tokens(text: str):
    """Each scalar token inside a container of `text` (strings with their quotes and escapes as
    sent, numbers, literals), as (stack, slot, match): `stack` the member names and array indexes
    of the containers holding it from the top (one list, changed as the walk goes on: copy it to
    keep it), `slot` its own name or index. The one tokenizer of raw paths (`raw_member_span`,
    recording.redaction). A text that is not JSON yields what its tokens suggest, never raises."""
    kinds: list[str] = []  # '{' or '[' for each open container
    stack: list = []  # the slot of each open container but the outermost
    counters: list[int] = []  # the next index, per open container (arrays use it)
    key = None
    expect_key = False
    for m in JSON_TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == "{" or c == "[":
            if kinds:
                stack.append(counters[-1] if kinds[-1] == "[" else key)
            kinds.append(c)
            counters.append(0)
            key = None
            expect_key = c == "{"
        elif c == "}" or c == "]":
            if kinds:
                kinds.pop()
                counters.pop()
                if kinds:
                    stack.pop()
                    if kinds[-1] == "[":
                        counters[-1] += 1
            key = None
            expect_key = False
        elif c == ",":
            expect_key = bool(kinds) and kinds[-1] == "{"
        elif c == ":":
            expect_key = False
        elif expect_key:
            if c != '"':
                key = tok
            elif "\\" not in tok:
                key = tok[1:-1]  # no escape: the name as written (json.loads only when needed: it is slow)
            else:
                try:
                    key = json.loads(tok)
                except ValueError:
                    key = tok
        elif kinds:
            if kinds[-1] == "[":
                yield stack, counters[-1], m
                counters[-1] += 1
            elif key is not None:
                yield stack, key, m
            key = None


# ---------------------------------------------------------------------------------------------
# raw spans of values (the bytes of a definition as it was offered)

_SPACE = re.compile(r"[ \t\n\r]*")
_SCAN_ANY = json.JSONDecoder().scan_once  # repeated names allowed: the span of the last is wanted


def _value_end(text: str, i: int) -> int:
    return _SCAN_ANY(text, i)[1]


def _members(text: str, i: int):
    """(name, start, end) of each member of the object at `i` (raises on what is not JSON)."""
    i = _SPACE.match(text, i + 1).end()
    if text[i] == "}":
        return
    while True:
        name, i = json.decoder.scanstring(text, i + 1)
        i = _SPACE.match(text, i).end()
        if text[i] != ":":
            raise ValueError("no colon")
        start = _SPACE.match(text, i + 1).end()
        end = _value_end(text, start)
        yield name, start, end
        i = _SPACE.match(text, end).end()
        if text[i] == "}":
            return
        if text[i] != ",":
            raise ValueError("no comma")
        i = _SPACE.match(text, i + 1).end()


def value_span(text: str, path: Path) -> tuple[int, int] | None:
    """Where the value at `path` (object member names from the top) lies in the JSON `text`, as
    sent: (start, end) of its characters. The last of repeated names, as the parse keeps; None when
    absent or `text` is not JSON there."""
    try:
        start = _SPACE.match(text).end()
        span = (start, _value_end(text, start))
        for name in path:
            if text[span[0]] != "{":
                return None
            found = None
            for member, s, e in _members(text, span[0]):
                if member == name:
                    found = (s, e)
            if found is None:
                return None
            span = found
        return span
    except (ValueError, IndexError, StopIteration):
        return None


def element_spans(text: str, span: tuple[int, int]) -> list[tuple[int, int]] | None:
    """The (start, end) of each element of the array at `span` in `text`; None when it is not one."""
    i = span[0]
    if text[i] != "[":
        return None
    out = []
    try:
        i = _SPACE.match(text, i + 1).end()
        if text[i] == "]":
            return out
        while True:
            end = _value_end(text, i)
            out.append((i, end))
            i = _SPACE.match(text, end).end()
            if text[i] == "]":
                return out
            if text[i] != ",":
                return None
            i = _SPACE.match(text, i + 1).end()
    except (ValueError, IndexError, StopIteration):
        return None
