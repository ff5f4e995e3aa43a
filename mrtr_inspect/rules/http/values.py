"""How a header mirrors a body value (SEP-2243, "Streamable HTTP: Custom Headers"): the Base64
sentinel and the encoding of header values, a tool's x-mcp-header annotations, a request's headers
by name. No rules: what headers.py judges with."""

from __future__ import annotations

import base64
import binascii
import json
import re
import string

from ..common import at


OWS = " \t"
SENTINEL_HEAD, SENTINEL_TAIL = "=?base64?", "?="
MCP_PARAM = "mcp-param-"

TCHAR = frozenset("!#$%&'*+-.^_`|~" + string.digits + string.ascii_letters)
PRIMITIVE = frozenset({"string", "integer", "boolean"})
DATA_KEYWORDS = frozenset({"x-mcp-header", "default", "examples", "const", "enum"})  # values, not schemas
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")

def decode_header_value(raw: str) -> tuple[str | None, str | None]:
    """The value an `Mcp-Name` / `Mcp-Param-*` header carries (the Base64 sentinel decoded), or None
    and what is wrong with it (RULES.md §4.6 http-header-value-encoding)."""
    if not raw.isascii() or not raw.replace("\t", " ").isprintable():
        return None, "contains characters outside visible ASCII, space and tab (such values must be Base64-encoded)"
    if raw != raw.strip(OWS):
        return None, "has leading or trailing whitespace (such values must be Base64-encoded)"
    if raw[:len(SENTINEL_HEAD)].lower() != SENTINEL_HEAD:
        return raw, None
    if not raw.startswith(SENTINEL_HEAD):
        return None, "writes the =?base64? marker in upper case (the markers must appear exactly, in lower case)"
    if len(raw) < len(SENTINEL_HEAD) + len(SENTINEL_TAIL) or not raw.endswith(SENTINEL_TAIL):
        return None, "opens the Base64 sentinel =?base64? without closing it with ?="
    try:
        data = base64.b64decode(raw[len(SENTINEL_HEAD):-len(SENTINEL_TAIL)], validate=True)
    except (binascii.Error, ValueError):
        return None, "carries invalid Base64 inside the sentinel"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "carries Base64 that does not decode to UTF-8 text"


def _plain(raw: str) -> bool:
    """Safe to send as is: visible ASCII and inner spaces, not sentinel-like."""
    return raw.isascii() and raw.isprintable() and not raw.startswith(("=?", " ")) and not raw.endswith(" ")


def _looks_like_sentinel(value: str) -> bool:
    return value.startswith(SENTINEL_HEAD) and value.endswith(SENTINEL_TAIL)


def _matches(decoded: str, value) -> bool:
    """Header text against the body value: integers numerically (42.0 is 42), booleans as lowercase
    true/false, strings exactly."""
    t = type(value)
    if t is bool:
        return decoded == ("true" if value else "false")
    if t is int and decoded.lstrip("-").isdigit():
        return int(decoded) == value  # exact, also beyond 2**53
    if t is int or t is float:
        return NUMBER.fullmatch(decoded) is not None and float(decoded) == value
    return t is str and decoded == value


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Annotations:
    """The `x-mcp-header` annotations of one tool definition: (path, header name) pairs, or why the
    definition is invalid (streamable-http.mdx "Schema Extension")."""

    __slots__ = ("headers", "problem", "keys")

    def __init__(self, schema) -> None:
        self.headers: list[tuple[tuple[str, ...], str, str, str]] = []  # path, name, header key, source
        self.problem: str | None = None
        self._walk(schema, (), True)
        self.keys = frozenset(key for _, _, key, _ in self.headers)
        seen: dict[str, str] = {}
        for _, name, _, _ in self.headers:
            if name.lower() in seen and self.problem is None:
                self.problem = f"x-mcp-header {name!r} is not case-insensitively unique (also {seen[name.lower()]!r})"
            seen.setdefault(name.lower(), name)

    def _fail(self, why: str) -> None:
        if self.problem is None:
            self.problem = why

    def _walk(self, node, path: tuple[str, ...], reachable: bool) -> None:
        if type(node) is list:
            for item in node:
                self._walk(item, path, False)
            return
        if type(node) is not dict:
            return
        if "x-mcp-header" in node:
            self._annotation(node, path, reachable)
        for k, v in node.items():
            if k == "properties" and type(v) is dict:
                for name, sub in v.items():
                    self._walk(sub, path + (name,), reachable)
            elif k not in DATA_KEYWORDS:
                self._walk(v, path, False)

    def _annotation(self, node: dict, path: tuple[str, ...], reachable: bool) -> None:
        name = node["x-mcp-header"]
        at = ".".join(path) or "the schema root"
        if not reachable or not path:
            return self._fail(f"x-mcp-header on {at} is not statically reachable through properties keys alone")
        if type(name) is not str or not name:
            return self._fail(f"x-mcp-header of {at} is {'empty' if name == '' else 'not a string'}")
        if not set(name) <= TCHAR:
            return self._fail(f"x-mcp-header {name!r} of {at} is not an HTTP field-name token")
        types = node.get("type")
        types = [t for t in types if t != "null"] if type(types) is list else [types]
        if len(types) != 1 or type(types[0]) is not str or types[0] not in PRIMITIVE:
            declared = f"of type {_shown(node['type'])}" if "type" in node else "with no type"
            return self._fail(f"x-mcp-header {name!r} annotates {at} {declared}, not integer, string or boolean")
        self.headers.append((path, name, MCP_PARAM + name.lower(), "arguments." + ".".join(path)))


# The request headers last mapped: the rules of one POST run in a row, so the first maps them and the
# others look names up. (One tuple, replaced whole: inspectors in other threads never mix them up.)
_last_map: tuple = (None, None)


def _header_map(headers) -> tuple[dict[str, str], list[str]]:
    """The request headers by lower-case name (the first of each), and the Mcp-Param-* names among them."""
    global _last_map
    last = _last_map
    if last[0] is headers:
        return last[1]
    h = dict(headers)
    names = "\n".join(h)
    if len(h) != len(headers) or names.lower() != names:  # the fast path needs lower-case names, each once
        h = {}
        for k, v in headers:
            h.setdefault(k.lower(), v)
        names = "\n".join(h)
    mapped = h, [k for k in h if k.startswith(MCP_PARAM)] if MCP_PARAM in names else []
    _last_map = (headers, mapped)
    return mapped


def _at(args, path: tuple[str, ...]) -> tuple[bool, object]:
    for step in path:
        if type(args) is not dict or step not in args:
            return False, None
        args = args[step]
    return True, args
