"""Chains: the logical request behind several `input_required` exchanges (RULES.md §3).

A chain starts at a `tools/call`, `prompts/get` or `resources/read` and follows each retry: first by
the `requestState` the retry echoes (keyed by SHA-256, so opaque state never appears in output),
then by the `inputResponses` keys it answers, then by its parameters. How a retry was tied is kept
as the link's evidence (`state`, `keys`, `params`). The stitcher is deterministic: the same
messages always give the same chains.

The stitcher decides links; it does not judge them. What it saw goes out as observations
(`Linked`, `NotLinked`, `RoundOpened`, `ChainClosed`) for the rules to judge.

Memory: a chain lives while it is open. Once closed it is handed out and forgotten, except for the
states its rounds issued, kept in a bounded index so a replay of an old state is still recognised.
What the index keeps of a closed chain is a `RetiredChain` with `RetiredRound`s: only what the
stitcher and the rules read of a round whose chain has closed (no messages, summaries or links).
A closed chain nothing holds any more is freed by reference counting (`_release`), not left to the
garbage collector.
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import re
import sys
import weakref
from collections import OrderedDict, deque
from typing import Any

from .jsontext import dumps_with
from .messages import ERROR, MRTR_METHODS, RESULT, Message, target_of
from .observations import ChainClosed, Linked, NotLinked, RoundOpened

# -------------------------------------------------------------------------------------------------
# keys


def _canon_num(v: Any) -> Any:
    if type(v) is float and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if type(v) is dict:
        return {k: _canon_num(x) for k, x in v.items()}
    if type(v) is list:
        return [_canon_num(x) for x in v]
    return v


_CANONICAL = dumps_with(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Canonical JSON in the manner of RFC 8785: sorted members, no spaces, integral floats as integers."""
    try:
        return _CANONICAL(value)
    except (TypeError, ValueError):
        return json.dumps(_canon_num(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_EXCLUDED = ("_meta", "inputResponses", "requestState")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _may_have_float(text: str) -> bool:
    """Whether JSON text has a "." or an exponent outside its strings (where a float would be)."""
    bare = _STRING.sub("", text)
    return "." in bare or "e+" in bare or "e-" in bare


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@functools.lru_cache(maxsize=1024)  # a retry repeats the params of its chain: digested once
def _float_free_digest(text: str) -> str | None:
    """The digest of canonical text, None when the text may hold a float (to be made an integer first)."""
    # a float is written with "." or an exponent: without them there is none to make an integer of
    if ("." in text or "e+" in text or "e-" in text) and _may_have_float(text):
        return None
    return _digest(text)


def params_digest(method: str | None, params: Any) -> str:
    """digest(R): the canonical params without _meta, inputResponses and requestState
    (an absent `arguments` counts as {})."""
    if type(params) is not dict:
        return _digest(canonical_json(params))
    p = {k: v for k, v in params.items() if k not in _EXCLUDED}
    if method != "resources/read" and "arguments" not in p:
        p["arguments"] = {}
    try:
        digest = _float_free_digest(_CANONICAL(p))
    except (TypeError, ValueError):
        digest = None
    return digest if digest is not None else _digest(canonical_json(_canon_num(p)))


@functools.lru_cache(maxsize=1024)  # a retry echoes the state its round was issued: hashed once
def state_hash(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()


# -------------------------------------------------------------------------------------------------
# model


class ChainRequest:
    """One request of a chain: the first, or a retry of one of its rounds."""

    __slots__ = (
        "chain", "msg", "index", "id", "time", "round", "link", "response_kind", "response_index",
        "response_time", "cancelled", "answered_summary", "error_code",
    )

    def __init__(self, chain: "Chain", msg: Message, round_: "Round | None") -> None:
        self.chain = chain
        self.msg: Message | None = msg  # dropped once answered
        self.index = msg.index
        self.id = msg.id
        self.time = msg.time
        self.round = round_  # the round this request retries (None for the first request)
        self.link: Linked | None = None
        self.response_kind: str | None = None  # None in flight; result, input_required, error, task, none
        self.response_index: int | None = None
        self.response_time: float | None = None
        self.cancelled = False
        self.answered_summary: dict | None = None
        self.error_code: Any = None

    @property
    def in_flight(self) -> bool:
        return self.response_kind is None and not self.cancelled


class Round:
    """One `input_required` result and what it asked."""

    __slots__ = (
        "chain", "n", "request", "irr_index", "irr_time", "input_requests", "state", "state_hash",
        "state_token", "retries", "peer", "key", "asked", "had_state", "expired",
    )

    def __init__(self, chain: "Chain", n: int, request: ChainRequest, irr: Message) -> None:
        result = irr.result if type(irr.result) is dict else {}
        self.chain = chain
        self.n = n
        self.request = request
        self.irr_index = irr.index
        self.irr_time = irr.time
        ir = result.get("inputRequests")
        self.input_requests: dict | None = ir if type(ir) is dict else None
        st = result.get("requestState")
        self.had_state = "requestState" in result
        self.state: str | None = st if type(st) is str else None
        self.state_hash = state_hash(st) if type(st) is str else None
        self.state_token = irr.raw_token("result", "requestState") if type(st) is str else None
        self.retries: list[ChainRequest] = []
        self.peer = chain.peer
        self.key = chain.key
        self.asked = summarize_requests(self.input_requests)
        self.expired = False

    @property
    def keys(self) -> frozenset:
        return frozenset(self.input_requests) if self.input_requests else frozenset()

    @property
    def consumed(self) -> bool:
        return bool(self.retries)


class Chain:
    __slots__ = (
        "id", "seq", "method", "target", "digest", "key", "peer", "session", "transport", "era", "requests",
        "rounds", "outcome", "vias", "start", "end", "error_code", "tainted", "closed", "final_index",
    )

    def __init__(self, seq: int, msg: Message, peer: str, digest: str) -> None:
        self.id = f"c{seq}"
        self.seq = seq
        self.method = msg.method
        self.target = target_of(msg.method, msg.params)
        self.digest = digest
        self.key = (msg.method, self.target, digest)
        self.peer = peer
        self.session = msg.session
        self.transport = msg.transport
        self.era = msg.era
        self.requests: list[ChainRequest] = []
        self.rounds: list[Round] = []
        self.outcome: str | None = None
        self.vias: list[str] = []
        self.start = msg.time
        self.end = msg.time
        self.error_code: Any = None
        self.tainted = False
        self.closed = False
        self.final_index: int | None = None

    @property
    def link(self) -> str | None:
        """How the retries were tied: the weakest evidence used (state, then keys, then params)."""
        if not self.vias:
            return None
        for via in ("params", "keys", "state"):
            if via in self.vias:
                return via
        return self.vias[-1]

    @property
    def in_flight(self) -> list[ChainRequest]:
        return [r for r in self.requests if r.in_flight]

    @property
    def open_round(self) -> Round | None:
        if self.rounds and not self.rounds[-1].consumed and not self.rounds[-1].expired:
            return self.rounds[-1]
        return None

    @property
    def duration_ms(self) -> float:
        """From the first request to the end: the final response, the disconnect of a cancelled
        chain, or for a chain still waiting (`open`, `abandoned`) the moment it was given up on: the
        end of the capture or of its session, or the abandon timeout."""
        return round((self.end - self.start) * 1000.0, 3)

    @property
    def unanswered_round(self) -> Round | None:
        """The abandoned chain's last round, when no retry ever answered it (it waited until `end`)."""
        if self.outcome == "abandoned" and self.rounds and not self.rounds[-1].retries:
            return self.rounds[-1]
        return None

    def summary(self) -> dict:
        """The chain as the JSON report shows it (CONTRACTS.md), with its timeline."""
        timeline = []
        for r in self.requests:
            entry: dict[str, Any] = {"id": r.id, "message": r.index, "time": r.time}
            if r.round is not None:
                entry["retries_round"] = r.round.n
                entry["wait_ms"] = round((r.time - r.round.irr_time) * 1000.0, 3)
                if r.link is not None:
                    entry["link"] = r.link.via
                if r.answered_summary is not None:
                    entry["answered"] = r.answered_summary
            entry["response"] = r.response_kind if not r.cancelled else "cancelled"
            if r.response_index is not None:
                entry["response_message"] = r.response_index
                entry["response_time"] = r.response_time
            if r.error_code is not None:
                entry["error_code"] = r.error_code
            timeline.append(entry)
        rounds = []
        for rd in self.rounds:
            rounds.append({
                "round": rd.n,
                "message": rd.irr_index,
                "time": rd.irr_time,
                "asked": rd.asked,
                "request_state": rd.state_hash[:16] if rd.state_hash else None,
            })
        if self.outcome == "abandoned":
            rd = self.unanswered_round
            if rd is not None:  # the wait no retry ended: up to the abandonment
                rounds[-1]["unanswered_ms"] = round((self.end - rd.irr_time) * 1000.0, 3)
        return {
            "id": self.id,
            "method": self.method,
            "target": self.target,
            "rounds": len(self.rounds),
            "requests": [r.id for r in self.requests],
            "outcome": self.outcome or "open",
            "link": self.link,
            "duration_ms": self.duration_ms,
            "era": self.era,
            "peer": self.peer,
            "start": self.start,
            "end": self.end,
            "error_code": self.error_code,
            "timeline": timeline,
            "round_details": rounds,
        }


# -------------------------------------------------------------------------------------------------
# what a closed chain keeps for replays of its states


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


class RetiredRound:
    """A round of a closed chain, with the attributes of `Round` that are read once its chain has
    closed (a late or replayed retry, a state on another request). Its `inputRequests` are kept
    serialised (marshal: exact for JSON values) and decoded when read, which only such a retry does."""

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
        try:
            self._asked: Any = marshal.dumps(ir) if ir is not None else None
        except ValueError:  # nested too deep for marshal: kept as it is
            self._asked = [ir]
        self.state = rd.state
        self.state_hash = rd.state_hash
        tok = rd.state_token
        self._token = _PLAIN if tok is not None and rd.state is not None and tok == f'"{rd.state}"' else tok
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
        return a[0] if type(a) is list else marshal.loads(a)

    @property
    def state_token(self) -> str | None:
        return f'"{self.state}"' if self._token is _PLAIN else self._token

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


def _parts(chain: Chain) -> tuple[list, list]:
    """The objects of a chain that refer to one another (the chain, its requests, rounds and links,
    and their lists), and the references they hold that may be to one of them."""
    reqs, rounds = chain.requests, chain.rounds
    objs: list = [chain, reqs, rounds]
    refs: list = [reqs, rounds, *reqs, *rounds]
    for r in reqs:
        objs.append(r)
        link = r.link
        refs += (r.chain, r.round, link)
        if link is not None:
            objs += (link, link.earlier)
            refs += (link.chain, link.round, link.creq, link.earlier, *link.earlier)
    for rd in rounds:
        objs += (rd, rd.retries)
        refs += (rd.chain, rd.request, rd.retries, *rd.retries)
    return objs, refs


_RELEASE_AFTER = 16  # closed chains between a chain's close and its release
# reference counts tell whether anything else holds an object (not so without the GIL)
_EXACT_COUNTS = getattr(sys, "_is_gil_enabled", lambda: True)()


def _release(chain: Chain) -> None:
    """Cut the references that make a closed chain a cycle (the chain and its requests and rounds
    refer to each other, a request and its link too) when nothing else refers to any of them: the
    chain is then freed by reference counting, at once, instead of by the garbage collector. A chain
    still held anywhere (an output kept, an observation, a rule's memory) is left as it is.

    Their references to one another are a part of each one's reference count (the part the garbage
    collector subtracts); when those counted add up to the sum of the counts, there is no other
    (leaving one out only keeps the chain). A list holding them adds to each count what it adds to a
    new object put at its end. The counts are taken at once, in C; none of these objects can be
    referred to weakly."""
    objs, refs = _parts(chain)
    del chain
    ids = set(map(id, objs))
    inner = sum(map(ids.__contains__, map(id, refs)))
    del refs
    if len(ids) != len(objs) or not _EXACT_COUNTS:
        return
    objs.append(object())
    counts = list(map(sys.getrefcount, objs))
    objs.pop()
    base = counts.pop()
    if sum(counts) - base * len(counts) != inner:
        return
    for o in objs:
        if type(o) is list:
            o.clear()
        elif type(o) is ChainRequest:
            o.link = None


# -------------------------------------------------------------------------------------------------
# summaries for `show`


_DUMPS = dumps_with(ensure_ascii=False, default=str)


def _short(text: Any, n: int = 72) -> str:
    s = text if isinstance(text, str) else _DUMPS(text)
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def summarize_requests(input_requests: dict | None) -> dict:
    out: dict[str, Any] = {}
    for key, req in (input_requests or {}).items():
        if type(req) is not dict:
            out[key] = {"method": None, "summary": _short(req)}
            continue
        method = req.get("method")
        params = req.get("params") if type(req.get("params")) is dict else {}
        s: dict[str, Any] = {"method": method}
        if method == "elicitation/create":
            s["mode"] = params.get("mode", "form")
            s["summary"] = _short(params.get("message", ""))
            schema = params.get("requestedSchema")
            if type(schema) is dict and type(schema.get("properties")) is dict:
                s["fields"] = list(schema["properties"])
            if params.get("url"):
                s["url"] = _short(params.get("url"))
        elif method == "sampling/createMessage":
            msgs = params.get("messages")
            first = ""
            if type(msgs) is list and msgs and type(msgs[0]) is dict:
                c = msgs[0].get("content")
                if type(c) is dict:
                    first = c.get("text", c.get("type", ""))
                elif type(c) is list and c and type(c[0]) is dict:
                    first = c[0].get("text", c[0].get("type", ""))
            s["summary"] = _short(first)
            if "maxTokens" in params:
                s["maxTokens"] = params.get("maxTokens")
        elif method == "roots/list":
            s["summary"] = "the client's roots"
        else:
            s["summary"] = _short(params)
        out[key] = s
    return out


def summarize_responses(input_responses: Any) -> dict | None:
    if type(input_responses) is not dict:
        return None
    out: dict[str, Any] = {}
    for key, resp in input_responses.items():
        if type(resp) is not dict:
            out[key] = {"summary": _short(resp)}
        elif "action" in resp:
            s: dict[str, Any] = {"action": resp.get("action")}
            if "content" in resp:
                s["summary"] = _short(resp.get("content"))
            out[key] = s
        elif "roots" in resp:
            roots = resp.get("roots")
            n = len(roots) if type(roots) is list else 0
            first = roots[0].get("uri") if n and type(roots[0]) is dict else None
            out[key] = {"summary": f"{n} root{'s' if n != 1 else ''}" + (f": {first}" + (" …" if n > 1 else "") if first else "")}
        elif "model" in resp or "role" in resp:
            c = resp.get("content")
            text = c.get("text", c.get("type")) if type(c) is dict else c
            out[key] = {"model": resp.get("model"), "summary": _short(text)}
        else:
            out[key] = {"summary": _short(resp)}
    return out


# -------------------------------------------------------------------------------------------------
# the stitcher


def _by_state(rounds: list[Round], peer: str, key: tuple) -> tuple[Round, bool]:
    """The round a retry echoing their state ties to, among the rounds that issued it, and whether it
    is ambiguous. A server that issues the same state round after round is no ambiguity: only rounds
    that tie with the chosen one on every rank but the chain order are. Before recency, a round still
    open (no retry yet, not expired) outranks one already answered: a server that derives the state
    from the request alone gives parallel identical calls the same state, and each of their retries
    answers a round of its own, not the latest one again (which would be a fork)."""
    if len(rounds) == 1:
        return rounds[0], False

    def rank(r: Round) -> tuple:
        return (r.peer == peer, r.key == key, r.key[:2] == key[:2], not r.retries and not r.expired, r.irr_time)

    rd = max(rounds, key=lambda r: (*rank(r), -r.chain.seq))
    top = rank(rd)
    return rd, sum(rank(r) == top for r in rounds) > 1


def _tied(rounds: list[Round], chosen: Round) -> bool:
    """Whether recency did not decide: another round was opened at the same instant as the chosen one."""
    return sum(r.irr_time == chosen.irr_time for r in rounds) > 1


class Stitcher:
    """MRTR stitching per RULES.md §3. One per inspector."""

    def __init__(self, abandon_after: float | None = None, retired_states: int = 100_000) -> None:
        self.abandon_after = abandon_after
        self._retired_limit = retired_states
        self._seq = 0
        self._state_index: dict[str, list[Round]] = {}
        self._retired: OrderedDict[str, None] = OrderedDict()  # state hashes of closed chains, oldest first
        self._open_by_peer: dict[str, list[Round]] = {}
        self._open_chains: dict[str, Chain] = {}  # chain id -> chain, insertion (start) order
        self._completed: OrderedDict[tuple, tuple[Chain, bool]] = OrderedDict()  # (peer,key) -> (chain, stray)
        self._stray_states: OrderedDict[str, Chain] = OrderedDict()  # state hashes on complete results
        # the last chains closed, released (`_release`) once as many others have closed after them:
        # by then the outputs and observations that carried them are long consumed
        self._closed: deque[Chain] = deque()

    # -- queries --------------------------------------------------------------------------------
    @property
    def open_chains(self) -> list[Chain]:
        return list(self._open_chains.values())

    def _new_chain(self, msg: Message, peer: str, digest: str) -> Chain:
        self._seq += 1
        c = Chain(self._seq, msg, peer, digest)
        self._open_chains[c.id] = c
        return c

    def _open_rounds(self, peer: str, key: tuple) -> list[Round]:
        return [rd for rd in self._open_by_peer.get(peer, ()) if rd.key == key and not rd.consumed and not rd.expired]

    # -- requests -------------------------------------------------------------------------------
    def on_request(self, msg: Message, peer: str, covered: bool) -> tuple[ChainRequest | None, list]:
        """A client request. Returns its place in a chain (None when it is not an MRTR request)
        and the observations made."""
        obs: list = []
        params = msg.params if type(msg.params) is dict else {}
        has_st = "requestState" in params
        st_raw = params.get("requestState")
        st = st_raw if type(st_raw) is str else (canonical_json(st_raw) if has_st else None)
        ir = params.get("inputResponses") if "inputResponses" in params else None
        ir_keys = frozenset(ir) if type(ir) is dict else frozenset()
        m = msg.method
        stitch = msg.era in ("modern", "malformed")

        if m not in MRTR_METHODS:
            if stitch and (has_st or "inputResponses" in params):
                h = state_hash(st) if st is not None else None
                related = None
                if h is not None and self._state_index.get(h):
                    related = self._state_index[h][-1]
                elif ir_keys:
                    for rd in self._open_by_peer.get(peer, ()):
                        if not rd.consumed and rd.keys & ir_keys:
                            related = rd
                            break
                reason = "parallel-misuse" if related is not None else "unsupported-method"
                obs.append(NotLinked(msg, reason, related))
            return None, obs

        digest = params_digest(m, params)
        key = (m, target_of(m, params), digest)

        if not stitch:
            chain = self._new_chain(msg, peer, digest)
            creq = ChainRequest(chain, msg, None)
            chain.requests.append(creq)
            return creq, obs

        if has_st and st is not None:
            h = state_hash(st)
            rounds = self._state_index.get(h)  # an expired round too: a late retry is no stranger
            if rounds:
                rd, ambiguous = _by_state(rounds, peer, key)
                if rd.key[:2] != key[:2]:
                    chain = self._new_chain(msg, peer, digest)
                    chain.tainted = True
                    creq = ChainRequest(chain, msg, None)
                    chain.requests.append(creq)
                    obs.append(NotLinked(msg, "parallel-misuse", rd))
                    return creq, obs
                replay = forked = None
                if rd.consumed:
                    answered = [r for r in rd.retries if r.response_kind is not None and r.response_kind != "none"]
                    if answered:
                        replay = "errored" if all(r.response_kind == "error" for r in answered) else "answered"
                    elif any(r.in_flight for r in rd.retries):
                        forked = True
                    else:
                        replay = "broken"
                relation = self._state_relation(rd, msg, has_st, st_raw)
                return self._link(msg, rd, "state", relation, peer, key, obs, replay=replay, forked=forked,
                                  ambiguous=ambiguous)
            cand = self._open_rounds(peer, key)
            with_state = [rd for rd in cand if rd.had_state]
            if with_state:
                rd = self._most_recent(with_state)
                return self._link(msg, rd, "params", "altered", peer, key, obs, ambiguous=_tied(with_state, rd))
            if cand:
                rd = self._most_recent(cand)
                return self._link(msg, rd, "params", "fabricated", peer, key, obs, ambiguous=_tied(cand, rd))
            chain = self._new_chain(msg, peer, digest)
            creq = ChainRequest(chain, msg, None)
            chain.requests.append(creq)
            stray = self._stray_states.get(h)
            if stray is not None:
                obs.append(NotLinked(msg, "after-complete", None, completed=stray))
            else:
                obs.append(NotLinked(msg, "state-unsolicited", None, capture_incomplete=not covered))
            return creq, obs

        cand = self._open_rounds(peer, key)
        if ir is not None:
            if cand:
                scored = sorted(cand, key=lambda r: (len(ir_keys & r.keys), r.irr_time, -r.chain.seq), reverse=True)
                rd = scored[0]
                score = len(ir_keys & rd.keys)
                ties = [r for r in scored if len(ir_keys & r.keys) == score and r.irr_time == rd.irr_time]
                if score > 0 or not rd.input_requests:
                    relation = "dropped" if rd.had_state else "none"
                    return self._link(msg, rd, "keys" if score > 0 else "params", relation, peer, key, obs,
                                      ambiguous=len(ties) > 1)
                rd = self._most_recent(cand)
                relation = "dropped" if rd.had_state else "none"
                return self._link(msg, rd, "params", relation, peer, key, obs, ambiguous=_tied(cand, rd))
            chain = self._new_chain(msg, peer, digest)
            creq = ChainRequest(chain, msg, None)
            chain.requests.append(creq)
            done = self._completed.get((peer, key))
            if done is not None and done[1]:
                obs.append(NotLinked(msg, "after-complete", None, completed=done[0]))
            else:
                obs.append(NotLinked(msg, "responses-unsolicited", None, capture_incomplete=not covered))
            return creq, obs

        chain = self._new_chain(msg, peer, digest)
        creq = ChainRequest(chain, msg, None)
        chain.requests.append(creq)
        for rd in cand:
            if rd.had_state and not rd.input_requests:
                obs.append(NotLinked(msg, "possible-state-dropped", rd))
                break
        return creq, obs

    @staticmethod
    def _most_recent(rounds: list[Round]) -> Round:
        return max(rounds, key=lambda r: (r.irr_time, -r.chain.seq))

    @staticmethod
    def _state_relation(rd: Round, msg: Message, has_st: bool, st_raw: Any) -> str:
        if not rd.had_state:
            return "fabricated" if has_st else "none"
        if not has_st:
            return "dropped"
        if st_raw != rd.state or type(st_raw) is not str:
            return "altered"
        token = msg.raw_token("params", "requestState")
        if rd.state_token is not None and token is not None and token != rd.state_token:
            return "reencoded"
        return "echoed"

    def _link(self, msg: Message, rd: Round, via: str, relation: str, peer: str, key: tuple, obs: list,
              replay: str | None = None, forked: bool | None = None, ambiguous: bool = False):
        chain = rd.chain
        earlier = list(chain.requests)
        if chain.closed:
            # a state replayed after its chain ended: the replay is a logical request of its own (the
            # ended chain is reported already), tied to the round it replays by the link, which its
            # `link` says
            chain = self._new_chain(msg, peer, key[2])
            chain.tainted = True
            chain.vias.append(via)
            creq = ChainRequest(chain, msg, None)
        else:
            creq = ChainRequest(chain, msg, rd)
            chain.vias.append(via)
            if msg.time > chain.end:  # max(chain.end, msg.time)
                chain.end = msg.time
        params = msg.params if type(msg.params) is dict else {}
        creq.answered_summary = summarize_responses(params.get("inputResponses"))
        chain.requests.append(creq)
        rd.retries.append(creq)
        link = Linked(
            chain=chain, round=rd, request=msg, creq=creq, via=via, state=relation, replay=replay,
            forked=bool(forked), params_changed=key[2] != rd.key[2], cross_principal=peer != rd.peer,
            ambiguous=ambiguous, earlier=earlier,
        )
        creq.link = link
        obs.append(link)
        return creq, obs

    # -- responses ------------------------------------------------------------------------------
    def on_response(self, creq: ChainRequest, resp: Message) -> list:
        chain = creq.chain
        obs: list = []
        result = resp.result if type(resp.result) is dict else None
        rtype = result.get("resultType") if result is not None else None
        if creq.response_kind is not None or creq.cancelled:
            # a second answer, or one after cancellation: noted by the rules, does not move the chain
            chain.end = max(chain.end, resp.time)
            return obs
        t = creq.response_time = resp.time
        creq.response_index = resp.index
        creq.msg = None
        if t > chain.end:  # max(chain.end, t)
            chain.end = t
        stitch = chain.era in ("modern", "malformed")
        if resp.kind == ERROR:
            creq.response_kind = "error"
            err = resp.error if type(resp.error) is dict else {}
            creq.error_code = err.get("code")
            chain.error_code = creq.error_code
            self._finish(chain, "error", resp, obs)
        elif rtype == "input_required" and stitch:
            creq.response_kind = "input_required"
            prev = chain.rounds[-1] if chain.rounds else None
            rd = Round(chain, len(chain.rounds) + 1, creq, resp)
            chain.rounds.append(rd)
            if rd.state_hash is not None:
                self._state_index.setdefault(rd.state_hash, []).append(rd)
            self._open_by_peer.setdefault(chain.peer, []).append(rd)
            obs.append(RoundOpened(chain, rd, prev))
            self._maybe_close(chain, obs)
        elif rtype == "task":
            creq.response_kind = "task"
            self._finish(chain, "task", resp, obs)
        else:
            creq.response_kind = "result"
            if result is not None and ("inputRequests" in result or "requestState" in result):
                st = result.get("requestState")
                if type(st) is str:
                    self._remember(self._stray_states, state_hash(st), chain)
                self._remember(self._completed, (chain.peer, chain.key), (chain, True))
            else:  # a plain completion of the same request ends what a stray one left (the chain is not kept)
                self._completed.pop((chain.peer, chain.key), None)
            self._finish(chain, "complete", resp, obs)
        return obs

    def _remember(self, od: OrderedDict, key: Any, value: Any) -> None:
        od[key] = value
        od.move_to_end(key)
        while len(od) > self._retired_limit:
            od.popitem(last=False)

    def on_no_response(self, creq: ChainRequest, time: float) -> list:
        """The request's HTTP exchange ended with no JSON-RPC response."""
        obs: list = []
        if creq.response_kind is None and not creq.cancelled:
            creq.response_kind = "none"
            creq.msg = None
            chain = creq.chain
            chain.end = max(chain.end, time)
            if not chain.in_flight and chain.open_round is None:
                self._close(chain, "abandoned" if chain.rounds else "error", obs)
        return obs

    def on_cancel(self, creq: ChainRequest, time: float) -> list:
        obs: list = []
        if creq.in_flight:
            creq.cancelled = True
            creq.msg = None
            chain = creq.chain
            chain.end = max(chain.end, time)
            if not chain.in_flight:
                self._close(chain, "cancelled", obs)
        return obs

    def _finish(self, chain: Chain, outcome: str, resp: Message, obs: list) -> None:
        chain.outcome = outcome
        chain.final_index = resp.index
        self._maybe_close(chain, obs)

    def _maybe_close(self, chain: Chain, obs: list) -> None:
        if chain.closed:
            return
        for r in chain.requests:  # chain.in_flight, without its list
            if r.response_kind is None and not r.cancelled:
                return
        if chain.outcome is not None:
            self._close(chain, chain.outcome, obs)

    def _close(self, chain: Chain, outcome: str, obs: list) -> None:
        chain.outcome = outcome
        chain.closed = True
        self._open_chains.pop(chain.id, None)
        # the index keeps the retired form of the chain's rounds; the chain itself goes out whole
        for rd, kept in zip(chain.rounds, retire(chain) if chain.rounds else ()):
            lst = self._open_by_peer.get(rd.peer)
            if lst is not None and rd in lst:
                lst.remove(rd)
                if not lst:
                    del self._open_by_peer[rd.peer]
            if rd.state_hash is not None:
                indexed = self._state_index.get(rd.state_hash)
                if indexed is not None:
                    self._state_index[rd.state_hash] = [kept if r is rd else r for r in indexed]
                self._retired[rd.state_hash] = None
                self._retired.move_to_end(rd.state_hash)
        while len(self._retired) > self._retired_limit:
            h, _ = self._retired.popitem(last=False)
            self._state_index.pop(h, None)
        for r in chain.requests:  # its messages go: what a closed chain keeps for replays is small (and
            link = r.link         # a late duplicate answer to one of its requests finds no chain)
            if link is None:
                continue
            if link.request is not None:
                link.request = None  # type: ignore[assignment]
                link.earlier = []
            rd = link.round
            if rd.chain is not chain and (r.response_kind is not None or r.cancelled):
                # a retry of a round of an earlier closed chain: that round keeps it in its retries
                rd.retries[:] = [KeptRequest(x) if x is r else x for x in rd.retries]
        obs.append(ChainClosed(chain))
        closed = self._closed
        closed.append(chain)
        if len(closed) > _RELEASE_AFTER:
            _release(closed.popleft())

    # -- time and the end -----------------------------------------------------------------------
    def expire(self, now: float) -> list:
        """Abandon chains whose open round has waited longer than `abandon_after`."""
        if self.abandon_after is None:
            return []
        obs: list = []
        limit = now - self.abandon_after
        for chain in list(self._open_chains.values()):
            rd = chain.open_round
            if rd is not None and rd.irr_time < limit and not chain.in_flight:
                rd.expired = True
                gave_up = rd.irr_time + self.abandon_after  # when it was abandoned, however late this check runs
                if gave_up > chain.end:
                    chain.end = gave_up
                self._close(chain, "abandoned", obs)
        return obs

    def close_all(self, now: float, session: str | None = None) -> list:
        """End of capture (or of one session): open rounds are abandoned, requests in flight open.
        Both were still waiting until `now`: their duration runs to it."""
        obs: list = []
        for chain in list(self._open_chains.values()):
            if session is not None and chain.session != session:
                continue
            if chain.in_flight:
                if now > chain.end:
                    chain.end = now
                self._close(chain, "open", obs)
            elif chain.outcome is not None:
                self._close(chain, chain.outcome, obs)
            else:
                if now > chain.end:
                    chain.end = now
                self._close(chain, "abandoned", obs)
        return obs
