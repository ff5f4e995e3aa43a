"""The mutations of RULES.md §14: a recorded server that misbehaves on purpose, one way per mutation.

A `Director` stands in front of the replay (`replay.serve.Replayer`): each live request goes to the
replayer as `replay serve` would answer it, and the director changes the answer (a rotated
requestState, a round of its own, an error, a fault). Rounds of its own carry states it issued
(`mrtr-probe-…`); a retry that echoes one is answered by the director, and a retry that echoes a
state it put in place of a recorded one goes to the replayer with the recorded state back, so the
recorded chain goes on as recorded.

    director = DIRECTORS["state-rotated"](script)
    session = ServeSession(script, options, director=director)     # serve.py calls director.answer
    director.summary()                                              # what it did, as JSON

What each mutation did is in its summary (the stdio probe server runs in a process of its own and
writes it to a file); the verdicts are judged from it, the traffic and the client's exit
(`client_runner.py`). Sans-IO: messages in, answers out.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.canonical import canonical_json
from ..core.messages import CLIENT_CAPABILITIES_KEY, ERROR, REQUEST, RESULT, Message, decode_message, target_of
from ..core.rawjson import raw_member_span
from ..replay.faults import Fault
from ..replay.script import Exchange, Script
from ..replay.serve import Answer, Gate, Replayer, apply_fault
from ..replay.wire import dumps, map_sse_data, set_member
from .mutations import _result_type as result_type

PREFIX = "mrtr-probe-"
MISSING_CAPABILITY = -32021
MANY_ROUNDS = 60  # many-rounds asks this many rounds at most
STORM = 50  # retries past this are a storm (client-retry-storm)
LARGE = 64 * 1024
# non-ASCII text, U+2028, an escaped solidus and a surrogate pair, as JSON escapes (the raw member text)
UNICODE_STATE_RAW = '"' + PREFIX + 'unicode-\\u00e9t\\u00e9 \u00fcber \\u2028 a\\/b \\ud83d\\ude00 \u2713"'
UNICODE_STATE = json.loads(UNICODE_STATE_RAW)
KIND_CAPABILITY = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
ELICIT = {"method": "elicitation/create", "params": {
    "mode": "form", "message": "mrtr-inspect probe: a question of its own",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
ELICIT_URL = {"method": "elicitation/create", "params": {
    "mode": "url", "message": "mrtr-inspect probe: open this page", "url": "https://example.com/mrtr-probe"}}
SAMPLE = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "mrtr-inspect probe: say anything"}}],
    "maxTokens": 16}}
ROOTS = {"method": "roots/list", "params": {}}


def _params(m: Message) -> dict:
    return m.params if type(m.params) is dict else {}


def declared(live: Message) -> dict:
    """The client capabilities this request declared (`_meta`)."""
    meta = _params(live).get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_KEY) if type(meta) is dict else None
    return caps if type(caps) is dict else {}


def kinds_declared(caps: dict) -> dict[str, dict]:
    """The kinds of input request these capabilities allow: key → the request to ask."""
    out: dict[str, dict] = {}
    el = caps.get("elicitation")
    if type(el) is dict and ("form" in el or "url" not in el):
        out["elicit"] = ELICIT
    if type(caps.get("sampling")) is dict:
        out["sample"] = SAMPLE
    if type(caps.get("roots")) is dict:
        out["roots"] = ROOTS
    return out


def kinds_undeclared(caps: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    el = caps.get("elicitation")
    if type(el) is not dict:
        out["elicit"] = ELICIT
    elif "url" not in el:
        out["elicit-url"] = ELICIT_URL
    if type(caps.get("sampling")) is not dict:
        out["sample"] = SAMPLE
    if type(caps.get("roots")) is not dict:
        out["roots"] = ROOTS
    return out


def irr(live_id: Any, requests: dict | None, state_raw: str) -> bytes:
    """An input_required result with the live id; `state_raw` is the requestState as raw JSON text."""
    result: dict = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    text = dumps({"jsonrpc": "2.0", "id": live_id, "result": {**result, "requestState": "@"}})
    return text.replace('"requestState":"@"', '"requestState":' + state_raw).encode("utf-8")


def set_raw(data: bytes, path: tuple, raw_value: str) -> bytes:
    """`data` with the scalar member at `path` replaced by this raw JSON text (escapes as given)."""
    text = data.decode("utf-8", "replace")
    span = raw_member_span(text, path)
    if span is None:
        return data
    return (text[: span[0]] + raw_value + text[span[1]:]).encode("utf-8")


def response_of(ans: Answer) -> Message | None:
    for _, msg, _ in reversed(ans.items):
        if msg is not None:
            m = decode_message(msg)
            if m.kind in (RESULT, ERROR):
                return m
    return None


def rewrite_response(ans: Answer, fn) -> Answer:
    """The answer with its response message (and the event carrying it) passed through `fn`."""
    items = list(ans.items)
    for i in range(len(items) - 1, -1, -1):
        offset, msg, ev = items[i]
        if msg is not None and decode_message(msg).kind in (RESULT, ERROR):
            items[i] = (offset, fn(msg), map_sse_data(ev, fn) if ev is not None else None)
            break
    ans.items = items
    return ans


def own(live: Message, data: bytes, ex: Exchange | None = None, status: int = 200) -> Answer:
    return Answer([(0.0, data, None)], ex, status)


class Director:
    """Answers as the replayer does, changed by one mutation (subclasses)."""

    name = ""
    needs = "the first request of a recorded chain with an input_required round"

    def __init__(self, script: Script, window: float = 2.0) -> None:
        self.script = script
        self.window = window
        self.round_chains = {ex.chain for ex in script.exchanges
                             if ex.chain is not None and result_type(ex.response) == "input_required"}
        self.held: dict[str, Any] = {}  # a state of the director's own -> what answers its retry
        self.back: dict[str, str] = {}  # a state put in place of a recorded one -> the recorded one
        self.applied = False
        self.chain: str | None = None  # the recorded chain it changed
        self.label = ""
        self.skip = ""  # why it could not apply (a request that declared every kind…)
        self.issued: list[str] = []  # the states it issued (what the client must echo)
        self.keys: list[str] = []  # the inputRequests keys of its own
        self.extra: dict = {}
        self.n = 0
        self.hold: float | None = None  # fault-delay: send the answer after this many seconds (None: never)

    # -- what the session calls --------------------------------------------------------------------
    def answer(self, raw: bytes, http_path: str | None, replayer: Replayer) -> Answer | None:
        live = decode_message(raw)
        if live.kind != REQUEST:
            return replayer.answer(raw, http_path)
        st = _params(live).get("requestState")
        if type(st) is str and st in self.held:
            return self.on_retry(live, self.held[st], replayer)
        if type(st) is str and st in self.back:
            raw = set_member(raw, ("params", "requestState"), self.back[st])
        ans = replayer.answer(raw, http_path)
        if ans is None:
            return None
        return self.mutate(live, ans, replayer)

    def summary(self) -> dict:
        return {"mutation": self.name, "applied": self.applied, "chain": self.chain, "label": self.label,
                "skip": self.skip, "issued": self.issued, "keys": self.keys, "chains": len(self.round_chains),
                **self.extra}

    # -- what a mutation changes -------------------------------------------------------------------
    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        return ans

    def on_retry(self, live: Message, held: Any, replayer: Replayer) -> Answer:
        """A retry echoing a state of the director's own: by default the recorded answer it held back."""
        return replayer._replay(held, live)

    # -- helpers ------------------------------------------------------------------------------------
    def opens(self, ans: Answer) -> bool:
        """The answer is to the first request of a recorded chain with rounds (the first time only)."""
        ex = ans.exchange
        return (not self.applied and ex is not None and ex.round == 0 and ex.chain in self.round_chains
                and ans.fault is None)

    def take(self, ex: Exchange) -> None:
        self.applied = True
        self.chain = ex.chain
        self.label = f"{ex.method} {ex.target}" if ex.target is not None else str(ex.method)
        self.extra.update(method=ex.method, target=ex.target)

    def state(self, what: str) -> str:
        self.n += 1
        s = f"{PREFIX}{what}-{self.n}"
        self.issued.append(s)
        return s

    def rotate(self, ans: Answer, what: str) -> Answer | None:
        """The answer with its input_required result's requestState changed to a new one of the probe's
        (still opaque, not the recorded bytes); None when it carries none."""
        r = response_of(ans)
        recorded = (r.result or {}).get("requestState") if r is not None and type(r.result) is dict else None
        if result_type(r) != "input_required" or type(recorded) is not str:
            return None
        self.n += 1
        new = f"{PREFIX}{what}-{self.n}." + recorded[::-1]
        self.issued.append(new)
        self.back[new] = recorded
        return rewrite_response(ans, lambda b: set_member(b, ("result", "requestState"), new))

    def first_question(self, chain: str | None) -> tuple[str, dict] | None:
        for ex in self.script.exchanges:
            if ex.chain == chain and result_type(ex.response) == "input_required":
                r = ex.response.result if ex.response is not None and type(ex.response.result) is dict else {}
                ir = r.get("inputRequests")
                if type(ir) is dict and ir:
                    k = next(iter(ir))
                    return k, ir[k]
        return None

    def ask(self, live: Message, ex: Exchange, requests: dict | None, what: str, held: Any = None) -> Answer:
        """A round of the director's own in place of the answer; its retry gets `held` (default: the
        recorded answer to `ex`)."""
        s = self.state(what)
        self.held[s] = ex if held is None else held
        if requests:
            self.keys += [k for k in requests if k not in self.keys]
        return own(live, irr(live.id, requests, json.dumps(s)), ex)


