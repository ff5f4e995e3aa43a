"""Observations: what the pipeline saw, handed out with each frame's outputs for the rules to judge.

The core decodes, pairs and stitches; it does not judge. Each stage states what it saw as one of
these records, frozen and complete when made: each carries the facts of its moment that a judge
reads (the request a response answers, the chain place as it stood, the requests then in flight),
so the rules judge them after the frame (`Inspector.step`) and the rule engine passes each record
to the rules that subscribe to its type.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any

from .exchanges import NO_FLIGHT

if TYPE_CHECKING:  # pragma: no cover
    from .chains import Chain, ChainRequest, LegacyRound, Round
    from .exchanges import Flight, HttpExchange
    from .framing import SseFields
    from .messages import Message


def fast_init(cls: type) -> type:
    """A frozen slotted dataclass, given `cls.new`: its constructor for the core's hot paths (same
    signature, same defaults), for the observations made for every message, every SSE event, every
    exchange. The class's own `__init__` (what `dataclass(frozen=True)` writes: `object.__setattr__`
    per field, 2 to 3 times slower) stays for everything else.

    `new` makes an instance of a class of the same slots, not frozen, stores the fields as any plain
    slotted class does, then gives the instance `cls` as its class (a layout-compatible `__class__`
    assignment). What it returns is a `cls` like any other, frozen from then on: 3.1k instructions for
    a five-field observation against 5.7k through the slots' descriptors (callgrind, this Python).
    Each is compiled when the class is made: 0.5M instructions of the import each."""
    ns: dict[str, Any] = {"_alloc": object.__new__, "_frozen": cls}
    params = []
    for f in fields(cls):
        if f.default is MISSING:
            params.append(f.name)
        else:
            ns[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
    ns["_Builder"] = type(f"_{cls.__name__}Builder", (), {"__slots__": tuple(cls.__slots__),  # type: ignore[attr-defined]
                                                         "__module__": cls.__module__})
    stores = "".join(f"    o.{f.name} = {f.name}\n" for f in fields(cls))
    exec(f"def new({', '.join(params)}):\n    o = _alloc(_Builder)\n{stores}    o.__class__ = _frozen\n    return o\n", ns)
    cls.new = ns["new"]  # type: ignore[attr-defined]
    return cls


@fast_init
@dataclass(frozen=True, slots=True)
class Decoded:
    """Any message, decoded (or not: kind `invalid`), its era known. `exchange` on HTTP.

    `request`: for a response, the request it answers (None: it answers nothing known). `creq`: for
    a client request of an MRTR method, its place in a chain; for a response, the place of the request
    it answers. A retry's place ends when its chain closes (closed chains keep no messages): a late
    answer to it has none. `flight`: the client requests in flight in the message's scope (the stdio
    pipe, the HTTP peer) when it was seen."""

    msg: "Message"
    exchange: "HttpExchange | None" = None
    request: "Message | None" = None
    creq: "ChainRequest | None" = None
    flight: "Flight" = NO_FLIGHT


@fast_init
@dataclass(frozen=True, slots=True)
class Answered:
    """A response paired with the request it answers (`request` None: it answers nothing known)."""

    response: "Message"
    request: "Message | None"
    creq: "ChainRequest | None" = None  # its place in a chain, for MRTR requests
    exchange: "HttpExchange | None" = None
    asked: "LegacyRound | None" = None  # a client's answer to a legacy server request: the round it answers


@fast_init
@dataclass(frozen=True, slots=True)
class Linked:
    """A retry tied to the round it answers.

    `via`: state, keys or params. `state`: how the retry's requestState relates to the round's:
    echoed, reencoded (same value, other escapes), altered, dropped, fabricated, none (neither had
    one). `replay`: None, or how the round's earlier retry ended: answered, errored, broken (no
    response). `earlier`: the chain's requests before this one. `request` and `earlier` are
    released when the chain closes (closed chains keep no messages).
    """

    chain: "Chain"
    round: "Round"
    request: "Message"
    creq: "ChainRequest"
    via: str
    state: str
    replay: str | None = None
    forked: bool = False
    params_changed: bool = False
    cross_principal: bool = False
    ambiguous: bool = False
    earlier: tuple = ()


@fast_init
@dataclass(frozen=True, slots=True)
class NotLinked:
    """A request carrying MRTR fields that ties to no open round.

    reason: parallel-misuse (fields of another chain), unsupported-method (MRTR fields on a method
    that takes none), state-unsolicited, responses-unsolicited, after-complete (a retry of a chain
    whose last result was complete), possible-state-dropped (a fresh call where a state-only round
    was open).
    """

    request: "Message"
    reason: str
    round: "Round | None" = None
    capture_incomplete: bool = False
    completed: Any = None  # the completed chain, for after-complete
    restart_of: str | None = None  # capture_incomplete: the earlier session it may resume a chain of
    creq: "ChainRequest | None" = None  # the place of the request in the chain it starts (None: no MRTR method)


@fast_init
@dataclass(frozen=True, slots=True)
class RoundOpened:
    """An `input_required` result opened round `round` of `chain`; `previous` is the round before."""

    chain: "Chain"
    round: "Round"
    previous: "Round | None"


@fast_init
@dataclass(frozen=True, slots=True)
class LegacyAsked:
    """A legacy server request that asks the client (elicitation/create, sampling/createMessage,
    roots/list) while a legacy chain is open in its session (RULES.md §13). `round`: the round of the
    chain it was tied to (`round.via` says by what evidence), or None when no evidence tied it
    (it is left unattached: `waiting` legacy chains were open)."""

    msg: "Message"
    round: "LegacyRound | None"
    waiting: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class ChainClosed:
    chain: "Chain"


@fast_init
@dataclass(frozen=True, slots=True)
class SseSeen:
    """One server-sent event on `exchange`, its fields, and its message if it carried data."""

    exchange: "HttpExchange"
    fields: "SseFields"
    msg: "Message | None"
    time: float


@fast_init
@dataclass(frozen=True, slots=True)
class ExchangeDone:
    """An HTTP exchange is over: everything about it is known. `creq`: the chain place of the
    request POSTed on it (as `Decoded.creq`)."""

    exchange: "HttpExchange"
    creq: "ChainRequest | None" = None
    legacy_session: bool = False  # its Mcp-Session-Id was minted by a server's answer to initialize


@fast_init
@dataclass(frozen=True, slots=True)
class Cancelled:
    """A `notifications/cancelled` for a request (`request` None: unknown or already answered)."""

    notification: "Message"
    request: "Message | None"
    creq: "ChainRequest | None"


@fast_init
@dataclass(frozen=True, slots=True)
class DuplicateMembers:
    """The raw bytes of a message repeat member names in some object (`msg.duplicates` says where);
    made only for such messages."""

    msg: "Message"
    exchange: "HttpExchange | None" = None


@fast_init
@dataclass(frozen=True, slots=True)
class InFlightReuse:
    """A request reuses the id of a request from the same sender that is still unanswered."""

    msg: "Message"
    prior: "Message"


@fast_init
@dataclass(frozen=True, slots=True)
class ServerExited:
    """A stdio server process ended (`status`: its exit status, negative for the signal that killed
    it) while the client was still connected or with a failing status, and `unanswered` (the client
    requests in flight, oldest first) never got their answer; the chains they belong to (`chains`,
    their ids) end as `error`. Made only when some request was left."""

    session: str
    time: float
    status: int
    unanswered: list
    chains: list


@fast_init
@dataclass(frozen=True, slots=True)
class SessionOver:
    session: str
    transport: str
    time: float
    info: dict


@fast_init
@dataclass(frozen=True, slots=True)
class InspectorFailed:
    """The pipeline itself raised: on a frame (`frame`, its type name: `StdioLine`, `HttpRequest`…) or
    while closing the analysis (`frame` None). The traffic was not affected; the analysis goes on
    with the next frame. Rules: `inspector-error` (rules/tool.py)."""

    frame: str | None
    error: BaseException
    time: float
