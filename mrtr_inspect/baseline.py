"""Baselines: the definitions each server offered, saved as a reviewed lock file, and what changed
since (`mrtr-inspect baseline save`, `check --baseline`; docs/ci.md).

    mrtr-inspect baseline save session.jsonl --output mcp-baseline.json
    mrtr-inspect check session.jsonl --baseline mcp-baseline.json

The file (`mrtr-inspect.baseline/1`) is JSON, members sorted, two spaces of indent, one newline at
the end: saving the same recordings twice gives the same bytes, and a change reads as a small diff
in review. Characters a reviewer would not see (zero-width, bidi controls, escapes) are written as
`\\uXXXX` escapes. It holds, per server name (its `serverInfo`), the `tools`, `prompts`,
`resources` and `resourceTemplates` it listed, each by name (uri, uriTemplate), as offered less
`_meta`.

The comparison (`compare`) makes the `definition-*` findings (rules/definitions.py); a server the
file does not name, or a kind the recordings did not list, is a note, not a flood of `removed`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from .config import Config
from .core.findings import Finding
from .errors import UserError
from .offered import NOUN, SECTIONS, Server

FORMAT = "mrtr-inspect.baseline/1"
HINTS = {  # behaviour hint -> (its default, the value that means more danger)
    "readOnlyHint": (False, False),
    "destructiveHint": (True, True),
    "idempotentHint": (False, False),
    "openWorldHint": (True, True),
}
SHOWN = 4  # changes a finding lists; the rest are counted

# what a reviewer of the file would not see (json.dumps escapes the C0 controls itself): DEL, C1 controls, bidi controls, zero-width and tag characters
_INVISIBLE = re.compile("[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
                        "\ufeff\ud800-\udfff\U000e0000-\U000e007f]")


class BadBaseline(UserError):
    """A baseline file that cannot be used: one line naming the file, the key and what is wrong."""


def _escape(m: re.Match) -> str:
    c = m.group()
    if len(c.encode("utf-16-le", "surrogatepass")) > 2:
        hi, lo = divmod(ord(c) - 0x10000, 0x400)
        return f"\\u{0xD800 + hi:04x}\\u{0xDC00 + lo:04x}"
    return f"\\u{ord(c):04x}"


def _definition(value: dict) -> dict:
    return {k: v for k, v in value.items() if k != "_meta"}


def lock(servers: Iterable[Server]) -> dict:
    """The lock file's document of what the servers offered."""
    out: dict[str, Any] = {}
    for s in servers:
        if s.definitions:
            out[s.name] = {section: {key: _definition(d.value) for key, d in defs.items()}
                           for section, defs in s.definitions.items()}
    return {"format": FORMAT, "servers": out}


def dumps(doc: dict) -> bytes:
    """The file's bytes: sorted, indented, invisible characters escaped (inside strings, the only
    place they can be, an escape means the same character)."""
    text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False)
    return (_INVISIBLE.sub(_escape, text) + "\n").encode("utf-8")


def counts(doc: dict) -> str:
    """`2 servers: 12 tools, 3 prompts`."""
    servers = doc["servers"]
    per = {section: sum(len(s.get(section, {})) for s in servers.values()) for section in SECTIONS}
    from .core.findings import plural

    what = ", ".join(plural(n, NOUN[section]) for section, n in per.items() if n)
    return f"{plural(len(servers), 'server')}: {what or 'nothing listed'}"


# --- reading ---------------------------------------------------------------------------------------


