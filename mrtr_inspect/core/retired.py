"""What the stitcher keeps of a closed chain, and how it lets the rest go (RULES.md §3, docs/architecture.md).

A closed chain is handed out whole and forgotten, except for the states its rounds issued: the
`StateIndex` maps each state's hash to the rounds that issued it, open ones as `Round`s and those of
closed chains as `RetiredRound`s (with a `RetiredChain` and `KeptRequest`s: only what the stitcher
and the rules read of a round whose chain has closed, no messages, summaries or links), bounded by
`remembered_states`, so a replay of an old state is still recognised. `forget_retries` keeps a
closing chain's retries of older rounds small; `release` frees a closed chain nothing holds any more by reference
counting, not by the garbage collector.
"""

from __future__ import annotations

import marshal
import sys
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from orjson import dumps as _orjson
from orjson import loads as _orjson_loads

if TYPE_CHECKING:  # pragma: no cover
    from .chains import Chain, ChainRequest, Round


class KeptRequest:
    """A request of a closed chain, answered or cancelled (so it changes no more): what a later
    retry of one of its rounds reads of it (`Linked.earlier`, the round's `retries`)."""

    __slots__ = ("id", "index", "response_kind", "cancelled")

    def __init__(self, r: ChainRequest) -> None:
        self.id = r.id
        self.index = r.index
        self.response_kind = r.response_kind
        self.cancelled = r.cancelled

    @property
    def in_flight(self) -> bool:
        return self.response_kind is None and not self.cancelled


class RetiredChain:
    """A closed chain as the state index keeps it: its names, its requests and its rounds.

    Nothing here refers back to itself: a round holds its chain and the round before it, the chain
    holds its rounds weakly. So what the index forgets is freed at once, by reference counting, not
    by a full collection of the garbage collector much later (the retired rounds live long enough to
    reach its oldest generation)."""

    __slots__ = ("id", "seq", "method", "target", "outcome", "requests", "_rounds")
    closed = True

    def __init__(self, chain: Chain, requests: list) -> None:
        self.id = chain.id
        self.seq = chain.seq
        self.method = chain.method
        self.target = chain.target
        self.outcome = chain.outcome
        self.requests = requests
        self._rounds: list[weakref.ref] = []

    @property
    def rounds(self) -> list[RetiredRound]:
        """Its rounds from the first to the last one still held (by the index, or by a link to it):
        a round keeps those before it, so whoever holds a round sees every round up to it."""
        out = []
        for ref in self._rounds:
            rd = ref()
            if rd is None:
                break
            out.append(rd)
        return out


_PLAIN = object()  # a state token spelled as the state itself between quotes (no escapes)
CANONICAL = object()  # a state token that is orjson's form of the state (its message was canonical: rawjson.parse_message)


def canonical_token(state: str) -> str:
    """The token of a string in a canonical message (`rawjson.canonical_token`)."""
    return _orjson(state).decode("utf-8")


