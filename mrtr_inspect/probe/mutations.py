"""The mutations of RULES.md §12: what each sends, and how the server's reaction is judged.

A mutation plans on the recorded chain (which round it changes, which recorded requests are played
first), builds its request from what the live server answered to those (the live `requestState`,
the live questions), and judges the live response:

    plan = MUTATIONS["tampered-state"].plan(chain, max_rounds)   # a Plan, or the reason it is skipped
    data = plan.build(live)                                      # bytes, or the reason it is skipped
    verdict = plan.judge(response)                               # Verdict(pass|fail, rule, reason)

Everything here is sans-IO: messages in, bytes and verdicts out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.messages import CLIENT_CAPABILITIES_KEY, ERROR, RESULT, Message, decode_message
from ..replay.script import Exchange
from ..replay.wire import dumps, set_member

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
MISSING_CAPABILITY = -32021
UNKNOWN_KEY = "mrtr-inspect-probe-unknown"
#: the capability each kind of input request needs (RULES.md §4.1 input-request-undeclared-capability)
CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


@dataclass
class Verdict:
    verdict: str
    rule: str | None = None
    reason: str = ""


@dataclass
class RecordedChain:
    """One recorded chain: its requests in order (`exchanges[0]` the first, then the retries)."""

    id: str
    exchanges: list[Exchange]
    others: list[Exchange] = field(default_factory=list)  # first requests of the recording's other chains

    @property
    def first(self) -> Exchange:
        return self.exchanges[0]

    @property
    def rounds(self) -> int:
        """input_required results the recorded server sent in the chain."""
        return sum(1 for ex in self.exchanges if _result_type(ex.response) == "input_required")

    def retry(self, n: int) -> Exchange | None:
        """The recorded retry answering round n."""
        return next((ex for ex in self.exchanges if ex.round == n and ex.round_of is not None), None)

    def label(self) -> str:
        ex = self.first
        return f"{ex.method} {ex.target}" if ex.target is not None else str(ex.method)


@dataclass
class Live:
    """What the live server answered before the mutated request: the response that opened the round
    (None for a mutation of the first request), and the request the mutation is built from (the
    recorded one, with the live id and, for a retry, the live requestState)."""

    base: bytes
    opened: Message | None = None


@dataclass
class Plan:
    mutation: str
    chain: RecordedChain
    prefix: list[Exchange]  # the recorded requests of the chain played first, in order
    target: Exchange  # the recorded request the mutated one is made from
    round: int  # the round the mutated request answers (0: the first request)
    build: Callable[[Live], "bytes | str"]
    judge: Callable[[Message, Live], Verdict]
    resend: bool = False  # the target was played already: send its live bytes again (replayed-state)
    other_headers: bool = False  # HTTP: the request's own headers, not the recorded ones (target changed)


# -------------------------------------------------------------------------------------------------
# what a response is


def _result_type(m: Message | None) -> str | None:
    if m is None:
        return None
    if m.kind == ERROR:
        return "error"
    if m.kind != RESULT:
        return None
    r = m.result if type(m.result) is dict else {}
    rt = r.get("resultType", "complete")
    return rt if type(rt) is str else "complete"


def outcome(m: Message) -> str:
    """`error -32602`, `input_required (asks a, b)`, `complete`, … in short, for a reason."""
    rt = _result_type(m)
    if rt == "error":
        e = m.error if type(m.error) is dict else {}
        return f"a JSON-RPC error {e.get('code')} ({str(e.get('message', ''))[:80]})"
    if rt == "input_required":
        return f"input_required (asks {', '.join(sorted(_asks(m))) or 'nothing'})"
    if rt == "complete" and type(m.result) is dict and m.result.get("isError") is True:
        return "a complete result with isError: true"
    return f"a {rt} result" if rt else "no JSON-RPC response"


def _asks(m: Message | None) -> dict:
    r = m.result if m is not None and type(m.result) is dict else {}
    ir = r.get("inputRequests")
    return ir if type(ir) is dict else {}


def _params(raw: bytes) -> dict:
    m = decode_message(raw)
    return m.params if type(m.params) is dict else {}


def _answers(ex: Exchange) -> dict:
    p = ex.request.params if type(ex.request.params) is dict else {}
    a = p.get("inputResponses")
    return a if type(a) is dict else {}


def _questions(ex: Exchange) -> dict:
    """The recorded questions the retry `ex` answers (its round's inputRequests)."""
    return _asks(ex.round_of.response) if ex.round_of is not None else {}


def _state(live: Live) -> str | None:
    r = live.opened.result if live.opened is not None and type(live.opened.result) is dict else {}
    s = r.get("requestState")
    return s if type(s) is str else None


# -------------------------------------------------------------------------------------------------
# judging


def accepted(rule: str, what: str, m: Message) -> Verdict:
    """The server did not refuse what the probe sent: fail with `rule`. A result with isError: true
    is said as what it is, the tool failing after the request was taken, not a refusal ("accepted it
    … with isError: true" read as a contradiction)."""
    if _result_type(m) == "complete" and type(m.result) is dict and m.result.get("isError") is True:
        return Verdict(FAIL, rule, f"{what}: the server did not refuse it with a JSON-RPC error; it ran the call, "
                       "which answered a complete result with isError: true (a tool failure, not a refusal)")
    return Verdict(FAIL, rule, f"{what}: the server accepted it and answered {outcome(m)}")


def _error_passes(rule: str, what: str) -> Callable[[Message, Live], Verdict]:
    """Pass on a JSON-RPC error; a result (complete, or another input_required) is acceptance."""

    def judge(m: Message, live: Live) -> Verdict:
        if m.kind == ERROR:
            return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}")
        return accepted(rule, what, m)

    return judge


