"""What the stitcher keeps of a closed chain, and how it lets the rest go (RULES.md §3, docs/architecture.md).

A closed chain is handed out whole and forgotten, except for the states its rounds issued: the
`StateIndex` maps each state's hash to the rounds that issued it, open ones as `Round`s and those of
closed chains as `RetiredRound`s (with a `RetiredChain` and `KeptRequest`s: only what the stitcher
and the rules read of a round whose chain has closed, no messages, summaries or links; made from a
record of plain tuples when a state of the chain is looked up again, which most never are), bounded by
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

    def __init__(self, id: Any, index: int, response_kind: str | None, cancelled: bool) -> None:
        self.id = id
        self.index = index
        self.response_kind = response_kind
        self.cancelled = cancelled

    @classmethod
    def of(cls, r: ChainRequest) -> KeptRequest:
        return cls(r.id, r.index, r.response_kind, r.cancelled)

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

    def __init__(self, names: tuple, requests: list) -> None:
        self.id, self.seq, self.method, self.target, self.outcome = names
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


def _asked_form(rd: Round) -> Any:
    """A round's `inputRequests` as a retired round keeps them: by orjson when its message was
    canonical (its values are orjson's, written back and read again exactly), as a str (a bytes object
    orjson wrote holds a 4 KiB allocation while it is kept); else by marshal, in a tuple (exact for
    JSON values; about four times orjson's instructions, most of them marshal's table of objects);
    nested too deep for marshal, as they are, in a list."""
    ir = rd.input_requests
    if ir is None:
        return None
    if rd.canonical:
        text = rd.asked_text  # written for its summary's key already
        return text if text is not None else _orjson(ir).decode("utf-8")
    try:
        return (marshal.dumps(ir),)
    except ValueError:
        return [ir]


class RetiredRound:
    """A round of a closed chain, with the attributes of `Round` that are read once its chain has
    closed (a late or replayed retry, a state on another request). Its `inputRequests` are kept
    serialised (`_asked_form`) and decoded when read, which only such a retry does."""

    __slots__ = ("chain", "n", "request", "irr_index", "irr_time", "_asked", "state", "state_hash", "_token",
                 "retries", "peer", "key", "had_state", "expired", "_previous", "__weakref__")

    def __init__(self, facts: tuple, chain: RetiredChain, request: Any, retries: list,
                 previous: RetiredRound | None) -> None:
        self.chain = chain
        self._previous = previous  # held: the chain's rounds up to this one stay readable
        self.request = request
        self.retries = retries
        (self.n, self.irr_index, self.irr_time, self._asked, self.state, self.state_hash, tok, self.peer, self.key,
         self.had_state, self.expired) = facts[:11]
        state = self.state
        self._token = tok if tok is CANONICAL or tok is None else _PLAIN if state is not None and tok == f'"{state}"' else tok

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


def _record(chain: Chain) -> tuple:
    """What the state index keeps of a closed chain until a state of it is looked up again (most never
    are: a chain's retries come before it closes), as plain tuples: its names, each request's facts
    (the request itself while in flight: a chain closed at the end of a capture, an answer may still
    reach it), and each round's facts with the positions of its request and retries among the
    chain's requests (by identity: `list.index` compares a request, which defines no equality, by
    its identity). `_revive` makes its `RetiredChain` and `RetiredRound`s of them, the same as
    when they were made at the close (about 40k instructions a chain, most chains never read)."""
    reqs = chain.requests
    # a round's request and retries are requests of its chain, by construction; one that is not (if
    # ever) is kept as it is, as when the rounds were retired at the close
    for at in (reqs.index, lambda r: _at(reqs, r)):
        try:
            rounds = [(rd.n, rd.irr_index, rd.irr_time, _asked_form(rd), rd.state, rd.state_hash, rd._token, rd.peer,
                       rd.key, rd.had_state, rd.expired, at(rd.request), [at(r) for r in rd.retries])
                      for rd in chain.rounds]
            break
        except ValueError:
            continue
    return ((chain.id, chain.seq, chain.method, chain.target, chain.outcome),
            [r if r.response_kind is None and not r.cancelled else (r.id, r.index, r.response_kind, r.cancelled)
             for r in reqs], rounds)


def _at(reqs: list, r: Any) -> Any:
    """Where a request is among its chain's requests, or the request itself when it is not one."""
    for k, x in enumerate(reqs):
        if x is r:
            return k
    return r


