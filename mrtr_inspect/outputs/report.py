"""The JSON report (CONTRACTS.md, format `mrtr-inspect.report/1`), built as outputs stream in.

Closed chains and findings are spooled (in memory while small, then to a temporary file), so a
report over millions of messages costs disk, not memory. Each is serialised once, as the report
writes it: `write_json` copies the spooled lines; `chains()` and `findings()` parse them back for the
other outputs.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
import tempfile
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator

from orjson import OPT_INDENT_2, OPT_PASSTHROUGH_DATACLASS, OPT_PASSTHROUGH_DATETIME, OPT_PASSTHROUGH_SUBCLASS, Fragment
from orjson import dumps as _orjson

from ..version import __version__
from ..core.findings import SEVERITIES, Finding, Severity
from ..core.jsontext import ORJSON_FLOATS_AS_REPR, dumps_with
from ..core.hops import HopsCorrelated
from ..core.inspector import ChainEvent
from ..core.messages import Message
from ..core.era import Era
from ..core.vocabulary import Link, Outcome
from .text import json_printable

if TYPE_CHECKING:  # pragma: no cover
    from ..core.chains import Chain

FORMAT = "mrtr-inspect.report/1"
_SPOOL_BYTES = 1024 * 1024  # each spool in memory up to this (about 850 chains or 2,700 findings), then on disk


def _dumps(obj: Any, **kw: Any) -> str:
    """JSON text that can always be written as UTF-8: a lone surrogate (a tool name sent as \\ud800
    and quoted back in a finding) is kept as its escape; and that a terminal shows inert (`json_printable`)."""
    text = json.dumps(obj, ensure_ascii=False, default=str, **kw)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, default=str, **kw)
    return json_printable(text)


_LINE = dumps_with(ensure_ascii=False, default=str)
_LINE_ASCII = dumps_with(ensure_ascii=True, default=str)

# orjson, for what it writes as the C encoder does: every type but str, int, float, bool, None, list,
# tuple, dict, a str-valued enum (and a UUID) goes to `_refuse`, so to the C encoder
_ORJSON_PLAIN = OPT_PASSTHROUGH_SUBCLASS | OPT_PASSTHROUGH_DATACLASS | OPT_PASSTHROUGH_DATETIME
_ORJSON_INDENTED = _ORJSON_PLAIN | OPT_INDENT_2
_SHORT_EXPONENT = re.compile(rb"e-[0-9](?![0-9])")  # orjson's 1e-7 where float.__repr__ writes 1e-07


def _refuse(obj: Any) -> Any:
    raise TypeError


_FLOATS_AS_REPR = ORJSON_FLOATS_AS_REPR  # the way is taken only with an orjson that writes floats so


def _spaced(obj: dict) -> bytes | None:
    """`_LINE(obj).encode()` by orjson, at a fraction of the C encoder's cost (whose float reprs alone
    are 44% of a chain's), or None when that is not proven the same bytes.

    orjson writes strings, ints, bools and None as the C encoder does with ensure_ascii=False (the
    escapes JSON requires, the rest as UTF-8; a lone surrogate, an int past 64 bits, a key that is
    not a str raise), and a float as `float.__repr__` does for finite floats at or above 1e-4 in
    magnitude, and 0. Its compact form has no whitespace outside strings; its indented form puts a
    line feed (never inside a string, where it is escaped) and two spaces per level before each
    member and after the last, and `": "` after each key. So with no string holding two spaces in a
    row (the compact form has none), taking every two spaces out of the indented form leaves only the
    line feeds, and a line feed after a comma becoming one space and every other one going gives the
    report's separators (`", "`, `": "`) exactly. What orjson writes otherwise is refused here: a NaN
    or an infinity (orjson's `null`: more nulls than the item's Nones), a float below 1e-4
    (`0.0000…`, `e-7`), anything orjson does not take (a TypeError)."""
    if not _FLOATS_AS_REPR:  # pragma: no cover - the orjson the tests run with writes them so
        return None
    try:
        compact = _orjson(obj, _refuse, _ORJSON_PLAIN)
    except TypeError:
        return None
    # (the pattern searched at once: looking for "e-" first scans the text twice when a string holds one,
    # as "sample-model" does, and costs as much as the search when none does)
    if b"  " in compact or b"0.0000" in compact or _SHORT_EXPONENT.search(compact):
        return None
    # (counted at once, not looked for first: a chain summary nearly always has a null; a None deeper: refused too)
    if (nulls := compact.count(b"null")) and nulls != [*obj.values()].count(None):
        return None
    return _orjson(obj, _refuse, _ORJSON_INDENTED).replace(b"  ", b"").replace(b",\n", b", ").replace(b"\n", b"")


def _chain_line(obj: Any) -> bytes:
    """`_line(obj)`, by `_spaced` when it can: a chain summary (about 1 KB, 20 floats) costs 0.6 of
    the C encoder's instructions that way; a finding (a few hundred bytes, 2 floats) would cost more."""
    data = _spaced(obj) if type(obj) is dict else None
    if data is None:
        return _line(obj)
    if data.isascii() and 127 not in data:  # (DEL looked for as an int: memchr; `b"\\x7f" in` is 30x slower)
        return data
    return json_printable(data.decode("utf-8")).encode("utf-8")


