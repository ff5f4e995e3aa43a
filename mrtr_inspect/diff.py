"""`mrtr-inspect diff A B`: what changed between two recordings, by meaning.

    changes = compare(load_side("a.jsonl"), load_side("b.jsonl"), ignore=["result.structuredContent.at"])

What is compared (each recording read as `replay` reads it: replay/script.py, the core's pairing
and chains):

* what the server offered: the tools, prompts, resources and resource templates of every
  `*/list` result (by name, uri or uriTemplate; the last definition seen of each), compared only
  when both recordings listed that kind; and its capabilities and protocol versions
  (`server/discover` or `initialize`);
* the chains (`tools/call`, `prompts/get`, `resources/read`). The k-th chain of a method and target
  in A is matched with the k-th chain of the same method and target in B (order within the
  recording, across its sessions); one without a partner is added or removed. A matched pair is
  compared on its request's arguments, its number of rounds, what each round asked (the
  `inputRequests`), its outcome, and its final result (`content`, `structuredContent`, `isError`,
  all but `_meta`) or error (code, message, data).

Not compared, because two runs of the same client against the same server differ there anyway:
JSON-RPC ids, times, session ids and headers, `requestState`s (a sealed state is fresh on every
run), `_meta` of requests and results, notifications. `ignore` takes paths as `replay` does (dotted,
into the whole message, `*` and `**`: replay/matching.py), left out of each message before it is
compared: `result.structuredContent.timestamp`, `result.tools.*.description`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Any, Iterable

from .core.messages import ERROR, RESULT, Message
from .core.vocabulary import Outcome
from .replay.matching import ABSENT, MRTR_FIELDS, differences, parse_paths, show, strip_paths
from .replay.script import Exchange, load_script

FORMAT = "mrtr-inspect.diff/1"

# list method -> (kind, the result member holding the items, the item member naming one)
LISTS = {
    "tools/list": ("tool", "tools", "name"),
    "prompts/list": ("prompt", "prompts", "name"),
    "resources/list": ("resource", "resources", "uri"),
    "resources/templates/list": ("resource", "resourceTemplates", "uriTemplate"),
}
OFFERED = ("tool", "prompt", "resource")
SERVER_METHODS = ("server/discover", "initialize")
SERVER_FIELDS = ("capabilities", "supportedVersions", "protocolVersion")
SHOWN_DIFFERENCES = 4


@dataclass(frozen=True)
class Difference:
    field: str
    a: Any
    b: Any

    def text(self) -> str:
        return f"{self.field}: {show(self.a, 50)} → {show(self.b, 50)}"

    def to_json(self) -> dict:
        return {"field": self.field, "a": None if self.a is ABSENT else self.a,
                "b": None if self.b is ABSENT else self.b,
                "absent": [s for s, v in (("a", self.a), ("b", self.b)) if v is ABSENT]}


@dataclass
class Change:
    """One change from A to B (`kind` as CONTRACTS.md lists them)."""

    kind: str
    target: str | None
    detail: str
    method: str | None = None
    chains: tuple[str | None, str | None] = (None, None)  # the chain ids in A and in B
    differences: list[Difference] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"kind": self.kind, "target": self.target, "detail": self.detail, "method": self.method,
                "chain_a": self.chains[0], "chain_b": self.chains[1],
                "differences": [d.to_json() for d in self.differences]}


@dataclass
class ChainShape:
    id: str
    method: str | None
    target: str | None
    outcome: str
    arguments: Any  # the first request's params without _meta and the MRTR fields
    questions: list[Any]  # each round's inputRequests
    final: Any  # the final result (without _meta) or error, ABSENT when there is none
    final_kind: str | None  # result, error or None

    @property
    def label(self) -> str:
        return " ".join(str(x) for x in (self.method, self.target) if x is not None)


@dataclass
class Side:
    """What one recording shows of the server and of its chains."""

    path: str
    offered: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> key -> definition
    server: Any = ABSENT
    chains: list[ChainShape] = field(default_factory=list)


def _part(value: Any, name: str) -> Any:
    return value.get(name, ABSENT) if type(value) is dict else ABSENT


def _no_meta(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != "_meta"} if type(value) is dict else value


def load_side(path: str, ignore: Iterable[str] = ()) -> Side:
    """Read a recording (raises a UserError, exit 2, when it cannot be read)."""
    script = load_script(path, allow_empty=True)
    pats = parse_paths(ignore)

    def value(msg: Message | None) -> Any:
        if msg is None:
            return ABSENT
        return strip_paths(msg.value, pats) if pats else msg.value

    side = Side(path)
    by_chain: dict[str, list[Exchange]] = {}
    for ex in script.exchanges:
        if ex.chain is not None:
            by_chain.setdefault(ex.chain, []).append(ex)
            continue
        r = ex.response
        if r is None or r.kind != RESULT:
            continue
        result = _part(value(r), "result")
        if ex.method in LISTS:
            kind, member, key = LISTS[ex.method]
            items = side.offered.setdefault(kind, {})
            for item in _part(result, member) if type(_part(result, member)) is list else ():
                if type(item) is dict and isinstance(item.get(key), str):
                    items[item[key]] = item
        elif ex.method in SERVER_METHODS and type(result) is dict:
            side.server = {k: result[k] for k in SERVER_FIELDS if k in result}
    for cid, summary in sorted(script.chains.items(), key=lambda kv: int(kv[0][1:])):
        exs = by_chain.get(cid, [])
        responses = {ex.response.index: ex.response for ex in exs if ex.response is not None}
        questions = [_part(_part(value(responses.get(rd["message"])), "result"), "inputRequests")
                     for rd in summary.get("round_details") or ()]
        final, final_kind = ABSENT, None
        timeline = summary.get("timeline") or []
        last = responses.get(timeline[-1].get("response_message")) if timeline else None
        if last is not None and last.kind == ERROR:
            final, final_kind = _part(value(last), "error"), "error"
        elif last is not None and last.kind == RESULT and summary.get("outcome") != Outcome.ABANDONED:
            final, final_kind = _no_meta(_part(value(last), "result")), "result"
        first = value(exs[0].request) if exs else ABSENT
        params = _part(first, "params")
        args = {k: v for k, v in params.items() if k not in MRTR_FIELDS} if type(params) is dict else params
        side.chains.append(ChainShape(cid, summary.get("method"), summary.get("target"), summary.get("outcome") or "open",
                                      args, questions, final, final_kind))
    return side


# -------------------------------------------------------------------------------------------------
# comparing


def _differences(a: Any, b: Any) -> list[Difference]:
    out = []
    for d in differences(a, b):
        name = d.path if d.path != "(the whole message)" else "(all of it)"
        out.append(Difference(name, d.recorded, d.live))
    return out


def _said(diffs: list[Difference]) -> str:
    text = "; ".join(d.text() for d in diffs[:SHOWN_DIFFERENCES])
    if len(diffs) > SHOWN_DIFFERENCES:
        text += f"; and {len(diffs) - SHOWN_DIFFERENCES} more"
    return text


def _asks(questions: Any) -> str:
    if type(questions) is not dict:
        return show(questions, 50)
    return ", ".join(f"{k} ({q.get('method') if type(q) is dict else '?'})" for k, q in questions.items()) or "nothing"


def _rounds(n: int) -> str:
    return f"{n} round{'s' if n != 1 else ''}"


def _chain_changes(a: ChainShape, b: ChainShape) -> list[Change]:
    out: list[Change] = []

    def add(kind: str, detail: str, diffs: list[Difference] | None = None) -> None:
        out.append(Change(kind, a.target, detail, a.method, (a.id, b.id), diffs or []))

    if diffs := _differences(a.arguments, b.arguments):
        add("request-changed", "the request differs: " + _said(diffs), diffs)
    na, nb = len(a.questions), len(b.questions)
    if na != nb:
        extra = b.questions[na:] if nb > na else a.questions[nb:]
        who = "B" if nb > na else "A"
        first = min(na, nb) + 1
        asks = "; ".join(f"round {first + i} asks {_asks(q)}" for i, q in enumerate(extra[:SHOWN_DIFFERENCES]))
        if len(extra) > SHOWN_DIFFERENCES:
            asks += f"; and {len(extra) - SHOWN_DIFFERENCES} more"
        add("chain-rounds-changed", f"{_rounds(na)} → {_rounds(nb)} (only {who}: {asks})")
    for i, (qa, qb) in enumerate(zip(a.questions, b.questions), start=1):
        if diffs := _differences(qa, qb):
            add("question-changed", f"round {i} asks differently: {_said(diffs)}", diffs)
    if a.outcome != b.outcome:
        add("outcome-changed", f"{_outcome(a)} → {_outcome(b)}")
    elif a.final_kind == b.final_kind and (diffs := _differences(a.final, b.final)):
        add("result-changed", f"the {'error' if a.final_kind == 'error' else 'result'} differs: {_said(diffs)}", diffs)
    return out


def _outcome(c: ChainShape) -> str:
    if c.final_kind == "error" and type(c.final) is dict and "code" in c.final:
        return f"{c.outcome} ({c.final['code']})"
    if c.final_kind == "result" and type(c.final) is dict and c.final.get("isError") is True:
        return f"{c.outcome} (isError)"
    return c.outcome


def compare(a: Side, b: Side) -> tuple[list[Change], list[str]]:
    """The changes from A to B, and notes on what could not be compared."""
    changes: list[Change] = []
    notes: list[str] = []
    if a.server is not ABSENT and b.server is not ABSENT:
        if diffs := _differences(a.server, b.server):
            changes.append(Change("server-changed", None, "the server declares differently: " + _said(diffs),
                                  None, differences=diffs))
    elif a.server is not ABSENT or b.server is not ABSENT:
        notes.append(f"the server's declaration (server/discover, initialize): only {'A' if b.server is ABSENT else 'B'} "
                     "recorded it; not compared")
    for kind in OFFERED:
        da, db = a.offered.get(kind), b.offered.get(kind)
        if da is None or db is None:
            if da is not None or db is not None:
                notes.append(f"{kind}s: only {'A' if da is not None else 'B'} listed them; not compared")
            continue
        for name in list(da) + [n for n in db if n not in da]:
            if name not in db:
                changes.append(Change(f"{kind}-removed", name, f"{kind} {name} is no longer offered"))
            elif name not in da:
                desc = db[name].get("description") if type(db[name]) is dict else None
                changes.append(Change(f"{kind}-added", name, f"new {kind} {name}" + (f": {show(desc, 60)}" if desc else "")))
            elif diffs := _differences(da[name], db[name]):
                changes.append(Change(f"{kind}-changed", name, f"{kind} {name} changed: {_said(diffs)}",
                                      differences=diffs))
    groups_a = _grouped(a.chains)
    groups_b = _grouped(b.chains)
    for key in list(groups_a) + [k for k in groups_b if k not in groups_a]:
        ca, cb = groups_a.get(key, []), groups_b.get(key, [])
        for x, y in zip(ca, cb):
            changes += _chain_changes(x, y)
        for x in ca[len(cb):]:
            changes.append(Change("chain-removed", x.target, f"{x.label} ({x.id}, {_rounds(len(x.questions))}, "
                                  f"{_outcome(x)}) is not in B", x.method, (x.id, None)))
        for y in cb[len(ca):]:
            changes.append(Change("chain-added", y.target, f"{y.label} ({y.id}, {_rounds(len(y.questions))}, "
                                  f"{_outcome(y)}) is new in B", y.method, (None, y.id)))
    return changes, notes


def _grouped(chains: list[ChainShape]) -> dict[tuple, list[ChainShape]]:
    out: dict[tuple, list[ChainShape]] = {}
    for c in chains:
        out.setdefault((c.method, c.target), []).append(c)
    return out


def diff(path_a: str, path_b: str, ignore: Iterable[str] = ()) -> tuple[list[Change], list[str]]:
    ignore = tuple(ignore)
    return compare(load_side(path_a, ignore), load_side(path_b, ignore))


# -------------------------------------------------------------------------------------------------
# output


def to_json(path_a: str, path_b: str, changes: list[Change], notes: list[str]) -> dict:
    return {"format": FORMAT, "inputs": [path_a, path_b], "changes": [c.to_json() for c in changes], "notes": notes}


def write_json(stream: IO[str], path_a: str, path_b: str, changes: list[Change], notes: list[str]) -> None:
    from .outputs.text import json_printable

    stream.write(json_printable(json.dumps(to_json(path_a, path_b, changes, notes), ensure_ascii=False, indent=2,
                                           default=str)) + "\n")


_SECTION = {"server": "server", "tool": "tools offered", "prompt": "prompts offered", "resource": "resources offered"}
_MARK = {"added": ("+", "green"), "removed": ("-", "red")}


def write_text(stream: IO[str], path_a: str, path_b: str, changes: list[Change], notes: list[str],
               color: bool = False) -> None:
    """Grouped: the server, what it offers, then the chains (each matched pair under one heading)."""
    from rich.console import Console
    from rich.text import Text

    from .outputs.text import printable

    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, width=120, soft_wrap=True)

    def line(*parts: tuple[str, str]) -> None:
        t = Text()
        for text, style in parts:
            t.append(printable(text), style=style)
        console.print(t)

    n = len(changes)
    line((f"A {path_a}  →  B {path_b}: ", "bold"),
         (f"{n} change{'s' if n != 1 else ''}" if n else "no change", "bold yellow" if n else "bold green"))
    heading = None
    for c in changes:
        family, _, what = c.kind.rpartition("-")
        h = _SECTION.get(family, "chains")
        if h != heading:
            line((h, "bold underline"))
            heading = h
        mark, style = _MARK.get(what, ("~", "yellow"))
        if h == "chains":
            ids = " → ".join(x or "–" for x in c.chains)
            line((f"  {mark} ", style), (f"{c.method} {c.target or ''}".strip(), "bold"), (f" [{ids}] ", "dim"),
                 (c.kind, style))
        else:
            line((f"  {mark} ", style), (str(c.target or c.kind), "bold"), (f" {c.kind}", style))
        line((f"      {c.detail}", ""))
    for note in notes:
        line((f"note: {note}", "dim"))
