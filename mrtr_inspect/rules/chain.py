"""RULES.md §4.4: chain semantics (tracker events and cross-chain rules), and what the first
seed's gateway shows (RULES.md §10.5): a result collapsed to text, a server giving up after rounds,
a server rejecting its own state."""

from __future__ import annotations

import re

from ..core.findings import plural
from ..core.messages import ERROR as ERROR_KIND
from ..core.messages import target_of
from ..core.observations import Answered, ChainClosed, Linked, NotLinked, RoundOpened
from ..core.events import S2C
from ..core.vocabulary import Outcome
from . import spec
from .common import answered, chain_of
from .registry import ERROR, INFO, OTHER_RESULT, WARNING, rule


@rule(
    "tool-result-missing-structured-content", ERROR, on=Answered, kinds=[OTHER_RESULT], directions=["s2c"],
    methods=["tools/call"],
    section="4.4", spec=spec.TOOLS_OUTPUT_SCHEMA,
    quote="Servers MUST provide structured results that conform to this schema.",
    summary="A tools/call result has no structuredContent though the tool declared an outputSchema.",
    why="What a gateway that collapses every result to one text block shows on the wire: the client loses the "
        "structured answer its tool definition promised.",
    example='tools/list: {"name": "weather", "outputSchema": {…}}; '
            'tools/call weather → {"content": [{"type": "text", …}]}',
)
def tool_result_missing_structured_content(obs: Answered, ctx) -> None:
    """A server's complete, non-error result to tools/call (any era) that has no
    `structuredContent`, for a tool whose `outputSchema` this capture saw in an earlier tools/list.
    Results with `isError: true`, input_required and task results are not judged."""
    r = obs.response.result
    if obs.response.direction != S2C or type(r) is not dict or "structuredContent" in r or r.get("isError") is True:
        return
    if r.get("resultType", "complete") != "complete":
        return
    params = obs.request.params if obs.request is not None and type(obs.request.params) is dict else {}
    tool = ctx.knowledge.tool(obs.response.session, params.get("name"))
    if tool is not None and "outputSchema" in tool:
        ctx.emit(f"{answered(obs)} has no structuredContent, but tool {params['name']!r} declared an outputSchema "
                 "in tools/list; servers MUST provide structured results that conform to it",
                 messages=[obs.request.index, obs.response.index], chain=chain_of(obs))


@rule(
    "chain-linked", INFO, on=Linked, section="4.4", spec=spec.MRTR,
    summary="A retry was tied to the round it answers.",
    why="The event behind every stitched chain: shows how (state, keys or params) and after how long.",
    example="tools/call id 3 linked to round 1 of c1 via state after 4.2 s",
)
def chain_linked(obs: Linked, ctx) -> None:
    """A retry was linked to its round; carries the chain, the round, the link method and the time
    the user took to answer."""
    req, rd, c, via = obs.request, obs.round, obs.chain, obs.via
    ms = (req.time - rd.irr_time) * 1000
    # (a finding of every retry: the retry's label, `Message.label` of a request, written out, its id by
    # repr, which `format_id` is for every JSON value; the ms rounded by the float's own __round__,
    # which round() looks up and calls)
    ctx.emit(
        f"{req.method} id={req.id!r} continues chain {c.id} ({c.method} {c.target}) after round "
        f"{rd.n}, linked via {via}, {ms:.0f} ms after the input_required",
        messages=[rd.irr_index, req.index], chain=c.id,
        details={"round": rd.n, "link_method": via, "elapsed_ms": ms.__round__(3)},
    )


@rule(
    "chain-ambiguous-link", INFO, on=Linked, where={"ambiguous": [True]}, section="4.4", spec=spec.MRTR,
    summary="Several open rounds could take a retry; the tie was broken by recency and order.",
    why="Two identical calls in flight at once cannot be told apart by a passive observer.",
    example="two tools/call deploy {} both waiting; one retry echoing neither state",
)
def chain_ambiguous_link(obs: Linked, ctx) -> None:
    """More than one candidate round survived the tie-breakers of RULES.md §3 except the last one
    (the lowest chain number)."""
    if obs.ambiguous:
        ctx.emit(f"{obs.request.label()} could continue more than one chain; linked to {obs.chain.id} by recency",
                 messages=[obs.request.index], chain=obs.chain.id)