def _line(obj: Any) -> bytes:
    """`_dumps(obj)` as UTF-8: one item of the report's lists, exactly as `write_json` writes it."""
    return _utf8(_LINE(obj)) or _LINE_ASCII(obj).encode("utf-8")


def _utf8(text: str) -> bytes | None:
    """`text`, the C encoder's JSON of an item, as `_line` gives it; None when it holds a lone
    surrogate (the caller writes the item with its non-ASCII escaped)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if len(data) == len(text) and "\x7f" not in text:  # ASCII without DEL: as json_printable gives it, encoded once
        return data
    return json_printable(text).encode("utf-8")


_ENCODE_STR = encode_basestring  # the C encoder's own string writer (ensure_ascii off): a JSON string, quoted
# a rule's, severity's, spec's and conformance id's part of a finding's line: what comes before its message
# and between its messages and its time (`_finding_parts`), for as many as there are rules and severities
_FINDING_PARTS: dict[tuple, tuple[str, str]] = {}
_FINDING_PARTS_MAX = 4096


def _finding_parts(key: tuple) -> tuple[str, str] | None:
    rule, severity, spec, conformance = key
    if (type(rule) is not str or (type(severity) is not str and type(severity) is not Severity)
            or (spec is not None and type(spec) is not str)
            or (conformance is not None and type(conformance) is not str)):
        return None
    head = _LINE({"rule": rule, "severity": severity, "message": ""})  # ... "message": ""}
    mid = _LINE({"spec": spec, "conformance": conformance, "time": 0})  # {"spec": ..., "time": 0}
    parts = (head[:-3], ", " + mid[1:-2])
    if len(_FINDING_PARTS) < _FINDING_PARTS_MAX:
        _FINDING_PARTS[key] = parts
    return parts


def _finding_line_parts(f: Any) -> bytes:
    """`_line(f.to_json())` for a `Finding` (else `_line(f)`), written without the C encoder's
    costliest parts: the strings a rule always writes the same (its id, severity, spec and conformance
    id: a part of the line kept per rule, `_finding_parts`) and the time's float repr (orjson's,
    the same for a float from 1e-4 up to 1e16, as `ORJSON_FLOATS_AS_REPR` checks). The message and
    the chain by the C encoder's own string writer, the messages and the details by the C encoder;
    a time outside that range, a member of another type: the C encoder writes the whole finding."""
    if type(f) is not Finding:
        return _line(f)
    t, message, chain, messages = f.time, f.message, f.chain, f.messages
    key = (f.rule, f.severity, f.spec, f.conformance)
    try:
        parts = _FINDING_PARTS.get(key) or _finding_parts(key)
    except TypeError:  # unhashable
        parts = None
    if (parts is None or type(t) is not float or not 1e-4 <= t < 1e16 or type(message) is not str
            or (chain is not None and type(chain) is not str) or type(messages) is not list or not _FLOATS_AS_REPR):
        return _line(f.to_json())
    details = f.details
    text = (f"{parts[0]}{_ENCODE_STR(message)}, \"chain\": {'null' if chain is None else _ENCODE_STR(chain)}, "
            f"\"messages\": {_LINE(messages)}{parts[1]}{_orjson(t).decode()}"
            + (f", \"details\": {_LINE(details)}}}" if details else "}"))
    return _utf8(text) or _line(f.to_json())


# -------------------------------------------------------------------------------------------------
# A closed chain's line, written from the `Chain` without its summary dict (`chain_line`): exactly
# `_chain_line(chain.summary())`, at a fraction of its cost (the summary's dicts, about 37k
# instructions a chain, and their encoding, about 136k: orjson's compact and indented forms, the scans
# that prove them, three `bytes.replace`, were most of the report's share of `check`).
#
# A chain's line is a skeleton (its keys, brackets and separators) with values in it, and the skeleton
# depends only on the chain's shape: how many requests, which optional members each timeline entry
# has, how many rounds, whether the last round is unanswered, whether the chain names a hop. One walk
# over the chain (`_walk`, which follows `core.summary.chain_summary` member by member) gathers its
# values in the line's order and its shape. A shape's template is made once, from the first chain of
# that shape, by the report's own encoder (`_LINE` of its summary with every value a marker, cut at
# the markers): the skeleton's pieces as `orjson.Fragment`s with a free slot between each two. The
# values go into the slots of a copy (one slice assignment) and orjson writes the list indented: each
# element then sits on a line of its own after `,\n  `, and taking those out (one `bytes.replace`)
# leaves the pieces and the values' JSON end to end: the line. A `,\n  ` is found nowhere else: a
# string holds no raw line feed, the pieces and the summaries' texts (below) none either, no piece ends
# with a comma, and no value is a list or a dict (whose members orjson would indent deeper).
# What a round asked and a retry answered (the summaries core/summary.py shares between rounds and
# retries of equal values, read only) go in as Fragments of their text by the report's encoder, kept
# per object (`_NESTED`, which holds the object, so its id is not reused while kept).
#
# Proven, else the way of before: orjson writes each value as the C encoder does (ensure_ascii off):
# strings, ints, bools, None and str-valued enums alike (a lone surrogate, an int past 64 bits, a
# subclass, an unknown type: refused, a TypeError); a float as `float.__repr__` only from 1e-4 up to
# 1e16 in magnitude, and 0 (`ORJSON_FLOATS_AS_REPR`): each time and duration is compared with those
# bounds (a NaN fails every comparison), a `round(x, 3)` is 0 or at least 0.001 in magnitude. What
# comes from the wire (an id, an error code, the method, the hop) takes the way of before when it is a
# float, a list or a dict, a summary when it is not a dict; the other values are the analysis' own ints
# and strings or None (the indices, round numbers, era, peer, outcome, links, response kinds, the
# state's digest, the target, which `target_of` keeps only as a str). The first chain of each shape is
# compared byte for byte with the way of before (a shape whose line differed would keep that way; none
# is known). A legacy chain (its rounds are the server's questions) takes the way of before.

_SEP = b",\n  "  # between two elements of orjson's indented form of a flat list
_NOT_PLAIN = frozenset((float, list, tuple, dict))  # a wire value orjson would not write as the C encoder
_PLAIN_ENUMS = frozenset((Outcome, Link, Era))  # the str-valued enums of a chain's members
_round = float.__round__  # `round` of a float without its lookup of `__round__` (as core/summary does)
#: a shape's template (the skeleton's pieces, None between each two), or False where the
#: first chain of the shape was written otherwise by it
_TEMPLATES: dict[tuple, list | bool] = {}
_TEMPLATES_MAX = 4096
#: a round's asked or a retry's answered summary (by id) -> (the summary, its text as a Fragment)
_NESTED: dict[int, tuple[Any, Fragment]] = {}
_NESTED_MAX = 4096
_MARK = "\x00"  # a value's place in a skeleton: written `"\u0000"` by the report's encoder
_ABANDONED = Outcome.ABANDONED
_OPEN = Outcome.OPEN


def chain_line(chain: "Chain") -> bytes:
    """The chain's item of the JSON report, as `_chain_line(chain.summary())` writes it."""
    try:
        got = _walk(chain)
        if got is not None:
            key, values = got
            tpl = _TEMPLATES.get(key)
            if tpl:
                return _filled(tpl, values)
            if tpl is None:
                return _first_of_shape(chain, key, values)
    except (TypeError, ValueError):  # a value orjson refuses, a time that is not a number
        pass
    return _chain_line(chain.summary())


