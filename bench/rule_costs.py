"""Where the rules' instructions go: per observation kind, the whole dispatch and each entry of its plan.

Analyses a recording once (bench/gen_recording.py makes one), keeps up to 400 observations of each
kind (a `Decoded` request or result, an `Answered` by its resultType, `Linked`, `RoundOpened`,
`ChainClosed`), then, under callgrind, dispatches them again: the whole dispatch of each kind, then
the plan's entries cumulatively (the first entry, the first two, ...), so an entry's figure is what
it adds after the entries before it ran on the same observation (the views the rules share are
built by the first that asks). A pass's entry is then taken apart the same way: its update (the
state looked up), then its checks cumulatively, each after the plan's entries before the pass. Counted only inside `functools.reduce` (callgrind's
`--toggle-collect`), one dump per measurement: the instructions per observation, less nothing (the
reduce and its lambda cost about 0.9k each).

The observations are dispatched after the run, in a row of their kind: what a rule keeps of the
last message it took apart is then of another message (an `Answered` complete result to a retry
takes the retry's answers apart again: about 30k that `check` does not pay), and what is shared by
equal values (`AskFacts`) is warm.

    python bench/rule_costs.py [--recording PATH] [--messages 5003] [--kinds Linked,Answered:input_required]
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("Answered:input_required", "Linked", "Answered:complete", "Decoded:result", "Decoded:request", "RoundOpened",
         "ChainClosed")
KEPT = 400


def _child(recording: str, kinds: list[str], labels_path: str) -> None:
    """In the process callgrind counts: analyse, keep observations, dispatch them again in reduce()."""
    import collections
    import functools
    import gc

    sys.path.insert(0, str(ROOT))
    from mrtr_inspect.adapters.offline import analyze_all
    from mrtr_inspect.config import Config
    from mrtr_inspect.core.observations import Answered, Decoded
    from mrtr_inspect.rules import load_rules
    from mrtr_inspect.rules import registry as R

    load_rules()
    caught: dict = collections.defaultdict(list)
    engines: list = []
    dispatch = R.RuleEngine.dispatch

    def kind_of(o) -> str:
        k = type(o).__name__
        if type(o) is Answered:
            r = o.response.result
            k += ":" + (str(r.get("resultType")) if type(r) is dict else o.response.kind)
            if o.request is not None and o.request.method != "tools/call":
                k += ":other"
        elif type(o) is Decoded:
            k += ":" + o.msg.kind + ("" if o.msg.method in (None, "tools/call") else ":other")
        return k

    def keep(self, o):
        if self not in engines:
            engines.append(self)
        k = kind_of(o)
        if k in kinds and len(caught[k]) < KEPT:
            caught[k].append(o)
        return dispatch(self, o)

    R.RuleEngine.dispatch = keep
    analyze_all([recording], lambda outs: None, Config())
    R.RuleEngine.dispatch = dispatch
    e = engines[0]
    labels: list = []

    def measure(label: str, fn, items: list) -> None:
        labels.append((label, len(items)))
        functools.reduce(lambda _, o: fn(o), items, None)
        e.findings.clear()

    gc.disable()
    for k in kinds:
        obs = caught[k]
        if not obs:
            continue
        measure(f"{k}: dispatch", e.dispatch, obs)
        o0, t = obs[0], type(obs[0])
        if t is Decoded or t is Answered:
            m = o0.msg if t is Decoded else o0.response
            kind = m.kind
            if t is Answered and kind == "result" and type(m.result) is dict:
                rt = m.result.get("resultType")
                kind = rt if rt in ("input_required", "task") else kind
            method = m.method if t is Decoded else (o0.request.method if o0.request is not None else None)
            plan = e._cache[(t, kind, method if method in e._method_filtered else None, m.direction, m.transport,
                             m.era)]
        else:
            plan = e._plain.get(t) or e._keyed_plan(t, o0)
        for i, (_, ctx) in enumerate(plan):
            name = f"the {ctx._rule.id} pass" if isinstance(ctx, R._PassPlan) else ctx._rule.id

            def run(o, prefix=plan[:i + 1]):
                for check, c in prefix:
                    check(o, c)

            measure(f"{k}:   {name}", run, obs)
            if isinstance(ctx, R._PassPlan):
                _pass_entries(e, k, plan[:i], ctx, obs, measure)
    with open(labels_path, "w") as f:
        for label, n in labels:
            f.write(f"{n}\t{label}\n")


def _pass_entries(e, k: str, before: tuple, pp, obs: list, measure) -> None:
    """A pass's own entries, cumulatively after the plan's entries before it: its update (with the
    state looked up), then its checks one by one (those the gates of the first observation choose:
    a check the gates leave out of some observations is counted on those where it runs)."""
    from mrtr_inspect.rules import registry as R

    run = e._passes[next(p for p in e._passes if p.unit is pp._rule)]
    update = run.p.update.fn if pp.update and run.p.update is not None else None

    def state(o):
        for check, c in before:
            check(o, c)
        if run.states is None:
            st = run.shared
        else:
            st = run.states.get(R._session_of(o))
            if st is None:
                st = run.states[R._session_of(o)] = run.p.state(run.ctx)
        return update(o, st) if update is not None else st

    if update is not None:
        measure(f"{k}:     (update)", state, obs)
    args = (obs[0], state(obs[0])) if run.p.gates_read_state else (obs[0],)  # (a gate of the state: after update)
    checks = pp.checks if not pp.gates else pp.pick(tuple(bool(g(*args)) for g in pp.gates)
                                                     if len(pp.gates) > 1 else bool(pp.gates[0](*args)))
    for j, (fn, c) in enumerate(checks):
        def part(o, prefix=checks[:j + 1]):
            st = state(o)
            if st is None:
                return
            for f, cc in prefix:
                f(o, cc, st)

        name = c._rule.id if c._rule.section != "pass" else getattr(fn, "__name__", "?")
        measure(f"{k}:     {name}", part, obs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recording", help="the recording (generated there if it does not exist)")
    ap.add_argument("--messages", type=int, default=5003)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    if a.child:
        _child(a.child[0], kinds, a.child[1])
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_recording import generate

    with tempfile.TemporaryDirectory() as tmp:
        rec = a.recording or str(Path(tmp) / "bench.jsonl")
        if not Path(rec).exists():
            generate(rec, a.messages)
        out, labels = Path(tmp) / "cg.out", Path(tmp) / "labels.txt"
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
               "--dump-after=functools_reduce", f"--callgrind-out-file={out}", sys.executable, __file__,
               "--kinds", a.kinds, "--child", str(Path(rec).resolve()), str(labels)]
        p = subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True)
        if p.returncode != 0 or not labels.exists():
            raise SystemExit(f"callgrind failed ({p.returncode}): {p.stderr[-2000:]}")
        totals = []
        for part in sorted(glob.glob(f"{out}.*"), key=lambda s: int(s.rsplit(".", 1)[1])):
            with open(part) as f:
                totals.append(next(int(line.split()[1]) for line in f if line.startswith(("totals:", "summary:"))))
        before = base = 0.0
        inner = None
        print("instructions per observation (each plan entry: what it adds to the ones before it; a pass's "
              "update and checks: what each adds inside the pass)")
        for line, total in zip(labels.read_text().splitlines(), totals):
            n, label = line.split("\t")
            per = total / int(n)
            if label.endswith(": dispatch"):
                print(f"{per / 1e3:8.1f}k  {label}  ({n} observations)")
                before = 0.0
            elif label.split(":")[-1].startswith("     "):  # inside the pass of the entry above
                print(f"{(per - (base if inner is None else inner)) / 1e3:8.1f}k  {label}")
                inner = per
            else:
                print(f"{(per - before) / 1e3:8.1f}k  {label}")
                base, inner, before = before, None, per


if __name__ == "__main__":
    main()