@rule(
    "chain-forked", WARNING, on=Linked, where={"forked": [True]}, section="4.4", spec=spec.MRTR_CLIENT,
    summary="Two retries answer the same round while the first is still in flight.",
    why="The specification speaks of the retry in the singular; two retries run the operation twice.",
    example="round 1 of c1; retries id 3 and id 4 both sent before either is answered",
)
def chain_forked(obs: Linked, ctx) -> None:
    """Two retries link to the same round while the first is still unanswered."""
    if obs.forked:
        first = obs.round.retries[0]
        ctx.emit(
            f"{obs.request.label()} answers round {obs.round.n} of chain {obs.chain.id} again while retry id {first.id} "
            "is still in flight", messages=[first.index, obs.request.index], chain=obs.chain.id,
        )


@rule(
    "request-state-replayed", ERROR, on=Linked, section="4.4", spec=spec.MRTR_CLIENT,
    quote="Both the inputRequests and requestState fields affect only the client's retry of the original request.",
    summary="A requestState whose round was already consumed by an answered retry is presented again.",
    why="A replayed state can repeat an operation (a second deployment, a second payment). Reported as info "
        "when the earlier retry failed or got no response: re-issuing is then expected.",
    example="round 1 → retry id 3 → complete; later another retry with round 1's state",
)
def request_state_replayed(obs: Linked, ctx) -> None:
    """A requestState is presented again after its round's retry received a response. Info when
    that response was a JSON-RPC error or the retry's stream broke with no response."""
    if obs.replay is None:
        return
    first = obs.round.retries[0]
    if obs.replay == "answered":
        ctx.emit(f"{obs.request.label()} presents round {obs.round.n}'s requestState again; retry id {first.id} already "
                 "consumed it and was answered", messages=[first.index, obs.request.index], chain=obs.chain.id)
    else:
        why = "was answered with an error" if obs.replay == "errored" else "got no response"
        ctx.emit(f"{obs.request.label()} presents round {obs.round.n}'s requestState again after retry id {first.id} {why}",
                 messages=[first.index, obs.request.index], chain=obs.chain.id, severity=INFO)


def _non_error(obs: Answered) -> bool:
    return obs.response.kind != ERROR_KIND


def _state_in_question(obs) -> bool:
    """What the four checks of what a server accepted on a retry's state can find something in: a
    retry whose link is altered, replayed after an answer, from another principal or with changed
    params, or a request of no link that carries a requestState (one `NotLinked` as parallel-misuse
    remembered for server-accepted-state-on-other-request; a `NotLinked` itself always passes). The
    answer to an ordinary retry, or to a first request, is none of these: the gate spares it the four
    calls (each check still tests its own condition)."""
    if type(obs) is NotLinked:
        return True
    creq = obs.creq
    link = creq.link if creq is not None else None
    if link is not None:
        return link.state == "altered" or link.replay == "answered" or link.cross_principal or link.params_changed
    p = obs.request.params if obs.request is not None else None
    return type(p) is dict and "requestState" in p


@rule(
    "server-accepted-altered-state", WARNING, on=Answered, kinds=["result"], section="4.4", spec=spec.MRTR_SERVER,
    gate=_state_in_question,
    conformance="sep-2322-reject-tampered-state",
    quote="servers MUST protect its integrity (e.g. HMAC or AEAD) and MUST reject state that fails verification.",
    summary="The server accepted a retry whose requestState was altered from the one it issued.",
    why="Accepting tampered state means the server trusts attacker-controlled input (a warning: the spec "
        "allows unprotected state when tampering can do no harm).",
    example="retry with requestState + \"-TAMPERED\" answered with resultType complete",
)
def server_accepted_altered_state(obs: Answered, ctx) -> None:
    """After `request-state-altered`, the server returns a result (complete or another
    input_required) instead of an error. RULES.md §4.4 also names a fabricated and a replayed
    state; §10.6 (decided after review) narrows it to a state that differs from one the server
    itself issued in the chain: a fabricated state on a chain whose server issued none is
    `request-state-fabricated` alone, and a replay echoes the issued state verbatim (integrity
    protection cannot refuse it), which `request-state-replayed` reports."""
    creq = obs.creq
    link = creq.link if creq is not None else None
    if link is None or link.state != "altered" or not link.round.had_state:
        return
    ctx.emit(f"the server accepted an altered requestState on {link.request.label()} of chain {link.chain.id}",
             messages=[link.request.index, obs.response.index], chain=link.chain.id)


