"""The records of the messages mitmproxy takes whole, written from its raw parts (`Whole`), for the
proxy's recorder (`recorder.HttpRecorder`): no frame made, the same bytes as the frames' records."""

from __future__ import annotations

import operator
from typing import Any, Callable

from orjson import dumps as _orjson

from ..recording import format as fmt
from ..recording.redaction import Redactor

#: the steps of a message mitmproxy took whole, which may hold its raw parts (`recorder.HttpRecorder`)
WHOLE = frozenset({"request_message", "response_message"})


def _text(fields: Any) -> Any:
    """Header fields as the framer takes them (`flows.flow_headers`): mitmproxy's raw ones decoded."""
    if fields and type(fields[0][0]) is bytes:
        return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in fields)
    return fields


def framer_step(step: tuple) -> tuple:
    """A whole message's step with mitmproxy's raw parts (the addon's) as the framer takes them."""
    name, args = step
    if name == "request_message":
        t, x, method, path, fields, *rest = args
        if type(path) is bytes or (fields and type(fields[0][0]) is bytes):
            return name, (t, x, method, path.decode("latin-1") if type(path) is bytes else path, _text(fields), *rest)
    elif name == "response_message":
        t, x, status, fields, *rest = args
        if fields and type(fields[0][0]) is bytes:
            return name, (t, x, status, _text(fields), *rest)
    return step


#: printable ASCII: the bytes JSON writes as themselves but for `"` and `\\`, which are looked for apart
#: (`bytes.translate` deletes these: what is left is written otherwise; a third of a regular expression's cost)
_PRINTABLE = bytes(range(0x20, 0x7f))
_FIRST = operator.itemgetter(0)
_TYPE = 16  # `Whole`'s class of Content-Type
_GENERAL = 64  # of a field that sends its message the general way (a content-encoding, a name JSON escapes)
_HELD = 1024  # names, texts and redacted fields `Whole` remembers; past them all are forgotten at once
_HELD_SIZE = 256  # bytes (characters) of a field's value (a text) at most, for `Whole` to remember it


