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
* JSON members with a secret's name (`MEMBERS`: `password`, `api_token`, `access_token`, `apiKey`,
  `client-secret`…; the name's case and its `-`/`_` separators do not matter), anywhere in a message:
  a string value, or the string items of an array value; the same members inside a string that
  holds JSON (a tool result's text mirror of its `structuredContent`: `"{\\"token\\": \\"…\\"}"`);
* JSON paths (core.jsonpath: `params.arguments.password`, `params.inputResponses.*.content.token`,
  `**.token`); string values there are replaced in place.

A placeholder stands for the secret's text as the peer meant it: a query value percent-decoded, so
a token sent in a header and in a URL has one placeholder. Names the settings add
(`redact_query`, `redact_args`, `redact_members`) are redacted too, names in `redact_keep` never
(docs/configuration.md).

Member names are matched whole (normalised: lower case, `-`, `_`, `.` and spaces dropped), never as
substrings: `tokens`, `max_tokens`, `maxTokens`, `tokenCount`, `progressToken`, `requestState`,
`cursor`, `nextCursor` are not secrets. Only string values are replaced, so a schema that describes a
`password` property (`{"password": {"type": "string"}}`) keeps its shape. A message is walked only
when a bytes search finds a secret's name followed by `":` (or an escaped ASCII letter, which a name
could hide behind): the rest pass with one regular-expression scan.

Pure: the key is given by the caller (writer.py loads or creates it). A recording's header names the
key's id (`redaction.keys`, an HMAC of a constant: nothing of the key), so replay knows whether its
placeholders were made with the same key as the live side's (replay/matching.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections import Counter
from dataclasses import replace
from typing import Iterable
from urllib.parse import unquote_plus

from ..core import jsonpath
from ..core.events import Frame, HttpBody, HttpRequest, HttpResponse, SessionEnd, SessionStart, SseEvent, StdioLine
from ..core.rawjson import scalar_tokens

DEFAULT_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "apikey",
    "x-auth-token", "x-access-token", "x-goog-api-key", "anthropic-api-key", "openai-api-key",
    "ocp-apim-subscription-key", "x-functions-key", "x-amz-security-token",
})
# any other header whose name says api-key, secret, token, password, credential, signature or
# authorization, or ends in `-key`, `-auth`, `-sig` (`X-Functions-Key`, `Ocp-Apim-Subscription-Key`)
_SECRET_NAME = re.compile(r"(api[-_]?key|secret|token|passw(?:or)?d|credential|signature|authorization|"
                          r"(?:^|[-_])(?:key|auth|sig)$)", re.I)
_PLACEHOLDER = re.compile(r"\[redacted:[0-9a-f]{12}\]")
PLACEHOLDERS = _PLACEHOLDER  # found in a longer text (a URL, a command line)
#: headers whose value is an identity the analysis and replay read: redacted only when it looks like a
#: credential (a JWT, a high-entropy token), consistently, so sessions and resumption still pair up
IDENTITY_HEADERS = frozenset({"mcp-session-id", "last-event-id"})
#: headers whose value is a URL: its query is redacted (`link`: each `<URL>` of it)
URL_HEADERS = frozenset({"location", "content-location", "referer", "link"})
# query parameters and command-line options: the header rule, a token not being a count (`max_tokens`)
# nor a tokenizer, and a few short names
_SECRET_ARG = re.compile(r"api[-_]?key|secret|token(?!s|iz|is)|passw(?:or)?d|credential|private[-_]?key|"
                         r"access[-_]?key|session[-_]?id|client[-_]?assertion|code[-_]?verifier|signature|"
                         r"(?:^|[-_.])(?:pat|key|sig|auth)$", re.I)