@rule(
    "server-accepted-replayed-state", WARNING, on=Answered, kinds=["result"], section="4.4", spec=spec.MRTR_SERVER,
    gate=_state_in_question,
    quote="Servers for which a given requestState must be consumed at most once (e.g., one-time redemptions) MUST "
          "enforce that invariant server-side.",
    summary="The server accepted a requestState presented again after a retry that carried it was answered.",
    why="A state the server takes twice is not consumed once: a replayed retry can repeat the operation (a second "
        "deployment, a second payment). A warning: whether the server needs single use is not on the wire.",
    example="round 1 → retry id 3 → complete; retry id 4 with round 1's state again → complete",
)
def server_accepted_replayed_state(obs: Answered, ctx) -> None:
    """After `request-state-replayed` at error (the state of a round presented again although a
    retry that carried it was answered with a result), the server answers the replay with a result
    (complete, or another input_required) instead of an error. A replay after the earlier retry
    failed or got no response is the re-issue the changelog asks for, and its acceptance is not
    judged. The state is one the server issued, so this is not `server-accepted-altered-state`
    (RULES.md §10.6, §10.9)."""
    creq = obs.creq
    link = creq.link if creq is not None else None
    if link is None or link.replay != "answered":
        return
    first = link.round.retries[0]
    ctx.emit(f"the server accepted round {link.round.n}'s requestState again on {link.request.label()}, after retry "
             f"id {first.id} had consumed it; a state that must be consumed at most once MUST be refused the second time",
             messages=[first.index, link.request.index, obs.response.index], chain=link.chain.id)


@rule(
    "server-accepted-state-on-other-request", WARNING, on=(NotLinked, Answered), section="4.4", spec=spec.MRTR_SERVER,
    gate=_state_in_question,
    quote="an identifier for the originating request, e.g. the method name and a digest of its salient parameters, rejecting state presented on a request that does not match.",
    summary="The server completed a request carrying state issued for another request.",
    why="State not bound to its request can be moved to another call: the first seed's gateway accepted one "
        "tools/call's state on another.",
    example="state from tools/call deploy {\"env\":\"staging\"} accepted on tools/call deploy {\"env\":\"prod\"}",
)
def server_accepted_state_on_other_request(obs, ctx) -> None:
    """The server answers with a result a request whose `requestState` was issued for a different
    method, target or arguments."""
    mem = ctx.mem
    if type(obs) is NotLinked:
        if obs.reason == "parallel-misuse" and obs.round is not None and obs.round.state is not None:
            p = obs.request.params if type(obs.request.params) is dict else {}
            if p.get("requestState") == obs.round.state:
                mem[obs.request.index] = obs.round
        return
    req = obs.request
    if req is None:
        return
    rd = mem.pop(req.index, None)
    link = obs.creq.link if obs.creq is not None else None
    if rd is None and link is not None and link.via == "state" and link.params_changed and link.state in ("echoed", "reencoded"):
        rd = link.round
    if rd is not None and _non_error(obs):
        same_target = (req.method, target_of(req.method, req.params)) == (rd.chain.method, rd.chain.target)
        ctx.emit(
            f"the server answered {req.label()} with a result although its requestState was issued for "
            f"{rd.chain.method} {rd.chain.target}{' with other arguments' if same_target else ''} "
            f"(round {rd.n} of chain {rd.chain.id})",
            messages=[rd.irr_index, req.index, obs.response.index], chain=rd.chain.id,
        )