def load(path: str) -> dict:
    """The lock file at `path`, checked; BadBaseline says what is wrong, and where."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadBaseline(f"{path}: cannot read the baseline: {e.strerror or e}") from None
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise BadBaseline(f"{path}: not a baseline: not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise BadBaseline(f"{path}: not a baseline: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None

    def bad(key: str, what: str) -> BadBaseline:
        return BadBaseline(f"{path}: {key}: {what}")

    if type(doc) is not dict:
        raise bad("(top level)", "must be an object with format and servers (`mrtr-inspect baseline save` writes one)")
    if doc.get("format") != FORMAT:
        raise bad("format", f"must be {FORMAT!r}, not {doc.get('format')!r}")
    servers = doc.get("servers")
    if type(servers) is not dict:
        raise bad("servers", "must be an object of server name -> its definitions")
    for name, sections in servers.items():
        if type(sections) is not dict:
            raise bad(f"servers.{name}", "must be an object of " + ", ".join(SECTIONS))
        for section, defs in sections.items():
            if section not in SECTIONS:
                import difflib

                close = difflib.get_close_matches(section, SECTIONS, n=1)
                raise bad(f"servers.{name}.{section}", "unknown kind" + (f" (did you mean {close[0]!r}?)" if close
                                                                          else f"; known: {', '.join(SECTIONS)}"))
            if type(defs) is not dict or any(type(d) is not dict for d in defs.values()):
                raise bad(f"servers.{name}.{section}", f"must be an object of {NOUN[section]} -> its definition (an object)")
    return doc


# --- comparing ---------------------------------------------------------------------------------------


def finding(rule_id: str, config: Config, message: str, messages: Iterable[int] = (), time: float = 0.0,
            details: dict | None = None) -> Finding | None:
    """A finding of a rule without a check of its own (definition-*, contract-*), as the engine makes
    one: the configured severity, None when the rule is disabled."""
    from .rules import load_rules
    from .rules.registry import REGISTRY

    load_rules()
    r = REGISTRY[rule_id]
    if rule_id in config.disabled:
        return None
    return Finding(rule_id, config.severity.get(rule_id, r.severity), message, time, None, list(messages), r.spec,
                   r.conformance, details)


def _show(value: Any, width: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if value is not None else "absent"
    return text if len(text) <= width else text[:width - 1] + "…"


def _types(schema: dict) -> set[str] | None:
    t = schema.get("type")
    if type(t) is str:
        types = {t}
    elif type(t) is list:
        types = {x for x in t if type(x) is str}
    else:
        return None  # any type
    if "number" in types:
        types.add("integer")  # a number accepts the integers
    return types


_SCHEMA_TEXT = ("description", "title", "examples", "$comment")  # what a schema says, not what it accepts
_BOUNDS = {"minimum": 1, "exclusiveMinimum": 1, "minLength": 1, "minItems": 1, "minProperties": 1,
           "maximum": -1, "exclusiveMaximum": -1, "maxLength": -1, "maxItems": -1, "maxProperties": -1}


class _SchemaDiff:
    """The changes between two JSON Schemas, each (where, what, breaking). `inbound`: an input
    schema (what callers send: narrowing breaks them); else an output schema (what they read:
    widening breaks them). Descriptions are collected apart (definition-description-changed)."""

    def __init__(self, inbound: bool) -> None:
        self.inbound = inbound
        self.changes: list[tuple[str, bool]] = []
        self.texts: list[str] = []

    def add(self, text: str, breaking: bool) -> None:
        self.changes.append((text, breaking))

    def narrows(self, narrower: bool) -> bool:
        """Whether a change that narrows (`narrower`) or widens what is valid breaks callers."""
        return narrower if self.inbound else not narrower

    def compare(self, old: Any, new: Any, where: str) -> None:
        if old == new:
            return
        if type(old) is not dict or type(new) is not dict:
            self.add(f"{where}: {_show(old)} → {_show(new)}", False)
            return
        if old.get("description") != new.get("description"):
            self.texts.append(f"{where}.description")
        if old.get("title") != new.get("title"):
            self.add(f"{where}: title {_show(old.get('title'))} → {_show(new.get('title'))}", False)
        ot, nt = _types(old), _types(new)
        if ot != nt:
            if ot is not None and (nt is None or nt > ot):
                self.add(f"{where}: type widened from {'/'.join(sorted(ot))} to "
                         f"{'/'.join(sorted(nt)) if nt else 'any'}", self.narrows(False))
            elif nt is not None and (ot is None or nt < ot):
                self.add(f"{where}: type narrowed from {'/'.join(sorted(ot)) if ot else 'any'} to "
                         f"{'/'.join(sorted(nt))}", self.narrows(True))
            else:
                self.add(f"{where}: type changed from {'/'.join(sorted(ot or ()))} to {'/'.join(sorted(nt or ()))}", True)
        self._enum(old, new, where)
        self._properties(old, new, where)
        for k, sign in _BOUNDS.items():
            a, b = old.get(k), new.get(k)
            if a == b:
                continue
            if type(a) in (int, float) and type(b) in (int, float):
                tighter = (b - a) * sign > 0
            else:
                tighter = a is None  # a bound added narrows; one taken away widens
            self.add(f"{where}: {k} {_show(a)} → {_show(b)}", self.narrows(tighter))
        for k in ("pattern", "format", "const"):
            if old.get(k) != new.get(k):
                self.add(f"{where}: {k} {_show(old.get(k))} → {_show(new.get(k))}",
                         self.narrows(new.get(k) is not None))
        if old.get("additionalProperties", True) != new.get("additionalProperties", True):
            a, b = old.get("additionalProperties", True), new.get("additionalProperties", True)
            if b is False:
                self.add(f"{where}: no longer accepts other properties", self.narrows(True))
            elif a is False and b is True:
                self.add(f"{where}: now accepts other properties", self.narrows(False))
            else:
                self.compare(a if type(a) is dict else {}, b if type(b) is dict else {}, f"{where}.additionalProperties")
        if "items" in old or "items" in new:
            self.compare(old.get("items", {}), new.get("items", {}), f"{where}.items")
        known = {"type", "enum", "properties", "required", "additionalProperties", "items", "pattern", "format",
                 "const", *_BOUNDS, *_SCHEMA_TEXT}
        for k in sorted((old.keys() | new.keys()) - known):
            if old.get(k) != new.get(k):
                self.add(f"{where}.{k}: {_show(old.get(k))} → {_show(new.get(k))}", False)

    def _enum(self, old: dict, new: dict, where: str) -> None:
        a, b = old.get("enum"), new.get("enum")
        if a == b:
            return
        if type(a) is list and type(b) is list:
            gone = [v for v in a if v not in b]
            came = [v for v in b if v not in a]
            if gone:
                self.add(f"{where}: enum value{'s' if len(gone) > 1 else ''} {', '.join(_show(v) for v in gone)} "
                         "removed", self.narrows(True))
            if came:
                self.add(f"{where}: enum value{'s' if len(came) > 1 else ''} {', '.join(_show(v) for v in came)} "
                         "added", self.narrows(False))
        else:
            self.add(f"{where}: enum {_show(a)} → {_show(b)}", self.narrows(b is not None))

    def _properties(self, old: dict, new: dict, where: str) -> None:
        op = old.get("properties") if type(old.get("properties")) is dict else {}
        np = new.get("properties") if type(new.get("properties")) is dict else {}
        oreq = set(old.get("required") or ()) if type(old.get("required")) is list else set()
        nreq = set(new.get("required") or ()) if type(new.get("required")) is list else set()
        noun = "argument" if self.inbound and where == "inputSchema" else "property"
        for name in sorted(op.keys() - np.keys()):
            self.add(f"{where}: {noun} {name!r} removed", True)
        for name in sorted(np.keys() - op.keys()):
            required = name in nreq
            self.add(f"{where}: new {'required' if required else 'optional'} {noun} {name!r}",
                     required and self.inbound)
        for name in sorted(op.keys() & np.keys()):
            if name in nreq and name not in oreq:
                self.add(f"{where}: {noun} {name!r} now required", self.inbound)
            elif name in oreq and name not in nreq:
                self.add(f"{where}: {noun} {name!r} no longer required", not self.inbound)
            self.compare(op[name], np[name], f"{where}.properties.{name}")


def _listed(items: list[str]) -> str:
    text = "; ".join(items[:SHOWN])
    return text + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _hint(annotations: Any, name: str) -> Any:
    v = annotations.get(name) if type(annotations) is dict else None
    return v if type(v) is bool else HINTS[name][0]


def changes(section: str, old: dict, new: dict) -> list[tuple[str, str]]:
    """(rule id, what changed) of one definition, old (the file's) → new (offered)."""
    out: list[tuple[str, str]] = []
    old, new = _definition(old), _definition(new)
    texts = []
    if old.get("description") != new.get("description"):
        from .rules.definitions import suspicious

        a, b = old.get("description"), new.get("description")
        said = (f"description changed ({len(a) if type(a) is str else 'none'} → "
                f"{len(b) if type(b) is str else 'none'} characters)")
        had = suspicious(a) if type(a) is str else []
        gained = [k for k in suspicious(b) if k not in had] if type(b) is str else []
        texts.append(said + (f"; it now holds {', '.join(gained)} (tool-poisoning-*)" if gained else ""))
    breaking, other = [], []
    for member in ("inputSchema", "outputSchema"):
        if old.get(member) != new.get(member):
            diff = _SchemaDiff(member == "inputSchema")
            diff.compare(old.get(member), new.get(member), member)
            texts += [f"{w} changed" for w in diff.texts]
            breaking += [t for t, b in diff.changes if b]
            other += [t for t, b in diff.changes if not b]
    if texts:
        out.append(("definition-description-changed", _listed(texts)))
    if breaking:
        out.append(("definition-schema-breaking", _listed(breaking + other)))
    elif other:
        out.append(("definition-schema-changed", _listed(other)))
    if old.get("annotations") != new.get("annotations"):
        oa, na = old.get("annotations"), new.get("annotations")
        riskier, safer = [], []
        for name, (_, danger) in HINTS.items():
            a, b = _hint(oa, name), _hint(na, name)
            if a != b:
                (riskier if b == danger else safer).append(f"{name} {str(a).lower()} → {str(b).lower()}")
        rest = sorted(k for k in ((oa if type(oa) is dict else {}).keys() | (na if type(na) is dict else {}).keys())
                      if k not in HINTS and (oa or {}).get(k) != (na or {}).get(k))
        if riskier:
            out.append(("definition-annotation-riskier", _listed(riskier)))
        if safer or rest:
            out.append(("definition-annotation-changed", _listed(safer + [f"annotations.{k} changed" for k in rest])))
    rest = sorted(k for k in old.keys() | new.keys()
                  if k not in ("description", "inputSchema", "outputSchema", "annotations") and old.get(k) != new.get(k))
    if rest:
        out.append(("definition-changed", _listed([f"{k} {_show(old.get(k))} → {_show(new.get(k))}" for k in rest])))
    return out


def compare(doc: dict, servers: Iterable[Server], config: Config, path: str) -> tuple[list[Finding], list[str]]:
    """The `definition-*` findings of the servers against the lock file `doc` (read from `path`),
    and notes on what could not be compared."""
    findings: list[Finding] = []
    notes: list[str] = []
    base = doc["servers"]
    seen = set()

    def add(rule_id: str, message: str, d=None) -> None:
        f = finding(rule_id, config, message, [d.message] if d is not None else [], d.time if d is not None else 0.0)
        if f is not None:
            findings.append(f)

    for s in servers:
        if not s.definitions:
            continue
        old = base.get(s.name)
        if old is None:
            held = ", ".join(repr(n) for n in sorted(base)) or "no server"
            notes.append(f"server {s.name!r} is not in the baseline {path} (it holds {held}): its definitions were not "
                         "compared (`mrtr-inspect baseline save` adds it)")
            continue
        seen.add(s.name)
        for section in SECTIONS:
            noun = NOUN[section]
            was = old.get(section, {})
            now = s.definitions.get(section)
            if now is None:
                if was:
                    notes.append(f"server {s.name!r}: the recordings hold no list of its {noun}s; the baseline's "
                                 f"{len(was)} were not compared")
                continue
            last = max(now.values(), key=lambda d: d.message, default=None)
            for key in sorted(was.keys() - now.keys()):
                add("definition-removed", f"server {s.name!r}: {noun} {key!r} is in the baseline but no longer offered",
                    last)
            for key in sorted(now.keys() - was.keys()):
                add("definition-added", f"server {s.name!r}: {noun} {key!r} is offered but not in the baseline",
                    now[key])
            for key in sorted(now.keys() & was.keys()):
                for rule_id, what in changes(section, was[key], now[key].value):
                    add(rule_id, f"server {s.name!r}: {noun} {key!r}: {what}", now[key])
    gone = sorted(set(base) - seen - {s.name for s in servers if s.definitions})
    for name in gone:
        notes.append(f"server {name!r} of the baseline {path} is not in the recordings: not compared")
    return findings, notes