class StateRotated(Director):
    name = "state-rotated"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        rotated = self.rotate(ans, "rotated")
        if rotated is not None and not self.applied and ans.exchange is not None:
            self.take(ans.exchange)
        return rotated or ans


class ReplacedState(Director):
    """large-state, unicode-state: the chain's first requestState replaced by one of the probe's."""

    raw_state = ""

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        ex = ans.exchange
        r = response_of(ans)
        if self.applied or ex is None or ex.chain not in self.round_chains or r is None \
                or result_type(r) != "input_required":
            return ans
        recorded = (r.result or {}).get("requestState")
        if type(recorded) is not str:
            return ans
        self.take(ex)
        value = json.loads(self.raw_state)
        self.issued.append(value)
        self.back[value] = recorded
        return rewrite_response(ans, lambda b: set_raw(b, ("result", "requestState"), self.raw_state))


class LargeState(ReplacedState):
    name = "large-state"
    needs = "a recorded chain whose server issued a requestState"
    head = PREFIX + "large-"
    raw_state = json.dumps(head + "".join(chr(33 + (i * 7) % 94) for i in range(LARGE - len(head)))
                           .replace('"', "'").replace("\\", "/"))


class UnicodeState(ReplacedState):
    name = "unicode-state"
    needs = "a recorded chain whose server issued a requestState"
    raw_state = UNICODE_STATE_RAW


