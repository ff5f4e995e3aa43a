"""Chains: the logical request behind several `input_required` exchanges (RULES.md §3).

A chain starts at a `tools/call`, `prompts/get` or `resources/read` and follows each retry. The
stitcher ties a retry to a round by linkers tried in the order RULES.md §3 gives: by the
`requestState` the retry echoes (keyed by SHA-256, so opaque state never appears in output), then by
the `inputResponses` keys it answers, then by its parameters. How a retry was tied is kept as the
link's evidence (`state`, `keys`, `params`). The stitcher is deterministic: the same messages always
give the same chains.

The stitcher decides links; it does not judge them. What it saw goes out as observations
(`Linked`, `NotLinked`, `RoundOpened`, `ChainClosed`) for the rules to judge.

Memory: a chain lives while it is open. Once closed it is handed out and forgotten, except for the
states its rounds issued (retired.py). Digests: canonical.py; the report's summaries: summary.py.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import replace
from typing import Any

from .canonical import canonical_json, params_digest, state_hash
from .era import MALFORMED, MODERN
from .vocabulary import Link, Outcome
from .messages import ERROR, MRTR_METHODS, Message, format_id, target_of
from .observations import ChainClosed, LegacyAsked, Linked, NotLinked, RoundOpened
from .retired import CANONICAL, RELEASE_AFTER, StateIndex, canonical_token, forget_retries, release
from .summary import chain_summary, summarize_requests, summarize_requests_text, summarize_responses

# -------------------------------------------------------------------------------------------------
# model


# the eras whose MRTR requests are stitched into chains (RULES.md §3): a set, looked up by the str hash,
# where a tuple compares an Era to each member with the slower rich comparison
_STITCHED = frozenset({MODERN, MALFORMED})

# how a chain's retries were tied, weakest first (`Chain.link`)
_WEAKEST_FIRST = (Link.PARAMS, Link.TIME, Link.KEYS, Link.RELATED, Link.STATE, Link.STREAM)


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

    # what the stitcher records of it (only the stitcher calls these)
    def linked(self, link: Linked, answered_summary: dict | None) -> None:
        """A retry: how it was tied to its round, and what it answered."""
        self.link = link
        self.answered_summary = answered_summary

    def answer(self, kind: str, index: int | None = None, time: float | None = None, error_code: Any = None) -> None:
        """Its answer came (`kind`: result, input_required, error, task; `none`: its exchange ended
        without one): it keeps no message from now on."""
        self.response_kind = kind
        self.response_index = index
        self.response_time = time
        self.error_code = error_code
        self.msg = None

    def cancel(self) -> None:
        self.cancelled = True
        self.msg = None


class Round:
    """One `input_required` result and what it asked."""

    __slots__ = (
        "chain", "n", "request", "irr_index", "irr_time", "input_requests", "state", "state_hash",
        "_token", "retries", "peer", "key", "asked", "had_state", "expired", "canonical", "asked_text",
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
        # the state's raw token (`state_token`); CANONICAL: orjson's form of the state, written when read
        self._token = (CANONICAL if irr.canonical else irr.raw_token("result", "requestState")) if type(st) is str else None
        self.retries: list[ChainRequest] = []
        self.peer = chain.peer
        self.key = chain.key
        # orjson's text of its inputRequests (None: none, or orjson does not write them), the key of its
        # summary and, when its message was canonical, the form its retired round keeps (retired.py)
        self.asked, self.asked_text = summarize_requests_text(self.input_requests)
        self.expired = False
        self.canonical = irr.canonical  # its values are orjson's (rawjson.parse_message): orjson writes them back exactly

    @property
    def state_token(self) -> str | None:
        """The raw token of its `requestState` (quotes and escapes as sent), when the state is a string."""
        tok = self._token
        return canonical_token(self.state) if tok is CANONICAL else tok

    @property
    def keys(self) -> frozenset:
        return frozenset(self.input_requests) if self.input_requests else frozenset()

    @property
    def consumed(self) -> bool:
        return bool(self.retries)

    def expire(self) -> None:
        """No retry came in time (`abandon_after`)."""
        self.expired = True


class LegacyRound:
    """One question a server asked while a legacy chain's request was open (RULES.md §13): its
    `elicitation/create`, `sampling/createMessage` or `roots/list`, and the client's answer.

    `via` is the evidence that tied it to the request: `stream` (it came on that request's own event
    stream), `related` (its `_meta` names the request) or `time` (that request was the only one open
    in its session). It keeps no message: what it asked and what the client answered are summarised
    when they are seen (summary.py)."""

    __slots__ = ("chain", "n", "request", "via", "index", "time", "id", "asked", "answer_index", "answer_time",
                 "answer_kind", "answered", "error_code")

    def __init__(self, chain: "Chain", n: int, request: "ChainRequest", ask: Message, via: str) -> None:
        self.chain = chain
        self.n = n
        self.request = request
        self.via = via
        self.index = ask.index
        self.time = ask.time
        self.id = ask.id
        self.asked = summarize_requests({format_id(ask.id): {"method": ask.method, "params": ask.params}})
        self.answer_index: int | None = None
        self.answer_time: float | None = None
        self.answer_kind: str | None = None  # result or error, once answered
        self.answered: dict | None = None
        self.error_code: Any = None

    def answer(self, resp: Message) -> None:
        """The client answered its question (the first answer counts)."""
        if self.answer_kind is not None:
            return
        self.answer_index, self.answer_time = resp.index, resp.time
        if resp.kind == ERROR:
            self.answer_kind = "error"
            err = resp.error if type(resp.error) is dict else {}
            self.error_code = err.get("code")
            self.answered = {format_id(self.id): {"summary": f"error {format_id(self.error_code)}"}}
        else:
            self.answer_kind = "result"
            self.answered = summarize_responses({format_id(self.id): resp.result})


class Chain:
    __slots__ = (
        "id", "seq", "method", "target", "digest", "key", "peer", "session", "transport", "era", "requests",
        "rounds", "outcome", "vias", "start", "end", "error_code", "tainted", "closed", "final_index", "asks",
        "hop", "refused",
    )

    def __init__(self, seq: int, msg: Message, peer: str, digest: str, hop: str | None = None) -> None:
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
        self.outcome: Outcome | None = None
        self.vias: list[str] = []
        self.start = msg.time
        self.end = msg.time
        self.error_code: Any = None
        self.tainted = False
        self.closed = False
        self.final_index: int | None = None
        self.asks: list[LegacyRound] = []  # a legacy chain's rounds: the server's questions (RULES.md §13)
        self.hop = hop  # the hop its session named (RULES.md §11), for a chain core.hops keeps
        # when a retry of it was answered with an error, while a retry echoing a state it issued may
        # still continue it (RULES.md decision 13): its outcome is `error` unless one does
        self.refused: float | None = None

    @property
    def link(self) -> str | None:
        """How the retries were tied: the weakest evidence used (state, then keys, then params); for a
        legacy chain, how its questions were (stream, then related, then time)."""
        if not self.vias:
            return None
        for via in _WEAKEST_FIRST:
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
        if self.outcome == Outcome.ABANDONED and self.rounds and not self.rounds[-1].retries:
            return self.rounds[-1]
        return None

    def summary(self) -> dict:
        """The chain as the JSON report shows it (CONTRACTS.md), with its timeline (summary.py)."""
        return chain_summary(self)

    # what the stitcher records of it (only the stitcher calls these)
    def extend(self, t: float) -> None:
        """It lasted until `t` at least."""
        if t > self.end:
            self.end = t

    def taint(self) -> None:
        """It started with fields of another chain, or as a replay of a closed one."""
        self.tainted = True

    def errored(self, code: Any) -> None:
        """A request of it was answered with an error (`code`: its error.code)."""
        self.error_code = code

    def refuse(self, index: int, t: float) -> None:
        """A retry of it was refused (RULES.md decision 13): it ends in error unless a retry continues it."""
        self.outcome, self.final_index, self.refused = Outcome.ERROR, index, t

    def go_on(self) -> None:
        """A retry continues it after a refused one."""
        self.refused = self.outcome = self.error_code = self.final_index = None

    def finish(self, outcome: str, index: int) -> None:
        """Its last answer (`index`) came: `outcome` once no request of it is in flight."""
        self.refused = None
        self.outcome = outcome
        self.final_index = index

    def close(self, outcome: str) -> None:
        self.outcome = outcome
        self.closed = True
        self.refused = None


# -------------------------------------------------------------------------------------------------
# the stitcher


def _issuing_round(rounds: list[Round], peer: str, key: tuple) -> tuple[Round, bool]:
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


def _recency(rd: Round) -> tuple:
    """Most recent first: the later `input_required`, then the lower chain seq."""
    return rd.irr_time, -rd.chain.seq


def _most_recent(rounds: list[Round]) -> Round:
    return max(rounds, key=_recency)


def _tied(rounds: list[Round], chosen: Round) -> bool:
    """Whether recency did not decide: another round was opened at the same instant as the chosen one."""
    return sum(r.irr_time == chosen.irr_time for r in rounds) > 1


def _presented(r: Any) -> bool:
    """Whether a retry of a round presented the state that round issued (a request of a closed
    chain, which keeps no link, is taken to have)."""
    link = getattr(r, "link", None)
    return link is None or link.state not in ("altered", "fabricated")


def _state_relation(rd: Round, msg: Message, st_raw: Any) -> str:
    """How a retry's requestState (present) relates to the state its round issued."""
    if not rd.had_state:
        return "fabricated"
    if st_raw != rd.state or type(st_raw) is not str:
        return "altered"
    if msg.canonical and rd._token is CANONICAL:  # both tokens orjson's form of the same string
        return "echoed"
    token = msg.raw_token("params", "requestState")
    if rd.state_token is not None and token is not None and token != rd.state_token:
        return "reencoded"
    return "echoed"


