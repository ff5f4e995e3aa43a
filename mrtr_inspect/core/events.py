"""The vocabulary the core consumes: wire events.

Everything the inspector knows arrives as one of these small, immutable records. Adapters (the stdio
tee, the mitmproxy addon) produce them from live traffic, through the framers in `framing.py`; the
recording reader produces the very same records from a file. Time is always carried by the event:
the core never looks at a clock.

Two levels exist:

* chunk level, what an adapter sees: some bytes in one direction (`framing.StdioFramer`,
  `framing.HttpFramer` turn those into frames);
* frame level, one unit of the protocol: a stdio line, an HTTP request with its body, a response
  head, one SSE event, a whole JSON response body, the end of a response. Frames are what a
  recording stores and what `Inspector.feed` consumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Union


class Direction(StrEnum):
    """Who sent a message: the client (`c2s`) or the server (`s2c`). Equal to its value as a string."""

    C2S = "c2s"
    S2C = "s2c"


Transport = Literal["stdio", "http"]
Headers = tuple[tuple[str, str], ...]

C2S = Direction.C2S
S2C = Direction.S2C


def header(headers: Headers, name: str) -> str | None:
    """The first value of a header, matched case-insensitively (None when absent)."""
    name = name.lower()
    n = len(name)
    for k, v in headers:
        if len(k) == n and k.lower() == name:  # the length test spares most lower() calls
            return v
    return None


def header_all(headers: Headers, name: str) -> list[str]:
    name = name.lower()
    return [v for k, v in headers if k.lower() == name]


@dataclass(frozen=True, slots=True)
class SessionStart:
    """A capture session begins: one tee run around one child, or one proxy run."""

    time: float
    session: str
    transport: Transport
    info: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class SessionEnd:
    """The capture session ends (child exited, proxy shut down, recording ended)."""

    time: float
    session: str
    info: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class StdioLine:
    """One line of a stdio stream, without its terminating LF.

    `eol` is False for bytes the stream ended with and no LF after them (a last line without a
    newline, or a message torn by the process dying). `cut`: bytes of a line past the size limit
    that `data` does not carry (the line is `len(data) + cut` bytes; the recording holds all of it,
    the analysis kept no more than its limit: `framing.LineSplitter`, the recording reader).
    """

    time: float
    session: str
    direction: Direction
    data: bytes
    eol: bool = True
    cut: int = 0


@dataclass(frozen=True, slots=True)
class StdioClose:
    """End of file on one direction of a stdio session (stdin closed, or stdout closed)."""

    time: float
    session: str
    direction: Direction


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """An HTTP request with its whole body (content-encoding removed, see `body_note`).

    `exchange` numbers the request/response pair within the session. `client` is the client's
    address without port. `complete` is False when the body was cut short.
    """

    time: float
    session: str
    exchange: int
    method: str
    path: str
    headers: Headers
    body: bytes = b""
    client: str = ""
    complete: bool = True
    body_note: str | None = None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """The status line and headers of the response to `exchange`."""

    time: float
    session: str
    exchange: int
    status: int
    headers: Headers


@dataclass(frozen=True, slots=True)
class HttpBody:
    """A whole response body that is not an event stream (content-encoding removed)."""

    time: float
    session: str
    exchange: int
    data: bytes
    complete: bool = True
    body_note: str | None = None


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event exactly as it crossed the wire, its terminating blank line included."""

    time: float
    session: str
    exchange: int
    raw: bytes


# Why a response ended before it was over (`HttpEnd.error`; docs/recording-format.md, `end`):
CLIENT_DISCONNECTED = "client-disconnected"  # the client went away before the response ended
UPSTREAM_ERROR = "upstream-error: "  # then what failed: the server could not be reached, or broke off
CAPTURE_ENDED = "capture-ended"  # the capture stopped (the proxy shut down, a file saved) while it came


@dataclass(frozen=True, slots=True)
class HttpEnd:
    """The response to `exchange` is over.

    `error` is None for a normal end; otherwise one of `CLIENT_DISCONNECTED`, `UPSTREAM_ERROR` and
    what failed, `CAPTURE_ENDED`, or another short reason.
    """

    time: float
    session: str
    exchange: int
    error: str | None = None


Frame = Union[
    SessionStart, SessionEnd, StdioLine, StdioClose, HttpRequest, HttpResponse, HttpBody, SseEvent, HttpEnd
]
