"""RULES.md §4.2: MRTR, the client side. Each retry is judged against the round it answers."""

from __future__ import annotations

import base64
import json
from urllib.parse import unquote

from ..core.messages import MRTR_METHODS, REQUEST, format_id
from ..core.observations import Decoded, Linked, NotLinked
from . import spec
from .common import chain_of
from .registry import ERROR, INFO, WARNING, Pass, declare, rule

# why a capture may not have seen a round: it began after it, or an import left out the exchange
UNSEEN = "(the capture of this peer began with it, or left out the exchange the round came in)"


def _unseen(obs: NotLinked) -> str:
    """Why the capture may have missed the round (RULES.md §10.8)."""
    if obs.restart_of is not None:
        return (f"(it follows session {obs.restart_of} of the same command or upstream, which ended with a chain of "
                "this request open: a restart mid-chain)")
    return UNSEEN


def _ids(ids) -> str:
    return ", ".join(format_id(i) for i in ids)


# --- retry ids ----------------------------------------------------------------------------------


def _id_seen_before(obs: Linked) -> bool:
    """What the two checks of a retry's id can find something in: an earlier request of its chain
    whose id equals the retry's, or is written the same once both are turned into strings. Most
    retries take a new id: the gate spares them the calls (each check still tests its own
    condition)."""
    mid = obs.request.id
    mine = str(mid)
    for r in obs.earlier:
        if r.id == mid or str(r.id) == mine:
            return True
    return False


@rule(
    "retry-reused-id", ERROR, on=Linked, gate=_id_seen_before, section="4.2", spec=spec.MRTR_CLIENT,
    conformance="sep-2322-client-jsonrpc-id-different",
    quote="The JSON-RPC id MUST be different between the initial request and the retry, as they are independent requests.",
    summary="A retry reuses the JSON-RPC id of an earlier request of its chain.",
    why="Each round is an independent request; a reused id lets responses be matched to the wrong request.",
    example='tools/call id 2 → input_required; retry tools/call id 2 with inputResponses',
)
def retry_reused_id(obs: Linked, ctx) -> None:
    """A request linked as a retry has the same JSON-RPC id (type and value) as an earlier request of
    its chain; the check covers every earlier round, not only the first request."""
    msg = obs.request
    same = [r for r in obs.earlier if type(r.id) is type(msg.id) and r.id == msg.id]
    if same:
        first = same[0]
        ctx.emit(
            f"retry {msg.label()} of chain {obs.chain.id} (round {obs.round.n}) reuses the id of "
            f"{'the first request' if first is obs.earlier[0] else 'an earlier request'} of the chain (message #{first.index})",
            messages=[first.index, msg.index], chain=obs.chain.id,
        )


@rule(
    "retry-id-stringly-equal", INFO, on=Linked, gate=_id_seen_before, section="10.1", spec=spec.MRTR_CLIENT,
    summary="A retry's id differs from an earlier id of its chain only by type (1 and \"1\").",
    why="Some JSON-RPC stacks compare ids as strings; such a peer would pair the responses wrongly.",
    example='tools/call id 1 → input_required; retry id "1"',
)
def retry_id_stringly_equal(obs: Linked, ctx) -> None:
    """A retry whose id equals an earlier request's id of the chain once both are turned into
    strings, while their JSON types differ. They are different JSON-RPC ids, so this is not a
    violation."""
    msg = obs.request
    mine = str(msg.id)
    loose = [r for r in obs.earlier if str(r.id) == mine]
    # an id of the same type and value is retry-reused-id (it is among those equal as strings)
    if loose and not any(type(r.id) is type(msg.id) and r.id == msg.id for r in loose):
        ctx.emit(
            f"retry id {format_id(msg.id)} of chain {obs.chain.id} differs from id {format_id(loose[0].id)} of "
            f"message #{loose[0].index} only by its JSON type; they are different ids",
            messages=[loose[0].index, msg.index], chain=obs.chain.id,
        )


# --- requestState ----------------------------------------------------------------------------------