class StateOnly(Director):
    name = "state-only"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        assert ans.exchange is not None
        self.take(ans.exchange)
        return self.ask(live, ans.exchange, None, "ready")


class ExtraRound(Director):
    name = "extra-round"
    needs = "a recorded retry that completed its chain"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        ex = ans.exchange
        r = response_of(ans)
        if self.applied or ex is None or not ex.round or ex.chain not in self.round_chains or r is None \
                or result_type(r) in ("input_required", "error", None):
            return ans
        q = self.first_question(ex.chain)
        if q is None:
            return ans
        self.take(ex)
        self.extra["retried_id"] = live.id
        return self.ask(live, ex, {PREFIX + "extra": q[1]}, "extra")


class ManyRounds(Director):
    name = "many-rounds"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        assert ans.exchange is not None
        q = self.first_question(ans.exchange.chain)
        if q is None:
            return ans
        self.take(ans.exchange)
        self.extra.update(question=q[1], rounds=1)
        return self.ask(live, ans.exchange, {f"{PREFIX}round-1": q[1]}, "round", held=(ans.exchange, 1))

    def on_retry(self, live: Message, held: Any, replayer: Replayer) -> Answer:
        ex, n = held
        if n >= MANY_ROUNDS:
            return replayer._replay(ex, live)
        self.extra["rounds"] = n + 1
        return self.ask(live, ex, {f"{PREFIX}round-{n + 1}": self.extra["question"]}, "round", held=(ex, n + 1))


class AllKinds(Director):
    name = "all-kinds"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        assert ans.exchange is not None
        asks = kinds_declared(declared(live))
        if not asks:
            self.skip = "the request declared none of elicitation (form), sampling and roots"
            return ans
        self.take(ans.exchange)
        return self.ask(live, ans.exchange, {PREFIX + k: v for k, v in asks.items()}, "kinds")


class UndeclaredKind(Director):
    name = "undeclared-kind"

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        assert ans.exchange is not None
        asks = kinds_undeclared(declared(live))
        if not asks:
            self.skip = ("the request declared every kind (elicitation form and url, sampling, roots): there is no "
                         "undeclared kind to ask")
            return ans
        k, req = next(iter(asks.items()))
        self.take(ans.exchange)
        self.extra["kind"] = req["method"] + (" (url mode)" if k == "elicit-url" else "")
        return self.ask(live, ans.exchange, {PREFIX + "undeclared": req}, "undeclared")