class Stitcher:
    """MRTR stitching per RULES.md §3. One per inspector.

    A request of an MRTR method goes to the linkers in turn (`_LINKERS`: by state, by keys, by
    params). Each is given the same facts and either links the request to a round (returning the
    `Linked` it made), refuses it (returning the `NotLinked` that says why: the request starts a
    chain of its own), or declines (None: the next one is asked). A request no linker links starts a
    chain, in one place (`_open`)."""

    def __init__(self, abandon_after: float | None = None, retired_states: int = 100_000) -> None:
        self.abandon_after = abandon_after
        self._seq = 0
        self._states = StateIndex(retired_states)  # state hash -> the rounds that issued it
        self._open_by_peer: dict[str, list[Round]] = {}
        self._open_chains: dict[str, Chain] = {}  # chain id -> chain, insertion (start) order
        # the chains waiting after a refused retry (RULES.md decision 13), in the order they were refused
        self._refused: dict[Chain, None] = {}
        self._completed: OrderedDict[tuple, tuple[Chain, bool]] = OrderedDict()  # (peer,key) -> (chain, stray)
        self._stray_states: OrderedDict[str, Chain] = OrderedDict()  # state hashes on complete results
        # the last chains closed, released (`release`) once as many others have closed after them:
        # by then the outputs and observations that carried them are long consumed
        self._closed: deque[Chain] = deque()

    # -- queries --------------------------------------------------------------------------------
    @property
    def open_chains(self) -> list[Chain]:
        return list(self._open_chains.values())

    def _open(self, msg: Message, peer: str, digest: str, hop: str | None = None) -> ChainRequest:
        """A new chain, `msg` its first request."""
        self._seq += 1
        chain = Chain(self._seq, msg, peer, digest, hop)
        self._open_chains[chain.id] = chain
        creq = ChainRequest(chain, msg, None)
        chain.requests.append(creq)
        return creq

    def _open_rounds(self, peer: str, key: tuple) -> list[Round]:
        return [rd for rd in self._open_by_peer.get(peer, ()) if rd.key == key and not rd.consumed and not rd.expired]

    # -- requests -------------------------------------------------------------------------------
    def on_request(self, msg: Message, peer: str, covered: bool, restart_of: str | None = None,
                   hop: str | None = None) -> tuple[ChainRequest | None, list]:
        """A client request. Returns its place in a chain (None when it is not an MRTR request)
        and the observations made. `covered`: whether the capture saw its peer from the start;
        `restart_of`: else, the earlier session of the same command or upstream it may continue;
        `hop`: the hop a chain it starts belongs to (RULES.md §11)."""
        params = msg.params if type(msg.params) is dict else {}
        st_raw = params.get("requestState")
        # the decoded state (None: absent), and the answers (None: absent or null)
        st = (st_raw if type(st_raw) is str else canonical_json(st_raw)) if "requestState" in params else None
        ir = params.get("inputResponses")
        m = msg.method
        stitch = msg.era in _STITCHED

        if m not in MRTR_METHODS:
            if stitch and (st is not None or "inputResponses" in params):
                return None, [self._not_mrtr(msg, peer, st, ir)]
            return None, []

        digest = params_digest(m, params)
        if not stitch:
            return self._open(msg, peer, digest, hop), []
        key = (m, target_of(m, params), digest)
        rounds = self._states.get(state_hash(st)) if st is not None else None
        cand = None if rounds else self._open_rounds(peer, key)  # the open rounds of its key, when no state ties it
        o = None
        if st is not None or ir is not None:  # a fresh call (neither) is never a retry: no linker takes it
            for linker in _LINKERS:
                o = linker(self, msg, peer, key, st, ir, rounds, cand)
                if o is not None:
                    if type(o) is Linked:
                        return o.creq, [o]
                    break
        out = self._moved_on(peer) if self._refused else []
        creq = self._open(msg, peer, digest, hop)
        if o is not None:  # refused: the fields of another chain
            creq.chain.taint()
            o = replace(o, creq=creq)
        else:
            o = self._unlinked(msg, creq, peer, key, st, ir, cand, covered, restart_of)
        if o is not None:
            out.append(o)
        return creq, out

    def _moved_on(self, peer: str) -> list:
        """A peer starts a new logical request: its chains waiting after a refused retry were given up
        (a client that retries after a refusal does so before it calls anything else); they close in
        error (RULES.md decision 13)."""
        obs: list = []
        for chain in [c for c in self._refused if c.peer == peer and not c.in_flight]:
            self._close(chain, Outcome.ERROR, obs)
        return obs

    def _link_by_state(self, msg: Message, peer: str, key: tuple, st: str | None, ir: Any, rounds: list | None,
                       cand: list | None) -> Linked | NotLinked | None:
        """A state some round issued ties the retry to that round (an expired round too: a late retry
        is no stranger), unless it is of another (method, target)."""
        if not rounds:
            return None
        rd, ambiguous = _issuing_round(rounds, peer, key)
        if rd.key[:2] != key[:2]:
            return NotLinked.new(msg, "parallel-misuse", rd)
        replay = forked = None
        if rd.consumed:
            # a retry that presented another state (altered, fabricated) did not present this one:
            # the state is not replayed after it (RULES.md decision 13)
            answered = [r for r in rd.retries if r.response_kind is not None and r.response_kind != "none"
                        and _presented(r)]
            if answered:
                replay = "errored" if all(r.response_kind == "error" for r in answered) else "answered"
            elif any(r.in_flight for r in rd.retries):
                forked = True
            elif any(_presented(r) for r in rd.retries):
                replay = "broken"
        relation = _state_relation(rd, msg, msg.params.get("requestState"))
        return self._link(msg, rd, Link.STATE, relation, peer, key, replay=replay, forked=forked, ambiguous=ambiguous)

    def _link_by_keys(self, msg: Message, peer: str, key: tuple, st: str | None, ir: Any, rounds: list | None,
                      cand: list | None) -> Linked | None:
        """Without a state, answers tie the retry to the open round of its key that asked the most of
        their keys (then the most recent); none when they answer no key of any."""
        if st is not None or ir is None or not cand or type(ir) is not dict:
            return None
        ir_keys = frozenset(ir)
        scores = [len(ir_keys & rd.keys) for rd in cand]
        score = max(scores)
        if not score:
            return None
        top = [rd for rd, s in zip(cand, scores) if s == score]
        rd = _most_recent(top)
        return self._link(msg, rd, Link.KEYS, "dropped" if rd.had_state else "none", peer, key,
                          ambiguous=_tied(top, rd))

    def _link_by_params(self, msg: Message, peer: str, key: tuple, st: str | None, ir: Any, rounds: list | None,
                        cand: list | None) -> Linked | None:
        """A retry its state or answers tied to no round goes to the most recent open round of its key
        (a round that issued a state first, for a retry with one). A request with neither is a fresh
        call, never a retry."""
        if not cand:
            return None
        if st is not None:
            with_state = [rd for rd in cand if rd.had_state]
            if with_state:
                rd = _most_recent(with_state)
                return self._link(msg, rd, Link.PARAMS, "altered", peer, key, ambiguous=_tied(with_state, rd))
            rd = _most_recent(cand)
            return self._link(msg, rd, Link.PARAMS, "fabricated", peer, key, ambiguous=_tied(cand, rd))
        if ir is not None:
            rd = _most_recent(cand)
            return self._link(msg, rd, Link.PARAMS, "dropped" if rd.had_state else "none", peer, key,
                              ambiguous=_tied(cand, rd))
        return None

    def _unlinked(self, msg: Message, creq: ChainRequest, peer: str, key: tuple, st: str | None, ir: Any, cand: list | None,
                  covered: bool, restart_of: str | None) -> NotLinked | None:
        """What is said of an MRTR request no linker linked (it starts a chain): its state or answers
        tie it to no round; or, a fresh call, it may be a retry that dropped a round's only state."""
        if st is not None:
            stray = self._stray_states.get(state_hash(st))
            if stray is not None:
                return NotLinked.new(msg, "after-complete", None, completed=stray, creq=creq)
            return NotLinked.new(msg, "state-unsolicited", None, capture_incomplete=not covered, creq=creq,
                             restart_of=None if covered else restart_of)
        if ir is not None:
            done = self._completed.get((peer, key))
            if done is not None and done[1]:
                return NotLinked.new(msg, "after-complete", None, completed=done[0], creq=creq)
            return NotLinked.new(msg, "responses-unsolicited", None, capture_incomplete=not covered, creq=creq,
                             restart_of=None if covered else restart_of)
        for rd in cand or ():
            if rd.had_state and not rd.input_requests:
                return NotLinked.new(msg, "possible-state-dropped", rd, creq=creq)
        return None

    def _not_mrtr(self, msg: Message, peer: str, st: str | None, ir: Any) -> NotLinked:
        """MRTR fields on a method that takes none: those of a chain (its state, or keys an open
        round asked), or none known."""
        related = None
        rounds = self._states.get(state_hash(st)) if st is not None else None
        if rounds:
            related = rounds[-1]
        elif type(ir) is dict and ir:
            ir_keys = frozenset(ir)
            for rd in self._open_by_peer.get(peer, ()):
                if not rd.consumed and rd.keys & ir_keys:
                    related = rd
                    break
        return NotLinked.new(msg, "parallel-misuse" if related is not None else "unsupported-method", related)

    def _link(self, msg: Message, rd: Round, via: str, relation: str, peer: str, key: tuple,
              replay: str | None = None, forked: bool | None = None, ambiguous: bool = False) -> Linked:
        chain = rd.chain
        earlier = tuple(chain.requests)
        if chain.closed:
            # a state replayed after its chain ended: the replay is a logical request of its own (the
            # ended chain is reported already), tied to the round it replays by the link, which its
            # `link` says
            creq = self._open(msg, peer, key[2])
            chain = creq.chain
            chain.taint()
            chain.vias.append(via)
        else:
            creq = ChainRequest(chain, msg, rd)
            chain.vias.append(via)
            if chain.refused is not None:  # a retry after a refused one continues it (RULES.md decision 13)
                chain.go_on()
                self._refused.pop(chain, None)
            chain.extend(msg.time)
            chain.requests.append(creq)
        params = msg.params if type(msg.params) is dict else {}
        rd.retries.append(creq)
        # Linked(chain, round, request, creq, via, state, replay, forked, params_changed, cross_principal,
        # ambiguous, earlier)
        link = Linked.new(chain, rd, msg, creq, via, relation, replay, bool(forked), key[2] != rd.key[2], peer != rd.peer,
                          ambiguous, earlier)
        creq.linked(link, summarize_responses(params.get("inputResponses")))
        return link

    # -- responses ------------------------------------------------------------------------------
    def on_response(self, creq: ChainRequest, resp: Message) -> list:
        chain = creq.chain
        obs: list = []
        result = resp.result if type(resp.result) is dict else None
        rtype = result.get("resultType") if result is not None else None
        if creq.response_kind is not None or creq.cancelled:
            # a second answer, or one after cancellation: noted by the rules, does not move the chain
            chain.extend(resp.time)
            return obs
        t = resp.time
        chain.extend(t)
        stitch = chain.era in _STITCHED
        if resp.kind == ERROR:
            err = resp.error if type(resp.error) is dict else {}
            creq.answer("error", resp.index, t, err.get("code"))
            chain.errored(creq.error_code)
            if creq.round is not None and not _presented(creq) and any(rd.state is not None for rd in chain.rounds):
                # a refused retry that presented another state (altered, fabricated): the chain ends
                # in error unless a retry echoing a state it issued
                # continues it (RULES.md decision 13); it closes with that outcome at the end of its
                # session or capture, once it has waited `abandon_after`, or when its peer starts another
                chain.refuse(resp.index, t)
                self._refused[chain] = None
            else:
                self._finish(chain, Outcome.ERROR, resp, obs)
        elif rtype == "input_required" and stitch:
            creq.answer("input_required", resp.index, t)
            prev = chain.rounds[-1] if chain.rounds else None
            rd = Round(chain, len(chain.rounds) + 1, creq, resp)
            chain.rounds.append(rd)
            self._states.add(rd)
            self._open_by_peer.setdefault(chain.peer, []).append(rd)
            obs.append(RoundOpened.new(chain, rd, prev))
            if chain.outcome is not None:  # (another request of it was answered finally: it may close now)
                self._maybe_close(chain, obs)
        elif rtype == "task":
            creq.answer("task", resp.index, t)
            self._finish(chain, Outcome.TASK, resp, obs)
        else:
            creq.answer("result", resp.index, t)
            if result is not None and ("inputRequests" in result or "requestState" in result):
                st = result.get("requestState")
                if type(st) is str:
                    self._remember(self._stray_states, state_hash(st), chain)
                self._remember(self._completed, (chain.peer, chain.key), (chain, True))
            else:  # a plain completion of the same request ends what a stray one left (the chain is not kept)
                self._completed.pop((chain.peer, chain.key), None)
            self._finish(chain, Outcome.COMPLETE, resp, obs)
        return obs

    def _remember(self, od: OrderedDict, key: Any, value: Any) -> None:
        od[key] = value
        od.move_to_end(key)
        while len(od) > self._states.limit:
            od.popitem(last=False)

    def on_no_response(self, creq: ChainRequest, time: float, failed: bool = False) -> list:
        """The request's HTTP exchange ended with no JSON-RPC response. `failed`: because the upstream
        failed (unreachable, or it broke the response off): the chain ends as `error`, mid-chain too."""
        obs: list = []
        if creq.response_kind is None and not creq.cancelled:
            creq.answer("none")
            chain = creq.chain
            chain.extend(time)
            if not chain.in_flight and chain.open_round is None:
                self._close(chain, Outcome.ABANDONED if chain.rounds and not failed else Outcome.ERROR, obs)
        return obs

    def on_server_gone(self, now: float, session: str) -> list:
        """The server process of a stdio session ended with requests unanswered (`ServerExited`):
        the chains that waited on it end as `error`, their duration running to `now`."""
        obs: list = []
        for chain in list(self._open_chains.values()):
            if chain.session == session and chain.in_flight:
                chain.extend(now)
                self._close(chain, Outcome.ERROR, obs)
        return obs

    def on_cancel(self, creq: ChainRequest, time: float) -> list:
        obs: list = []
        if creq.in_flight:
            creq.cancel()
            chain = creq.chain
            chain.extend(time)
            if not chain.in_flight:
                self._close(chain, Outcome.CANCELLED, obs)
        return obs

    # -- legacy questions (RULES.md §13) ----------------------------------------------------------
    def on_server_request(self, ask: Message, creq: ChainRequest, via: str) -> LegacyAsked:
        """A server request of the legacy era, tied by `via` to the legacy chain request `creq` in
        flight: a round of its chain."""
        chain = creq.chain
        rd = LegacyRound(chain, len(chain.asks) + 1, creq, ask, via)
        chain.asks.append(rd)
        chain.vias.append(via)
        return LegacyAsked.new(ask, rd)

    @staticmethod
    def on_server_answer(rd: LegacyRound, resp: Message) -> None:
        """The client answered the question of round `rd` (the first answer counts)."""
        rd.answer(resp)

    def _finish(self, chain: Chain, outcome: str, resp: Message, obs: list) -> None:
        if chain.refused is not None:
            self._refused.pop(chain, None)
        chain.finish(outcome, resp.index)
        self._maybe_close(chain, obs)

    def _maybe_close(self, chain: Chain, obs: list) -> None:
        if chain.closed or chain.refused is not None:
            return
        for r in chain.requests:  # chain.in_flight, without its list
            if r.response_kind is None and not r.cancelled:
                return
        if chain.outcome is not None:
            self._close(chain, chain.outcome, obs)

    def _close(self, chain: Chain, outcome: str, obs: list) -> None:
        if chain.refused is not None:
            self._refused.pop(chain, None)
        chain.close(outcome)
        self._open_chains.pop(chain.id, None)
        # the index keeps the retired form of the chain's rounds; the chain itself goes out whole
        for rd in chain.rounds:
            lst = self._open_by_peer.get(rd.peer)
            if lst is not None and rd in lst:
                lst.remove(rd)
                if not lst:
                    del self._open_by_peer[rd.peer]
        if chain.rounds:
            self._states.retire_chain(chain)
        forget_retries(chain)
        obs.append(ChainClosed.new(chain))
        closed = self._closed
        closed.append(chain)
        if len(closed) > RELEASE_AFTER:
            release(closed.popleft())

    # -- time and the end -----------------------------------------------------------------------
    def expire(self, now: float) -> list:
        """Abandon chains whose open round has waited longer than `abandon_after`."""
        if self.abandon_after is None:
            return []
        obs: list = []
        limit = now - self.abandon_after
        for chain in list(self._open_chains.values()):
            if chain.refused is not None:  # no retry continued the refused one: it ended in error
                if chain.refused < limit and not chain.in_flight:
                    self._close(chain, Outcome.ERROR, obs)
                continue
            rd = chain.open_round
            if rd is not None and rd.irr_time < limit and not chain.in_flight:
                rd.expire()
                chain.extend(rd.irr_time + self.abandon_after)  # when it was abandoned, however late this check runs
                self._close(chain, Outcome.ABANDONED, obs)
        return obs

    def close_all(self, now: float, session: str | None = None) -> list:
        """End of capture (or of one session): open rounds are abandoned, requests in flight open.
        Both were still waiting until `now`: their duration runs to it."""
        obs: list = []
        for chain in list(self._open_chains.values()):
            if session is not None and chain.session != session:
                continue
            if chain.in_flight:
                chain.extend(now)
                self._close(chain, Outcome.OPEN, obs)
            elif chain.outcome is not None:
                self._close(chain, chain.outcome, obs)
            else:
                chain.extend(now)
                self._close(chain, Outcome.ABANDONED, obs)
        return obs


_LINKERS = (Stitcher._link_by_state, Stitcher._link_by_keys, Stitcher._link_by_params)  # in RULES.md §3's order