@rule(
    "server-accepted-state-other-principal", WARNING, on=Answered, kinds=["result"], section="4.4",
    gate=_state_in_question,
    spec=spec.MRTR_SERVER,
    quote="the authenticated principal, rejecting state presented by a different principal.",
    summary="State issued to one principal was accepted from another.",
    why="State not bound to its principal lets one user resume another's request.",
    example="state issued under Authorization A, retried under Authorization B, answered complete",
)
def server_accepted_state_other_principal(obs: Answered, ctx) -> None:
    """The server answers with a result a retry whose `requestState` was issued to another peer
    (Authorization, or address and clientInfo; RULES.md §10.4)."""
    link = obs.creq.link if obs.creq is not None else None
    if link is not None and link.cross_principal and link.via == "state":
        ctx.emit(f"the server accepted round {link.round.n}'s requestState of chain {link.chain.id} from another principal",
                 messages=[link.round.irr_index, link.request.index, obs.response.index], chain=link.chain.id)


@rule(
    "chain-repeat-prompt", INFO, on=RoundOpened, section="4.4", spec=spec.MRTR_SERVER,
    quote="Servers MAY choose to return an InputRequiredResult on multiple attempts at the same request",
    summary="The server asks again exactly what the client just answered.",
    why="Allowed; but a loop of identical prompts is how a server that loses the answers looks on the wire.",
    example="round 2 asks {\"confirm\": …} identical to round 1, after a retry that answered confirm",
)
def chain_repeat_prompt(obs: RoundOpened, ctx) -> None:
    """A retry that answered every key of the previous round is answered with an input_required
    whose inputRequests are identical to the previous round's."""
    prev = obs.previous
    if prev is None or not prev.input_requests or obs.round.input_requests != prev.input_requests:
        return
    retry = obs.round.request
    p = retry.answered_summary or {}
    if set(prev.input_requests) <= set(p):
        ctx.emit(f"round {obs.round.n} of chain {obs.chain.id} asks again exactly what round {prev.n} asked and the "
                 "client answered", messages=[prev.irr_index, obs.round.irr_index], chain=obs.chain.id)


@rule(
    "chain-key-reused-different-request", INFO, on=RoundOpened, section="4.4", spec=spec.MRTR_SERVER,
    summary="A later round reuses an inputRequests key for a different question.",
    why="Keys are unique per request; reusing one for another question can make a client resend a stale answer.",
    example="round 1 {\"q\": \"name?\"}, round 2 {\"q\": \"age?\"}",
)
def chain_key_reused_different_request(obs: RoundOpened, ctx) -> None:
    """A key of this round's inputRequests was used by an earlier round of the chain for a
    different payload."""
    now = obs.round.input_requests or {}
    for rd in obs.chain.rounds[:-1]:
        for k, v in (rd.input_requests or {}).items():
            if k in now and now[k] != v:
                ctx.emit(f"round {obs.round.n} of chain {obs.chain.id} reuses key {k!r} of round {rd.n} for a different request",
                         messages=[rd.irr_index, obs.round.irr_index], chain=obs.chain.id)
                return


@rule(
    "chain-abandoned", INFO, on=ChainClosed, where={"chain.outcome": [Outcome.ABANDONED]}, section="4.4", spec=spec.MRTR_SERVER,
    quote="Servers MUST NOT assume that clients will fulfill the inputRequests or retry the original request.",
    summary="An input_required round was never answered.",
    why="Clients may walk away; servers must cope. A chain that stops here often shows a client that could "
        "not handle the input request.",
    example="tools/call → input_required; the capture ends with no retry",
)
def chain_abandoned(obs: ChainClosed, ctx) -> None:
    """An open round got no retry before the idle timeout or the end of the capture."""
    c = obs.chain
    if c.outcome == Outcome.ABANDONED and c.rounds:
        rd = c.rounds[-1]
        ctx.emit(f"chain {c.id} ({c.method} {c.target}) was abandoned after round {rd.n}: no retry came",
                 messages=[rd.irr_index], chain=c.id, time=c.end)


