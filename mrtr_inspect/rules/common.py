"""What the rules of every section share: the error codes of the specification, how findings name
a message and its chain, what a message carries.

Everything else a check reads comes with its observation (the request a response answers, the chain
place, the requests in flight: `core/observations.py`), or is the rules' own (`ctx.knowledge`, `ctx.mem`,
a pass's state).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Callable

from ..core.events import C2S, S2C, header
from ..core.framing import media_type
from ..core.messages import CLIENT_CAPABILITIES_KEY, Message
from ..core.era import MODERN

# --- error codes (basic/index.mdx "Error Codes", RULES.md §5) -------------------------------------------

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
JSONRPC_CODES = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR})
HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION = -32020, -32021, -32022
MODERN_CODES = frozenset({HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION})  # the codes 2026-07-28 defines
RESOURCE_NOT_FOUND_2025 = -32002  # 2025-11-25's resource not found; this revision MUST NOT emit it
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25 only

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"  # the tasks extension's capability name (SEP-2663)
BOUND = 1024  # entries a per-session table keeps before it forgets the oldest


# --- naming a message in a finding ---------------------------------------------------------------------


def at(msg: Message) -> str:
    """`tools/call id=2 (message #4)`: how findings name a message."""
    return f"{msg.label()} (message #{msg.index})"


def quoted(value: Any) -> str:
    """A header value or an SSE id as a finding quotes it: `repr(value)`, unless it looks like a
    credential (recording.redaction.looks_secret: a known token shape, a high-entropy token), which
    a finding never quotes: `<a JWT, not shown>`. Redaction covers the headers it knows by name;
    this covers the rest, which the recording keeps in clear (an SSE id, an Mcp-Session-Id)."""
    if type(value) is str:
        from ..recording.redaction import looks_secret

        what = looks_secret(value)
        if what is not None:
            return f"<{what}, not shown>"
    return repr(value)


def side(msg: Message) -> str:
    return "client" if msg.direction == C2S else "server"


def answered(obs: Any) -> str:
    """`result id=2 (message #3) to tools/call id=2 (message #2)`: an `Answered` observation."""
    return f"{at(obs.response)} to {at(obs.request)}"


# --- what a message carries -----------------------------------------------------------------------------


def params(msg: Message) -> dict:
    return msg.params if type(msg.params) is dict else {}


def meta_value(msg: Message, key: str):
    m = msg.meta
    return m.get(key) if m is not None else None


def client_caps(request: Message | None) -> dict:
    """The client capabilities the request declared for itself ({} when it declared none)."""
    meta = request.meta if request is not None else None
    caps = meta.get(CLIENT_CAPABILITIES_KEY) if meta is not None else None
    return caps if type(caps) is dict else {}


def error_code(msg: Message):
    """`error.code` as written, for comparing and showing; None when there is none, or when it is an
    array or object (no code to compare; error-code-not-integer reports it), which a set lookup of
    the code would fail on."""
    err = msg.error
    code = err.get("code") if type(err) is dict else None
    return None if type(code) is list or type(code) is dict else code


def integer_code(msg: Message) -> int | None:
    """`error.code` when it is an integer as written (None otherwise: absent, 1.0, "1", true)."""
    e = msg.error
    c = e.get("code") if type(e) is dict else None
    return c if type(c) is int else None


def modern_result(obs: Any) -> dict | None:
    """The result object of a server's answer to a modern request (an `Answered`), else None."""
    r = obs.response
    if r.era is not MODERN or r.direction != S2C or obs.request is None or type(r.result) is not dict:
        return None
    return r.result


# --- where a message stands -----------------------------------------------------------------------------


def chain_of(obs: Any) -> str | None:
    """The chain of an observation's message for findings: of a request (MRTR methods), or of the request
    a response answers, as it stood when the message was seen (`creq`); None for other messages."""
    creq = obs.creq
    return creq.chain.id if creq is not None else None


def endpoint(msg: Message, x) -> object:
    """The server behind a message: the stdio process, or the HTTP endpoint (path) of the capture."""
    return msg.session if x is None else (msg.session, x.path)


def client_at(msg: Message, x) -> object:
    """The client behind a message: the stdio pipe, or the HTTP client address on an endpoint."""
    return msg.session if x is None else (msg.session, x.path, x.client)


def foreign_answer(x) -> bool:
    """Whether an HTTP response is no MCP answer at all: a status other than 2xx whose Content-Type
    is neither JSON nor an event stream (a web server's 404 page, a 405 of a URL that is not the MCP
    endpoint). Its body is not judged as a JSON-RPC message; `upstream-not-mcp` says what came."""
    if x is None or x.status is None or 200 <= x.status < 300 or x.event_stream:
        return False
    ct = media_type(header(x.response_headers, "content-type"))
    return ct != "application/json" and not ct.endswith("+json") and ct != "text/event-stream"


def on_stream_of(x) -> Message | None:
    """The request whose POST response stream carries a server message (None: stdio, or no request)."""
    return x.request if x is not None else None


# --- bounded memory ------------------------------------------------------------------------------------


def bounded(table: dict, key, value) -> None:
    """table[key] = value, forgetting the oldest entry past BOUND."""
    table[key] = value
    if len(table) > BOUND:
        del table[next(iter(table))]


def kept(table: dict, key, value, limit: int) -> None:
    """table[key] = value in a table that analyses share (what values alone decide, kept by their
    bytes), forgetting the oldest entry past `limit`; when another analysis' thread changes the table
    meanwhile, the oldest is forgotten next time."""
    table[key] = value
    if len(table) > limit:
        try:
            del table[next(iter(table))]
        except (KeyError, RuntimeError, StopIteration):
            pass


def once(st, key) -> bool:
    """True the first time `key` is seen in this session's state (findings reported once; past
    4096 keys, a session that keeps producing new ones is not reported further)."""
    if key in st.once or len(st.once) >= 4096:
        return False
    st.once.add(key)
    return True


def loopback_host(host: str | None) -> bool:
    """Whether a URL's host is this machine (`localhost`, `*.localhost`, a loopback address)."""
    host = (host or "").strip("[]").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