@rule(
    "request-state-dropped", ERROR, on=Linked, where={"state": ["dropped"]}, section="4.2", spec=spec.MRTR_CLIENT,
    conformance="sep-2322-client-request-state-echoed",
    quote="If an InputRequiredResult contains the requestState field, the client MUST echo back the exact value of that field when retrying the original request.",
    summary="A retry leaves out the requestState its round carried.",
    why="Without its state a stateless server cannot resume the request: it starts over or fails.",
    example='round: {"resultType":"input_required","inputRequests":{…},"requestState":"abc"}; retry: inputResponses only',
)
def request_state_dropped(obs: Linked, ctx) -> None:
    """The round the retry answers carried `requestState`, and the retry (linked by its
    inputResponses keys or its parameters) has none."""
    if obs.state == "dropped":
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} answers round {obs.round.n} (message #{obs.round.irr_index}) "
            f"without the requestState that round carried",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id,
        )


def classify_alteration(issued: str, sent: object) -> str:
    """How a returned requestState differs from the issued one (RULES.md §4.2 request-state-altered)."""
    if type(sent) is not str:
        return "not-a-string"
    if issued.startswith(sent):
        return "truncated"
    if sent.startswith(issued):
        return "extended"
    if "".join(issued.split()) == "".join(sent.split()):
        return "whitespace"
    if issued.lower() == sent.lower():
        return "case"
    if _b64_equal(issued, sent):
        return "base64-variant"
    try:
        if json.loads(issued) == json.loads(sent):
            return "json-reserialized"
    except ValueError:
        pass
    if unquote(sent) == issued or unquote(issued) == sent:
        return "url-decoded"
    return "other"


def _b64_equal(a: str, b: str) -> bool:
    def dec(s: str) -> bytes | None:
        t = s.strip().replace("-", "+").replace("_", "/")
        t += "=" * (-len(t.rstrip("=")) % 4) if not t.endswith("=") else ""
        try:
            return base64.b64decode(t, validate=True)
        except Exception:
            return None

    da, db = dec(a), dec(b)
    return da is not None and da == db and a != b


@rule(
    "request-state-altered", ERROR, on=Linked, where={"state": ["altered"]}, section="4.2", spec=spec.MRTR_CLIENT,
    conformance="sep-2322-client-request-state-echoed",
    quote="Clients MUST NOT inspect, parse, modify, or make any assumptions about its contents.",
    summary="A retry returns a requestState different from the one its round issued.",
    why="State is opaque and often integrity-protected: any change makes a correct server reject the retry, "
        "and a server that accepts it may be trusting attacker-controlled data.",
    example='round requestState "v1.abc"; retry requestState "v1.abc-TAMPERED" (extended)',
)
def request_state_altered(obs: Linked, ctx) -> None:
    """The retry's decoded requestState differs from the one its round issued. The difference is
    classified: truncated, extended, whitespace, case, base64-variant, json-reserialized,
    url-decoded, other."""
    if obs.state != "altered":
        return
    p = obs.request.params if type(obs.request.params) is dict else {}
    sent = p.get("requestState")
    kind = classify_alteration(obs.round.state or "", sent)
    ctx.emit(
        f"retry {obs.request.label()} of chain {obs.chain.id} returns a requestState that differs from the one round "
        f"{obs.round.n} issued (message #{obs.round.irr_index}): {kind}",
        messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id, details={"difference": kind},
    )


@rule(
    "request-state-reencoded", INFO, on=Linked, where={"state": ["reencoded"]}, section="4.2", spec=spec.MRTR_CLIENT,
    quote="the client MUST echo back the exact value of that field",
    summary="A retry returns the same requestState value written with other JSON escapes.",
    why="The value is unchanged, so this is not a violation; but a server or gateway that compares bytes, "
        "or signs the raw token, will see a different state.",
    example='round "a/b"; retry "a\\u002Fb"',
)
def request_state_reencoded(obs: Linked, ctx) -> None:
    """The decoded values are equal but the raw JSON string tokens differ (for example `\\u002F`
    against `/`)."""
    if obs.state == "reencoded":
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} returns round {obs.round.n}'s requestState with the "
            "same value but different JSON escapes",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id,
        )


