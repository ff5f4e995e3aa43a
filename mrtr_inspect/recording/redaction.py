"""Redaction: secrets replaced by stable placeholders before a frame is written.

The same secret always becomes the same placeholder (a keyed hash), so a redacted recording still
replays: a request that carried a token carries the same placeholder on every round. Only the
secret's bytes are replaced; everything else stays byte-exact.

* headers: Authorization and Proxy-Authorization (the scheme is kept: `Bearer [redacted:…]`),
  Cookie, Set-Cookie, API-key style headers, and any configured header;
* JSON paths: dotted paths with `*` for any member or index (`params.arguments.password`,
  `params.inputResponses.*.content.token`); string values there are replaced in place.

Pure: the key is given by the caller (writer.py loads or creates it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import replace
from typing import Iterable

from ..core.events import Frame, HttpBody, HttpRequest, HttpResponse, SseEvent, StdioLine
from ..core.rawjson import JSON_TOKEN

DEFAULT_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "apikey",
    "x-auth-token", "x-access-token", "x-goog-api-key", "anthropic-api-key", "openai-api-key",
})
_SECRET_NAME = re.compile(r"(api[-_]?key|secret|token|password|credential)", re.I)
_PLACEHOLDER = re.compile(r"\[redacted:[0-9a-f]{12}\]")


class Redactor:
    def __init__(self, key: bytes, headers: Iterable[str] = (), paths: Iterable[str] = ()) -> None:
        self.key = key
        self.headers = DEFAULT_HEADERS | {h.lower() for h in headers}
        self.paths = [tuple(p.split(".")) for p in paths if p]
        self._sensitive: dict[str, bool] = {}  # header name as sent -> sensitive (names are few)

    # -- values ---------------------------------------------------------------------------------
    def placeholder(self, secret: str) -> str:
        if is_placeholder(secret):
            return secret  # already redacted
        digest = hmac.new(self.key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"[redacted:{digest[:12]}]"

    def header_value(self, name: str, value: str) -> str:
        n = name.lower()
        if n in ("authorization", "proxy-authorization"):
            scheme, sp, cred = value.partition(" ")
            if sp and cred and scheme.isalpha():
                return f"{scheme} {self.placeholder(cred)}"
            return self.placeholder(value)
        return self.placeholder(value)

    def sensitive_header(self, name: str) -> bool:
        known = self._sensitive.get(name)
        if known is None:
            n = name.lower()
            known = n in self.headers or bool(_SECRET_NAME.search(n))
            if len(self._sensitive) < 4096:
                self._sensitive[name] = known
        return known

    def redact_headers(self, headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        if not any(self.sensitive_header(k) for k, _ in headers):
            return headers
        return tuple((k, self.header_value(k, v) if self.sensitive_header(k) else v) for k, v in headers)

    # -- bodies ---------------------------------------------------------------------------------
    def redact_json(self, raw: bytes) -> bytes:
        if not self.paths:
            return raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
        spans = list(_string_spans(text, self.paths))
        if not spans:
            return raw
        out = text
        for start, end, value in sorted(spans, reverse=True):
            out = out[:start] + json.dumps(self.placeholder(value), ensure_ascii=False) + out[end:]
        return out.encode("utf-8")

    def redact_sse(self, raw: bytes) -> bytes:
        """The event's data (its data lines joined, as the event-stream rules join them) redacted as
        JSON, in place: a secret's token never spans lines, so each line keeps its own bytes."""
        if not self.paths:
            return raw
        spans = []  # where each data line's value lies in raw
        for m in _SSE_LINE.finditer(raw):
            if m.group(1).startswith(b"data:"):
                start = m.start(1) + 5
                spans.append((start + (raw[start:start + 1] == b" "), m.end(1)))
        if not spans:
            return raw
        pieces = self.redact_json(b"\n".join(raw[a:b] for a, b in spans)).split(b"\n")
        out = bytearray(raw)
        for (a, b), piece in reversed(list(zip(spans, pieces))):
            out[a:b] = piece
        return bytes(out)

    # -- frames ---------------------------------------------------------------------------------
    def frame(self, f: Frame) -> Frame:
        t = type(f)
        if t is StdioLine:
            return replace(f, data=self.redact_json(f.data)) if self.paths else f
        if t is HttpRequest:
            h, b = self.redact_headers(f.headers), self.redact_json(f.body)
            return f if h is f.headers and b is f.body else replace(f, headers=h, body=b)
        if t is HttpResponse:
            h = self.redact_headers(f.headers)
            return f if h is f.headers else replace(f, headers=h)
        if t is HttpBody:
            return replace(f, data=self.redact_json(f.data)) if self.paths else f
        if t is SseEvent:
            return replace(f, raw=self.redact_sse(f.raw)) if self.paths else f
        return f


_SSE_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\r|\n|\Z)")


def is_placeholder(value: object) -> bool:
    """Whether a value is a redaction placeholder (`[redacted:<12 hex>]`)."""
    return type(value) is str and _PLACEHOLDER.fullmatch(value) is not None


def redacts(paths: Iterable[str], path: tuple) -> bool:
    """Whether the configured `redact_paths` cover the JSON path `path` (a tuple of names)."""
    return _match(path, [tuple(p.split(".")) for p in paths if p])


def _match(path: tuple, patterns: list[tuple]) -> bool:
    for pat in patterns:
        if len(pat) == len(path) and all(p == "*" or p == str(x) for p, x in zip(pat, path)):
            return True
    return False


def _string_spans(text: str, patterns: list[tuple]):
    """(start, end, value) of each string scalar whose path matches a pattern."""
    kinds: list[str] = []
    names: list = []  # name (or index) of each open container within its parent
    counters: list[int] = []  # next array index, per open array
    key = None
    expect_key = False
    for m in JSON_TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == "{" or c == "[":
            names.append(_slot(kinds, counters, key))
            kinds.append(c)
            counters.append(0)
            key = None
            expect_key = c == "{"
        elif c == "}" or c == "]":
            if kinds:
                kinds.pop()
                names.pop()
                counters.pop()
                if kinds and kinds[-1] == "[":
                    counters[-1] += 1
            key = None
            expect_key = False
        elif c == ",":
            expect_key = bool(kinds) and kinds[-1] == "{"
        elif c == ":":
            expect_key = False
        elif expect_key:
            try:
                key = json.loads(tok)
            except ValueError:
                key = tok
        else:
            slot = _slot(kinds, counters, key)
            if c == '"' and slot is not None:
                path = tuple(names[1:]) + (slot,)
                # in a batch (an array at the top) each member's paths count from the member
                if _match(path, patterns) or (kinds[0] == "[" and _match(path[1:], patterns)):
                    try:
                        yield m.start(), m.end(), json.loads(tok)
                    except ValueError:
                        pass
            if kinds and kinds[-1] == "[":
                counters[-1] += 1
            key = None


def _slot(kinds: list, counters: list, key):
    if not kinds:
        return None
    if kinds[-1] == "[":
        return counters[-1]
    return key
