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
    """One JSON-RPC message (or one undecodable payload).

    A message refers to nothing the pipeline made of it later: the request a response answers and
    the chain a request belongs to are in the observations (`Decoded`, `Answered`)."""

    __slots__ = (
        "index", "time", "session", "direction", "transport", "exchange", "raw", "value", "kind",
        "id", "idk", "method", "params", "result", "error", "duplicates", "problem", "problem_reason",
        "era", "version", "peer", "batch", "note", "canonical",
    )

    def __init__(self) -> None:
        self.index = -1
        self.time = 0.0
        self.session = ""
        self.direction: Direction = "c2s"
        self.transport: Transport = "stdio"
        self.exchange: int | None = None
        self.raw = b""
        self.value: Any = None
        self.kind = INVALID
        self.id: Any = None
        self.idk: tuple | None = None
        self.method: str | None = None
        self.params: Any = None
        self.result: Any = None
        self.error: Any = None
        self.duplicates: tuple[rawjson.Duplicate, ...] = ()
        self.problem: str | None = None  # why the message is not a well-formed JSON-RPC 2.0 message
        self.problem_reason: str | None = None  # machine reason: utf8, json, extra-data, envelope…
        self.era: str = "unknown"  # modern, legacy, unknown
        self.version: str | None = None
        self.peer: str = ""
        self.batch: int | None = None  # index of the batch message this one was part of
        self.note: str | None = None  # framing note (a line without LF, a decoded body…)
        self.canonical = False  # `raw` is orjson's canonical form of `value` (rawjson.parse_message)

    # -- convenience --------------------------------------------------------------------------
    @property
    def is_response(self) -> bool:
        return self.kind == RESULT or self.kind == ERROR

    @property
    def meta(self) -> dict | None:
        p = self.params
        if type(p) is dict:
            m = p.get("_meta")
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


def classify(msg: Message, value: Any) -> None:
    """Fill kind, id, method, params, result, error and `problem` from a parsed value."""
    msg.value = value
    if type(value) is list:
        msg.kind = BATCH
        msg.problem = "a JSON array (batch)" if value else "an empty JSON array"
        msg.problem_reason = "batch"
        return
    if type(value) is not dict:
        msg.kind = INVALID
        msg.problem = f"a JSON {type(value).__name__}, not an object"
        msg.problem_reason = "envelope"
        return
    problems = []
    if value.get("jsonrpc") != "2.0":
        problems.append(f"jsonrpc is {value.get('jsonrpc')!r}, not \"2.0\"" if "jsonrpc" in value else "no jsonrpc member")
    has_id = "id" in value
    if "method" in value:
        method = value["method"]
        msg.method = method if type(method) is str else None
        if type(method) is not str:
            problems.append("method is not a string")
        msg.params = value.get("params")
        if "params" in value and type(msg.params) not in (dict, list):
            problems.append("params is neither an object nor an array")
        if "result" in value or "error" in value:
            problems.append("a request carrying result or error")
        if has_id:
            msg.kind = REQUEST
            msg.id = value["id"]
            msg.idk = id_key(msg.id)
        else:
            msg.kind = NOTIFICATION
    elif "result" in value or "error" in value:
        if "result" in value and "error" in value:
            problems.append("a response with both result and error")
        msg.kind = ERROR if "error" in value and "result" not in value else RESULT
        msg.result = value.get("result")
        msg.error = value.get("error")
        msg.id = value.get("id")
        msg.idk = id_key(msg.id)
        if not has_id and msg.kind == RESULT:
            problems.append("a result without id")
    else:
        msg.kind = INVALID
        problems.append("neither a request, a notification nor a response")
    if problems:
        msg.problem = "; ".join(problems)
        msg.problem_reason = "envelope"


def decode_message(raw: bytes, max_depth: int = rawjson.MAX_DEPTH) -> Message:
    msg = Message()
    msg.raw = raw
    try:
        value, duplicates, msg.canonical = rawjson.parse_message(raw, max_depth)
    except rawjson.ParseError as e:
        msg.kind = INVALID
        msg.problem = e.detail
        msg.problem_reason = e.reason
        return msg
    msg.duplicates = duplicates
    classify(msg, value)
    return msg


def too_large(size: int, limit: int, note: str | None = None) -> Message:
    """A message past the size limit, not parsed (`problem_reason` "size"): it crossed and was
    recorded unchanged; the analysis keeps none of its bytes. `note`: the body note of a body whose
    decoding went past the limit (its size then is its size on the wire)."""
    msg = Message()
    msg.kind = INVALID
    msg.problem_reason = "size"
    if over_limit(note):
        msg.problem = f"decodes to more than {mib(limit)} (content-encoding; {mib(size)} on the wire)"
    else:
        msg.problem = f"is {mib(size)} ({size} bytes), more than {mib(limit)}"
    return msg


def split_batch(batch: Message) -> list[Message]:
    """The members of a batch as messages of their own (same raw bytes as the batch)."""
    out = []
    for value in batch.value if type(batch.value) is list else ():
        m = Message()
        m.raw = batch.raw
        m.batch = batch.index
        classify(m, value)
        out.append(m)
    return out


def target_of(method: str | None, params: Any) -> str | None:
    """`name` for tools/call and prompts/get, `uri` for resources/read."""
    if type(params) is not dict:
        return None
    if method == "resources/read":
        v = params.get("uri")
    else:
        v = params.get("name")
    return v if type(v) is str else None
