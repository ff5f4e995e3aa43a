"""RULES.md §11: two hops, a gateway in the middle (the first seed's mcpx). What the gateway changed
between the host's chain in front of it and the upstream's chain behind it, judged on the pairs that
`core.hops` tied when the capture ended (`HopsCorrelated`), and the state a gateway binds to a
session, judged on the front chains of a named hop."""

from __future__ import annotations

from ..core.canonical import canonical_json
from ..core.hops import LEGACY_ONLY, HopFact, HopPair, HopsCorrelated
from . import spec
from .registry import ERROR, INFO, WARNING, rule


def _front_pairs(obs: HopsCorrelated) -> list[tuple[HopFact, list[HopPair]]]:
    """Each front chain with the pairs it heads, in the order of the front chains."""
    out: dict[str, tuple[HopFact, list[HopPair]]] = {}
    for p in obs.pairs:
        out.setdefault(p.front.id, (p.front, []))[1].append(p)
    return list(out.values())


def _unanswered(b: HopFact) -> list:
    return [q for q in b.questions if q.answered is None]


def _failed(f: HopFact) -> bool:
    fin = f.final
    return fin is not None and (fin["kind"] == "error" or fin.get("is_error"))


def _ok(f: HopFact) -> bool:
    fin = f.final
    return fin is not None and fin["kind"] == "result" and not fin.get("is_error")


def _label(f: HopFact) -> str:
    return f"{f.id} ({f.hop}: {f.method} {f.target})"


@rule(
    "gateway-answer-not-delivered", ERROR, on=HopsCorrelated, section="11", spec=spec.MRTR_CLIENT,
    quote="the client retries the original request with inputResponses under the same keys",
    summary="The host answered a front round, then the gateway asked again or failed, and the back hop never got "
            "that answer.",
    why="The seed's session binding: the loop continues without waiting, counts a round each time, and after 8 "
        "rounds abandons the upstream call. From the front alone it looks like a server that keeps asking.",
    example="front c1: 8 rounds answered, then -32603; back c2: one elicitation/create, never answered",
)
def gateway_answer_not_delivered(obs: HopsCorrelated, ctx) -> None:
    """A linked front chain whose client answered a round (a retry with `inputResponses`) and which then
    opened another round or ended in an error, while a back chain linked to it still had a question no
    answer reached (a legacy request never answered, or a round never retried). An error that refuses
    the retry's requestState (-32602, "another session") is the state's doing, not a lost answer
    (`gateway-state-binding` judges it)."""
    for f, pairs in _front_pairs(obs):
        answered = [a for a in f.answers if a[3]]
        if not answered:
            continue
        first = answered[0]
        asked_again = any(q.time > first[0] for q in f.questions)
        if not (asked_again or _failed(f)):
            continue
        if not asked_again and f.final is not None and any(r[1] == f.final["index"] for r in f.refused):
            continue  # the retry itself was refused (its state: gateway-state-binding), not an answer lost on the way
        lost = [(p.back, q) for p in pairs for q in _unanswered(p.back)]
        if not lost:
            continue
        back, q = lost[0]
        then = "asked again" if asked_again else "failed"
        ctx.emit(f"the host answered round {first[2]} of {_label(f)} but the gateway {then} ({f.rounds} rounds, "
                 f"{len(answered)} answered), and the back hop's {q.method} in {_label(back)} never received an "
                 "answer: the gateway did not deliver it",
                 messages=[first[1], q.index] + ([f.final["index"]] if f.final else []), chain=f.id,
                 details={"back": back.id, "front_rounds": f.rounds, "front_answers": len(answered),
                          "back_questions": len(back.questions), "back_unanswered": len(_unanswered(back))})


@rule(
    "gateway-rounds-inflated", WARNING, on=HopsCorrelated, section="11", spec=spec.MRTR,
    summary="The front chain has more rounds than the back hop asked questions for its call.",
    why="Each front round costs the user an answer; a gateway that re-asks what the upstream asked once makes "
        "them answer again, and counts toward its own round limit.",
    example="front c1: 8 rounds; back c2: 1 elicitation/create",
)
def gateway_rounds_inflated(obs: HopsCorrelated, ctx) -> None:
    """A front chain with more rounds (its `input_required` results) than the questions of the back chains
    linked to it (legacy server requests, or the keys of their rounds)."""
    for f, pairs in _front_pairs(obs):
        asked = sum(len(p.back.questions) for p in pairs)
        if len(f.chain.rounds) > asked:
            ctx.emit(f"{_label(f)} took {len(f.chain.rounds)} rounds, but the back hop asked {asked} question"
                     f"{'s' if asked != 1 else ''} for it ({', '.join(p.back.id for p in pairs)})",
                     messages=[r.irr_index for r in f.chain.rounds[:8]], chain=f.id,
                     details={"front_rounds": len(f.chain.rounds), "back_questions": asked,
                              "back": [p.back.id for p in pairs]})