class MissingCapability(Director):
    name = "missing-capability"

    def __init__(self, script: Script, window: float = 2.0) -> None:
        super().__init__(script, window)
        self.refused: dict[str, Exchange] = {}  # the request refused (canonical) -> its recorded exchange

    @staticmethod
    def same(live: Message) -> str:
        p = dict(_params(live))
        meta = p.get("_meta")
        if type(meta) is dict:
            p["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        return canonical_json([live.method, p])

    def refuse(self, live: Message, ex: Exchange) -> Answer:
        q = self.first_question(ex.chain)
        cap = KIND_CAPABILITY.get(q[1].get("method")) if q is not None and type(q[1]) is dict else None
        required = {cap or "elicitation": {}}
        data = dumps({"jsonrpc": "2.0", "id": live.id, "error": {
            "code": MISSING_CAPABILITY, "message": "mrtr-inspect probe: missing required client capability",
            "data": {"requiredCapabilities": required}}}).encode()
        return own(live, data, ex, 400)  # on HTTP with 400 Bad Request (basic/index.mdx, _meta)

    def answer(self, raw: bytes, http_path: str | None, replayer: Replayer) -> Answer | None:
        live = decode_message(raw)
        if live.kind == REQUEST and self.refused:
            key = self.same(live)
            if key in self.refused:
                self.extra["resends"] = self.extra.get("resends", 0) + 1
                return self.refuse(live, self.refused[key])
            if live.method == self.extra.get("method") and target_of(live.method, live.params) == self.extra.get("target") \
                    and "changed" not in self.extra:
                self.extra["changed"] = True  # resent changed (other capabilities): the recorded answer
                return replayer._replay(next(iter(self.refused.values())), live)
        return super().answer(raw, http_path, replayer)

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        ex = ans.exchange
        assert ex is not None
        self.take(ex)
        self.refused[self.same(live)] = ex
        self.extra.update(method=live.method, target=target_of(live.method, live.params), resends=0)
        return self.refuse(live, ex)


class Parallel(Director):
    name = "parallel"
    needs = "two requests of recorded chains with rounds open at once"

    def __init__(self, script: Script, window: float = 2.0) -> None:
        super().__init__(script, window)
        self.waiting: tuple[Gate, Answer] | None = None
        self.extra["overlap"] = False

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        ex = ans.exchange
        if ex is None or ex.round != 0 or ex.chain not in self.round_chains or ans.fault is not None:
            return self._rotated(ans)
        if self.waiting is not None and not self.waiting[0].opened:
            gate, first = self.waiting
            self.waiting = None
            self.applied = True
            self.extra["overlap"] = True
            self.extra.setdefault("labels", []).append(f"{ex.method} {ex.target}")
            ans = self._rotated(ans)
            ans.release = gate  # the first one is answered after this one
            return ans
        if self.applied:
            return self._rotated(ans)
        gate = Gate()
        ans = self._rotated(ans)
        ans.gate, ans.hold = gate, self.window
        self.waiting = (gate, ans)
        self.chain = ex.chain
        self.label = f"{ex.method} {ex.target}" if ex.target is not None else str(ex.method)
        self.extra["labels"] = [self.label]
        return ans

    def _rotated(self, ans: Answer) -> Answer:
        return self.rotate(ans, "parallel") or ans


class FaultMutation(Director):
    kind = ""

    def mutate(self, live: Message, ans: Answer, replayer: Replayer) -> Answer:
        if not self.opens(ans):
            return ans
        assert ans.exchange is not None
        self.take(ans.exchange)
        self.extra["request_id"] = live.id
        return apply_fault(Fault(self.kind, seconds=self.hold if self.kind == "delay" else None), ans, live.id)


class FaultDelay(FaultMutation):
    name, kind = "fault-delay", "delay"


class FaultDisconnect(FaultMutation):
    name, kind = "fault-disconnect", "disconnect"


class FaultMalformed(FaultMutation):
    name, kind = "fault-malformed", "malformed"


DIRECTORS: dict[str, type[Director]] = {d.name: d for d in (
    StateRotated, StateOnly, ExtraRound, ManyRounds, AllKinds, UndeclaredKind, LargeState, UnicodeState,
    MissingCapability, Parallel, FaultDelay, FaultDisconnect, FaultMalformed)}
