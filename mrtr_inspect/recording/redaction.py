"""Redaction: secrets replaced by stable placeholders before a frame is written.

The same secret always becomes the same placeholder (a keyed hash), so a redacted recording still
replays: a request that carried a token carries the same placeholder on every round. Only the
secret's bytes are replaced; everything else stays byte-exact.

* headers: Authorization and Proxy-Authorization (the scheme is kept: `Bearer [redacted:…]`),
  Cookie, Set-Cookie, API-key style headers, and any configured header;
* URLs: the values of secret-looking query parameters (`?api_key=[redacted:…]&page=2`) of every
  URL kept: the request path, `Location`, `Content-Location` and `Referer`, the proxy's upstream;
* a recorded command line: the value after a secret-looking option (`--api-key V`, `--token=V`),
  of a `NAME=VALUE` pair with a secret-looking name, of a `Header: value` argument for a redacted
  header, and the query of a URL argument;
* JSON paths (core.jsonpath: `params.arguments.password`, `params.inputResponses.*.content.token`,
  `**.token`); string values there are replaced in place.

A placeholder stands for the secret's text as the peer meant it: a query value percent-decoded, so
a token sent in a header and in a URL has one placeholder. Names the settings add
(`redact_query`, `redact_args`) are redacted too, names in `redact_keep` never (docs/configuration.md).

Pure: the key is given by the caller (writer.py loads or creates it). A recording's header names the
key's id (`redaction.keys`, an HMAC of a constant: nothing of the key), so replay knows whether its
placeholders were made with the same key as the live side's (replay/matching.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import replace
from typing import Iterable
from urllib.parse import unquote_plus

from ..core import jsonpath
from ..core.events import Frame, HttpBody, HttpRequest, HttpResponse, SessionEnd, SessionStart, SseEvent, StdioLine
from ..core.rawjson import scalar_tokens

DEFAULT_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "apikey",
    "x-auth-token", "x-access-token", "x-goog-api-key", "anthropic-api-key", "openai-api-key",
})
_SECRET_NAME = re.compile(r"(api[-_]?key|secret|token|password|credential)", re.I)
_PLACEHOLDER = re.compile(r"\[redacted:[0-9a-f]{12}\]")
PLACEHOLDERS = _PLACEHOLDER  # found in a longer text (a URL, a command line)
#: headers whose value is a URL: its query is redacted
URL_HEADERS = frozenset({"location", "content-location", "referer"})
# query parameters and command-line options: the header rule, a token not being a count (`max_tokens`)
# nor a tokenizer, and a few short names
_SECRET_ARG = re.compile(r"api[-_]?key|secret|token(?!s|iz|is)|passw(?:or)?d|credential|private[-_]?key|"
                         r"access[-_]?key|session[-_]?id|client[-_]?assertion|(?:^|[-_.])(?:pat|key)$", re.I)
_SECRET_WORDS = frozenset({"key", "auth", "sig", "signature", "pwd", "pass", "jwt", "bearer", "apikey", "sid"})
_OPTION = re.compile(r"(-{1,2})([A-Za-z][\w.-]*)(?:(=)(.*))?\Z", re.S)
_ENV_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_HEADER_ARG = re.compile(r"([A-Za-z][A-Za-z0-9-]*):\s*(.*)\Z", re.S)
_KEY_ID = b"mrtr-inspect redaction key id"


def secret_name(name: str) -> bool:
    """Whether a query parameter, an option or a variable of this name holds a secret, by default:
    `api_key`, `access_token`, `client_secret`, `password`, `TOKEN`, `STRIPE_KEY`, `GITHUB_PAT`,
    `key`, `sig`… but not `max_tokens`, `tokenizer`, `keyword`, `author`, `keys`."""
    n = name.strip().lower()
    return n in _SECRET_WORDS or _SECRET_ARG.search(n) is not None


class Redactor:
    def __init__(self, key: bytes, headers: Iterable[str] = (), paths: Iterable[str] = (),
                 query: Iterable[str] = (), args: Iterable[str] = (), keep: Iterable[str] = ()) -> None:
        self.key = key
        self.keep = frozenset(k.strip().lower().lstrip("-") for k in keep)
        self.headers = (DEFAULT_HEADERS | {h.lower() for h in headers}) - self.keep
        self.names = frozenset(n.strip().lower().lstrip("-") for n in (*query, *args)) - self.keep
        self.path_texts = [p for p in paths if p and jsonpath.parse(p)]
        self.paths = [jsonpath.parse(p) for p in self.path_texts]
        #: how many strings each configured path redacted (`unmatched`: the ones that redacted none)
        self.hits = [0] * len(self.paths)
        self._sensitive: dict[str, int] = {}  # header name as sent -> 0 kept, 1 secret, 2 a URL (names are few)
        self.key_id = hmac.new(key, _KEY_ID, hashlib.sha256).hexdigest()[:12]

    def unmatched(self) -> list[str]:
        """The configured paths that redacted no string value so far (a typo, or a path the traffic
        never had)."""
        return [p for p, n in zip(self.path_texts, self.hits) if not n]

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
        return self._header_kind(name) == 1

    def _header_kind(self, name: str) -> int:
        known = self._sensitive.get(name)
        if known is None:
            n = name.lower()
            if n in self.keep:
                known = 0
            elif n in self.headers or _SECRET_NAME.search(n):
                known = 1
            else:
                known = 2 if n in URL_HEADERS else 0
            if len(self._sensitive) < 4096:
                self._sensitive[name] = known
        return known

    def redact_headers(self, headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        kinds = [self._header_kind(k) for k, _ in headers]
        if not any(kinds):
            return headers
        out = tuple((k, v if c == 0 else self.header_value(k, v) if c == 1 else self.url(v))
                    for (k, v), c in zip(headers, kinds))
        return headers if out == headers else out

    # -- URLs and command lines -----------------------------------------------------------------
    def secret_arg(self, name: str) -> bool:
        n = name.strip().lower()
        return n not in self.keep and (n in self.names or secret_name(n))

    def url(self, value: str) -> str:
        """`value` (a URL, or a request target `/mcp?…`) with its secret-looking query values redacted."""
        q = value.find("?")
        if q < 0:
            return value
        end = value.find("#", q)
        end = len(value) if end < 0 else end
        parts = value[q + 1:end].split("&")
        changed = False
        for i, part in enumerate(parts):
            name, eq, v = part.partition("=")
            if eq and v and self.secret_arg(unquote_plus(name)):
                red = self.placeholder(unquote_plus(v))
                if red != v:
                    parts[i], changed = f"{name}={red}", True
        return value[:q + 1] + "&".join(parts) + value[end:] if changed else value

    def command(self, argv: list) -> list:
        """A recorded command line with its secrets redacted (the module's docstring says where)."""
        out: list = []
        value_of = None  # the secret option whose value comes next
        for a in argv:
            if type(a) is not str:
                out.append(a)
                value_of = None
                continue
            if value_of is not None and not a.startswith("-"):
                out.append(self.placeholder(a))
                value_of = None
                continue
            value_of = None
            m = _OPTION.match(a)
            if m is not None:
                dashes, name, eq, v = m.groups()
                if self.secret_arg(name) and not name.lower().startswith("no-"):
                    if not eq:
                        value_of = name
                        out.append(a)
                    else:
                        out.append(f"{dashes}{name}={self.placeholder(v)}" if v else a)
                    continue
                out.append(f"{dashes}{name}={self.url(v)}" if eq else a)
                continue
            m = _ENV_PAIR.match(a)
            if m is not None and self.secret_arg(m.group(1)) and m.group(2):
                out.append(f"{m.group(1)}={self.placeholder(m.group(2))}")
                continue
            m = _HEADER_ARG.match(a)
            if m is not None and m.group(2) and "://" not in a and self.sensitive_header(m.group(1)):
                out.append(f"{m.group(1)}: {self.header_value(m.group(1), m.group(2))}")
                continue
            out.append(self.url(a))
        return out

    def session_info(self, info: dict) -> dict:
        """A session header's or end's info: the command line and every URL in it redacted."""
        out = {}
        for k, v in info.items():
            if k == "command" and type(v) is list:
                v = self.command(v)
            elif type(v) is str and "?" in v:
                v = self.url(v)
            out[k] = v
        return out

    # -- bodies ---------------------------------------------------------------------------------
    def redact_json(self, raw: bytes) -> bytes:
        if not self.paths:
            return raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
        spans = list(_string_spans(text, self.paths, self.hits))
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
            h, b, p = self.redact_headers(f.headers), self.redact_json(f.body), self.url(f.path)
            return f if h is f.headers and b is f.body and p is f.path else replace(f, headers=h, body=b, path=p)
        if t is SessionStart:
            info = self.session_info(f.info)
            red = info.get("redaction")
            keys = red.get("keys") if type(red) is dict else None
            keys = sorted({*(k for k in keys if type(k) is str), self.key_id}) if type(keys) is list else [self.key_id]
            info["redaction"] = {**(red if type(red) is dict else {}), "keys": keys}
            return replace(f, info=info)
        if t is SessionEnd:
            info = self.session_info(f.info)
            return f if info == f.info else replace(f, info=info)
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
    return jsonpath.any_match(jsonpath.parse_all(paths), path)


def _which(patterns: list[tuple], path: tuple) -> int:
    for i, pat in enumerate(patterns):
        if jsonpath.matches(pat, path):
            return i
    return -1


def _string_spans(text: str, patterns: list[tuple], hits: list[int] | None = None):
    """(start, end, value) of each string scalar whose path matches a pattern (`hits` counts them
    per pattern). In a batch (an array at the top) each member's paths count from the member."""
    batch = text.lstrip()[:1] == "["
    for stack, slot, m in scalar_tokens(text):
        tok = m.group()
        if tok[0] != '"':
            continue
        path = (*stack, slot)
        i = _which(patterns, path)
        if i < 0 and batch:
            i = _which(patterns, path[1:])
        if i < 0:
            continue
        try:
            value = json.loads(tok)
        except ValueError:
            continue
        if hits is not None:
            hits[i] += 1
        yield m.start(), m.end(), value
