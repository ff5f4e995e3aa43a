"""Exchanges: responses paired with the requests they answer.

On stdio the pipe is the peer: a response from the server answers the client's request with the
same id, and the other way round for the server requests of the legacy era. On HTTP a request and
its response share an HTTP exchange (`HttpExchange`); the legacy era adds server requests on a GET
stream answered by POSTed responses, paired by id within the legacy session.

Ids are compared by type and value: `1` and `"1"` are different ids.
"""

from __future__ import annotations

from typing import Any

from .events import Headers
from .messages import Message


class Flight(dict):
    """The requests in flight in a scope at one moment (`InFlight.snapshot`), as a `Decoded`
    observation carries them: `len`, iteration (oldest first: the requests, not their ids) and
    `get(id_key)`. Never changed: a copy of the scope's requests by id, made by `dict`'s own
    constructor (it is made for each client request: a class of its own with an `__init__` cost 1.5k
    instructions more)."""

    __slots__ = ()
    # one moment's requests: equal to itself alone, hashable (an observation that carries it is too)
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __iter__(self):
        return iter(self.values())

    def __repr__(self) -> str:
        return f"Flight({list(self.values())!r})"


NO_FLIGHT = Flight({})  # nothing in flight


class InFlight:
    """Requests sent by one side within one scope and not yet answered.

    What a judge reads of it is a `snapshot` (a `Flight`); the inspector also keeps beside each
    client request of an MRTR method its tie to its chain (`attach`, `take`, `tie`).

    A request the client cancelled stays here (a late answer is still paired with it and judged) but
    is no longer open (`cancel`, `sole_open`; RULES.md decision 14)."""

    __slots__ = ("_by_id", "_ties", "_cancelled", "_snap")

    def __init__(self) -> None:
        self._by_id: dict[tuple, Message] = {}
        self._ties: dict[tuple, Any] = {}
        self._cancelled: set[tuple] = set()
        self._snap: Flight | None = NO_FLIGHT  # the last snapshot, while the requests did not change

    def snapshot(self) -> Flight:
        """The requests in flight now, as a `Flight` that later changes leave as it is."""
        snap = self._snap
        if snap is None:
            snap = self._snap = Flight(self._by_id) if self._by_id else NO_FLIGHT
        return snap

    def add(self, msg: Message) -> Message | None:
        """Track a request; returns the request already in flight under the same id, if any."""
        if msg.idk is None:
            return None
        self._snap = None
        prior = self._by_id.get(msg.idk)
        self._by_id[msg.idk] = msg
        if prior is not None:
            if self._ties:
                self._ties.pop(msg.idk, None)
            self._cancelled.discard(msg.idk)
        return prior

    def cancel(self, idk: tuple | None) -> None:
        """The client cancelled the request in flight under this id: it is no longer open."""
        if idk is not None and idk in self._by_id:
            self._cancelled.add(idk)

    def sole_open(self) -> Message | None:
        """The one request in flight that is not cancelled, if exactly one is (else None)."""
        by_id, cancelled = self._by_id, self._cancelled
        if len(by_id) - len(cancelled) != 1:
            return None
        if not cancelled:
            return next(iter(by_id.values()))
        return next(m for k, m in by_id.items() if k not in cancelled)

    def attach(self, msg: Message, tie: Any) -> None:
        """Keep `tie` beside `msg` (tracked by `add`) while it is in flight."""
        if msg.idk is not None and self._by_id.get(msg.idk) is msg:
            self._ties[msg.idk] = tie

    def pop(self, idk: tuple | None) -> Message | None:
        if idk is None:
            return None
        self._snap = None
        if self._ties:
            self._ties.pop(idk, None)
        if self._cancelled:
            self._cancelled.discard(idk)
        return self._by_id.pop(idk, None)

    def take(self, idk: tuple | None) -> tuple[Message | None, Any]:
        """`pop`, with the tie kept beside the request (None: none)."""
        if idk is None:
            return None, None
        if self._cancelled:
            self._cancelled.discard(idk)
        by_id = self._by_id
        req = by_id.pop(idk, None)
        self._snap = None if by_id else NO_FLIGHT  # nothing left in flight: the snapshot is known
        return req, self._ties.pop(idk, None) if self._ties else None

    def get(self, idk: tuple | None) -> Message | None:
        return self._by_id.get(idk) if idk is not None else None

    def tie(self, idk: tuple | None) -> Any:
        """The tie kept beside the request in flight under this id (None: none)."""
        return self._ties.get(idk) if idk is not None and self._ties else None

    def discard(self, msg: Message) -> None:
        if msg.idk is not None and self._by_id.get(msg.idk) is msg:
            self._snap = None
            del self._by_id[msg.idk]
            if self._ties:
                self._ties.pop(msg.idk, None)
            if self._cancelled:
                self._cancelled.discard(msg.idk)

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self):
        return iter(list(self._by_id.values()))