def _filled(tpl: list, values: list) -> bytes:
    """The template with the values' JSON in its slots, as `_line` ends a line."""
    out = _orjson(values, _refuse, _ORJSON_INDENTED)
    parts = tpl.copy()
    parts[1::2] = out[4:-2].split(_SEP)  # (less "[\n  " and "\n]")
    line = b"".join(parts)
    if out.isascii() and 127 not in out:  # (the skeleton's pieces are ASCII; DEL looked for as an int: memchr)
        return line
    return json_printable(line.decode("utf-8")).encode("utf-8")


def _nested(d: dict) -> Fragment | None:
    """A summary's text by the report's encoder, kept; None when it holds a lone surrogate."""
    try:
        frag = Fragment(_LINE(d).encode("utf-8"))
    except UnicodeEncodeError:
        return None
    if len(_NESTED) >= _NESTED_MAX:
        _NESTED.clear()
    _NESTED[id(d)] = (d, frag)
    return frag


def _walk(chain: "Chain") -> tuple[tuple, list] | None:
    """The chain's shape and its values in the line's order, or None where the way of before writes
    it. Follows `core.summary.chain_summary`: a member there is a value here, in the same order, and
    a member present or not is a part of the shape."""
    if not _FLOATS_AS_REPR or chain.asks:
        return None
    start, end, dur = chain.start, chain.end, chain.duration_ms
    if not (1e-4 <= start < 1e16 and 1e-4 <= end < 1e16 and -1e16 < dur < 1e16):
        return None
    method, ec, hop = chain.method, chain.error_code, chain.hop
    not_plain, plain_enum = _NOT_PLAIN, _PLAIN_ENUMS
    if type(method) in not_plain or type(ec) in not_plain or type(hop) in not_plain:
        return None
    requests, rounds = chain.requests, chain.rounds
    outcome = chain.outcome
    values: list[Any] = [chain.id, method, chain.target, len(rounds)]
    values += [r.id for r in requests]
    o, link, era = outcome or _OPEN, chain.link, chain.era
    # as `chain_summary` gives them (`_plain`): a str-valued enum as its `_value_` (orjson would read
    # its `value`, a Python property), anything else as it is
    if type(o) in plain_enum:
        o = o._value_
    if type(link) in plain_enum:
        link = link._value_
    if type(era) in plain_enum:
        era = era._value_
    values += (o, link, dur, era, chain.peer, start, end, ec)
    shape = []
    nget = _NESTED.get
    for r in requests:
        i, t, rd = r.id, r.time, r.round
        if type(i) in not_plain or not 1e-4 <= t < 1e16:
            return None
        response = r.response_kind if not r.cancelled else "cancelled"
        if rd is None:  # the first request
            code = 0
            values += (i, r.index, t, response)
        else:
            w = _round((t - rd.irr_time) * 1000.0, 3)
            if not -1e16 < w < 1e16:
                return None
            values += (i, r.index, t, rd.n, w)
            code = 1
            link = r.link
            if link is not None:
                code = 3
                via = link.via
                values.append(via._value_ if type(via) in plain_enum else via)
            a = r.answered_summary
            if a is not None:
                if type(a) is not dict:
                    return None
                code |= 4
                if a:
                    e = nget(id(a))
                    a = e[1] if e is not None and e[0] is a else _nested(a)
                    if a is None:
                        return None
                values.append(a)
            values.append(response)
        ri = r.response_index
        if ri is not None:
            code |= 8
            rt = r.response_time
            if rt is not None and not 1e-4 <= rt < 1e16:
                return None
            values += (ri, rt)
        e = r.error_code
        if e is not None:
            if type(e) in not_plain:
                return None
            code |= 16
            values.append(e)
        shape.append(code)
    for rd in rounds:
        it, a, sh = rd.irr_time, rd.asked, rd.state_hash
        if not 1e-4 <= it < 1e16:
            return None
        if type(a) is not dict:
            if a is not None:
                return None
        elif a:
            e = nget(id(a))
            a = e[1] if e is not None and e[0] is a else _nested(a)
            if a is None:
                return None
        values += (rd.n, rd.irr_index, it, a, sh[:16] if sh else None)
    shape.append(len(rounds))
    flags = 0
    if outcome == _ABANDONED:
        rd = chain.unanswered_round
        if rd is not None:
            w = round((end - rd.irr_time) * 1000.0, 3)
            if not -1e16 < w < 1e16:
                return None
            values.append(w)
            flags = 1
    if hop is not None:
        flags |= 2
        values.append(hop)
    shape.append(flags)
    return tuple(shape), values