@rule(
    "request-state-fabricated", ERROR, on=Linked, where={"state": ["fabricated"]}, section="4.2", spec=spec.MRTR_CLIENT,
    conformance="sep-2322-client-no-state-omitted",
    quote="If the InputRequiredResult does not contain a requestState field, the client MUST NOT include one in the retry.",
    summary="A retry carries a requestState although its round issued none.",
    why="State the server never issued is forged input; it can only confuse or attack the server.",
    example='round: {"resultType":"input_required","inputRequests":{…}}; retry with requestState "x"',
)
def request_state_fabricated(obs: Linked, ctx) -> None:
    """A linked retry carries `requestState` although the round it answers had none."""
    if obs.state == "fabricated":
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} carries a requestState, but round {obs.round.n} "
            f"(message #{obs.round.irr_index}) issued none",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id,
        )


@rule(
    "request-state-unsolicited", ERROR, on=NotLinked, where={"reason": ["state-unsolicited"]},
    section="4.2", spec=spec.MRTR_CLIENT,
    summary="A request carries a requestState that matches no input_required result ever seen.",
    why="State exists only to be echoed on the retry it was issued for.",
    example='a first tools/call that already carries requestState "abc"',
)
def request_state_unsolicited(obs: NotLinked, ctx) -> None:
    """`requestState` on an MRTR request that matches no round observed in this capture, on stdio
    and HTTP alike: a live capture sees every peer from its start (RULES.md §10.8). When the
    capture may have missed the round, `capture-incomplete` (info) is reported instead: an HTTP
    capture not declared live (an import) and the peer's first request, an import that left out
    exchanges, or a restart mid-chain (a session following one of the same command or upstream
    that ended with a chain of this method and target open or abandoned)."""
    if obs.reason != "state-unsolicited":
        return
    msg = obs.request
    if obs.capture_incomplete:
        ctx.emit(
            f"{msg.label()} carries a requestState from a round this capture did not see {_unseen(obs)}",
            messages=[msg.index], chain=chain_of(obs), rule_id="capture-incomplete",
        )
        return
    ctx.emit(f"{msg.label()} carries a requestState that no input_required result issued", messages=[msg.index],
             chain=chain_of(obs))  # the chain it starts


# One condition, two ids: what request-state-unsolicited (and input-responses-unsolicited) find is
# reported under this id, at info, when the capture could not have seen the round (it is unconfirmed,
# not a finding of the rule); users filter on the id, so the variant is a rule of its own.
declare(
    "capture-incomplete", INFO, section="0", emitted_by="request-state-unsolicited",
    summary="A finding could not be confirmed because the capture began after the chain it concerns.",
    doc="A retry whose earlier rounds the capture may not have seen (RULES.md §0, tag C; §10.8): an import of a "
        "flow file or HAR, which may have begun after the peer's chain (its first request from each peer), an "
        "exchange an import left out (a body the mitmproxy flow file did not hold), or a restart mid-chain (a "
        "session that follows, in the same capture, a session of the same command or upstream that ended with "
        "an open or abandoned chain of the same method and target). A live capture (the tee, the proxy, the "
        "addon; its recording header says `\"live\": true`) sees every peer from its start: there these requests "
        "are `request-state-unsolicited` and `input-responses-unsolicited`. Rules that need the whole chain "
        "report this instead of an error.",
    why="A passive observer only knows what it saw; this keeps a late start, a hole in an imported capture, or "
        "a server restarted mid-chain from producing false errors.",
)