class RetiredRound:
    """A round of a closed chain, with the attributes of `Round` that are read once its chain has
    closed (a late or replayed retry, a state on another request). Its `inputRequests` are kept
    serialised and decoded when read, which only such a retry does: by orjson when its message was
    canonical (its values are orjson's, written back and read again exactly), else by marshal (exact
    for JSON values; about four times orjson's instructions, most of them marshal's table of objects)."""

    __slots__ = ("chain", "n", "request", "irr_index", "irr_time", "_asked", "state", "state_hash", "_token",
                 "retries", "peer", "key", "had_state", "expired", "_previous", "__weakref__")

    def __init__(self, rd: Round, chain: RetiredChain, request: Any, retries: list,
                 previous: RetiredRound | None) -> None:
        self.chain = chain
        self._previous = previous  # held: the chain's rounds up to this one stay readable
        self.n = rd.n
        self.request = request
        self.irr_index = rd.irr_index
        self.irr_time = rd.irr_time
        ir = rd.input_requests
        if ir is None:
            self._asked: Any = None
        elif rd.canonical:
            # orjson's form, as a str: a bytes object orjson wrote holds a 4 KiB allocation while it is kept
            self._asked = _orjson(ir).decode("utf-8")
        else:
            try:
                self._asked = (marshal.dumps(ir),)  # a tuple: marshal's form
            except ValueError:  # nested too deep for marshal: kept as it is
                self._asked = [ir]
        self.state = rd.state
        self.state_hash = rd.state_hash
        tok = rd._token
        self._token = tok if tok is CANONICAL or tok is None else _PLAIN if rd.state is not None and tok == f'"{rd.state}"' else tok
        self.retries = retries
        self.peer = rd.peer
        self.key = rd.key
        self.had_state = rd.had_state
        self.expired = rd.expired

    @property
    def input_requests(self) -> dict | None:
        a = self._asked
        if a is None:
            return None
        t = type(a)
        return _orjson_loads(a) if t is str else marshal.loads(a[0]) if t is tuple else a[0]

    @property
    def state_token(self) -> str | None:
        tok = self._token
        return f'"{self.state}"' if tok is _PLAIN else canonical_token(self.state) if tok is CANONICAL else tok

    @property
    def keys(self) -> frozenset:
        ir = self.input_requests
        return frozenset(ir) if ir else frozenset()

    @property
    def consumed(self) -> bool:
        return bool(self.retries)


def retire(chain: Chain) -> list[RetiredRound]:
    """What the state index keeps of a closed chain: its rounds, retired (each holds the retired
    chain). A request still in flight (a chain closed at the end of a capture) is kept as it is: an
    answer may still reach it."""
    # a round's request and retries are requests of its chain (a retry of a closed chain's round
    # opens a chain of its own, but that round is retired already)
    kept = {id(r): KeptRequest(r) for r in chain.requests if r.response_kind is not None or r.cancelled}
    get = kept.get
    rc = RetiredChain(chain, [get(id(r), r) for r in chain.requests])
    rounds: list[RetiredRound] = []
    for rd in chain.rounds:
        rounds.append(RetiredRound(rd, rc, get(id(rd.request), rd.request), [get(id(r), r) for r in rd.retries],
                                   rounds[-1] if rounds else None))
    rc._rounds = [weakref.ref(r) for r in rounds]
    return rounds


class StateIndex:
    """The state index of RULES.md §3: the hash of each state a round issued -> the rounds that
    issued it, in the order they did. A closed chain's rounds are kept in their retired form, and the
    states of closed chains are remembered up to `limit`, the oldest forgotten first."""

    __slots__ = ("rounds", "retired", "limit")

    def __init__(self, limit: int) -> None:
        self.rounds: dict[str, list] = {}  # Round while its chain is open, RetiredRound after
        self.retired: OrderedDict[str, None] = OrderedDict()  # state hashes of closed chains, oldest first
        self.limit = limit

    def add(self, rd: Round) -> None:
        """A round opened: the state it issued, if any, names it."""
        if rd.state_hash is not None:
            self.rounds.setdefault(rd.state_hash, []).append(rd)

    def retire_chain(self, chain: Chain) -> None:
        """The chain closed: its states name the retired form of its rounds from now on."""
        rounds, retired = self.rounds, self.retired
        for rd, kept in zip(chain.rounds, retire(chain)):
            h = rd.state_hash
            if h is not None:
                indexed = rounds.get(h)
                if indexed is not None:
                    rounds[h] = [kept if r is rd else r for r in indexed]
                retired[h] = None
                retired.move_to_end(h)
        while len(retired) > self.limit:
            h, _ = retired.popitem(last=False)
            rounds.pop(h, None)