def _first_of_shape(chain: "Chain", key: tuple, values: list) -> bytes:
    """The line of before for the first chain of a shape, and the shape's template from its summary
    by the report's encoder: kept when the chain's line by it is that line, else False is kept (the
    shape keeps the way of before; none is known). A value refused (a TypeError) keeps nothing: the
    next chain of the shape tries again."""
    summary = chain.summary()
    expected = _chain_line(summary)
    return _keep_template(_TEMPLATES, key, _template(_skeleton(summary)), values, expected)


def _skeleton(obj: Any, nested: bool = False) -> Any:
    """A summary with each value (and each asked or answered summary whole) as `_MARK`."""
    if nested:
        return _MARK
    if type(obj) is dict:
        return {k: _skeleton(v, k == "asked" or k == "answered") for k, v in obj.items()}
    if type(obj) is list:
        return [_skeleton(v) for v in obj]
    return _MARK


# A finding's line by a template as a chain's (`_filled`), one per rule, severity, spec, conformance
# id, number of messages and details' keys: the values (the message, the chain, the messages, the
# time, the details' values) by one orjson call. Proven as a chain's: the message a str, the chain a
# str or None, the messages ints, the time and a float among the details' values from 1e-4 up to 1e16
# in magnitude (or 0), no details' value a list, a tuple or a dict; the template's pieces ASCII without
# DEL; the first finding of each key compared byte for byte with `_finding_line_parts`. Anything else
# is written by `_finding_line_parts`.
_FINDING_TEMPLATES: dict[tuple, list | bool] = {}
_CONTAINERS = frozenset((list, tuple, dict))