def tamper(state: str) -> str:
    """`state` with one character near its middle changed to another of its class (a letter for a
    letter, a digit for a digit): still valid base64, base64url, UTF-8 and JSON, but not the bytes the
    server issued."""
    if not state:
        return "A"
    n = len(state)
    for d in range(n):
        for i in (n // 2 + d, n // 2 - d):
            if 0 <= i < n and state[i].isascii() and state[i].isalnum():
                c = state[i]
                base, size = ("0", 10) if c.isdigit() else (("a", 26) if c.islower() else ("A", 26))
                new = chr(ord(base) + (ord(c) - ord(base) + 1) % size)
                return state[:i] + new + state[i + 1:]
    return state + "A"


def _first_state_round(chain: RecordedChain, max_rounds: int) -> tuple[int, Exchange] | str:
    for ex in chain.exchanges:
        if ex.round and ex.round_of is not None and ex.round_of.issued_state is not None:
            if ex.round > max_rounds:
                return f"its first round with a requestState is round {ex.round}, past --max-rounds {max_rounds}"
            return ex.round, ex
    if any(ex.issued_state for ex in chain.exchanges):
        return "no retry answers the round that carries a requestState"
    return "the recorded server issued no requestState in this chain"


def _first_answered_round(chain: RecordedChain, max_rounds: int, ok: Callable[[Exchange], bool],
                          what: str) -> tuple[int, Exchange] | str:
    for ex in chain.exchanges:
        if ex.round and ex.round_of is not None and ok(ex):
            if ex.round > max_rounds:
                return f"the first retry with {what} answers round {ex.round}, past --max-rounds {max_rounds}"
            return ex.round, ex
    return f"no recorded retry carries {what}"


def _prefix(chain: RecordedChain, n: int) -> list[Exchange]:
    """The chain's requests before the retry of round n: the first request and the retries of the
    earlier rounds."""
    return [ex for ex in chain.exchanges if ex.round < n]


def _with_state(live: Live, state: str | None) -> bytes:
    return set_member(live.base, ("params", "requestState"), state) if state is not None else live.base


# -------------------------------------------------------------------------------------------------
# the mutations


def plan_tampered_state(chain: RecordedChain, max_rounds: int) -> Plan | str:
    found = _first_state_round(chain, max_rounds)
    if isinstance(found, str):
        return found
    n, ex = found

    def build(live: Live) -> bytes | str:
        state = _state(live)
        if state is None:
            return f"the live server's round {n} carries no requestState"
        return _with_state(live, tamper(state))

    return Plan("tampered-state", chain, _prefix(chain, n), ex, n, build,
                _error_passes("server-accepted-altered-state", f"round {n}'s requestState with one byte changed"))


def plan_replayed_state(chain: RecordedChain, max_rounds: int) -> Plan | str:
    last = chain.exchanges[-1]
    if len(chain.exchanges) < 2 or not last.round:
        return "the chain has no retry"
    if chain.rounds > max_rounds:
        return f"the chain has {chain.rounds} rounds, past --max-rounds {max_rounds}"
    if _result_type(last.response) in (None, "input_required"):
        return "the recorded chain did not complete"
    if last.echoed_state is None:
        return "its last retry carries no requestState the server issued"

    def build(live: Live) -> bytes | str:
        if live.opened is None or _result_type(live.opened) in (None, "input_required"):
            what = outcome(live.opened) if live.opened is not None else "nothing"
            return f"the live chain did not complete (its last retry got {what})"
        if "requestState" not in _params(live.base):
            return "the live last retry carried no requestState"
        return live.base

    return Plan("replayed-state", chain, list(chain.exchanges), last, last.round, build,
                _error_passes("server-accepted-replayed-state", "the last retry sent again with a new id after the "
                              "chain completed"), resend=True)


def _other_arguments(params: dict) -> tuple[dict, str] | None:
    args = params.get("arguments")
    if type(args) is not dict:
        return None
    for k, v in args.items():
        if type(v) is str:
            return {**params, "arguments": {**args, k: v + "-other"}}, f"argument {k!r} changed"
    return None


def plan_state_on_other_request(chain: RecordedChain, max_rounds: int) -> Plan | str:
    found = _first_state_round(chain, max_rounds)
    if isinstance(found, str):
        return found
    n, ex = found
    other = next((o for o in chain.others if o.method == chain.first.method and o.target != chain.first.target
                  and type(o.request.params) is dict), None)
    first_params = chain.first.request.params if type(chain.first.request.params) is dict else {}
    if _other_arguments(first_params) is None and other is None:
        return "no string argument to change and no other recorded target of the same method"

    def build(live: Live) -> bytes | str:
        state = _state(live)
        if state is None:
            return f"the live server's round {n} carries no requestState"
        obj = json.loads(_with_state(live, state))
        params = obj.get("params") if type(obj.get("params")) is dict else {}
        changed = _other_arguments(params)
        if changed is None:
            assert other is not None
            theirs = other.request.params
            keep = {k: v for k, v in params.items() if k not in ("name", "arguments", "uri")}
            params = {**keep, **{k: v for k, v in theirs.items() if k in ("name", "arguments", "uri")}}
        else:
            params = changed[0]
        obj["params"] = params
        return dumps(obj).encode("utf-8")

    what = f"round {n}'s live requestState on a request for another target or other arguments"
    return Plan("state-on-other-request", chain, _prefix(chain, n), ex, n, build,
                _error_passes("server-accepted-state-on-other-request", what), other_headers=True)


def _set_answers(live: Live, answers: dict) -> bytes:
    return set_member(live.base, ("params", "inputResponses"), answers)


def plan_missing_answer(chain: RecordedChain, max_rounds: int) -> Plan | str:
    found = _first_answered_round(chain, max_rounds, lambda ex: bool(_answers(ex)), "an inputResponses key")
    if isinstance(found, str):
        return found
    n, ex = found
    key = next(iter(_answers(ex)))

    def build(live: Live) -> bytes | str:
        answers = _answers_of(live)
        answers.pop(key, None)
        return _set_answers(live, answers)

    def judge(m: Message, live: Live) -> Verdict:
        what = f"the retry of round {n} without the answer {key!r}"
        if m.kind == ERROR:
            return Verdict(FAIL, "server-error-instead-of-reask",
                           f"{what}: the server answered {outcome(m)} instead of asking for it again")
        if _result_type(m) == "input_required" and key in _asks(m):
            return Verdict(PASS, None, f"{what}: the server asked for it again")
        return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}, not an error")

    return Plan("missing-answer", chain, _prefix(chain, n), ex, n, build, judge)


