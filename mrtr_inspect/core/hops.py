"""Two hops: a gateway seen from both sides (RULES.md §11).

A gateway is a server to its host and a client to its upstream. When the sessions of a capture name
their hop (`--hop front` on the proxy in front of it, `--hop back` on the tee behind it; the session
header's `"hop"`), `HopWatcher` keeps a few facts of each chain of those sessions while it runs (what
it called, with which arguments, what it asked and was answered, how it ended) and, when the capture
is over, ties each back-hop chain to the front chain that caused it:

    watcher = HopWatcher(config)            # the Inspector makes one at the first session naming a hop
    watcher.see(observation)                # every observation, before the rules
    watcher.correlate() -> HopsCorrelated   # at the end of the capture: pairs and ambiguous ties

Evidence, strongest first (`link`): `target+args` (the back request's method and target equal the
front's, or a `hop_map` entry maps the front call to them, and the arguments' canonical digests are
equal), `args` (only the arguments are equal), `time` (only the method, and the back chain lies in
the front chain's span). Every candidate lies in the front chain's span, on one clock or shifted by
the offset the two hops' first chains imply. Among tied candidates, the one whose questions carry the
back question's message text wins; a tie left is never linked (`HopAmbiguity`). Which hop is the
front of which is what the time spans say (the back chains lie inside the front ones), names breaking
a tie (`front`, `back`).

Pure: no clock, no I/O. Memory: the facts of at most `LIMIT` chains (each a few small dicts); past
it, chains of named hops are not kept, and the correlation says how many were left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .canonical import canonical_json
from .events import C2S, header
from .messages import ERROR, RESULT, target_of
from .observations import Answered, ChainClosed, Decoded, LegacyAsked, Linked, RoundOpened

_HOP_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def hop_problem(name: str) -> str | None:
    """Why `name` cannot name a hop (`--hop`: 1 to 32 of the letters, digits and `_.-`), or None."""
    if not 1 <= len(name) <= 32 or not set(name) <= _HOP_CHARS:
        return f"a hop name is 1 to 32 letters, digits, '_', '.' or '-', not {name!r}"
    return None


LIMIT = 100_000  # chains of named hops kept for the correlation
SLACK = 0.05  # seconds: how far a back chain may stick out of its front chain's span (clock steps, rounding)
#: members of a question that only the 2025-11-25 era has (a 2026-07-28 front cannot carry them)
LEGACY_ONLY = ("elicitationId",)
_KEPT = ("mode", "message", "requestedSchema", "url", *LEGACY_ONLY)
_REFUSALS = ("another session", "belongs to", "session mismatch", "wrong session")


@dataclass(slots=True)
class HopQuestion:
    """One question a chain asked its client: a key of a round's `inputRequests` (modern) or a legacy
    server request (`elicitation/create`…). `params`: its message, mode, schema, URL and legacy-only
    members; `answered`: the time its answer was seen (None: never answered)."""

    method: Any
    params: dict
    index: int
    time: float
    key: str | None = None
    round: int = 0
    answered: float | None = None
    answer_index: int | None = None


@dataclass(slots=True)
class HopFact:
    """What the correlation and the §11 rules read of one chain of a named hop."""

    chain: Any  # core.chains.Chain
    hop: str
    session: str
    method: str
    target: Any
    args: str  # the canonical digest of its arguments (tools/call, prompts/get) or uri (resources/read)
    mapped: list = field(default_factory=list)  # (method, target, args) the hop_map says it wraps
    questions: list = field(default_factory=list)  # HopQuestion
    answers: list = field(default_factory=list)  # (time, index, round, keys) of each retry answering a round
    final: dict | None = None  # how it ended: kind, index, time, shape of the result or the error
    session_ids: list = field(default_factory=list)  # (request index, Mcp-Session-Id or None, accepted)
    refused: list = field(default_factory=list)  # (index, response index, session id, code, message, state)

    @property
    def id(self) -> str:
        return self.chain.id

    @property
    def start(self) -> float:
        return self.chain.start

    @property
    def end(self) -> float:
        return self.chain.end

    @property
    def rounds(self) -> int:
        return len(self.chain.rounds) + len(self.chain.asks)

    def duration(self) -> float:
        return self.chain.end - self.chain.start

    def waits(self) -> list[tuple[float, float]]:
        """When the chain waited for its client's answers: from each question to its answer, or to the
        chain's end for one never answered."""
        return [(q.time, q.answered if q.answered is not None else self.chain.end) for q in self.questions]