@rule(
    "chain-cancelled", INFO, on=ChainClosed, where={"chain.outcome": [Outcome.CANCELLED]}, section="4.4", spec=spec.STDIO_CANCEL,
    summary="The client cancelled a chain (notifications/cancelled, or closing the HTTP response).",
    why="Shows where a logical request ended and why.",
    example="notifications/cancelled {requestId: 3} while round 2's retry is in flight",
)
def chain_cancelled(obs: ChainClosed, ctx) -> None:
    """stdio: `notifications/cancelled` for the chain's in-flight request; HTTP: the client closed
    the response before its final message."""
    c = obs.chain
    if c.outcome == Outcome.CANCELLED:
        last = c.requests[-1]
        ctx.emit(f"chain {c.id} ({c.method} {c.target}) was cancelled while request id {last.id} was in flight",
                 messages=[last.index], chain=c.id, time=c.end)


@rule(
    "chain-ended-error", INFO, on=ChainClosed, where={"chain.outcome": [Outcome.ERROR]}, section="4.4", spec=spec.BASE_ERRORS,
    summary="A chain ended in a JSON-RPC error.",
    why="The error code tells why: -32602 after an altered state is the expected rejection.",
    example="retry → {\"error\":{\"code\":-32602,\"message\":\"Invalid or expired requestState\"}}",
)
def chain_ended_error(obs: ChainClosed, ctx) -> None:
    """The terminal response of the chain is a JSON-RPC error; the code is recorded."""
    c = obs.chain
    if c.outcome == "error":
        if c.error_code is not None:
            how = f"ended in error {c.error_code}"
        elif c.transport == "stdio":
            how = "ended with no JSON-RPC response (the server process exited before answering)"
        else:
            how = ("ended with no JSON-RPC response (its HTTP exchange ended without one: the upstream failed, or "
                   "the body held none)")
        ctx.emit(f"chain {c.id} ({c.method} {c.target}) {how} after {plural(len(c.rounds), 'round')}",
                 messages=[c.final_index] if c.final_index is not None else [c.requests[-1].index],
                 chain=c.id, time=c.end, details={"code": c.error_code})


@rule(
    "chain-task-handoff", INFO, on=ChainClosed, where={"chain.outcome": [Outcome.TASK]}, section="4.4", spec=spec.MRTR,
    summary="A round was answered with resultType task: the chain continues as a task.",
    why="From here input goes through tasks/get and tasks/update, not retries.",
    example='retry → {"resultType":"task","taskId":"t1"}',
)
def chain_task_handoff(obs: ChainClosed, ctx) -> None:
    """A request of the chain was answered with `resultType: "task"`; the MRTR phase ends."""
    c = obs.chain
    if c.outcome == "task":
        ctx.emit(f"chain {c.id} ({c.method} {c.target}) was handed off to a task", chain=c.id, time=c.end,
                 messages=[c.final_index] if c.final_index is not None else [])


@rule(
    "chain-long", INFO, on=RoundOpened, section="4.4", spec=spec.MRTR_SERVER,
    summary="A chain has more rounds than the configured limit (chain_long_rounds, default 10).",
    why="The spec sets no maximum; clients do (the Python SDK gives up after 10). Long chains hit client limits.",
    example="an 11th input_required in one chain",
)
def chain_long(obs: RoundOpened, ctx) -> None:
    """The number of rounds of a chain passes `chain_long_rounds` (reported once per chain)."""
    if obs.round.n == ctx.config.chain_long_rounds + 1:
        ctx.emit(f"chain {obs.chain.id} ({obs.chain.method} {obs.chain.target}) has passed "
                 f"{ctx.config.chain_long_rounds} rounds", messages=[obs.round.irr_index], chain=obs.chain.id)


@rule(
    "possible-retry-state-dropped", INFO, on=NotLinked, where={"reason": ["possible-state-dropped"]},
    section="4.4", spec=spec.MRTR_CLIENT,
    summary="A fresh call repeats a request whose round asked only to retry with its state.",
    why="Either a new call (allowed) or a retry that dropped its state; a passive observer cannot tell.",
    example='round: {"resultType":"input_required","requestState":"s"}; then the same tools/call with no state',
)
def possible_retry_state_dropped(obs: NotLinked, ctx) -> None:
    """A request with the same method, target and arguments as an open state-only round (no
    inputRequests), carrying no requestState: not linked, reported as ambiguous."""
    if obs.reason == "possible-state-dropped" and obs.round is not None:
        ctx.emit(f"{obs.request.label()} repeats the request of chain {obs.round.chain.id}, whose round {obs.round.n} "
                 "asked only for a retry with its requestState; it carries none, so it starts a new chain",
                 messages=[obs.round.irr_index, obs.request.index], chain=obs.round.chain.id)