def _answers_of(live: Live) -> dict:
    a = _params(live.base).get("inputResponses")
    return dict(a) if type(a) is dict else {}


def plan_unknown_answer_key(chain: RecordedChain, max_rounds: int) -> Plan | str:
    found = _first_answered_round(chain, max_rounds, lambda ex: "inputResponses" in (ex.request.params or {})
                                  and ex.response is not None, "inputResponses and a recorded response")
    if isinstance(found, str):
        return found
    n, ex = found
    recorded = _result_type(ex.response)

    def build(live: Live) -> bytes | str:
        return _set_answers(live, {**_answers_of(live), UNKNOWN_KEY: {"action": "decline"}})

    def judge(m: Message, live: Live) -> Verdict:
        what = f"the retry of round {n} with the extra key {UNKNOWN_KEY!r}"
        got = _result_type(m)
        if got == recorded:
            return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}, as recorded")
        return Verdict(FAIL, "server-rejected-unknown-key",
                       f"{what}: the server answered {outcome(m)}; the recorded retry got {outcome(ex.response)}")

    return Plan("unknown-answer-key", chain, _prefix(chain, n), ex, n, build, judge)


def _form_schema(question: Any) -> dict | None:
    if type(question) is not dict or question.get("method") != "elicitation/create":
        return None
    p = question.get("params") if type(question.get("params")) is dict else {}
    if p.get("mode", "form") != "form":
        return None
    s = p.get("requestedSchema")
    return s if type(s) is dict and type(s.get("properties")) is dict and s["properties"] else None