@dataclass(frozen=True, slots=True)
class HopPair:
    """A front chain and a back chain it caused, with the evidence that tied them."""

    front: HopFact
    back: HopFact
    link: str  # target+args, args, time
    offset: float = 0.0  # seconds added to the back hop's times to put them on the front hop's clock

    def entry(self) -> dict:
        """The pair as the report's `hops` list gives it (CONTRACTS.md): the durations in ms; the
        gateway's share is the front duration less the back one, each without the user's answering
        time, the back one counted only within the front chain's span (a back call the gateway left
        open runs on after the front chain ended)."""
        f, b = self.front, self.back
        front_ms = round(f.duration() * 1000.0, 3)
        back_ms = round(b.duration() * 1000.0, 3)
        # the gateway's share: the time in the front chain's span when neither the host's user was
        # answering (a front round waiting for its retry) nor the upstream was working (the back call
        # open and not itself waiting for an answer; one the gateway left waiting is not working)
        o = self.offset
        busy = [(s + o, e + o) for s, e in _gaps((b.start, b.end), b.waits())]
        gone = _measure(_clip(f.waits() + busy, f.start, f.end))
        gateway_ms = round(max(0.0, f.duration() - gone) * 1000.0, 3)
        entry = {"front": f.id, "back": b.id, "link": self.link, "front_ms": front_ms, "back_ms": back_ms,
                 "gateway_ms": gateway_ms, "front_hop": f.hop, "back_hop": b.hop}
        if o:  # two clocks: what was added to the back hop's times (the offset of their first chains)
            entry["offset_ms"] = round(o * 1000.0, 3)
        return entry


@dataclass(frozen=True, slots=True)
class HopAmbiguity:
    """A back chain that several front chains could have caused, on equal evidence: not linked."""

    back: HopFact
    fronts: list
    link: str


@dataclass(frozen=True, slots=True)
class HopsCorrelated:
    """The capture is over: the chains of its named hops tied together (an observation for the §11
    rules, and an output for the report's `hops`). `facts`: every kept chain fact, by chain id."""

    pairs: list
    ambiguous: list
    facts: dict
    left_out: int = 0

    def entries(self) -> list[dict]:
        return [p.entry() for p in self.pairs]


def _clip(spans: list, start: float, end: float) -> list:
    return [(max(s, start), min(e, end)) for s, e in spans if min(e, end) > max(s, start)]


def _merged(spans: list) -> list:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _measure(spans: list) -> float:
    """The length of the union of the spans."""
    return sum(e - s for s, e in _merged(spans))


def _gaps(span: tuple, holes: list) -> list:
    """`span` less the `holes`."""
    out, at = [], span[0]
    for s, e in _merged(_clip(holes, *span)):
        if s > at:
            out.append((at, s))
        at = max(at, e)
    if at < span[1]:
        out.append((at, span[1]))
    return out


def _digest(value: Any) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError):  # pragma: no cover - decoded JSON is always canonicalisable
        return repr(value)


def arguments_of(method: Any, params: Any) -> Any:
    """What a call's evidence compares: its arguments (absent: {}), for resources/read its uri."""
    p = params if type(params) is dict else {}
    if method == "resources/read":
        return p.get("uri")
    a = p.get("arguments")
    return {} if a is None else a


def _at(value: Any, path: str) -> Any:
    """The member at a dotted path (empty: the value itself), or None."""
    for part in path.split(".") if path else ():
        if type(value) is not dict:
            return None
        value = value.get(part)
    return value


def _shape(msg: Any) -> dict:
    """How a response ended a chain, in the few facts the rules compare."""
    if msg.kind == ERROR:
        e = msg.error if type(msg.error) is dict else {}
        return {"kind": "error", "index": msg.index, "time": msg.time, "code": e.get("code"),
                "message": e.get("message") if type(e.get("message")) is str else ""}
    r = msg.result if type(msg.result) is dict else {}
    content = r.get("content")
    blocks = [b.get("type") if type(b) is dict else None for b in content] if type(content) is list else []
    messages = r.get("messages")
    return {"kind": "result", "index": msg.index, "time": msg.time, "is_error": r.get("isError") is True,
            "structured": "structuredContent" in r, "blocks": blocks,
            "messages": len(messages) if type(messages) is list else None,
            "contents": len(r["contents"]) if type(r.get("contents")) is list else None}


