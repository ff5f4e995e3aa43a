"""JSON text without building an encoder per call.

`json.dumps(obj, **options)` makes a new encoder (and, for a dict or a list, a new C encoder) on
every call; on the hot paths (digests, summaries, the report) that costs more than the encoding.
`dumps_with(**options)` returns a function that gives exactly what `json.dumps(obj, **options)`
gives, by a C encoder made once. The one difference: no circular-reference check (the values are
parsed JSON or summaries, trees by construction; a cycle would end in RecursionError instead of
ValueError).
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii
from typing import Any, Callable

from orjson import dumps as _orjson

#: whether the installed orjson writes a float as `float.__repr__` does (the exponent's sign and form,
#: the shortest digits, `.0`): its float writer has changed between versions (pyproject allows 3.10
#: on), so the recording's times (`recording.format.stamp`) and the report's chain summaries
#: (`outputs.report`) take orjson's way, each for its own range, only with one that does
ORJSON_FLOATS_AS_REPR = all(_orjson(x) == float.__repr__(x).encode() for x in (
    1e16, -1.5e16, 1.2345678901234568e17, 1e22, 1e300, 1.7976931348623157e308, 1e15, 9999999999999998.0, 0.1, 1e-4,
    -0.0, 1.0, 100.0, 1796000004.464037, 1795997950.0, 3317.821, 0.000123))

_not_serializable = json.JSONEncoder().default  # raises TypeError, as json.dumps does without `default`


def dumps_with(*, ensure_ascii: bool = True, separators: tuple[str, str] | None = None, sort_keys: bool = False,
               allow_nan: bool = True, default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """`lambda obj: json.dumps(obj, ensure_ascii=…, separators=…, sort_keys=…, allow_nan=…, default=…)`."""
    item_separator, key_separator = separators if separators is not None else (", ", ": ")
    if c_make_encoder is None:  # pragma: no cover - CPython has the C encoder
        enc = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=(item_separator, key_separator),
                               sort_keys=sort_keys, allow_nan=allow_nan, default=default, check_circular=False).encode
        return enc
    c = c_make_encoder(None, default if default is not None else _not_serializable,
                       encode_basestring_ascii if ensure_ascii else encode_basestring, None, key_separator,
                       item_separator, sort_keys, False, allow_nan)
    join = "".join

    def dumps(obj: Any) -> str:
        return join(c(obj, 0))

    return dumps
