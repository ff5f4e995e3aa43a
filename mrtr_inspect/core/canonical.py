"""Canonical JSON and the digests chain stitching keys on (RULES.md §3).

`canonical_json` is the one canonical form of a JSON value in the package (stitching, replay
matching): sorted members, no spaces. `params_digest` is digest(R), the SHA-256 of the canonical
params of a request without `_meta`, `inputResponses` and `requestState`, integral floats written as
integers (in the manner of RFC 8785); `state_hash` keys the state index by the SHA-256 of a
`requestState`, so opaque state never appears in output. Both are cached: a retry repeats the
params of its chain and echoes the state its round was issued.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any

from orjson import OPT_SORT_KEYS
from orjson import dumps as _orjson

from .jsontext import ORJSON_FLOATS_AS_REPR, dumps_with


def _canon_num(v: Any) -> Any:
    if type(v) is float and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if type(v) is dict:
        return {k: _canon_num(x) for k, x in v.items()}
    if type(v) is list:
        return [_canon_num(x) for x in v]
    return v


_CANONICAL = dumps_with(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Canonical JSON in the manner of RFC 8785: sorted members, no spaces. Integral floats become
    integers only where the value cannot be written as it is (a NaN, a non-JSON value, written by
    `str`); `params_digest` makes them integers always."""
    try:
        return _CANONICAL(value)
    except (TypeError, ValueError):
        return json.dumps(_canon_num(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_EXCLUDED = ("_meta", "inputResponses", "requestState")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _may_have_float(text: str) -> bool:
    """Whether JSON text has a "." or an exponent outside its strings (where a float would be)."""
    bare = _STRING.sub("", text)
    return "." in bare or "e+" in bare or "e-" in bare


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@functools.lru_cache(maxsize=1024)  # a retry repeats the params of its chain: digested once
def _float_free_digest(text: str) -> str | None:
    """The digest of canonical text, None when the text may hold a float (to be made an integer first)."""
    # a float is written with "." or an exponent: without them there is none to make an integer of
    if ("." in text or "e+" in text or "e-" in text) and _may_have_float(text):
        return None
    return _digest(text)


@functools.lru_cache(maxsize=1024)  # a retry repeats the params of its chain: digested once
def _orjson_digest(text: str) -> str | None:
    """The digest of orjson's sorted compact form of a value (`params_digest`), None when it may hold a
    float (to be made an integer first) or a `null` (orjson's form of a NaN or an infinity too). (The
    text is a str: a bytes object orjson wrote holds a 4 KiB allocation while it is kept.)"""
    if "." in text or "e+" in text or "e-" in text or "null" in text:
        bare = _STRING.sub("", text)
        if "." in bare or "e+" in bare or "e-" in bare or "null" in bare:
            return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def params_digest(method: str | None, params: Any) -> str:
    """digest(R): the canonical params without _meta, inputResponses and requestState
    (an absent `arguments` counts as {}).

    Written by orjson where that gives the canonical text's bytes: orjson's compact form with sorted
    keys (in code point order, as Python sorts them) escapes strings as the json module does with
    `ensure_ascii=False` (the quote, the backslash and the controls, in the same forms) and writes
    integers, booleans and null alike; a float (orjson's float writer writes `float.__repr__` here,
    which always has a ".", "e+" or "e-") or a null (orjson writes a NaN and the infinities so) outside
    the strings sends the params to the json module, as does what orjson does not take (a lone
    surrogate, an integer past 64 bits)."""
    if type(params) is not dict:
        return _digest(canonical_json(params))
    p = {k: v for k, v in params.items() if k not in _EXCLUDED}
    if method != "resources/read" and "arguments" not in p:
        p["arguments"] = {}
    if ORJSON_FLOATS_AS_REPR:
        try:
            digest = _orjson_digest(_orjson(p, option=OPT_SORT_KEYS).decode("utf-8"))
        except TypeError:  # a lone surrogate, an integer past 64 bits, a value orjson does not write
            digest = None
        if digest is not None:
            return digest
    try:
        digest = _float_free_digest(_CANONICAL(p))
    except (TypeError, ValueError):
        digest = None
    return digest if digest is not None else _digest(canonical_json(_canon_num(p)))


@functools.lru_cache(maxsize=1024)  # a retry echoes the state its round was issued: hashed once
def state_hash(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()