class Whole:
    """The records of the messages mitmproxy takes whole, written from its raw parts (the request's
    method, path bytes and header fields; the response's status and fields): the JSON of each
    header field is its bytes between quotes, unless its name is one the redactor redacts (that
    field's JSON is remembered, a session id or a credential being sent again and again), so
    exactly the records `encode` writes for the frames `FlowFramer` and the redactor make of the
    same step (tests/adapters/test_recorder.py). A step it does not take (None) goes the general
    way: a content-encoding to remove, an event stream, a byte JSON escapes, parts not raw."""

    def __init__(self, session: str, redactor: Redactor) -> None:
        self.enc = fmt.HttpEncoder(session)
        self.redactor = redactor
        # (each bounded: at most _HELD entries, a value or text of at most _HELD_SIZE)
        self._kinds: dict[bytes, int] = {}  # a field name → its redaction kind, _TYPE or _GENERAL
        self._texts: dict[str, bytes | None] = {}  # a method, client or error → its JSON text (None: orjson's not)
        self._redacted: dict[tuple[bytes, bytes], bytes] = {}  # a redacted field → its JSON text

    def _kind(self, name: bytes) -> int:
        if name.translate(None, _PRINTABLE) or name.find(b'"') >= 0 or name.find(b"\\") >= 0:
            return _GENERAL
        low = name.lower()
        kind = self.redactor.header_kind(name.decode("latin-1"))
        if low == b"content-encoding":
            return _GENERAL
        if low == b"content-type":
            return _TYPE if kind == 0 else _GENERAL
        return kind

    def fields(self, fields: tuple, response: bool) -> bytes | None:
        """The JSON text of the (redacted) header fields; None: the general way."""
        if not fields:
            return b"[]"
        if type(fields[0][0]) is not bytes:
            return None
        kinds = self._kinds
        ks = list(map(kinds.get, map(_FIRST, fields)))
        if None in ks:
            if len(kinds) >= _HELD:
                kinds.clear()
            for k, _ in fields:
                if k not in kinds:
                    if len(k) > _HELD_SIZE:  # (not remembered: the general way)
                        return None
                    kinds[k] = self._kind(k)
            ks = list(map(kinds.__getitem__, map(_FIRST, fields)))
        if _GENERAL in ks:
            return None
        if response and _TYPE in ks and fields[ks.index(_TYPE)][1].lower().find(b"event-stream") >= 0:
            return None  # an event stream: its events are framed the general way
        if ks.count(0) + ks.count(_TYPE) == len(ks):  # none redacted: the bytes, between quotes
            inner = b'"],["'.join(map(b'","'.join, fields))
            if inner.translate(None, _PRINTABLE) or inner.find(b"\\") >= 0 or inner.count(b'"') != 4 * len(fields) - 2:
                return None
            return b'[["' + inner + b'"]]'
        out = []
        redacted = self._redacted
        for (k, v), c in zip(fields, ks):
            if c == 0 or c == _TYPE:
                if v.translate(None, _PRINTABLE) or v.find(b'"') >= 0 or v.find(b"\\") >= 0:
                    return None
                out.append(b'["' + k + b'","' + v + b'"]')
                continue
            text = redacted.get((k, v))
            if text is None:
                name = k.decode("latin-1")
                text = _orjson((name, self.redactor.redact_header(name, v.decode("latin-1"), c)))
                if len(v) <= _HELD_SIZE:
                    if len(redacted) >= _HELD:
                        redacted.clear()
                    redacted[k, v] = text
            out.append(text)
        return b"[" + b",".join(out) + b"]"

    def text(self, value: str) -> bytes | None:
        """A string's JSON text, remembered (None: one orjson does not write, a lone surrogate)."""
        texts = self._texts
        try:
            return texts[value]
        except KeyError:
            pass
        try:
            out: bytes | None = _orjson(value)
        except TypeError:
            out = None
        if len(value) <= _HELD_SIZE:
            if len(texts) >= _HELD:
                texts.clear()
            texts[value] = out
        return out

    def path(self, path: bytes) -> bytes | None:
        if not path.translate(None, _PRINTABLE) and path.find(b"?") < 0 and path.find(b'"') < 0 and path.find(b"\\") < 0:
            return b'"' + path + b'"'
        try:
            return _orjson(self.redactor.url(path.decode("latin-1")))
        except TypeError:
            return None

    def parts(self, step: tuple) -> tuple | None:
        """A whole message's step as its records are written from it: (t, exchange, method's, path's
        JSON, fields' JSON, client's JSON, body, complete) for a request, (t, exchange, status, fields'
        JSON, body, t_end, error's JSON or None, whether it ended well) for a response; None: the
        general way. Never raises."""
        name, args = step
        try:
            if name == "request_message":
                t, x, method, path, fields, client, body, complete = args
                if type(path) is not bytes or type(t) is not float or t - t != 0.0 or type(x) is not int:
                    return None
                headers = self.fields(fields, False)
                m, p, c = self.text(method), self.path(path), self.text(client)
                if headers is None or m is None or p is None or c is None:
                    return None
                return t, x, m, p, headers, c, body, complete
            t, x, status, fields, body, t_end, error = args
            if (type(t) is not float or t - t != 0.0 or type(t_end) is not float or t_end - t_end != 0.0
                    or type(x) is not int or type(status) is not int):
                return None
            headers = self.fields(fields, True)
            e = self.text(error) if error else None
            if headers is None or (error and e is None):
                return None
            return t, x, status, headers, body, t_end, e, error is None
        except Exception:  # the general way says what is wrong
            return None

    def records(self, step: tuple, redact_json: Callable[[bytes], bytes], framer: Any) -> bytes | None:
        """The step's records, its body redacted by `redact_json`, the exchange opened or closed in
        `framer` (`flows.FlowFramer`); None: the general way (`parts`). Raises what encoding raises."""
        parts = self.parts(step)
        if parts is None:
            return None
        enc = self.enc
        if step[0] == "request_message":
            t, x, m, p, headers, c, body, complete = parts
            data = enc.request(t, x, m, p, headers, c, redact_json(body), complete)
            framer.opened(x)
            return data
        t, x, status, headers, body, t_end, e, ok = parts
        data = enc.response(t, x, status, headers)
        if body:
            data += enc.body(t_end, x, redact_json(body), ok)
        data += enc.end(t_end, x, e)
        framer.closed(x)
        return data
