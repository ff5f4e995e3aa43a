"""The protocol era of each request (RULES.md §2).

* modern: the request declares `_meta["io.modelcontextprotocol/protocolVersion"]` (2026-07-28 on);
* legacy: `initialize`, or a request on a stdio process / HTTP session that completed `initialize`,
  or an HTTP request whose `MCP-Protocol-Version` header names a legacy version;
* malformed: no version in `_meta`, from a peer or endpoint that has already spoken modern (the
  server is expected to reject it with -32602);
* unknown: none of the above (a legacy candidate).

Responses inherit the era of the request they answer; server messages no request covers inherit
the era of their context (the stdio process, the legacy HTTP session).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from .events import Headers, header

from .messages import LEGACY_VERSIONS, PROTOCOL_VERSION_KEY, Message, meta_of

MODERN_ERROR_CODES = frozenset({-32020, -32021, -32022})  # the errors only a modern server answers with
class Era(StrEnum):
    """The protocol era of a request, and of what answers it (RULES.md §2). Equal to its value as a string."""

    MODERN = "modern"
    LEGACY = "legacy"
    MALFORMED = "malformed"
    UNKNOWN = "unknown"


MODERN = Era.MODERN
LEGACY = Era.LEGACY
MALFORMED = Era.MALFORMED
UNKNOWN = Era.UNKNOWN


class EraTracker:
    def __init__(self) -> None:
        self._stdio_initialized: set[str] = set()  # sessions whose initialize succeeded
        self._stdio_pending_init: dict[str, tuple] = {}  # session -> initialize request id
        self._legacy_http_sessions: set[str] = set()  # Mcp-Session-Id values minted by initialize
        self._spoke_modern: set[str] = set()  # contexts (stdio session, http endpoint) that spoke modern
        self._spoke_legacy: set[str] = set()

    # -- requests -----------------------------------------------------------------------------
    def classify_request(self, method: str | None, params, context: str,
                         http_headers: Headers | None = None) -> tuple[str, str | None]:
        """The era and version of a client request of `method` with `params`; `context` is the stdio
        session or HTTP endpoint (which this request shows to speak that era)."""
        meta = meta_of(params)
        version = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
        if type(version) is str:
            self._spoke_modern.add(context)
            return MODERN, version
        if method == "initialize":
            v = params.get("protocolVersion") if type(params) is dict else None
            self._spoke_legacy.add(context)
            return LEGACY, v if type(v) is str else None
        if http_headers is not None:
            hv = header(http_headers, "mcp-protocol-version")
            sid = header(http_headers, "mcp-session-id")
            if (hv is not None and hv.strip() in LEGACY_VERSIONS) or (sid is not None and sid in self._legacy_http_sessions):
                self._spoke_legacy.add(context)
                return LEGACY, hv.strip() if hv else None
        elif context in self._stdio_initialized:
            return LEGACY, None
        if context in self._spoke_modern:
            return MALFORMED, None
        return UNKNOWN, None

    def context_era(self, context: str, http_headers: Headers | None = None) -> str:
        """The era of a server message that answers no request."""
        if http_headers is not None:
            sid = header(http_headers, "mcp-session-id")
            if sid is not None and sid in self._legacy_http_sessions:
                return LEGACY
        elif context in self._stdio_initialized:
            return LEGACY
        if context in self._spoke_modern:
            return MODERN
        if context in self._spoke_legacy:
            return LEGACY
        return UNKNOWN

    def spoke(self, context: str) -> tuple[bool, bool]:
        return context in self._spoke_modern, context in self._spoke_legacy

    # -- initialize ---------------------------------------------------------------------------
    def initialize_answered(self, context: str, session_id: str | None = None) -> None:
        """A server answered `initialize` with a result: its session (or stdio process) is legacy."""
        if session_id:
            self._legacy_http_sessions.add(session_id)
        else:
            self._stdio_initialized.add(context)

    def legacy_session(self, session_id: str | None) -> bool:
        return session_id is not None and session_id in self._legacy_http_sessions


def probe_fallback(request: Message | None, error: Any) -> bool:
    """A legacy server's answer to a modern client's era probe (RULES.md §2, §13): `server/discover`
    answered with an error that is no recognized modern one (stdio: -32601; HTTP: 400 with the
    server's own error), the fallback the stdio and Streamable HTTP pages expect. The answer is the
    legacy server's, judged as legacy. `error`: the error member of an error response."""
    if request is None or request.method != "server/discover":
        return False
    return type(error) is not dict or error.get("code") not in MODERN_ERROR_CODES