def _accepted_form_key(ex: Exchange) -> str | None:
    qs = _questions(ex)
    for k, a in _answers(ex).items():
        if type(a) is dict and a.get("action") == "accept" and type(a.get("content")) is dict \
                and _form_schema(qs.get(k)) is not None:
            return k
    return None


_WRONG = {"boolean": "not-a-boolean", "number": "not-a-number", "integer": "not-an-integer",
          "array": "not-an-array", "object": "not-an-object"}


def broken_content(schema: dict, content: dict) -> tuple[dict, str]:
    """`content` with one field given a value of the wrong type for `schema` (a required one first)."""
    props = schema["properties"]
    req = [r for r in schema.get("required") or () if r in props]
    name = req[0] if req else next(iter(props))
    kind = props[name].get("type") if type(props[name]) is dict else None
    wrong: Any = 12345 if kind == "string" else _WRONG.get(kind, {"unexpected": True})  # type: ignore[arg-type]
    return {**content, name: wrong}, f"field {name!r} ({kind}) given {json.dumps(wrong)}"


def plan_invalid_answer(chain: RecordedChain, max_rounds: int) -> Plan | str:
    found = _first_answered_round(chain, max_rounds, lambda ex: _accepted_form_key(ex) is not None,
                                  "an accepted form elicitation answer")
    if isinstance(found, str):
        return found
    n, ex = found
    key = _accepted_form_key(ex)
    assert key is not None
    schema = _form_schema(_questions(ex)[key])
    assert schema is not None
    note: list[str] = []

    def build(live: Live) -> bytes | str:
        answers = _answers_of(live)
        answer = dict(answers.get(key) or {})
        live_schema = _form_schema(_asks(live.opened).get(key)) or schema
        answer["content"], what = broken_content(live_schema, dict(answer.get("content") or {}))
        note.append(what)
        answers[key] = answer
        return _set_answers(live, answers)

    def judge(m: Message, live: Live) -> Verdict:
        what = f"the answer {key!r} of round {n} with its {note[-1] if note else 'content'} against requestedSchema"
        if m.kind == ERROR or _result_type(m) == "input_required":
            return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}")
        return accepted("server-accepted-invalid-input-responses", what, m)

    return Plan("invalid-answer", chain, _prefix(chain, n), ex, n, build, judge)


def _caps(raw_params: dict) -> dict | None:
    meta = raw_params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_KEY) if type(meta) is dict else None
    return caps if type(caps) is dict else None