def _finding_line(f: Any) -> bytes:
    """`_line(f.to_json())` for a `Finding` (else `_line(f)`): by its key's template when it can
    (about a third of `_finding_line_parts`' instructions: no C encoder, no float repr), else by
    `_finding_line_parts`."""
    if type(f) is not Finding:
        return _line(f)
    t, message, chain, messages, details = f.time, f.message, f.chain, f.messages, f.details
    if (type(t) is float and 1e-4 <= t < 1e16 and type(message) is str and (chain is None or type(chain) is str)
            and type(messages) is list and _FLOATS_AS_REPR):
        sev = f.severity
        if type(sev) is Severity:
            sev = sev._value_  # (an enum member's hash is a Python call)
        try:
            values = [message, chain]
            for m in messages:
                if type(m) is not int:
                    raise TypeError
            values += messages
            values.append(t)
            if details:
                if type(details) is not dict:
                    raise TypeError
                for v in details.values():
                    tv = type(v)
                    if tv is float:
                        if not (1e-4 <= v < 1e16 or -1e16 < v <= -1e-4 or v == 0):
                            raise TypeError
                    elif tv in _CONTAINERS:
                        raise TypeError
                    elif tv in _PLAIN_ENUMS:
                        v = v._value_  # (orjson reads an enum's `value`, a Python property)
                    values.append(v)
                key: tuple = (f.rule, sev, f.spec, f.conformance, len(messages), *details)
            else:
                key = (f.rule, sev, f.spec, f.conformance, len(messages))
            tpl = _FINDING_TEMPLATES.get(key)
            if tpl:
                return _filled(tpl, values)
            if tpl is None:
                return _first_finding(f, key, values)
        except TypeError:  # unhashable, a value orjson refuses, a value of another type
            pass
    return _finding_line_parts(f)


def _first_finding(f: Finding, key: tuple, values: list) -> bytes:
    """The line for the first finding of a key, and the key's template (kept as `_first_of_shape`
    keeps a chain's; False where its pieces are not ASCII or its line differed)."""
    expected = _finding_line_parts(f)
    skeleton = f.to_json()
    skeleton["message"] = skeleton["time"] = _MARK
    if skeleton["chain"] is not None:
        skeleton["chain"] = _MARK
    skeleton["messages"] = [_MARK] * len(f.messages)
    if "details" in skeleton:
        skeleton["details"] = dict.fromkeys(skeleton["details"], _MARK)
    return _keep_template(_FINDING_TEMPLATES, key, _template(skeleton), values, expected)


