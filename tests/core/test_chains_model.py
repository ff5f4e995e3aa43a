"""Stitching against a model: random well-behaved conversations of several concurrent chains,
interleaved at random, on stdio and HTTP. Each chain's calls carry their own arguments, or all share
the same arguments and every round carries its own state; either way the stitcher must find exactly
the chains the conversation was made of: their requests, rounds, outcome and link evidence."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from tests.core.strategies import FUZZ
from tests.traffic import ACCEPT, CAPS_ALL, ELICIT, Traffic

OUTCOMES = ("complete", "error", "task", "abandoned", "cancelled", "open")
CAPS = {**CAPS_ALL, "extensions": {"io.modelcontextprotocol/tasks": {}}}  # so a task result is allowed


@dataclass
class Plan:
    rounds: list[tuple[tuple[str, ...], bool]]  # per round: the keys asked, whether it carries a state
    outcome: str


plans = st.builds(
    Plan,
    st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=2).map(tuple), st.booleans())
             .filter(lambda r: r[0] or r[1]), max_size=3),  # a round asks something or carries a state
    st.sampled_from(OUTCOMES),
)


def steps(n: int, plan: Plan) -> list[tuple]:
    """Chain n's steps in order: ("call", round answered or None), ("irr", round), ("end", outcome)."""
    out: list[tuple] = [("call", None)]
    for i in range(len(plan.rounds)):
        out += [("irr", i), ("call", i)]
    if plan.outcome == "abandoned":
        return out[:-1] if plan.rounds else out + [("end", "open")]  # no round to abandon: left in flight
    return out + [("end", plan.outcome)]


def expected(plan: Plan) -> tuple:
    outcome = plan.outcome if plan.rounds or plan.outcome != "abandoned" else "open"
    vias = ["state" if state else "keys" for _, state in plan.rounds]
    if outcome == "abandoned":
        vias = vias[:-1]
    link = "keys" if "keys" in vias else ("state" if vias else None)
    return len(plan.rounds), outcome, link


@FUZZ
@given(st.data(), st.lists(plans, min_size=1, max_size=4), st.sampled_from(["stdio", "http"]), st.booleans())
def test_interleaved_conversations_are_stitched_as_they_were_made(data, chain_plans, transport, shared):
    if shared:  # the same arguments everywhere: only the states tell the chains apart
        chain_plans = [Plan([(keys, True) for keys, _ in p.rounds], p.outcome) for p in chain_plans]
    t = Traffic(transport)
    todo = {n: steps(n, p) for n, p in enumerate(chain_plans)}
    order = data.draw(st.permutations([n for n, s in todo.items() for _ in s]))
    ids: dict[int, list] = {n: [] for n in todo}
    for n in order:
        kind, arg = todo[n].pop(0)
        plan = chain_plans[n]
        args = {} if shared else {"chain": n}
        if kind == "call":
            extra = {}
            if arg is not None:
                keys, state = plan.rounds[arg]
                extra["inputResponses"] = {k: ACCEPT for k in keys}
                if state:
                    extra["requestState"] = f"state-{n}-{arg}"
            t.tick(0.5)
            ids[n].append(t.call("tools/call", {"name": "deploy", "arguments": args, **extra}, caps=CAPS))
        elif kind == "irr":
            keys, state = plan.rounds[arg]
            t.irr(ids[n][-1], {k: ELICIT for k in keys} if keys else None, state=f"state-{n}-{arg}" if state else None)
        elif arg == "complete":
            t.result(ids[n][-1], {"content": []})
        elif arg == "error":
            t.error(ids[n][-1], -32603, "failed")
        elif arg == "task":
            t.result(ids[n][-1], {"task": {"taskId": f"t{n}"}}, result_type="task")
        elif arg == "cancelled" and transport == "stdio":
            t.notify("notifications/cancelled", {"requestId": ids[n][-1]})
        elif arg == "cancelled":
            t.respond_sse(t._x_of_id.pop(str(ids[n][-1])), [], end_error="client-disconnected")
    r = t.run()

    assert not [f for f in r.findings if f.rule == "inspector-error"]
    assert len(r.chains) == len(chain_plans)
    by_first = {c["requests"][0]: c for c in r.chains}
    for n, plan in enumerate(chain_plans):
        c = by_first[ids[n][0]]
        assert c["requests"] == ids[n]
        assert (c["rounds"], c["outcome"], c["link"]) == expected(plan), (n, plan)
        assert c["target"] == "deploy"
    assert not r.errors(), [f.message for f in r.errors()]