@rule(
    "mrtr-fields-parallel-misuse", ERROR, on=NotLinked, where={"reason": ["parallel-misuse"]},
    section="4.2", spec=spec.MRTR_CLIENT,
    conformance="sep-2322-client-parallel-isolation",
    quote="They MUST NOT be used for any other request that the client may be sending in parallel.",
    summary="The requestState or inputResponses of one chain appear on another request.",
    why="State and answers belong to one retry; sent elsewhere they leak answers and confuse servers.",
    example="chain c1's requestState sent on tools/list, or on a tools/call of another tool",
)
def mrtr_fields_parallel_misuse(obs: NotLinked, ctx) -> None:
    """A requestState or inputResponses keys issued for chain A appear on a request that is not A's
    retry: another method, another tool, prompt or resource, or a request such as tools/list."""
    if obs.reason != "parallel-misuse":
        return
    rd = obs.round
    msg = obs.request
    where = f"round {rd.n} of chain {rd.chain.id} ({rd.chain.method} {rd.chain.target})" if rd is not None else "another chain"
    ctx.emit(
        f"{msg.label()} carries the requestState or inputResponses of {where}",
        messages=[rd.irr_index, msg.index] if rd is not None else [msg.index],
        chain=rd.chain.id if rd is not None else None,
    )


@rule(
    "mrtr-fields-on-unsupported-method", WARNING, on=NotLinked, where={"reason": ["unsupported-method"]},
    section="4.2", spec=spec.MRTR_SUPPORTED,
    summary="inputResponses or requestState on a method that does not take them.",
    why="Only tools/call, prompts/get and resources/read take InputResponseRequestParams; servers ignore the "
        "fields elsewhere, so the client's intent is lost (the schema contradicts itself, RULES.md §7.2).",
    example='tools/list with params.requestState',
)
def mrtr_fields_on_unsupported_method(obs: NotLinked, ctx) -> None:
    """`inputResponses` or `requestState` in the params of a method other than tools/call,
    prompts/get and resources/read, matching no chain."""
    if obs.reason == "unsupported-method":
        ctx.emit(f"{obs.request.label()} carries MRTR fields (inputResponses or requestState) it does not take",
                 messages=[obs.request.index])


@rule(
    "retry-params-changed", WARNING, on=Linked, where={"params_changed": [True]}, section="4.2", spec=spec.MRTR_CLIENT,
    quote="Client gathers the requested information from the user or other sources, then retries the original request including the additional requested information.",
    summary="A retry tied by requestState changes the request's arguments.",
    why="A retry repeats the original request; servers SHOULD reject state presented on a request that does not match.",
    example='tools/call deploy {"env":"prod"} → input_required; retry with {"env":"staging"} and the state',
)
def retry_params_changed(obs: Linked, ctx) -> None:
    """A retry linked through `requestState` with the same method and target whose parameters
    (without _meta, inputResponses and requestState) differ from the original request's."""
    if obs.via == "state" and obs.params_changed and obs.replay is None:
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} changes the arguments of the original {obs.chain.method}",
            messages=[obs.round.request.index, obs.request.index], chain=obs.chain.id,
        )


class _Answered:
    """What a retry answers against what its round asked, for the four checks of `KEYS`: the
    request's params ({} when they are not an object), its `inputResponses` (None when absent), the
    round's `inputRequests` (its keys: `Round.keys`, without making them a frozenset), and the keys
    answered that the round did not ask (most often none: then the earlier rounds need not be
    looked at)."""

    __slots__ = ("params", "ir", "asked", "unasked")

    def __init__(self, params: dict, ir, asked) -> None:
        self.params, self.ir, self.asked = params, ir, asked
        if type(ir) is not dict or not ir:
            self.unasked: set = set()
        elif not asked:
            self.unasked = set(ir)
        else:
            self.unasked = set() if ir.keys() <= asked.keys() else set(ir).difference(asked)


def _answered(obs: Linked, _state) -> _Answered | None:
    """The update of `KEYS`; None (no check runs) when the retry answers every key its round asked
    and no other: the common case, in which none of the four can find anything."""
    p = obs.request.params
    p = p if type(p) is dict else {}
    ir = p.get("inputResponses")
    asked = obs.round.input_requests
    if type(ir) is dict and asked and ir.keys() == asked.keys():
        return None
    return _Answered(p, ir, asked)