def forget_retries(chain: Chain) -> None:
    """A closing chain's retries of an earlier closed chain's rounds stay in those rounds' retries in
    their small form (`KeptRequest`), so that what the index keeps for replays holds no message (the
    closing chain itself goes at its `release`)."""
    for r in chain.requests:
        link = r.link
        if link is None:
            continue
        rd = link.round
        if rd.chain is not chain and (r.response_kind is not None or r.cancelled):
            # a retry of a round of an earlier closed chain: that round keeps it in its retries
            rd.retries[:] = [KeptRequest(x) if x is r else x for x in rd.retries]


def _parts(chain: Chain) -> tuple[list, int]:
    """The objects of a chain that refer to one another (the chain, its requests, rounds and links,
    and their lists), and how many references they hold to one another.

    Counted from what the stitcher builds, with an `is` test where a reference may lead out of the
    chain, not by looking each reference up among the objects' ids (about 75 C calls a chain, 9k
    instructions a message of `check`): a request's `chain` is its chain; its `round` is None or a
    round of its chain (a replay's request starts a chain of its own, `round` None); a link's `round`
    is a round of the chain or, for a replay, a retired one, and its `earlier` holds that round's
    chain's requests; a round's `chain`, `request` and `retries` are of its chain (a later replay of
    its state finds the retired form, not it); a legacy round's `chain` and `request` too. Each object
    is listed once: a link and its `earlier` belong to one request, a `retries` list to one round. A
    count too low only keeps the chain (its release is skipped); it is never too high:
    tests/core/test_retired.py compares it with every reference looked up by id."""
    reqs, rounds = chain.requests, chain.rounds
    objs: list = [chain, reqs, rounds]
    append = objs.append
    inner = 2 + len(reqs) + len(rounds)  # the chain's two lists, and what they hold
    for r in reqs:
        append(r)
        if r.chain is chain:
            inner += 1
        rd = r.round
        if rd is not None and rd.chain is chain:
            inner += 1
        link = r.link
        if link is not None:  # its `request` is no part of the cycle: freed with it
            earlier = link.earlier
            append(link)
            append(earlier)
            inner += 2  # r.link, link.earlier
            if link.chain is chain:
                inner += 1
            if link.creq is r:
                inner += 1
            if link.round.chain is chain:  # the round and the requests before it: of this chain
                inner += 1 + len(earlier)
    for rd in rounds:
        retries = rd.retries
        append(rd)
        append(retries)
        inner += 1 + len(retries)  # rd.retries, the retries of an open chain's round
        if rd.chain is chain:
            inner += 1
        if rd.request.chain is chain:
            inner += 1
    asks = chain.asks
    if asks:  # a legacy chain's rounds (an empty list is in no cycle)
        append(asks)
        inner += 1 + len(asks)
        for q in asks:
            append(q)
            if q.chain is chain:
                inner += 1
            if q.request.chain is chain:
                inner += 1
    return objs, inner


RELEASE_AFTER = 16  # closed chains between a chain's close and its release
# reference counts tell whether anything else holds an object (not so without the GIL)
_EXACT_COUNTS = getattr(sys, "_is_gil_enabled", lambda: True)()


def release(chain: Chain) -> None:
    """Cut the references that make a closed chain a cycle (the chain and its requests and rounds
    refer to each other, a request and its link too) when nothing else refers to any of them: the
    chain is then freed by reference counting, at once, instead of by the garbage collector. A chain
    still held anywhere (an output kept, an observation, a rule's memory) is left as it is.

    Their references to one another are a part of each one's reference count (the part the garbage
    collector subtracts); when those counted add up to the sum of the counts, there is no other
    (leaving one out only keeps the chain). A list holding them adds to each count what it adds to a
    new object put at its end. The counts are taken at once, in C; none of these objects can be
    referred to weakly."""
    objs, inner = _parts(chain)
    del chain
    if not _EXACT_COUNTS:
        return
    objs.append(object())
    counts = list(map(sys.getrefcount, objs))
    objs.pop()
    base = counts.pop()
    if sum(counts) - base * len(counts) != inner:
        return
    for r in objs[1]:  # the chain's requests
        r.link = None
    for o in objs:
        if type(o) is list:
            o.clear()
