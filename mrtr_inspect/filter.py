"""The filter language (CONTRACTS.md, third wave): one parser and one evaluator over chains and
findings, for `check`, `show`, `stats`, `export` (`--filter EXPR`), the terminal view and the MCP
server (docs/filter.md).

    f = parse("tool:wizard (severity:error or rounds>2) not outcome:complete")
    f.matches(chain, findings)          # a chain of the report (its dict) and the findings about it
    f.matches_finding(finding, chain)   # one finding (its dict), with its chain when it has one

Terms: `tool:NAME`, `method:M`, `rule:ID`, `severity:LEVEL`, `outcome:O`, `hop:NAME`, `session:ID`,
`id:JSONRPC-ID` (the chain that holds that request id, whichever round), `rounds>N`, `ms>N`,
`waited>N` (also `<`, `>=`, `<=`, `=` and `:`), and a bare word: a substring of the chain's target
or of a finding's message. `*` in a value matches any run of characters; text compares without
regard to case. Terms side by side must all hold (and); `or` joins alternatives, `not` negates,
parentheses group: `not` binds tightest, then and, then `or`. Double quotes make a value (or a word)
literal: `"or"`, `tool:"my tool"`, `"a*b"` (no wildcard inside quotes). An empty expression matches
everything. A bad one raises `FilterError`, whose `term` is the text of the offending term.

A chain (`matches`): the chain's own fields answer the chain terms (tool, method, outcome, hop,
session, id, rounds, ms, waited); `rule:` and `severity:` hold when one of its findings has them; a
bare word when the target or one finding's message contains it.

A finding (`matches_finding`): `rule:`, `severity:` and a bare word (its message, or its chain's
target) are the finding's own; the chain terms are its chain's, and do not hold for a finding about
no chain. So `tool:wizard severity:error` keeps the errors about wizard chains.

Pure: no I/O; the chain and the findings are the dicts of the JSON report (`Finding` objects work
too). A chain's session is not in the report: pass it (`session=`) or set `chain["session"]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .core.findings import SEVERITIES
from .core.vocabulary import OUTCOMES, Outcome

__all__ = ["Filter", "FilterError", "parse", "TEXT_FIELDS", "NUMBER_FIELDS"]

#: the fields a `NAME:VALUE` term may name, with what each matches
TEXT_FIELDS = {
    "tool": "a tools/call chain's tool name",
    "method": "the chain's method (tools/call, prompts/get, resources/read)",
    "rule": "the rule id of a finding (RULES.md)",
    "severity": "a finding's severity: error, warning or info",
    "outcome": "the chain's outcome: complete, error, abandoned, cancelled, open or task",
    "hop": "the hop its session named (--hop)",
    "session": "the id of the recording's session (its header's `session`)",
    "id": "a JSON-RPC id of one of the chain's requests (the first or a retry)",
}
#: the fields a comparison (`NAME>N`) may name, with what each counts
NUMBER_FIELDS = {
    "rounds": "the chain's rounds (input_required results; a legacy chain's questions)",
    "ms": "the chain's duration in milliseconds, first request to end",
    "waited": "the user's answering time in milliseconds, over the chain's answered rounds",
}
KEYWORDS = ("and", "or", "not")
MAX_LENGTH = 4096  # characters of an expression
MAX_DEPTH = 64  # nested parentheses and `not`s

_TERM = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)(>=|<=|:|>|<|=)")


class FilterError(ValueError):
    """A bad filter expression: `term` is the offending term as written, `reason` what is wrong;
    `str()` is one line naming both."""

    def __init__(self, term: str, reason: str) -> None:
        self.term = term
        self.reason = reason
        super().__init__(f"bad filter term {term!r}: {reason}" if term else f"bad filter: {reason}")


# -- values ---------------------------------------------------------------------------------------

#: a value as written: its pieces, each (text, quoted); `*` outside quotes is a wildcard
Pieces = tuple[tuple[str, bool], ...]


def _wild(pieces: Pieces) -> bool:
    return any("*" in text for text, quoted in pieces if not quoted)


def _plain(pieces: Pieces) -> str:
    return "".join(text for text, _ in pieces)


def _matcher(pieces: Pieces, whole: bool) -> Callable[[str], bool]:
    """A test of a text against the value: the whole text (`whole`), else a part of it; no case."""
    if not _wild(pieces):
        want = _plain(pieces).casefold()
        if whole:
            return lambda s: s.casefold() == want
        return lambda s: want in s.casefold()
    rx = "".join(".*".join(re.escape(p) for p in text.split("*")) if not quoted else re.escape(text)
                 for text, quoted in pieces)
    pat = re.compile(rx, re.IGNORECASE | re.DOTALL)
    return (lambda s: pat.fullmatch(s) is not None) if whole else (lambda s: pat.search(s) is not None)


def _get(obj: Any, key: str) -> Any:
    """A field of a report dict, or an attribute of a typed object (`Finding`, `ChainSummary`)."""
    if type(obj) is dict:
        return obj.get(key)
    return getattr(obj, key, None)


def _text(value: Any) -> str | None:
    """A JSON value as the filter reads it: a string as it is, a number as JSON writes it."""
    if value is None or isinstance(value, (dict, list)):
        return None
    if value is True or value is False:
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


# -- the expression -------------------------------------------------------------------------------


class _Node:
    def chain(self, c: Any, findings: Sequence[Any], session: str | None) -> bool:
        raise NotImplementedError

    def finding(self, f: Any, c: Any, session: str | None) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class _All(_Node):
    def chain(self, c, findings, session):
        return True

    def finding(self, f, c, session):
        return True


@dataclass(frozen=True)
class _Not(_Node):
    inner: _Node

    def chain(self, c, findings, session):
        return not self.inner.chain(c, findings, session)

    def finding(self, f, c, session):
        return not self.inner.finding(f, c, session)


@dataclass(frozen=True)
class _And(_Node):
    parts: tuple[_Node, ...]

    def chain(self, c, findings, session):
        return all(p.chain(c, findings, session) for p in self.parts)

    def finding(self, f, c, session):
        return all(p.finding(f, c, session) for p in self.parts)


@dataclass(frozen=True)
class _Or(_Node):
    parts: tuple[_Node, ...]

    def chain(self, c, findings, session):
        return any(p.chain(c, findings, session) for p in self.parts)

    def finding(self, f, c, session):
        return any(p.finding(f, c, session) for p in self.parts)


def _chain_texts(name: str, c: Any, session: str | None) -> Iterable[str]:
    """The texts of a chain that a `name:` term tests (any one matching is enough)."""
    if name == "tool":
        t = _text(_get(c, "target")) if _get(c, "method") == "tools/call" else None
        if t is not None:
            yield t
    elif name == "session":
        s = session if session is not None else _get(c, "session")
        if s is not None:
            yield str(s)
    elif name == "id":
        for rid in _get(c, "requests") or ():
            t = _text(rid)
            if t is not None:
                yield t
    else:  # method, outcome, hop
        t = _text(_get(c, name))
        if name == "outcome" and t is None:
            t = Outcome.OPEN
        if t is not None:
            yield t


@dataclass(frozen=True, eq=False)
class _Field(_Node):
    """`name:value`: a chain field, or a finding's rule or severity."""

    name: str
    test: Callable[[str], bool]

    def chain(self, c, findings, session):
        if self.name in ("rule", "severity"):
            return any(self._finding_own(f) for f in findings)
        return any(self.test(t) for t in _chain_texts(self.name, c, session))

    def _finding_own(self, f) -> bool:
        t = _text(_get(f, self.name))
        return t is not None and self.test(t)

    def finding(self, f, c, session):
        if self.name in ("rule", "severity"):
            return self._finding_own(f)
        return c is not None and any(self.test(t) for t in _chain_texts(self.name, c, session))