_SECRET_WORDS = frozenset({"key", "auth", "sig", "signature", "pwd", "pass", "jwt", "bearer", "apikey", "sid"})
#: query parameters only: an OAuth authorization code (`?code=…&state=…` in a redirect's Location)
_QUERY_WORDS = frozenset({"code"})
#: JSON member names whose string values are secrets, normalised (`member_key`): docs/recording-format.md
MEMBERS = (
    "password", "passwd", "pwd", "passphrase", "secret", "client_secret", "api_secret", "secret_key",
    "secret_access_key", "token", "access_token", "refresh_token", "id_token", "api_token", "auth_token",
    "bearer_token", "session_token", "security_token", "api_key", "x_api_key", "private_key", "auth",
    "authorization", "credential", "credentials", "cookie", "client_assertion", "code_verifier",
)
_OPTION = re.compile(r"(-{1,2})([A-Za-z][\w.-]*)(?:(=)(.*))?\Z", re.S)
_ENV_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_HEADER_ARG = re.compile(r"([A-Za-z][A-Za-z0-9-]*):\s*(.*)\Z", re.S)
_KEY_ID = b"mrtr-inspect redaction key id"


# what looks like a credential (recording/secrets.py describes the heuristic)
_KNOWN = [
    ("an OpenAI/Anthropic-style key (sk-…)", re.compile(r"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token (xox…)", re.compile(r"(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}")),
    ("a GitLab token", re.compile(r"glpat-[A-Za-z0-9_-]{20,}")),
    ("a Google API key", re.compile(r"AIza[A-Za-z0-9_-]{35}")),
    ("an AWS access key id", re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}")),
    ("a JWT", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*", re.S)),
]
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,512}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
ENTROPY = 4.2  # bits per character


def entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def looks_secret(value: str) -> str | None:
    """What the value looks like ("a GitHub token", "a high-entropy token"), or None."""
    if is_placeholder(value):
        return None
    v = value.strip()
    for what, rx in _KNOWN:
        if rx.fullmatch(v):
            return what
    if (_TOKEN.fullmatch(v) and not _UUID.fullmatch(v) and any(c.isdigit() for c in v)
            and any(c.isalpha() for c in v) and entropy(v) > ENTROPY):
        return "a high-entropy token"
    return None


def member_key(name: str) -> str:
    """A member name as the member list compares it: `API-Key`, `api_key`, `apiKey` → `apikey`."""
    return _SEPARATORS.sub("", name).lower()


_SEPARATORS = re.compile(r"[-_. ]")


def default_member(name: str) -> bool:
    """Whether the defaults redact a JSON member of this name."""
    return member_key(name) in _DEFAULT_MEMBER_KEYS


_DEFAULT_MEMBER_KEYS = frozenset(member_key(n) for n in MEMBERS)


def _names(keys: Iterable[str], cased: bool = False) -> tuple[bytes, bytes] | None:
    """The pattern of the member names `keys` (normalised) after the opening quote, and their first
    characters; None when there are no names. The names are one trie (`(?:a(?:pi…|uth…)|p(?:ass…|wd)|…)`),
    with any run of `-`, `_`, `.` and spaces before, between and after the characters, as `member_key`
    drops them (`_token`, `api__key`, `token_`), then `"` (or `\\"`, inside a string that holds JSON),
    spaces and `:`. For a lower-cased text; `cased`: for the text as it is, an ASCII letter spelled as
    both of its cases (`[tT]`) and nothing else changed, so the pattern finds in a text exactly what
    the other finds in the text lower-cased (`bytes.lower` changes A-Z only, and no class here holds
    a letter)."""
    root: dict = {}
    for k in keys:
        if k:
            node = root
            for c in k:
                node = node.setdefault(c, {})
            node[""] = {}
    if not root:
        return None

    def char(c: str) -> bytes:
        b = c.encode()
        return b"[" + b + b.upper() + b"]" if cased and b.isalpha() and b.isascii() else re.escape(b)

    def emit(node: dict, first: bool) -> bytes:
        alts = [char(c) + emit(child, False) for c, child in sorted(node.items()) if c]
        if not alts:
            return b""
        body = (b"" if first else _SEPS) + (alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")")
        return b"(?:" + body + b")?" if "" in node else body

    # `\s` spelled out, as Python's `re` has it for bytes (RE2's lacks \v)
    return _SEPS + emit(root, True) + _SEPS + rb'\\?"[\t\n\x0b\x0c\r ]*:', "".join(sorted(root)).encode()


def _member_search(keys: Iterable[str], engine: str = "re2"):
    """A bytes search for `"NAME":` (or `\\"NAME\\":`, inside a string that holds JSON) for the member
    names `keys` (normalised), in a lower-cased text (`_names`).

    With RE2 (`engine="re2"`, when google-re2 is installed) the pattern runs as a DFA: one pass over
    the text whatever it holds. Python's `re` (`engine="re"`, the fallback) enters its matcher at every
    quote, about 200 instructions each, so there a lookahead passes over a quote that starts no
    secret's name in one test of its next character. Both find the same texts
    (tests/recording/test_redaction.py); None when there are no names."""
    made = _names(keys)
    if made is None:
        return None
    names, first = made
    try:  # RE2 (google-re2), imported when a redactor is made (2.4 ms): not by what makes none
        import re2 as _re2
    except ImportError:  # pragma: no cover - a platform without its wheel: `re` searches
        engine = "re"
    if engine == "re2":
        try:
            return _re2.compile(b'"' + names, _latin1(_re2)).search
        except _re2.error:  # pragma: no cover - a name RE2 cannot spell (the settings' own): `re` searches
            pass
    # the lookahead: a quote not followed by a name's first letter is passed over in one step
    return re.compile(rb'"(?=[' + re.escape(first) + rb'\-_. ])' + names).search


def _latin1(re2_module):
    options = re2_module.Options()
    options.encoding = re2_module.Options.Encoding.LATIN1  # a byte is a character: no UTF-8 decoding
    return options


def _text_search(keys: Iterable[str]):
    """`may_redact`'s two searches by RE2, over the text as it is (no lower-cased copy): for a
    secret's name as `_member_search` finds it in the text lower-cased (the pattern spells each letter
    in both cases: `_names(cased=True)`), and for an escaped character a name could hide behind
    (`_ESCAPED`), asked only of a text with a backslash. Apart, not as one pattern: a 64 KiB chunk
    of the bench's messages takes RE2 about 196 µs for the two as one pattern, 113 µs for the names
    alone, and the escapes alone, which begin with a backslash, are found by `memchr` in a few
    (`bytes.find` of `\\u00` is no `memchr`: about 60 µs; docs/performance.md).

    Each is google-re2's compiled pattern, whose own `_regexp.Match(_UNANCHORED, text, 0, len(text))`
    gives a first span that starts at 0 or after when it finds (-1 when not): its Python wrapper
    costs about 3,500 instructions a search on its own (a generator and a match object). None
    without RE2 (or a google-re2 whose patterns do not answer so), or without names: `may_redact`
    then asks `_member_search`. (The wrappers, not their methods, are kept: they are copied with the
    redactor, as the proxy's tests copy it for the analysis, by their patterns.)"""
    global _UNANCHORED
    made = _names(keys, cased=True)
    if made is None:
        return None
    try:
        import re2 as _re2
        names, escaped = _re2.compile(b'"' + made[0], _latin1(_re2)), _re2.compile(_ESCAPED, _latin1(_re2))
        _UNANCHORED = _re2._Anchor.UNANCHORED
        probes = (b"x", b"\\u0041", b'{"a":1}', b'{"A_Token" :1}', b'\\"password\\":', b'"\\u0070wd":', b'"to"ken":')
        for rx, hit in ((names, 4), (escaped, 1)):
            found = [rx._regexp.Match(_UNANCHORED, t, 0, len(t))[0][0] >= 0 for t in probes]
            if found != [rx.search(t) is not None for t in probes] or not found[hit] or found[0]:
                return None  # pragma: no cover
        return names, escaped
    except Exception:  # pragma: no cover - no RE2, a name it cannot spell, another google-re2
        pass
    return None  # pragma: no cover


_UNANCHORED = None  # google-re2's anchor of a search (`_text_search`)

#: bytes past which `may_redact` searches by RE2 (when installed), in one pass over the text as it is
#: (`_text_search`); below, RE2's cost per call (about 7,000 instructions) is more than `re`'s per
#: quote (bench/tee_put.py; a 37-byte answer: 6,500 by `re`, 7,500 by RE2; a 107-byte one 12,000 and 9,000)
SEARCH_BY_DFA_ABOVE = 64

_SEPS = rb"[-_. ]*"  # what member_key drops (a run: the classes are apart, so no pattern backtracks far)


# an escaped ASCII letter, digit, `-` or `_` (`\u0070assword`): no encoder writes one, but a name could
# hide behind it, so a message that has one is walked
_ESCAPED = rb"\\u00(?:[46][1-9a-fA-F]|[57][0-9aA]|3[0-9]|2[dD]|5[fF])"
_ESCAPED_NAME_CHAR = re.compile(_ESCAPED).search
# a secret member inside a string that holds JSON, as the outer string spells it: `\"token\": \"VALUE\"`
# (VALUE: the outer escapes of the inner string's characters; the inner escapes as `\\` + one more)
_NESTED = r'\\"([^"\\]{1,64})\\"(?:\s|\\[nrt])*:(?:\s|\\[nrt])*\\"((?:[^"\\]|\\[^"\\]|\\\\(?:[^"\\]|\\.))*)\\"'
_NESTED_MEMBER = re.compile(_NESTED, re.S)


def secret_header_name(name: str) -> bool:
    """Whether the defaults redact a header of this name (beyond `DEFAULT_HEADERS`)."""
    return _SECRET_NAME.search(name) is not None


def secret_name(name: str) -> bool:
    """Whether a query parameter, an option or a variable of this name holds a secret, by default:
    `api_key`, `access_token`, `client_secret`, `password`, `TOKEN`, `STRIPE_KEY`, `GITHUB_PAT`,
    `key`, `sig`… but not `max_tokens`, `tokenizer`, `keyword`, `author`, `keys`."""
    n = name.strip().lower()
    return n in _SECRET_WORDS or _SECRET_ARG.search(n) is not None


class Redactor:
    def __init__(self, key: bytes, headers: Iterable[str] = (), paths: Iterable[str] = (),
                 query: Iterable[str] = (), args: Iterable[str] = (), keep: Iterable[str] = (),
                 members: Iterable[str] = ()) -> None:
        self.key = key
        keep = list(keep)
        self.keep = frozenset(k.strip().lower().lstrip("-") for k in keep)
        self.headers = (DEFAULT_HEADERS | {h.lower() for h in headers}) - self.keep
        self.names = frozenset(n.strip().lower().lstrip("-") for n in (*query, *args)) - self.keep
        #: JSON member names (normalised: `member_key`) whose string values are redacted
        self.members = (_DEFAULT_MEMBER_KEYS | {member_key(m) for m in members}) - {member_key(k) for k in keep}
        # a long text (the tee's chunks) is searched by RE2, whose call costs about 1 µs more; a short one
        # (a message, or a chunk of one or two) by `re`, which pays per quote instead (`may_redact`)
        self._members_at = _member_search(self.members)
        self._members_short = _member_search(self.members, "re")
        # the same answer, in one pass of RE2 over the text as it is
        self._text_rx, self._escape_rx = _text_search(self.members) or (None, None)
        self._member_cache: dict[str, bool] = {}
        self.path_texts = [p for p in paths if p and jsonpath.parse(p)]
        self.paths = [jsonpath.parse(p) for p in self.path_texts]
        #: how many strings each configured path redacted (`unmatched`: the ones that redacted none)
        self.hits = [0] * len(self.paths)
        self._sensitive: dict[str, int] = {}  # name as sent -> 0 kept, 1 secret, 2 a URL, 3 links, 4 an id (names are few)
        self.key_id = hmac.new(key, _KEY_ID, hashlib.sha256).hexdigest()[:12]

    def note_paths(self, raw: bytes) -> bool:
        """Count in `hits` the configured paths' string values in `raw`, a payload this redaction
        already redacted elsewhere (the tee's analysis reads back what its forwarding threads
        redacted and recorded): a placeholder stands where each value was, so the count is the one
        redacting it would have made. Returns whether a path is still without a hit."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return True
        _string_spans(text, self.paths, self.hits)
        return not all(self.hits)

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

    def if_secret(self, value: str) -> str:
        """`value` redacted when it looks like a credential (`looks_secret`), else as is: an identity the
        analysis and replay read (a session id, an SSE event id), kept unless it is a token."""
        return self.placeholder(value) if looks_secret(value) is not None else value

    def sensitive_header(self, name: str) -> bool:
        return self.header_kind(name) == 1

    def header_kind(self, name: str) -> int:
        """How a header of this name is redacted: 0 not at all; else its `redact_header` kind."""
        known = self._sensitive.get(name)
        if known is None:
            n = name.lower()
            if n in self.keep:
                known = 0
            elif n in self.headers or secret_header_name(n):
                known = 1
            else:
                known = (3 if n == "link" else 2) if n in URL_HEADERS else 4 if n in IDENTITY_HEADERS else 0
            if len(self._sensitive) < 4096:
                self._sensitive[name] = known
        return known

    def redact_header(self, name: str, value: str, kind: int) -> str:
        """A header's value as `redact_headers` writes it, `kind` being `header_kind(name)`."""
        return (value if kind == 0 else self.header_value(name, value) if kind == 1 else self.url(value) if kind == 2
                else self.link(value) if kind == 3 else self.if_secret(value))

    def redact_headers(self, headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        kinds = [self.header_kind(k) for k, _ in headers]
        if not any(kinds):
            return headers
        out = tuple((k, self.redact_header(k, v, c)) for (k, v), c in zip(headers, kinds))
        return headers if out == headers else out

    # -- URLs and command lines -----------------------------------------------------------------
    def secret_arg(self, name: str) -> bool:
        n = name.strip().lower()
        return n not in self.keep and (n in self.names or secret_name(n))

    def _secret_query(self, name: str) -> bool:
        return self.secret_arg(name) or (name.strip().lower() in _QUERY_WORDS and name.strip().lower() not in self.keep)

    def link(self, value: str) -> str:
        """A `Link` header's value with the query of each `<URL>` in it redacted."""
        return _LINK_URL.sub(lambda m: f"<{self.url(m.group(1))}>", value) if "?" in value else value

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
            if eq and v and self._secret_query(unquote_plus(name)):
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
    def secret_member(self, name: str) -> bool:
        """Whether a JSON member of this name has its string values redacted (`MEMBERS`, the
        settings' `redact_members`, less `redact_keep`)."""
        known = self._member_cache.get(name)
        if known is None:
            known = member_key(name) in self.members
            if len(self._member_cache) < 4096:
                self._member_cache[name] = known
        return known

    def may_redact(self, raw: bytes) -> bool:
        """Whether `redact_json` may change `raw` by its member names (a bytes search; the configured
        paths are the caller's: `paths`)."""
        if len(raw) > SEARCH_BY_DFA_ABOVE:
            rx = self._text_rx
            if rx is not None:
                return (rx._regexp.Match(_UNANCHORED, raw, 0, len(raw))[0][0] >= 0 or (
                    raw.find(b"\\") >= 0 and self._escape_rx._regexp.Match(_UNANCHORED, raw, 0, len(raw))[0][0] >= 0))
            at = self._members_at
        else:
            at = self._members_short
        return at is not None and (at(raw.lower()) is not None or (raw.find(b"\\u00") >= 0 and _ESCAPED_NAME_CHAR(raw) is not None))

    def redact_json(self, raw: bytes) -> bytes:
        if not self.paths and not self.may_redact(raw):
            return raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
        spans = _string_spans(text, self.paths, self.hits, self.secret_member if self._members_at else None)
        if not spans:
            return raw
        pieces, at = [], 0
        for start, end, value in spans:  # in order, not overlapping: one pass (a long message with many secrets is linear)
            pieces += [text[at:start], self._replacement(text, start, end, value)]
            at = end
        pieces.append(text[at:])
        return "".join(pieces).encode("utf-8")

    def _replacement(self, text: str, start: int, end: int, value) -> str:
        if type(value) is str:
            return json.dumps(self.placeholder(value), ensure_ascii=False)
        return self.placeholder(value[0])  # inside a string: the placeholder needs no escape

    def redact_sse(self, raw: bytes) -> bytes:
        """The event's data (its data lines joined, as the event-stream rules join them) redacted as
        JSON, in place: a secret's token never spans lines, so each line keeps its own bytes. An `id:`
        that looks like a credential is redacted too (`if_secret`)."""
        if b"id:" in raw:
            raw = _SSE_ID.sub(self._sse_id, raw)
        if not self.paths and not self.may_redact(raw):
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

    def _sse_id(self, m: re.Match) -> bytes:
        try:
            value = m.group(2).decode("utf-8")
        except UnicodeDecodeError:
            return m.group()
        red = self.if_secret(value)
        return m.group() if red is value else m.group(1) + red.encode()

    # -- frames ---------------------------------------------------------------------------------
    def frame(self, f: Frame) -> Frame:
        t = type(f)
        if t is StdioLine:
            d = self.redact_json(f.data)
            return f if d is f.data else replace(f, data=d)
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
            d = self.redact_json(f.data)
            return f if d is f.data else replace(f, data=d)
        if t is SseEvent:
            r = self.redact_sse(f.raw)
            return f if r is f.raw else replace(f, raw=r)
        return f


_SSE_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\r|\n|\Z)")
_LINK_URL = re.compile(r"<([^<>]*)>")
_SSE_ID = re.compile(rb"(?m)^(id:[ ]?)([^\r\n]+)")


def is_placeholder(value: object) -> bool:
    """Whether a value is a redaction placeholder (`[redacted:<12 hex>]`)."""
    return type(value) is str and _PLACEHOLDER.fullmatch(value) is not None


def path_needles(redactor: Redactor) -> tuple[bytes, ...] | None:
    """Bytes one of which a line holds if the configured paths may redact something in it (the JSON
    text of a member name each path ends in); None when that cannot be told (every line is
    redacted one by one); () when no path is configured."""
    paths = getattr(redactor, "paths", None)
    if paths is None:
        return None
    out = []
    for path in paths:
        if type(path) is not tuple:
            return None
        # a wildcard (`*`, `**`) or an index names no member; a member a path matches holds the last
        # name it spells, whole or as the part after a dot (jsonpath matches `a.b` as `a`, `b`), so
        # the name's JSON text without its quotes is what the line holds
        names = [p for p in path if type(p) is str and p not in ("*", "**") and not p.isdigit()]
        if not names:
            return None
        out.append(json.dumps(names[-1], ensure_ascii=False).encode("utf-8")[1:-1])
    return tuple(out)


def redacts(paths: Iterable[str], path: tuple) -> bool:
    """Whether the configured `redact_paths` cover the JSON path `path` (a tuple of names)."""
    return jsonpath.any_match(jsonpath.parse_all(paths), path)


def _which(patterns: list[tuple], path: tuple) -> int:
    for i, pat in enumerate(patterns):
        if jsonpath.matches(pat, path):
            return i
    return -1


def _string_spans(text: str, patterns: list[tuple], hits: list[int] | None = None,
                  secret_member=None) -> list:
    """(start, end, value) of each string to redact, in order and not overlapping: each string scalar
    whose path matches a pattern (`hits` counts them per pattern), or whose member name (the name of
    the array holding it) is a secret's (`secret_member(name)`); value is the string, or a 1-tuple of
    it for a secret member inside a string that holds JSON (only that member's value is replaced).
    In a batch (an array at the top) each member's paths count from the member."""
    batch = text.lstrip()[:1] == "["
    out: list = []
    for stack, slot, m in scalar_tokens(text):
        tok = m.group()
        if tok[0] != '"':
            continue
        i = -1
        if patterns:
            path = (*stack, slot)
            i = _which(patterns, path)
            if i < 0 and batch:
                i = _which(patterns, path[1:])
        name = slot if type(slot) is str else stack[-1] if stack and type(stack[-1]) is str else None
        if i < 0 and not (secret_member is not None and name is not None and secret_member(name)):
            if secret_member is not None and '\\"' in tok:
                out += _nested(tok, m.start(), secret_member)
            continue
        try:
            value = json.loads(tok)
        except ValueError:
            continue
        if i >= 0 and hits is not None:
            hits[i] += 1
        out.append((m.start(), m.end(), value))
    return out


def _nested(tok: str, at: int, secret_member) -> list:
    """The secret members of the JSON a string token holds (`tok`, as sent, at `at`): where their
    values lie in the outer text, with the inner value."""
    out = []
    for m in _NESTED_MEMBER.finditer(tok):
        if not secret_member(m.group(1)):
            continue
        raw = m.group(2)
        try:
            value = json.loads('"' + json.loads('"' + raw + '"') + '"')
        except ValueError:  # not an inner string after all: the text as the outer string says it
            try:
                value = json.loads('"' + raw + '"')
            except ValueError:
                value = raw
        if type(value) is str:
            out.append((at + m.start(2), at + m.end(2), (value,)))
    return out