# The checks of a retry's keys are one pass: its update reads the retry's answers and its round's
# questions once (`_Answered`) and hands them to each check. Its checks are registered one after
# the other, so their findings keep their order.
KEYS = Pass("retry-keys", on=Linked, update=_answered)


@KEYS.check(
    "retry-without-input-responses", ERROR, section="4.2", spec=spec.MRTR_CLIENT,
    quote="If a client receives an InputRequiredResult that contains the inputRequests field, the client MUST construct the requested inputs before retrying the original request.",
    summary="A retry of a round that asked for input carries no inputResponses.",
    why="The server asked for input it needs; a retry without it can only be asked again or fail.",
    example='round asks {"confirm": elicitation/create}; retry echoes the state but has no inputResponses',
)
def retry_without_input_responses(obs: Linked, ctx, k: _Answered) -> None:
    """The round had a non-empty `inputRequests`, and the retry has no `inputResponses` at all."""
    if k.asked and "inputResponses" not in k.params:
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} answers round {obs.round.n}, which asked for "
            f"{', '.join(sorted(obs.round.input_requests))}, without inputResponses",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id,
        )


@KEYS.check(
    "input-responses-missing-key", ERROR, section="4.2", spec=spec.MRTR_CLIENT,
    quote="the client MUST construct the requested inputs before retrying the original request.",
    summary="A retry's inputResponses leaves out a key its round asked for.",
    why="The schema says each key of inputRequests must appear in inputResponses; a server missing one "
        "SHOULD ask again, many just fail.",
    example='round asks {"a": …, "b": …}; retry answers only "a"',
)
def input_responses_missing_key(obs: Linked, ctx, k: _Answered) -> None:
    """A key of the round's `inputRequests` is absent from the retry's `inputResponses` (present)."""
    ir, asked = k.ir, k.asked
    if type(ir) is not dict or not asked or asked.keys() <= ir.keys():  # (every key answered: the common case)
        return
    missing = sorted(set(asked) - set(ir))
    if missing:
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} does not answer {', '.join(missing)} of round {obs.round.n}",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id, details={"missing": missing},
        )


def _earlier_keys(obs: Linked) -> set:
    keys: set = set()
    for rd in obs.chain.rounds:
        if rd is obs.round:
            break
        keys |= rd.keys
    return keys


@KEYS.check(
    "input-responses-unknown-key", WARNING, section="4.2", spec=spec.MRTR_INPUT_RESPONSES,
    quote="Keys correspond to the keys in the InputRequests map",
    summary="A retry answers a key no round of its chain asked for.",
    why="The server SHOULD ignore it; a client sending it is answering a question it was not asked.",
    example='round asks {"confirm"}; retry answers {"confirm", "extra"}',
)
def input_responses_unknown_key(obs: Linked, ctx, k: _Answered) -> None:
    """A key in `inputResponses` that is neither in the round's `inputRequests` nor in any earlier
    round of the chain."""
    unasked = k.unasked
    unknown = sorted(unasked - _earlier_keys(obs)) if unasked else None
    if unknown:
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} answers {', '.join(unknown)}, which no round asked for",
            messages=[obs.round.irr_index, obs.request.index], chain=obs.chain.id, details={"unknown": unknown},
        )


@KEYS.check(
    "input-responses-stale-key", INFO, section="4.2", spec=spec.MRTR_INPUT_RESPONSES,
    summary="A retry resends answers to an earlier round of its chain.",
    why="The specification is silent on cumulative answers; the SEP sends only the current round's keys.",
    example='round 1 asks "a", round 2 asks "b"; the second retry answers "a" and "b"',
)
def input_responses_stale_key(obs: Linked, ctx, k: _Answered) -> None:
    """A key in `inputResponses` that belongs to an earlier round of the same chain and not to the
    current one (answers resent cumulatively)."""
    unasked = k.unasked
    stale = sorted(unasked & _earlier_keys(obs)) if unasked else None
    if stale:
        ctx.emit(
            f"retry {obs.request.label()} of chain {obs.chain.id} resends answers to earlier rounds: {', '.join(stale)}",
            messages=[obs.request.index], chain=obs.chain.id,
        )