def _waited(c: Any) -> float:
    from .outputs.exporters.otlp_spans import waited_ms

    return waited_ms(c if type(c) is dict else c.to_dict())


_NUMBER: dict[str, Callable[[Any], Any]] = {
    "rounds": lambda c: _get(c, "rounds") or 0,
    "ms": lambda c: _get(c, "duration_ms") or 0.0,
    "waited": _waited,
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
    "=": lambda a, b: a == b, ":": lambda a, b: a == b,
}


@dataclass(frozen=True, eq=False)
class _Compare(_Node):
    """`rounds>N`, `ms<=N`…: a number of the chain."""

    name: str
    op: str
    number: float

    def chain(self, c, findings, session):
        value = _NUMBER[self.name](c)
        return isinstance(value, (int, float)) and _COMPARE[self.op](value, self.number)

    def finding(self, f, c, session):
        return c is not None and self.chain(c, (), session)


@dataclass(frozen=True, eq=False)
class _Word(_Node):
    """A bare word: part of the chain's target, or of a finding's message."""

    test: Callable[[str], bool]

    def _target(self, c) -> bool:
        t = _text(_get(c, "target")) if c is not None else None
        return t is not None and self.test(t)

    def _message(self, f) -> bool:
        t = _text(_get(f, "message"))
        return t is not None and self.test(t)

    def chain(self, c, findings, session):
        return self._target(c) or any(self._message(f) for f in findings)

    def finding(self, f, c, session):
        return self._message(f) or self._target(c)