_NONE = InFlight()  # what a scope without requests reads as


class ExchangeTracker:
    """In-flight requests per scope and direction.

    A scope is the stdio session, or on HTTP the peer (client requests) or the legacy session
    (server requests).
    """

    def __init__(self) -> None:
        self._client: dict[str, InFlight] = {}
        self._server: dict[str, InFlight] = {}

    def client_scope(self, scope: str) -> InFlight:
        s = self._client.get(scope)
        if s is None:
            s = self._client[scope] = InFlight()
        return s

    def client_requests(self, scope: str) -> InFlight:
        """The client requests in flight in a scope, to read: a scope not seen is empty (and not made)."""
        s = self._client.get(scope)
        return s if s is not None else _NONE

    def flight(self, scope: str) -> Flight:
        """`client_requests(scope).snapshot()`: what a `Decoded` observation carries (the stdio
        session, the HTTP peer)."""
        s = self._client.get(scope)
        if s is None:
            return NO_FLIGHT
        snap = s._snap  # `s.snapshot()` without the call while it holds
        return snap if snap is not None else s.snapshot()

    def server_scope(self, scope: str) -> InFlight:
        s = self._server.get(scope)
        if s is None:
            s = self._server[scope] = InFlight()
        return s

    def drop_scope(self, scope: str) -> list[Message]:
        """Forget a scope (session over); returns the client requests left unanswered."""
        left = list(self._client.pop(scope, InFlight()))
        self._server.pop(scope, None)
        return left


class HttpExchange:
    """Everything seen on one HTTP request/response pair: made with its request's head, it records
    what the pipeline sees of it after (`requested`, `respond`, `event`, `end`)."""

    __slots__ = (
        "session", "number", "time", "method", "path", "headers", "client", "body_note", "complete",
        "request_messages", "status", "response_headers", "response_time", "event_stream", "body_messages",
        "events", "responses", "after_response_events", "end_time", "error", "peer", "era", "last_event_time",
        "body_bytes", "cancelled",
    )

    def __init__(self, session: str, number: int, time: float = 0.0, method: str = "", path: str = "",
                 headers: Headers = (), client: str = "", body_note: str | None = None, complete: bool = True,
                 body_bytes: int = 0, peer: str = "") -> None:
        self.session = session
        self.number = number
        self.time = time
        self.method = method
        self.path = path
        self.headers: Headers = headers
        self.client = client
        self.body_note: str | None = body_note
        self.complete = complete
        self.request_messages: list[Message] = []
        self.status: int | None = None
        self.response_headers: Headers = ()
        self.response_time: float | None = None
        self.event_stream = False
        self.body_messages: list[Message] = []  # messages of a non-SSE response body
        self.events = 0  # SSE events seen
        self.responses: list[Message] = []  # JSON-RPC responses seen on this exchange
        self.after_response_events = 0  # SSE events after the first response
        self.end_time: float | None = None
        self.error: str | None = None
        self.peer = peer
        self.era = "unknown"
        self.last_event_time: float | None = None
        self.body_bytes = body_bytes
        self.cancelled = False

    def requested(self, msg: Message) -> None:
        """The message POSTed on it; a request gives the exchange its era."""
        self.request_messages.append(msg)
        if msg.kind == "request":
            self.era = msg.era

    def respond(self, status: int, headers: Headers, time: float, event_stream: bool) -> None:
        """The response's head."""
        self.status, self.response_headers, self.response_time = status, headers, time
        self.event_stream = event_stream

    def event(self, time: float) -> None:
        """An SSE event came."""
        self.events += 1
        self.last_event_time = time
        if self.responses:
            self.after_response_events += 1

    def end(self, time: float, error: str | None, cancelled: bool) -> None:
        """It is over (`cancelled`: the client disconnected from a request it had not had its answer to)."""
        self.end_time, self.error, self.cancelled = time, error, cancelled

    @property
    def request(self) -> Message | None:
        """The single JSON-RPC request POSTed on this exchange, if it was one."""
        for m in self.request_messages:
            if m.kind == "request":
                return m
        return None