def _question(method: Any, params: Any, index: int, time: float, key: str | None = None, n: int = 0) -> HopQuestion:
    p = params if type(params) is dict else {}
    kept = {k: p[k] for k in _KEPT if k in p}
    return HopQuestion(method, kept, index, time, key, n)


def _session_id(x: Any) -> str | None:
    return header(x.headers, "mcp-session-id") if x is not None else None


class HopWatcher:
    """Keeps the facts of the chains of named hops (`see`), then ties them (`correlate`)."""

    def __init__(self, hop_map: list | None = None) -> None:
        self.hop_of: dict[str, str] = {}  # session id -> hop name
        self.facts: dict[Any, HopFact] = {}  # Chain -> its facts
        self.left_out = 0
        self._maps: dict[Any, list[tuple[str, str]]] = {}
        for m in hop_map or ():
            if type(m) is dict and type(m.get("target")) is str:
                self._maps.setdefault(m["target"], []).append((str(m.get("tool", "tool")), str(m.get("arguments", "arguments"))))
        self._asks: dict[Any, HopQuestion] = {}  # LegacyRound -> its question
        # legacy questions no evidence tied to a chain (two calls in flight on stdio), per session: a
        # pair adopts the one whose text its front chain asked (RULES.md §11: the message text)
        self.loose: dict[str, list[HopQuestion]] = {}
        self._loose_by_msg: dict[Any, HopQuestion] = {}  # the unanswered ones, by the server's request
        self._loose_kept = 0

    def name(self, session: str, hop: str) -> None:
        self.hop_of[session] = hop

    def hop_for(self, session: str) -> str | None:
        """The hop of a chain a request of `session` starts: its session's, while chains are kept."""
        hop = self.hop_of.get(session)
        return hop if hop is not None and len(self.facts) < LIMIT else None

    # -- what each chain does ---------------------------------------------------------------------
    def see(self, obs: Any) -> None:
        t = type(obs)
        if t is Decoded:
            creq = obs.creq
            if creq is None or obs.msg.direction != C2S:
                return
            chain = creq.chain
            f = self.facts.get(chain)
            if f is None:
                if creq.round is not None or chain.requests[0] is not creq:
                    return
                f = self._open(chain, obs.msg)
                if f is None:
                    return
            if obs.exchange is not None:
                f.session_ids.append([obs.msg.index, _session_id(obs.exchange), None])
        elif t is Answered:
            if obs.asked is None and obs.creq is None and self._loose_by_msg and obs.request is not None:
                q = self._loose_by_msg.pop(obs.request, None)
                if q is not None:
                    q.answered, q.answer_index = obs.response.time, obs.response.index
                return
            if obs.asked is not None:  # a client's answer to a legacy question of a chain
                q = self._asks.pop(obs.asked, None)
                if q is not None:
                    q.answered, q.answer_index = obs.response.time, obs.response.index
                return
            creq = obs.creq
            f = self.facts.get(creq.chain) if creq is not None else None
            if f is None:
                return
            self._answered(f, creq, obs.response)
        elif t is RoundOpened:
            f = self.facts.get(obs.chain)
            if f is not None:
                rd = obs.round
                for key, req in (rd.input_requests or {}).items():
                    req = req if type(req) is dict else {}
                    f.questions.append(_question(req.get("method"), req.get("params"), rd.irr_index, rd.irr_time, key, rd.n))
        elif t is Linked:
            f = self.facts.get(obs.chain)
            if f is not None:
                p = obs.request.params if type(obs.request.params) is dict else {}
                ir = p.get("inputResponses")
                keys = tuple(ir) if type(ir) is dict else ()
                f.answers.append((obs.request.time, obs.request.index, obs.round.n, keys))
                for q in f.questions:
                    if q.round == obs.round.n and q.key in keys and q.answered is None:
                        q.answered, q.answer_index = obs.request.time, obs.request.index
        elif t is LegacyAsked:
            rd = obs.round
            if rd is None:
                if obs.msg.session in self.hop_of and self._loose_kept < LIMIT:
                    q = _question(obs.msg.method, obs.msg.params, obs.msg.index, obs.msg.time)
                    self._loose_kept += 1
                    self.loose.setdefault(obs.msg.session, []).append(q)
                    self._loose_by_msg[obs.msg] = q
                return
            f = self.facts.get(rd.chain)
            if f is not None:
                q = _question(obs.msg.method, obs.msg.params, obs.msg.index, obs.msg.time, None, rd.n)
                f.questions.append(q)
                self._asks[rd] = q
        elif t is ChainClosed:
            f = self.facts.get(obs.chain)
            if f is not None:
                for rd in obs.chain.asks:
                    self._asks.pop(rd, None)

    def _open(self, chain: Any, msg: Any) -> HopFact | None:
        hop = self.hop_of.get(msg.session)
        if hop is None:
            return None
        if len(self.facts) >= LIMIT:
            self.left_out += 1
            return None
        args = _digest(arguments_of(chain.method, msg.params))
        f = HopFact(chain, hop, msg.session, chain.method, chain.target, args)
        maps = self._maps.get(chain.target) if chain.method == "tools/call" else None
        if maps:
            a = (msg.params if type(msg.params) is dict else {}).get("arguments")
            for tool_path, args_path in maps:
                tool = _at(a, tool_path)
                if type(tool) is str:
                    inner = _at(a, args_path)
                    f.mapped.append(("tools/call", tool, _digest({} if inner is None else inner)))
        self.facts[chain] = f
        return f

    def _answered(self, f: HopFact, creq: Any, msg: Any) -> None:
        kind = msg.kind
        if kind == RESULT and type(msg.result) is dict and msg.result.get("resultType") == "input_required":
            accepted = True
        else:
            accepted = kind == RESULT
            if kind == RESULT or kind == ERROR:
                f.final = _shape(msg)
        for entry in f.session_ids:
            if entry[0] == creq.index:
                entry[2] = accepted
        if kind == ERROR and creq.round is not None:
            e = msg.error if type(msg.error) is dict else {}
            text = e.get("message") if type(e.get("message")) is str else ""
            link = creq.link
            state = link.state if link is not None else None
            sid = next((e2[1] for e2 in f.session_ids if e2[0] == creq.index), None)
            if e.get("code") == -32602 or any(r in text.lower() for r in _REFUSALS):
                f.refused.append((creq.index, msg.index, sid, e.get("code"), text, state))

    # -- the end: the pairs -----------------------------------------------------------------------
    def correlate(self) -> HopsCorrelated:
        facts = list(self.facts.values())
        by_hop: dict[str, list[HopFact]] = {}
        for f in facts:
            by_hop.setdefault(f.hop, []).append(f)
        hops = sorted(by_hop)
        pairs: list[HopPair] = []
        ambiguous: list[HopAmbiguity] = []
        for i, a in enumerate(hops):
            for b in hops[i + 1:]:
                front, back = self._direction(a, b, by_hop)
                if front is None:
                    continue
                offset = self._offset(by_hop[front], by_hop[back])
                p, amb = self._link(by_hop[front], by_hop[back], offset)
                pairs += p
                ambiguous += amb
        pairs.sort(key=lambda p: (p.front.chain.seq, p.back.chain.seq))
        self._adopt(pairs)
        return HopsCorrelated(pairs, ambiguous, {f.id: f for f in facts}, self.left_out)

    def _adopt(self, pairs: list[HopPair]) -> None:
        """Each loose question goes to the back chain of a pair whose span holds it and whose front chain
        asked the same message text (only one such pair: else it stays loose)."""
        for session, questions in self.loose.items():
            for q in questions:
                text = q.params.get("message")
                if not text:
                    continue
                takers = [p for p in pairs if p.back.session == session and p.back.start <= q.time <= p.back.end
                          and any(fq.params.get("message") == text for fq in p.front.questions)]
                if len({id(p.back) for p in takers}) == 1:
                    back = takers[0].back
                    q.round = len(back.questions) + 1
                    back.questions.append(q)
                    back.questions.sort(key=lambda x: x.time)

    @staticmethod
    def _evidence(front: HopFact, back: HopFact) -> int:
        """3 target+args, 2 args, 1 time (same method), 0 none (time containment is checked apart)."""
        if front.method == back.method and front.target == back.target and front.args == back.args:
            return 3
        if ("tools/call" == back.method and (back.method, back.target, back.args) in front.mapped):
            return 3
        if front.method == back.method and front.args == back.args and front.args not in ("{}", "null"):
            return 2
        if back.method == "tools/call" and any(m[2] == back.args and m[2] not in ("{}", "null") for m in front.mapped):
            return 2
        if front.method == back.method:
            return 1
        return 0

    @staticmethod
    def _inside(front: HopFact, back: HopFact, offset: float, slack: float = SLACK) -> bool:
        """Whether the back chain lies in the front chain's span; one that never ended (cancelled,
        abandoned, open: the gateway gave it up, or the capture ended first) only has to start there."""
        if not front.start - slack <= back.start + offset:
            return False
        if back.chain.outcome not in ("complete", "error"):
            return back.start + offset <= front.end + slack
        return back.end + offset <= front.end + slack

    def _score(self, fronts: list[HopFact], backs: list[HopFact], offset: float, slack: float) -> int:
        n = 0
        for b in backs:
            if any(self._evidence(f, b) >= 2 and self._inside(f, b, offset, slack) for f in fronts):
                n += 1
        return n

    def _direction(self, a: str, b: str, by_hop: dict) -> tuple[str | None, str | None]:
        """Which of two hops is the front: named `front` or `back`, as named; else the one whose chains
        hold the other's, strictly on one clock first, then with the slack or the offset of two clocks.
        (A back call the gateway abandoned outlives its front chain: the names are the surer word.)"""
        fa, fb = by_hop[a], by_hop[b]
        if "front" in (a, b) or "back" in (a, b):
            return (b, a) if b == "front" or a == "back" else (a, b)
        ab, ba = self._score(fa, fb, 0.0, 0.0), self._score(fb, fa, 0.0, 0.0)
        if ab == ba:
            ab = max(self._score(fa, fb, 0.0, SLACK), self._score(fa, fb, self._offset(fa, fb), SLACK))
            ba = max(self._score(fb, fa, 0.0, SLACK), self._score(fb, fa, self._offset(fb, fa), SLACK))
        if ab == ba:
            if ab == 0 and not ({a, b} & {"front", "back"}):
                return None, None
            if b == "front" or a == "back":
                return b, a
            return a, b
        return (a, b) if ab > ba else (b, a)

    def _offset(self, fronts: list[HopFact], backs: list[HopFact]) -> float:
        """0 when some back chain lies in a front chain's span on one clock; else the shift that puts
        the first back chain at the start of the first front chain (two machines' recordings)."""
        for b in backs:
            if any(self._evidence(f, b) >= 1 and self._inside(f, b, 0.0) for f in fronts):
                return 0.0
        if not fronts or not backs:
            return 0.0
        return min(f.start for f in fronts) - min(b.start for b in backs)

    def _link(self, fronts: list[HopFact], backs: list[HopFact], offset: float) -> tuple[list, list]:
        pairs, ambiguous = [], []
        linked: dict[int, int] = {}  # front chain seq -> back chains linked to it
        names = {3: "target+args", 2: "args", 1: "time"}
        for b in sorted(backs, key=lambda f: (f.start, f.chain.seq)):
            scored = [(self._evidence(f, b), f) for f in fronts if self._inside(f, b, offset)]
            best = max((s for s, _ in scored), default=0)
            if best == 0:
                continue
            tied = [f for s, f in scored if s == best]
            if len(tied) > 1:  # the question's text, then the fronts not yet tied to a back chain
                texts = {q.params.get("message") for q in b.questions if q.params.get("message")}
                if texts:
                    same = [f for f in tied if texts & {q.params.get("message") for q in f.questions}]
                    tied = same or tied
            if len(tied) > 1:
                free = [f for f in tied if f.chain.seq not in linked]
                tied = free if len(free) == 1 else tied
            if len(tied) > 1:
                ambiguous.append(HopAmbiguity(b, sorted(tied, key=lambda f: f.chain.seq), names[best]))
                continue
            f = tied[0]
            linked[f.chain.seq] = linked.get(f.chain.seq, 0) + 1
            pairs.append(HopPair(f, b, names[best], offset))
        return pairs, ambiguous