class Filter:
    """A parsed expression (`parse`). `text` is the expression as given; `fields` the field names
    its terms use (`word` for a bare word): a caller that has no findings at hand can tell whether
    it needs them (`needs_findings`)."""

    def __init__(self, text: str, root: _Node, fields: frozenset[str]) -> None:
        self.text = text
        self._root = root
        self.fields = fields

    @property
    def empty(self) -> bool:
        """True for the empty expression, which matches everything."""
        return type(self._root) is _All

    @property
    def needs_findings(self) -> bool:
        return bool(self.fields & {"rule", "severity", "word"})

    def matches(self, chain: Any, findings: Iterable[Any] = (), session: str | None = None) -> bool:
        """Whether the chain (a chain of the report) passes, given the findings about it.
        `session`: the id of its recording session (else `chain["session"]`, if any)."""
        return self._root.chain(chain, findings if isinstance(findings, Sequence) else list(findings), session)

    def matches_finding(self, finding: Any, chain: Any = None, session: str | None = None) -> bool:
        """Whether one finding passes; `chain`: the chain it is about (None: about none, or not at hand)."""
        return self._root.finding(finding, chain, session)

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"


# -- parsing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # "(", ")", "word"
    raw: str  # as written
    pieces: Pieces = ()


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "()":
            out.append(_Token(ch, ch))
            i += 1
            continue
        start, pieces, buf = i, [], []
        while i < n and not text[i].isspace() and text[i] not in "()":
            if text[i] == '"':
                if buf:
                    pieces.append(("".join(buf), False))
                    buf = []
                i += 1
                quoted: list[str] = []
                while i < n and text[i] != '"':
                    if text[i] == "\\" and i + 1 < n:
                        i += 1
                    quoted.append(text[i])
                    i += 1
                if i >= n:
                    raise FilterError(text[start:], "the quote is not closed")
                pieces.append(("".join(quoted), True))
                i += 1
            else:
                buf.append(text[i])
                i += 1
        if buf:
            pieces.append(("".join(buf), False))
        out.append(_Token("word", text[start:i], tuple(pieces)))
    return out


def _keyword(tok: _Token) -> str | None:
    if tok.kind == "word" and len(tok.pieces) == 1 and not tok.pieces[0][1]:
        word = tok.pieces[0][0].lower()
        if word in KEYWORDS:
            return word
    return None