def _revive(record: tuple) -> list[RetiredRound]:
    """The retired rounds of a chain's record (`_record`), each holding the retired chain."""
    names, facts, round_facts = record
    requests = [KeptRequest(*f) if type(f) is tuple else f for f in facts]
    rc = RetiredChain(names, requests)
    rounds: list[RetiredRound] = []
    for f in round_facts:
        rounds.append(RetiredRound(f, rc, _of(requests, f[11]), [_of(requests, k) for k in f[12]],
                                   rounds[-1] if rounds else None))
    rc._rounds = [weakref.ref(r) for r in rounds]
    return rounds


def _of(requests: list, k: Any) -> Any:
    return requests[k] if type(k) is int else k


def retire(chain: Chain) -> list[RetiredRound]:
    """What the state index keeps of a closed chain: its rounds, retired (each holds the retired
    chain). A request still in flight (a chain closed at the end of a capture) is kept as it is: an
    answer may still reach it."""
    return _revive(_record(chain))


class StateIndex:
    """The state index of RULES.md §3: the hash of each state a round issued -> the rounds that
    issued it, in the order they did. A closed chain's rounds are kept in their retired form, made
    when one of its states is looked up (`get`) from the chain's record (`_record`); the states of
    closed chains are remembered up to `limit`, the oldest forgotten first."""

    __slots__ = ("_rounds", "retired", "limit")

    def __init__(self, limit: int) -> None:
        # Round while its chain is open; after, (record, i) until looked up, then the RetiredRound
        self._rounds: dict[str, list] = {}
        self.retired: OrderedDict[str, None] = OrderedDict()  # state hashes of closed chains, oldest first
        self.limit = limit

    def get(self, h: str) -> list | None:
        """The rounds that issued the state of hash `h` (None: none remembered)."""
        rounds = self._rounds.get(h)
        if rounds is not None:
            for x in rounds:
                if type(x) is tuple:
                    self._revive(x[0])
                    return self.get(h)
        return rounds

    @property
    def rounds(self) -> dict[str, list]:
        """Every state hash -> its rounds, each retired round made (for tests and inspection)."""
        for h in list(self._rounds):
            self.get(h)
        return self._rounds

    def _revive(self, record: tuple) -> None:
        """A chain's record's rounds made (`_revive`), each in place of its entry wherever its state
        is still indexed: the same rounds, held the same way, as if made at the chain's close."""
        index = self._rounds
        for i, rd in enumerate(_revive(record)):
            h = rd.state_hash
            indexed = index.get(h) if h is not None else None
            if indexed is not None:
                index[h] = [rd if type(x) is tuple and x[0] is record and x[1] == i else x for x in indexed]

    def add(self, rd: Round) -> None:
        """A round opened: the state it issued, if any, names it."""
        if rd.state_hash is not None:
            self._rounds.setdefault(rd.state_hash, []).append(rd)

    def retire_chain(self, chain: Chain) -> None:
        """The chain closed: its states name its record's rounds from now on (`_record`)."""
        rounds, retired = self._rounds, self.retired
        record = None
        for i, rd in enumerate(chain.rounds):
            h = rd.state_hash
            if h is not None:
                if record is None:
                    record = _record(chain)
                indexed = rounds.get(h)
                if indexed is not None:
                    rounds[h] = [(record, i) if r is rd else r for r in indexed]
                if h in retired:  # issued again: the newest now
                    retired.move_to_end(h)
                else:
                    retired[h] = None
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
            rd.retries[:] = [KeptRequest.of(x) if x is r else x for x in rd.retries]


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