# --- RULES.md §10.5: the first seed's gateway --------------------------------------------------------


@rule(
    "server-gave-up-after-rounds", WARNING, on=ChainClosed, where={"chain.outcome": [Outcome.ERROR]}, section="4.4", spec=spec.MRTR_ERRORS,
    quote="the server SHOULD respond with a new InputRequiredResult requesting the missing information again, rather than returning an error.",
    summary="The server asked, was answered in every round, and then failed with an error.",
    why="A gateway that loses the answers (state bound to a session the client does not have) asks round "
        "after round and finally errors: \"still asking for input after 8 rounds\".",
    example="8 rounds each fully answered, then -32603 \"tools/call was still asking for input after 8 rounds\"",
)
def server_gave_up_after_rounds(obs: ChainClosed, ctx) -> None:
    """A chain ends in a JSON-RPC error after two or more input_required rounds in each of which the
    client answered every requested key."""
    c = obs.chain
    if c.outcome != "error" or len(c.rounds) < 2:
        return
    for rd in c.rounds:
        if not rd.retries:
            return
        answered = rd.retries[-1].answered_summary or {}
        if rd.input_requests and not set(rd.input_requests) <= set(answered):
            return
    ctx.emit(f"chain {c.id} ({c.method} {c.target}) ended in error {c.error_code} after {len(c.rounds)} rounds, each "
             "of them fully answered by the client", messages=[c.final_index] if c.final_index is not None else [],
             chain=c.id, time=c.end)


_ABOUT_ANSWERS = ("inputresponses", "input response", "answer", "elicit", "confirm")
# what an error that turns the state away says; or it is -32602, invalid params, the params being as before
_ABOUT_STATE = ("state", "session", "expir", "signature", "tamper", "integrity", "verif", "principal", "replay",
                "stale")


@rule(
    "server-rejected-own-state", WARNING, on=Answered, kinds=["error"], section="4.4", spec=spec.MRTR_SERVER,
    summary="The server rejected a requestState it issued itself, echoed verbatim on the matching retry.",
    why="The state was bound to something the client does not carry in 2026-07-28, such as a session header: "
        "\"this requestState belongs to another session\".",
    example='retry with the exact state → {"error":{"code":-32602,"message":"this requestState belongs to another session"}}',
)
def server_rejected_own_state(obs: Answered, ctx) -> None:
    """The client echoed the previous round's requestState verbatim, from the same peer, on a retry
    that matches the chain, and the server answered with an error that does not concern the answers
    (its message names no inputResponses key, as a word, and no answer) but turns the request away:
    its code is -32602 (invalid params, when the params are those of the round), or its message
    speaks of the state, the session, expiry, a signature or integrity, the principal, a replay.
    An error that is neither (a backend that failed after the answer: "upstream failed", -32603) is
    no rejection of the state: `chain-ended-error` tells it."""
    link = obs.creq.link if obs.creq is not None else None
    if link is None or link.via != "state" or link.state not in ("echoed", "reencoded"):
        return
    if link.cross_principal or link.params_changed or link.replay is not None:
        return
    err = obs.response.error if type(obs.response.error) is dict else {}
    text = f"{err.get('message', '')} {err.get('data', '')}".lower()
    if err.get("code") != -32602 and not any(w in text for w in _ABOUT_STATE):
        return
    if any(w in text for w in _ABOUT_ANSWERS) or any(
            k and re.search(rf"(?<![\w-]){re.escape(k.lower())}(?![\w-])", text) for k in (link.round.input_requests or {})):
        return
    ctx.emit(
        f"the server rejected {link.request.label()} of chain {link.chain.id} with error {err.get('code')} "
        f"({str(err.get('message', ''))[:80]!r}) although it echoed round {link.round.n}'s requestState verbatim",
        messages=[link.round.irr_index, link.request.index, obs.response.index], chain=link.chain.id,
    )