def _keep_template(table: dict, key: tuple, tpl: list | None, values: list, expected: bytes) -> bytes:
    """`expected` (the first item of its key, written the way of before); `table` keeps the key's
    template when it writes that item's values as `expected`, else False (the key keeps the way of
    before). A value refused (a TypeError, a ValueError) keeps nothing: the next item tries again."""
    try:
        line = _filled(tpl, values) if tpl else None
    except (TypeError, ValueError):
        return expected
    if len(table) >= _TEMPLATES_MAX:
        table.clear()
    table[key] = tpl if line == expected else False
    return expected


def _template(skeleton: Any) -> list | None:
    """The report encoder's text of a skeleton, cut at its markers: its pieces with None between each
    two (`_filled`'s template); None when a piece is not ASCII or holds DEL."""
    pieces = _LINE(skeleton).split('"\\u0000"')
    if not all(p.isascii() and "\x7f" not in p for p in pieces):
        return None
    tpl: list = [None] * (2 * len(pieces) - 1)
    tpl[::2] = [p.encode("ascii") for p in pieces]
    return tpl


class _Spool:
    """JSON lines (each item as the report writes it), in memory up to a size, then on disk; written
    in batches."""

    def __init__(self, line: Callable[[Any], bytes] = _line) -> None:
        self._f = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, mode="w+b")
        self._batch: list[bytes] = []
        self._line = line
        self.count = 0

    def add(self, obj: Any) -> None:
        batch = self._batch
        batch.append(self._line(obj))
        self.count += 1
        if len(batch) >= 256:
            self._flush()

    def add_line(self, data: bytes) -> None:
        """An item already serialised as `line` would."""
        batch = self._batch
        batch.append(data)
        self.count += 1
        if len(batch) >= 256:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            self._batch.append(b"")
            self._f.write(b"\n".join(self._batch))
            self._batch = []

    def lines(self) -> Iterator[bytes]:
        """The items as serialised, each with its newline."""
        self._flush()
        self._f.seek(0)
        yield from self._f
        self._f.seek(0, 2)

    def blocks(self, size: int = _SPOOL_BYTES) -> Iterator[bytes]:
        """The items as serialised, in blocks of whole lines (about `size` bytes each)."""
        self._flush()
        f = self._f
        f.seek(0)
        rest = b""
        while chunk := f.read(size):
            chunk = rest + chunk if rest else chunk
            cut = chunk.rfind(b"\n") + 1
            rest = chunk[cut:]
            if cut:
                yield chunk[:cut]
        if rest:  # pragma: no cover - every item ends with its newline
            yield rest + b"\n"
        f.seek(0, 2)

    def __iter__(self) -> Iterator[dict]:
        loads = json.loads
        for line in self.lines():
            yield loads(line)

    def close(self) -> None:
        self._f.close()