class _Parser:
    def __init__(self, text: str, rules: Callable[[str], bool] | None) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.rules = rules
        self.fields: set[str] = set()
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> _Node:
        if not self.toks:
            return _All()
        node = self.or_()
        tok = self.peek()
        if tok is not None:  # only a `)` stops an or_ early
            raise FilterError(")", "closes no '('")
        return node

    def or_(self) -> _Node:
        parts = [self.and_("or")]
        while (tok := self.peek()) is not None and _keyword(tok) == "or":
            self.take()
            parts.append(self.and_("or"))
        return parts[0] if len(parts) == 1 else _Or(tuple(parts))

    def and_(self, after: str) -> _Node:
        parts: list[_Node] = []
        while (tok := self.peek()) is not None and tok.kind != ")" and _keyword(tok) != "or":
            if _keyword(tok) == "and":
                self.take()
                if not parts:
                    raise FilterError("and", "needs a term before it")
                nxt = self.peek()
                if nxt is None or nxt.kind == ")" or _keyword(nxt) in ("or", "and"):
                    raise FilterError("and", "needs a term after it")
                continue
            parts.append(self.unary())
        if not parts:
            tok = self.peek()
            if after == "or" and (self.i > 0 and _keyword(self.toks[self.i - 1]) == "or" or
                                  tok is not None and _keyword(tok) == "or"):
                raise FilterError("or", "needs a term on each side")
            if tok is not None and tok.kind == ")":
                raise FilterError("()" if self.i > 0 and self.toks[self.i - 1].kind == "(" else ")",
                                  "empty parentheses" if self.i > 0 and self.toks[self.i - 1].kind == "("
                                  else "closes no '('")
            raise FilterError("", "the expression is empty")  # pragma: no cover - parse() catches it first
        return parts[0] if len(parts) == 1 else _And(tuple(parts))

    def _deeper(self, raw: str) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(raw, f"nested more than {MAX_DEPTH} deep")

    def unary(self) -> _Node:
        tok = self.take()
        if _keyword(tok) == "not":
            nxt = self.peek()
            if nxt is None or nxt.kind == ")" or _keyword(nxt) in ("or", "and"):
                raise FilterError(tok.raw, "needs a term after it")
            self._deeper(tok.raw)
            node = _Not(self.unary())
            self.depth -= 1
            return node
        if tok.kind == "(":
            self._deeper("(")
            if (nxt := self.peek()) is not None and nxt.kind == ")":
                raise FilterError("()", "empty parentheses")
            node = self.or_()
            if self.peek() is None:
                raise FilterError("(", "is not closed")
            self.take()
            self.depth -= 1
            return node
        if tok.kind == ")":  # pragma: no cover - and_ stops at a `)`
            raise FilterError(")", "closes no '('")
        return self.term(tok)

    def term(self, tok: _Token) -> _Node:
        first, quoted = tok.pieces[0]
        m = None if quoted else _TERM.match(first)
        if m is not None and "://" in tok.raw and m.group(1).lower() not in TEXT_FIELDS | NUMBER_FIELDS.keys():
            m = None  # a URI (file:///x, https://…): a bare word, not a field
        if m is None:
            if not _plain(tok.pieces):
                raise FilterError(tok.raw, "an empty word")
            self.fields.add("word")
            return _Word(_matcher(tok.pieces, whole=False))
        name, op = m.group(1).lower(), m.group(2)
        rest = first[m.end():]
        pieces: Pieces = (((rest, False),) if rest else ()) + tok.pieces[1:]
        if name in NUMBER_FIELDS:
            self.fields.add(name)
            return self.compare(tok.raw, name, op, pieces)
        if name not in TEXT_FIELDS:
            raise FilterError(tok.raw, f"no field {m.group(1)!r} (fields: {', '.join([*TEXT_FIELDS, *NUMBER_FIELDS])}; "
                                       "quote a word that holds a colon)")
        if op != ":":
            raise FilterError(tok.raw, f"{name} is text: {name}:VALUE (comparisons are for "
                                       f"{', '.join(NUMBER_FIELDS)})")
        value = _plain(pieces)
        if not value:
            raise FilterError(tok.raw, f"{name}: needs a value")
        if not _wild(pieces):
            self.check_value(tok.raw, name, value)
        self.fields.add(name)
        return _Field(name, _matcher(pieces, whole=True))

    def check_value(self, raw: str, name: str, value: str) -> None:
        low = value.lower()
        if name == "severity" and low not in SEVERITIES:
            raise FilterError(raw, f"severity is {', '.join(SEVERITIES)}")
        if name == "outcome" and low not in OUTCOMES:
            raise FilterError(raw, f"outcome is {', '.join(OUTCOMES)}")
        if name == "rule" and self.rules is not None and not self.rules(value):
            raise FilterError(raw, "no rule has this id (see `mrtr-inspect rules`)")

    def compare(self, raw: str, name: str, op: str, pieces: Pieces) -> _Node:
        value = _plain(pieces)
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if number != number or number in (float("inf"), float("-inf")):
            raise FilterError(raw, f"{name} compares with a number ({name}>N, <, >=, <=, =)")
        return _Compare(name, op, number)


def _registered(rule_id: str) -> bool:
    from .rules import load_rules
    from .rules.registry import REGISTRY

    load_rules()
    return rule_id in REGISTRY or any(r.lower() == rule_id.lower() for r in REGISTRY)


def parse(text: str, *, rules: Callable[[str], bool] | None = _registered) -> Filter:
    """The filter of an expression; raises `FilterError` for a bad one. `rules`: a test that a
    `rule:` id (without wildcard) exists (default: the rule registry; None: any id)."""
    if len(text) > MAX_LENGTH:
        raise FilterError(text[:40] + "…", f"the expression is longer than {MAX_LENGTH} characters")
    p = _Parser(text, rules)
    root = p.parse()
    return Filter(text, root, frozenset(p.fields))