def _rich(fin: dict) -> bool:
    return fin.get("structured") or fin.get("blocks") not in ([], ["text"])


def _collapsed(fin: dict) -> bool:
    return not fin.get("structured") and fin.get("blocks") == ["text"]


@rule(
    "gateway-result-collapsed", WARNING, on=HopsCorrelated, section="11", spec=spec.TOOLS_OUTPUT_SCHEMA,
    quote="Servers MUST provide structured results that conform to this schema.",
    summary="The back result had structuredContent or other content blocks; the front result is one text block.",
    why="The seed: a call that went through a question comes back as one text block, and the host loses the "
        "structured answer the upstream gave.",
    example='back: {"content": [{"type": "text"}], "structuredContent": {"number": 7}}; '
            'front: {"content": [{"type": "text"}]}',
)
def gateway_result_collapsed(obs: HopsCorrelated, ctx) -> None:
    """A linked pair whose back chain succeeded with `structuredContent`, or content other than one text
    block, and whose front chain succeeded with one text block and no `structuredContent`; for
    prompts/get, several messages in the back result and one in the front."""
    for p in obs.pairs:
        f, b = p.front, p.back
        if not (_ok(f) and _ok(b)):
            continue
        ff, bf = f.final, b.final
        if f.method == "prompts/get" or b.method == "prompts/get":
            hit = (bf.get("messages") or 0) > 1 and ff.get("messages") == 1
            what = f"{bf.get('messages')} messages became one"
        else:
            hit = _rich(bf) and _collapsed(ff)
            kept = ["structuredContent"] if bf.get("structured") else []
            what = f"the back result's {', '.join(kept + [str(bf.get('blocks'))])} became one text block"
        if hit:
            ctx.emit(f"{_label(f)} ended with one text block where {_label(b)} returned more: {what}",
                     messages=[bf["index"], ff["index"]], chain=f.id, details={"back": b.id})


@rule(
    "gateway-error-masked", WARNING, on=HopsCorrelated, section="11", spec=spec.BASE_ERRORS,
    summary="The back hop failed and the front reports success, or the back hop succeeded and the front reports an "
            "error it never gave.",
    why="A host that is told a failed call worked acts on a result that does not exist; one told a working call "
        "failed retries or gives up on it.",
    example='back: {"error": {"code": -32000}}; front: {"content": [{"type": "text", "text": "ok"}]}',
)
def gateway_error_masked(obs: HopsCorrelated, ctx) -> None:
    """A linked pair whose back chain ended in a JSON-RPC error or `isError: true` and whose front chain
    ended in a result without `isError`; or the reverse: a back success and a front error (a JSON-RPC
    error or `isError`)."""
    for p in obs.pairs:
        f, b = p.front, p.back
        if _failed(b) and _ok(f):
            ctx.emit(f"{_label(b)} failed ({_outcome(b)}) but the gateway answered {_label(f)} with a success",
                     messages=[b.final["index"], f.final["index"]], chain=f.id, details={"back": b.id})
        elif _ok(b) and _failed(f):
            ctx.emit(f"{_label(b)} succeeded but the gateway answered {_label(f)} with an error ({_outcome(f)})",
                     messages=[b.final["index"], f.final["index"]], chain=f.id, details={"back": b.id})


def _outcome(f: HopFact) -> str:
    fin = f.final or {}
    if fin.get("kind") == "error":
        return f"error {fin.get('code')}: {fin.get('message')}"
    return "isError: true" if fin.get("is_error") else "a result"


def _canon(v) -> str:
    return canonical_json(v) if v is not None else ""


@rule(
    "gateway-question-altered", INFO, on=HopsCorrelated, section="11", spec=spec.ELICIT_SCHEMA,
    summary="A front question differs from the back question it passes on, in its message or its requestedSchema "
            "(warning when the schema changed).",
    why="The user answers the question the host shows; when the gateway reworded it or changed the fields, the "
        "answer it delivers is not an answer to what the upstream asked.",
    example="back: requestedSchema {confirm: boolean, required}; front: requestedSchema {ok: boolean}",
)
def gateway_question_altered(obs: HopsCorrelated, ctx) -> None:
    """Each question of a linked front chain against the back question in the same place (the i-th front
    question against the i-th back question, or the last one): a different `message` (info) or
    `requestedSchema` (warning). Members the front era cannot carry (`elicitationId`) are not compared."""
    for f, pairs in _front_pairs(obs):
        back = [q for p in pairs for q in p.back.questions]
        if not back or not f.questions:
            continue
        for i, q in enumerate(f.questions):
            bq = back[min(i, len(back) - 1)]
            if q.method != bq.method:
                continue
            schema = _canon(q.params.get("requestedSchema")) != _canon(bq.params.get("requestedSchema"))
            message = q.params.get("message") != bq.params.get("message")
            if schema or message:
                what = [w for w, c in (("requestedSchema", schema), ("message", message)) if c]
                ctx.emit(f"round {q.round} of {_label(f)} asks {q.key!r} with another {' and '.join(what)} than the "
                         f"back hop's {bq.method} (message {bq.index})",
                         messages=[bq.index, q.index], chain=f.id, severity=WARNING if schema else None,
                         details={"changed": what, "key": q.key})
                break