class ReportBuilder:
    def __init__(self, inputs: Iterable[str] = (), sessions: bool = False) -> None:
        """`sessions`: keep each chain's session id (`self.sessions`, chain id -> session), which
        the report does not show, for a filter's `session:` terms."""
        self.inputs = list(inputs)
        self.sessions: dict[str, str] | None = {} if sessions else None
        #: the filter expression the report was narrowed by (outputs/narrow.py), else None
        self.filter: str | None = None
        self.messages = 0
        self.severity_counts = {s: 0 for s in SEVERITIES}
        self.rule_counts: dict[str, int] = {}
        self._chains = _Spool(_chain_line)
        self._findings = _Spool(_finding_line)
        self.notes: list[str] = []
        #: the linked pairs of two hops (RULES.md §11), when some session named its hop
        self.hops: list[dict] | None = None

    def add(self, out: Any) -> None:
        self.add_all((out,))

    def add_all(self, outs: Iterable[Any]) -> None:
        """The outputs of a step of the analysis (`check` hands over each message's). A finding is
        counted and spooled here as `add_finding` does, without its two calls: `check` adds one
        for nearly every retry."""
        for out in outs:
            t = type(out)
            if t is Message:
                self.messages += 1
            elif t is Finding:
                sev, rule = out.severity, out.rule
                counts = self.severity_counts
                counts[sev] = counts.get(sev, 0) + 1
                counts = self.rule_counts
                counts[rule] = counts.get(rule, 0) + 1
                self._findings.add(out)  # its line written from it (`_finding_line`), without its dict
            elif t is ChainEvent and out.kind == "closed":
                self._chains.add_line(chain_line(out.chain))  # written from the chain, without its summary dict
                if self.sessions is not None:
                    self.sessions[out.chain.id] = out.chain.session
            elif t is HopsCorrelated:
                self.hops = out.entries()
                if out.left_out:
                    self.notes.append(f"{out.left_out} chains of named hops past the first {len(out.facts)} were not "
                                      "kept for tying the hops (RULES.md §11): their pairs are missing")

    def add_finding(self, f: Finding) -> None:
        self.severity_counts[f.severity] = self.severity_counts.get(f.severity, 0) + 1
        self.rule_counts[f.rule] = self.rule_counts.get(f.rule, 0) + 1
        self._findings.add(f)

    def add_finding_json(self, f: dict) -> None:
        """A finding in its report form (`Finding.to_json`)."""
        self.severity_counts[f["severity"]] = self.severity_counts.get(f["severity"], 0) + 1
        self.rule_counts[f["rule"]] = self.rule_counts.get(f["rule"], 0) + 1
        self._findings.add(f)

    def add_chain(self, c: dict) -> None:
        """A closed chain in its report form (`Chain.summary`)."""
        self._chains.add(c)

    @property
    def chain_count(self) -> int:
        return self._chains.count

    def chains(self) -> Iterator[dict]:
        return iter(self._chains)

    def findings(self) -> Iterator[dict]:
        return iter(self._findings)

    def summary(self) -> dict:
        return {
            "messages": self.messages,
            "chains": self._chains.count,
            "errors": self.severity_counts.get(Severity.ERROR, 0),
            "warnings": self.severity_counts.get(Severity.WARNING, 0),
            "infos": self.severity_counts.get(Severity.INFO, 0),
        }

    def write_json(self, fp: IO[str]) -> None:
        """Stream the whole report to `fp`."""
        head = {
            "format": FORMAT,
            "tool": {"name": "mrtr-inspect", "version": __version__},
            "inputs": self.inputs,
            "summary": self.summary(),
        }
        if self.filter is not None:
            head["filter"] = self.filter
        if self.notes:
            head["notes"] = self.notes
        text = _dumps(head, indent=2)
        fp.write(text[:-2] + ",\n  \"chains\": [")
        self._write_list(fp, self._chains)
        fp.write("],\n  \"findings\": [")
        self._write_list(fp, self._findings)
        if self.hops is not None:
            fp.write("],\n  \"hops\": [")
            if self.hops:
                fp.write("\n    " + ",\n    ".join(_dumps(h) for h in self.hops) + "\n  ")
        fp.write("]\n}\n")

    @staticmethod
    def _write_list(fp: IO[str], spool: _Spool) -> None:
        """The spooled items, each on its line. To an output file of the command line (`Output`) as
        the UTF-8 they are spooled as, without decoding and encoding them again (`write_utf8`)."""
        sep = b"\n    "
        write_utf8 = getattr(fp, "write_utf8", None)
        if write_utf8 is None:
            def write_utf8(data: bytes) -> None:
                fp.write(data.decode("utf-8"))
        for block in spool.blocks():  # the items of a block are its lines: one replace, not a write per item
            write_utf8(sep + block[:-1].replace(b"\n", b",\n    "))
            sep = b",\n    "
        if spool.count:
            fp.write("\n  ")

    def to_dict(self) -> dict:
        """The whole report in memory (for tests and small inputs)."""
        d = {
            "format": FORMAT,
            "tool": {"name": "mrtr-inspect", "version": __version__},
            "inputs": self.inputs,
            "summary": self.summary(),
            "chains": list(self.chains()),
            "findings": list(self.findings()),
        }
        if self.filter is not None:
            d["filter"] = self.filter
        if self.hops is not None:
            d["hops"] = self.hops
        if self.notes:
            d["notes"] = self.notes
        return d

    def close(self) -> None:
        self._chains.close()
        self._findings.close()