def plan_undeclared_capability(chain: RecordedChain, max_rounds: int) -> Plan | str:
    first = chain.first
    asked = sorted({CAPABILITY_OF[q.get("method")] for q in _asks(first.response).values()
                    if type(q) is dict and q.get("method") in CAPABILITY_OF})
    if not asked:
        return "the recorded first round asks for nothing a capability gates"
    declared = _caps(first.request.params if type(first.request.params) is dict else {})
    removed = [c for c in asked if declared is not None and c in declared]
    if not removed:
        return f"the recorded request did not declare {', '.join(asked)}"

    def build(live: Live) -> bytes | str:
        obj = json.loads(live.base)
        caps = _caps(obj.get("params") or {})
        assert caps is not None
        for c in removed:
            caps.pop(c, None)
        return dumps(obj).encode("utf-8")

    def judge(m: Message, live: Live) -> Verdict:
        what = f"the first request without {', '.join(removed)} in clientCapabilities"
        if m.kind == ERROR:
            e = m.error if type(m.error) is dict else {}
            data = e.get("data") if type(e.get("data")) is dict else {}
            if e.get("code") == MISSING_CAPABILITY and type(data.get("requiredCapabilities")) is dict:
                return Verdict(PASS, None, f"{what}: the server answered -32021 with requiredCapabilities")
            return Verdict(FAIL, "missing-capability-error-shape", f"{what}: the server answered {outcome(m)}; "
                           "a MissingRequiredClientCapabilityError (-32021) with data.requiredCapabilities is required")
        bad = sorted(k for k, q in _asks(m).items() if type(q) is dict and CAPABILITY_OF.get(q.get("method")) in removed)
        if bad:
            return Verdict(FAIL, "input-request-undeclared-capability",
                           f"{what}: the server still asks for {', '.join(bad)}")
        return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}, asking for none of it")

    return Plan("undeclared-capability", chain, [], first, 0, build, judge)


def plan_declined(chain: RecordedChain, max_rounds: int) -> Plan | str:
    def elicited(ex: Exchange) -> list[str]:
        qs = _questions(ex)
        return [k for k in _answers(ex) if type(qs.get(k)) is dict and qs[k].get("method") == "elicitation/create"]

    found = _first_answered_round(chain, max_rounds, lambda ex: bool(elicited(ex)), "an elicitation answer")
    if isinstance(found, str):
        return found
    n, ex = found
    keys = elicited(ex)

    def build(live: Live) -> bytes | str:
        answers = _answers_of(live)
        for k in keys:
            answers[k] = {"action": "decline"}
        return _set_answers(live, answers)

    def judge(m: Message, live: Live) -> Verdict:
        what = f"the retry of round {n} with {', '.join(repr(k) for k in keys)} declined"
        if m.kind == ERROR:
            return Verdict(FAIL, "server-error-on-decline", f"{what}: the server answered {outcome(m)}")
        return Verdict(PASS, None, f"{what}: the server answered {outcome(m)}")

    return Plan("declined", chain, _prefix(chain, n), ex, n, build, judge)


@dataclass(frozen=True)
class Mutation:
    name: str
    rule: str  # the rule its failure reports (RULES.md §12)
    plan: Callable[[RecordedChain, int], "Plan | str"]
    sends: str  # what is sent, in one line (docs/probes.md, --dry-run)


MUTATIONS: dict[str, Mutation] = {m.name: m for m in (
    Mutation("tampered-state", "server-accepted-altered-state", plan_tampered_state,
             "the retry with one byte of the live requestState changed"),
    Mutation("replayed-state", "server-accepted-replayed-state", plan_replayed_state,
             "after the chain completes, its last retry again with a new id"),
    Mutation("state-on-other-request", "server-accepted-state-on-other-request", plan_state_on_other_request,
             "the chain's live requestState on a request for other arguments or another target"),
    Mutation("missing-answer", "server-error-instead-of-reask", plan_missing_answer,
             "the retry with one inputResponses key left out"),
    Mutation("unknown-answer-key", "server-rejected-unknown-key", plan_unknown_answer_key,
             "the retry with an extra inputResponses key"),
    Mutation("invalid-answer", "server-accepted-invalid-input-responses", plan_invalid_answer,
             "an accepted elicitation answer whose content breaks the requestedSchema"),
    Mutation("undeclared-capability", "input-request-undeclared-capability", plan_undeclared_capability,
             "the first request with the asked capability left out of clientCapabilities"),
    Mutation("declined", "server-error-on-decline", plan_declined,
             "the retry with every elicitation answered decline"),
)}