@rule(
    "input-responses-unsolicited", WARNING, on=NotLinked, where={"reason": ["responses-unsolicited"]},
    section="4.2", spec=spec.MRTR_INPUT_RESPONSES,
    summary="inputResponses on a request that answers no open round.",
    why="Answers to questions never asked; the conformance harness does this on purpose, clients should not.",
    example="a first tools/call that already carries inputResponses",
)
def input_responses_unsolicited(obs: NotLinked, ctx) -> None:
    """`inputResponses` on an MRTR request that links to no open round, on stdio and HTTP alike
    (RULES.md §10.8); `capture-incomplete` (info) when the capture may have missed the round (see
    `request-state-unsolicited`)."""
    if obs.reason != "responses-unsolicited":
        return
    msg = obs.request
    if obs.capture_incomplete:
        ctx.emit(f"{msg.label()} carries inputResponses for a round this capture did not see {_unseen(obs)}",
                 messages=[msg.index], chain=chain_of(obs), rule_id="capture-incomplete")
        return
    ctx.emit(f"{msg.label()} carries inputResponses but answers no open input_required round", messages=[msg.index],
             chain=chain_of(obs))  # the chain it starts


@rule(
    "input-responses-duplicate-key", WARNING, on=Decoded, kinds=[REQUEST], directions=["c2s"], section="4.2",
    spec=spec.MRTR_INPUT_RESPONSES,
    summary="The raw JSON of inputResponses repeats a member name.",
    why="Parsers disagree on which duplicate wins; client, gateway and server may each see another answer.",
    example='"inputResponses": {"a": {"action":"accept"}, "a": {"action":"decline"}}',
)
def input_responses_duplicate_key(obs: Decoded, ctx) -> None:
    """The raw bytes of `params.inputResponses` repeat a member name (seen before parsing)."""
    for d in obs.msg.duplicates:
        if d.path == ("params", "inputResponses"):
            ctx.emit(f"{obs.msg.label()}: inputResponses repeats the key {d.name!r} {d.count} times",
                     messages=[obs.msg.index])


@rule(
    "input-responses-not-object", ERROR, on=Decoded, kinds=[REQUEST], directions=["c2s"], section="4.2",
    spec=spec.MRTR_INPUT_RESPONSES,
    summary="inputResponses is present but not a JSON object.",
    why="InputResponses is a map from the server's keys to answers; anything else cannot be read.",
    example='"inputResponses": null',
)
def input_responses_not_object(obs: Decoded, ctx) -> None:
    """`params.inputResponses` is present and is null, a number, a string or an array."""
    p = obs.msg.params
    if type(p) is dict and "inputResponses" in p and type(p["inputResponses"]) is not dict:
        v = p["inputResponses"]
        ctx.emit(f"{obs.msg.label()}: inputResponses is {json.dumps(v)[:40]}, not an object", messages=[obs.msg.index])


@rule(
    "retry-after-complete", ERROR, on=NotLinked, where={"reason": ["after-complete"]},
    section="4.2", spec=spec.BASE_RESULT_TYPE,
    conformance="sep-2322-default-result-type-complete",
    quote='clients MUST treat an absent resultType as "complete".',
    summary="The client retries a request whose last result was complete (or had no resultType).",
    why="A result without resultType is complete; stray inputRequests on it must not be answered.",
    example='{"result":{"inputRequests":{…},"requestState":"s"}} (no resultType), then a retry with state "s"',
)
def retry_after_complete(obs: NotLinked, ctx) -> None:
    """`inputResponses` or `requestState` on a request that ties to a chain whose last response was
    complete (resultType absent or "complete"), for example one carrying stray inputRequests."""
    if obs.reason == "after-complete":
        c = obs.completed
        ctx.emit(
            f"{obs.request.label()} retries chain {c.id}, whose last result (message #{c.final_index}) was complete",
            messages=[i for i in (c.final_index, obs.request.index) if i is not None], chain=c.id,
        )