@rule(
    "gateway-legacy-field-passthrough", WARNING, on=HopsCorrelated, section="11", spec=spec.CHANGELOG,
    quote="Remove the notifications/elicitation/complete notification and the elicitationId field of URL mode",
    summary="A 2025-11-25-only member of a back question reaches a 2026-07-28 front inputRequests unchanged.",
    why="The gateway carried the upstream's old-era field through to a host that cannot use it; "
        "url-elicitation-has-elicitation-id says the front hop has it, this says who put it there.",
    example='back: elicitation/create {"mode": "url", "elicitationId": "el-1"}; front inputRequests: the same',
)
def gateway_legacy_field_passthrough(obs: HopsCorrelated, ctx) -> None:
    """A front question (a key of `inputRequests`) carrying a 2025-11-25-only member (`elicitationId`) with
    the value the linked back question gave it."""
    for f, pairs in _front_pairs(obs):
        back = [q for p in pairs for q in p.back.questions]
        for q in f.questions:
            if q.key is None:
                continue
            for name in LEGACY_ONLY:
                bq = next((bq for bq in back if name in q.params and bq.params.get(name) == q.params[name]), None)
                if bq is not None:
                    ctx.emit(f"round {q.round} of {_label(f)} passes the back hop's {name} "
                             f"{q.params[name]!r} through to the host's inputRequests {q.key!r}",
                             messages=[bq.index, q.index], chain=f.id, details={"member": name, "key": q.key})
                    return


@rule(
    "gateway-state-binding", INFO, on=HopsCorrelated, section="11", spec=spec.MRTR_SECURITY,
    summary="The front requestState was refused on a verbatim echo that differs from an accepted request only in "
            "its session header.",
    why="The seed: the state is bound to an Mcp-Session-Id a 2026-07-28 client does not have; a conformant client "
        "echoing it verbatim is told it belongs to another session.",
    example="tools/call (Mcp-Session-Id s1) → input_required; retry without Mcp-Session-Id → -32602 "
            "\"this requestState belongs to another session\"",
)
def gateway_state_binding(obs: HopsCorrelated, ctx) -> None:
    """A chain of a named hop whose retry echoed its round's requestState verbatim and was refused
    (-32602, or an error message saying the state belongs to another session), where an earlier
    request of the chain that was accepted had another `Mcp-Session-Id` (or had one where the retry had
    none)."""
    for f in obs.facts.values():
        for index, resp, sid, code, text, state in f.refused:
            if state != "echoed":
                continue
            accepted = [s for i, s, ok in f.session_ids if ok and i != index]
            other = next((s for s in accepted if s != sid), False)
            if other is False:
                continue
            ctx.emit(f"{_label(f)}: the retry echoing the requestState verbatim was refused ({code}: {text}); "
                     f"it differs from an accepted request of the chain in its Mcp-Session-Id "
                     f"({other or 'none'} there, {sid or 'none'} here)",
                     messages=[index, resp], chain=f.id, details={"session": sid, "accepted_session": other})
            break


@rule(
    "hop-link-ambiguous", INFO, on=HopsCorrelated, section="11", spec=spec.MRTR,
    summary="A back-hop chain could have been caused by several front chains on equal evidence; it was not linked.",
    why="Two identical calls in flight at once cannot be told apart from outside the gateway; a guessed link "
        "would put one call's findings on the other.",
    example="two front tools/call deploy {} at once; one back tools/call deploy {} inside both",
)
def hop_link_ambiguous(obs: HopsCorrelated, ctx) -> None:
    """A back chain left unlinked: several front chains tie on the strongest evidence (and on the
    question's text, and on having no back chain yet)."""
    for a in obs.ambiguous:
        ctx.emit(f"{_label(a.back)} could belong to {', '.join(f.id for f in a.fronts)} (evidence {a.link}); "
                 "not linked", messages=[a.back.chain.requests[0].index], chain=a.back.id,
                 details={"fronts": [f.id for f in a.fronts], "link": a.link})
