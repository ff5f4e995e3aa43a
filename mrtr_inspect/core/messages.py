"""Messages: one decoded JSON-RPC message with its raw bytes and where it was seen.

`decode_message` turns the payload of a frame into a `Message` and never raises: bytes that are not
a JSON-RPC message become a message of kind `invalid` with the reason, so the next one decodes
normally.
"""

from __future__ import annotations

from typing import Any

from . import rawjson
from .events import Direction, Transport
from .framing import mib, over_limit

# kinds
REQUEST = "request"
NOTIFICATION = "notification"
RESULT = "result"
ERROR = "error"
INVALID = "invalid"
BATCH = "batch"

RESPONSE_KINDS = (RESULT, ERROR)

# MCP constants used across the core
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
INPUT_REQUEST_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
LEGACY_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
MODERN_VERSIONS = frozenset({"2026-07-28"})


def id_key(value: Any) -> tuple | None:
    """A hashable identity for a JSON-RPC id that keeps `1` and `"1"` apart."""
    t = type(value)
    if t is int:
        return ("n", value)
    if t is str:
        return ("s", value)
    if value is None:
        return None
    if t is float:
        return ("f", value)
    if t is bool:
        return ("b", value)
    return ("o", repr(value))


def format_id(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


class Message:
    """One JSON-RPC message (or one undecodable payload), complete when built: the core builds it
    once it knows everything about it (its decoding, where it was seen, its index and era).

    A message refers to nothing the pipeline made of it later: the request a response answers and
    the chain a request belongs to are in the observations (`Decoded`, `Answered`).

    `Message(*decoded(raw), index, time, session, direction, transport, exchange, era, version, peer,
    batch, note)`: the fields of `decoded` (or `oversized`, `members`) first."""

    __slots__ = (
        "raw", "value", "kind", "id", "idk", "method", "params", "result", "error", "duplicates", "problem",
        "problem_reason", "canonical", "index", "time", "session", "direction", "transport", "exchange", "era", "version", "peer",
        "batch", "note",
    )

    def __init__(self, raw: bytes = b"", value: Any = None, kind: str = "invalid", id: Any = None,
                 idk: tuple | None = None, method: str | None = None, params: Any = None, result: Any = None,
                 error: Any = None, duplicates: tuple = (), problem: str | None = None,
                 problem_reason: str | None = None, canonical: bool = False, index: int = -1, time: float = 0.0, session: str = "",
                 direction: Direction = "c2s", transport: Transport = "stdio", exchange: int | None = None,
                 era: str = "unknown", version: str | None = None, peer: str = "", batch: int | None = None,
                 note: str | None = None) -> None:
        self.raw = raw
        self.value = value
        self.kind = kind
        self.id = id
        self.idk = idk
        self.method = method
        self.params = params
        self.result = result
        self.error = error
        self.duplicates: tuple[rawjson.Duplicate, ...] = duplicates
        self.problem = problem  # why the message is not a well-formed JSON-RPC 2.0 message
        self.problem_reason = problem_reason  # machine reason: utf8, json, extra-data, envelope…
        self.canonical = canonical  # `raw` is orjson's canonical form of `value` (rawjson.parse_message)
        self.index = index
        self.time = time
        self.session = session
        self.direction = direction
        self.transport = transport
        self.exchange = exchange
        self.era = era  # modern, legacy, malformed, unknown
        self.version = version
        self.peer = peer
        self.batch = batch  # index of the batch message this one was part of
        self.note = note  # framing note (a line without LF, a decoded body…)

    def _complete(self, d: "Decoding", index: int, time: float, session: str, direction: Direction, transport: Transport,
                  exchange: int | None, era: str, version: str | None, peer: str, batch: int | None,
                  note: str | None) -> "Message":
        """`Message(*d, index, …, note)` for the core's hot path (`built`): the same fields, stored from
        the decoding as it is (a call of 12 arguments instead of 24)."""
        (self.raw, self.value, self.kind, self.id, self.idk, self.method, self.params, self.result, self.error,
         self.duplicates, self.problem, self.problem_reason, self.canonical) = d
        self.index = index
        self.time = time
        self.session = session
        self.direction = direction
        self.transport = transport
        self.exchange = exchange
        self.era = era
        self.version = version
        self.peer = peer
        self.batch = batch
        self.note = note
        return self

    # -- convenience --------------------------------------------------------------------------
    @property
    def is_response(self) -> bool:
        return self.kind == RESULT or self.kind == ERROR

    @property
    def meta(self) -> dict | None:
        """`meta_of(self.params)`, written out (read for most messages)."""
        params = self.params
        if type(params) is dict:
            m = params.get("_meta")
            if type(m) is dict:
                return m
        return None

    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def raw_token(self, *path: str) -> str | None:
        if self.canonical:
            return rawjson.canonical_token(self.value, path)
        try:
            return rawjson.raw_member_token(self.raw.decode("utf-8"), path, self.value)
        except UnicodeDecodeError:
            return None

    def label(self) -> str:
        if self.kind == REQUEST:
            return f"{self.method} id={format_id(self.id)}"
        if self.kind == NOTIFICATION:
            return f"{self.method}"
        if self.kind in RESPONSE_KINDS:
            return f"{self.kind} id={format_id(self.id)}"
        return self.kind

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<Message #{self.index} {self.direction} {self.label()}>"


#: `built(object.__new__(Message), d, index, time, session, direction, transport, exchange, era, version, peer,
#: batch, note)` is `Message(*d, index, …, note)` at about half the instructions (no argument tuple of 24,
#: no `type.__call__`): what the core builds each message with
built = Message._complete


def meta_of(params: Any) -> dict | None:
    """`params._meta` when both are objects (`Message.meta`)."""
    if type(params) is dict:
        m = params.get("_meta")
        if type(m) is dict:
            return m
    return None


# What a payload decodes to, before the message is built: (raw, value, kind, id, idk, method, params,
# result, error, duplicates, problem, problem_reason, canonical), the first fields of `Message`.
Decoding = tuple
KIND, IDK, METHOD, PARAMS, ERROR_FIELD = 2, 4, 5, 6, 8  # where `Decoding` keeps the fields the core reads before building


_ABSENT = object()


def classify(raw: bytes, value: Any, duplicates: tuple = (), canonical: bool = False) -> Decoding:
    """The decoding of a parsed value: kind, id, method, params, result, error and `problem`."""
    if type(value) is list:
        return (raw, value, BATCH, None, None, None, None, None, None, duplicates,
                "a JSON array (batch)" if value else "an empty JSON array", "batch", canonical)
    if type(value) is not dict:
        return (raw, value, INVALID, None, None, None, None, None, None, duplicates,
                f"a JSON {type(value).__name__}, not an object", "envelope", canonical)
    if value.get("jsonrpc") == "2.0":  # a well-formed message, the common case: decided in a few lookups
        if "method" in value:
            m = value["method"]
            params = value.get("params", _ABSENT)
            if params is _ABSENT:
                params = None
            elif type(params) is not dict and type(params) is not list:
                m = None  # (a problem: the general path below says it)
            if type(m) is str and "result" not in value and "error" not in value:
                if "id" in value:
                    id_ = value["id"]
                    return (raw, value, REQUEST, id_, ("n", id_) if type(id_) is int else id_key(id_), m, params, None,
                            None, duplicates, None, None, canonical)
                return (raw, value, NOTIFICATION, None, None, m, params, None, None, duplicates, None, None, canonical)
        elif "result" in value:
            if "error" not in value and "id" in value:
                id_ = value["id"]
                return (raw, value, RESULT, id_, ("n", id_) if type(id_) is int else id_key(id_), None, None,
                        value["result"], None, duplicates, None, None, canonical)
        elif "error" in value:
            id_ = value.get("id")
            return (raw, value, ERROR, id_, ("n", id_) if type(id_) is int else id_key(id_), None, None, None,
                    value["error"], duplicates, None, None, canonical)
    return _classify_object(raw, value, duplicates, canonical)


def _classify_object(raw: bytes, value: dict, duplicates: tuple, canonical: bool) -> Decoding:
    """`classify` of an object, every case (what the common cases above decide too, the same way)."""
    problems = []
    kind, id_, idk, method, params, result, error = INVALID, None, None, None, None, None, None
    if value.get("jsonrpc") != "2.0":
        problems.append(f"jsonrpc is {value.get('jsonrpc')!r}, not \"2.0\"" if "jsonrpc" in value else "no jsonrpc member")
    has_id = "id" in value
    if "method" in value:
        m = value["method"]
        method = m if type(m) is str else None
        if type(m) is not str:
            problems.append("method is not a string")
        params = value.get("params")
        if "params" in value and type(params) not in (dict, list):
            problems.append("params is neither an object nor an array")
        if "result" in value or "error" in value:
            problems.append("a request carrying result or error")
        if has_id:
            kind = REQUEST
            id_ = value["id"]
            idk = id_key(id_)
        else:
            kind = NOTIFICATION
    elif "result" in value or "error" in value:
        if "result" in value and "error" in value:
            problems.append("a response with both result and error")
        kind = ERROR if "error" in value and "result" not in value else RESULT
        result = value.get("result")
        error = value.get("error")
        id_ = value.get("id")
        idk = id_key(id_)
        if not has_id and kind == RESULT:
            problems.append("a result without id")
    else:
        problems.append("neither a request, a notification nor a response")
    if problems:
        return (raw, value, kind, id_, idk, method, params, result, error, duplicates, "; ".join(problems), "envelope",
                canonical)
    return (raw, value, kind, id_, idk, method, params, result, error, duplicates, None, None, canonical)


def decoded(raw: bytes, max_depth: int = rawjson.MAX_DEPTH) -> Decoding:
    """What a payload decodes to; never raises (what is no JSON-RPC message is of kind `invalid`)."""
    try:
        value, duplicates, canonical = rawjson.parse_message(raw, max_depth)
    except rawjson.ParseError as e:
        return (raw, None, INVALID, None, None, None, None, None, None, (), e.detail, e.reason, False)
    return classify(raw, value, duplicates, canonical)


def decode_message(raw: bytes, max_depth: int = rawjson.MAX_DEPTH) -> Message:
    return Message(*decoded(raw, max_depth))


def oversized(size: int, limit: int, note: str | None = None) -> Decoding:
    """A message past the size limit, not parsed (`problem_reason` "size"): it crossed and was
    recorded unchanged; the analysis keeps none of its bytes. `note`: the body note of a body whose
    decoding went past the limit (its size then is its size on the wire)."""
    if over_limit(note):
        problem = f"decodes to more than {mib(limit)} (content-encoding; {mib(size)} on the wire)"
    else:
        problem = f"is {mib(size)} ({size} bytes), more than {mib(limit)}"
    return (b"", None, INVALID, None, None, None, None, None, None, (), problem, "size", False)


def too_large(size: int, limit: int, note: str | None = None) -> Message:
    return Message(*oversized(size, limit, note))


def members(batch: Message) -> list[Decoding]:
    """The decodings of a batch's members (same raw bytes as the batch)."""
    return [classify(batch.raw, value) for value in (batch.value if type(batch.value) is list else ())]


def split_batch(batch: Message) -> list[Message]:
    """The members of a batch as messages of their own (same raw bytes as the batch)."""
    return [Message(*d, batch=batch.index) for d in members(batch)]


def target_of(method: str | None, params: Any) -> str | None:
    """`name` for tools/call and prompts/get, `uri` for resources/read."""
    if type(params) is not dict:
        return None
    if method == "resources/read":
        v = params.get("uri")
    else:
        v = params.get("name")
    return v if type(v) is str else None
