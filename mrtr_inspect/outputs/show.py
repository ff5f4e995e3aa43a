"""`show`: each chain round by round, as a tree (text), a sequence diagram (mermaid) or JSON."""

from __future__ import annotations

import json
from typing import IO, Iterable

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from ..core.findings import plural
from ..core.messages import format_id
from .text import chain_line, json_printable, printable


def _ms(v: float | None) -> str:
    if v is None:
        return "?"
    if v >= 10_000:
        return f"{v / 1000:.1f} s"
    return f"{v:.0f} ms"


def _asked(asked: dict) -> list[str]:
    out = []
    for key, a in (asked or {}).items():
        m = a.get("method")
        s = f"{key}: {m}"
        if m == "elicitation/create":
            s += f" ({a.get('mode', 'form')})"
        if a.get("summary"):
            s += f" {a['summary']!r}"
        if a.get("fields"):
            s += f" fields {', '.join(a['fields'])}"
        if a.get("maxTokens") is not None:
            s += f" maxTokens {a['maxTokens']}"
        out.append(s)
    return out


def _answered(answered: dict | None) -> list[str]:
    out = []
    for key, a in (answered or {}).items():
        s = f"{key}:"
        if "action" in a:
            s += f" {a['action']}"
        if a.get("model"):
            s += f" model {a['model']}"
        if a.get("summary"):
            s += f" {a['summary']}"
        out.append(s)
    return out


def legacy_rounds(c: dict) -> list[dict]:
    """A legacy chain's rounds (RULES.md §13): the server's questions, each with the client's answer,
    in the order they were asked. They come between the request and its response."""
    return [r for r in c.get("round_details") or () if "server_request" in r]


def _text(*parts: str | tuple[str, str]) -> Text:
    """One node of the tree: (text, style) pairs or plain strings, each shown literally (nothing in
    them is read as rich markup, and control characters are escaped: `printable`)."""
    t = Text()
    for p in parts:
        text, style = (p, "") if isinstance(p, str) else p
        t.append(printable(text), style=style)
    return t


def chain_tree(c: dict) -> Tree:
    tree = Tree(_text((chain_line(c), "bold")))
    rounds = {r["round"]: r for r in c.get("round_details", [])}
    start = c.get("start") or 0.0
    for e in c.get("timeline", []):
        rel = (e["time"] - start) * 1000.0
        if e.get("retries_round"):
            tree.add(_text((f"… the user took {_ms(e.get('wait_ms'))} to answer round {e['retries_round']}", "dim")))
            node = tree.add(_text(f"→ retry id {format_id(e['id'])} ",
                                  (f"(#{e['message']}, +{_ms(rel)}, linked via {e.get('link')})", "dim")))
            for line in _answered(e.get("answered")):
                node.add(_text(f"answers {line}"))
        else:
            tree.add(_text(f"→ request id {format_id(e['id'])} ", (f"(#{e['message']}, +0 ms)", "dim")))
            for rd in legacy_rounds(c):
                _legacy_tree(tree, rd, start)
        resp = e.get("response")
        rt = e.get("response_time")
        rrel = f", +{_ms((rt - start) * 1000.0)}" if rt else ""
        where = (f"(#{e.get('response_message')}{rrel})", "dim")
        if resp == "input_required":
            rd = next((r for r in rounds.values() if r["message"] == e.get("response_message")), None)
            node = tree.add(_text("← ", ("input_required", "yellow"), f" round {rd['round'] if rd else '?'} ", where))
            for line in _asked(rd["asked"] if rd else {}):
                node.add(_text(f"asks {line}"))
            if rd and rd.get("request_state"):
                node.add(_text((f"requestState sha256:{rd['request_state']}…", "dim")))
        elif resp == "error":
            tree.add(_text("← ", (f"error {e.get('error_code')}", "red"), " ", where))
        elif resp in ("result", "task"):
            tree.add(_text("← ", ("complete" if resp == "result" else "task", "green"), " ", where))
        elif resp == "cancelled":
            tree.add(_text("✗ ", ("cancelled", "magenta")))
        elif resp == "none":
            tree.add(_text("✗ ", ("no response (the stream ended)", "magenta")))
        else:
            tree.add(_text(("… no response yet", "dim")))
    return tree


def _legacy_tree(tree: Tree, rd: dict, start: float) -> None:
    """One legacy round as the tree shows it: the server's question, the user's time, the answer."""
    rel = (rd["time"] - start) * 1000.0
    node = tree.add(_text("← ", ("asks", "yellow"), f" round {rd['round']}: server request id {format_id(rd['server_request'])} ",
                          (f"(#{rd['message']}, +{_ms(rel)}, linked via {rd.get('link')})", "dim")))
    for line in _asked(rd.get("asked") or {}):
        node.add(_text(f"asks {line}"))
    if rd.get("response_message") is None:
        tree.add(_text((f"… no answer ({_ms(rd.get('unanswered_ms'))} waited)", "dim")))
        return
    tree.add(_text((f"… the user took {_ms(rd.get('wait_ms'))} to answer round {rd['round']}", "dim")))
    what = "answer" if rd.get("response") == "result" else f"error {rd.get('error_code')}"
    node = tree.add(_text(f"→ {what} to id {format_id(rd['server_request'])} ",
                          (f"(#{rd['response_message']}, +{_ms((rd['response_time'] - start) * 1000.0)})", "dim")))
    for line in _answered(rd.get("answered")):
        node.add(_text(f"answers {line}"))


# mermaid's entity codes (`#quot;`, `#35;`: mermaid turns `#name;` and `#number;` into the
# character before it parses the diagram) for what would end a message (`#`, `;`, a line break),
# become markup (`<br>`, `&lt;`) or a comment (`%%`)
_MERMAID = {"#": "#35;", ";": "#59;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "%": "#37;"}
_MERMAID_TABLE = str.maketrans(_MERMAID)


def _mm(text: str) -> str:
    """Text from the recording as a sequence diagram message shows it: on one line (`printable`),
    at most 80 characters, literally."""
    return _mm_comment(printable(text)[:80])


def _mm_comment(text: str) -> str:
    """Text from the recording on a diagram's `%%` comment line: on one line (`printable`), and
    encoded as a message is, whole. Mermaid obeys a directive (`%%{init: …}%%`) wherever it stands,
    a comment line included, so no `%` of the recording's may reach it raw."""
    return printable(text).translate(_MERMAID_TABLE)


def render_mermaid(chains: Iterable[dict], stream: IO[str]) -> int:
    n = 0
    for c in chains:
        n += 1
        rounds = {r["message"]: r for r in c.get("round_details", [])}
        stream.write("%% " + _mm_comment(f"{c['id']} {c.get('method')} {c.get('target')}: {c.get('outcome')}, "
                                         f"{plural(c.get('rounds'), 'round')}") + "\n")
        stream.write("sequenceDiagram\n    participant C as Client\n    participant S as Server\n")
        for e in c.get("timeline", []):
            if e.get("retries_round"):
                stream.write(f"    Note over C: user answered in {_ms(e.get('wait_ms'))}\n")
                ans = "; ".join(_answered(e.get("answered")))
                stream.write(f"    C->>S: {_mm(str(c.get('method')))} id {_mm(format_id(e['id']))}"
                             f" (retry{', ' + _mm(ans) if ans else ''})\n")
            else:
                stream.write(f"    C->>S: {_mm(str(c.get('method')))} {_mm(str(c.get('target')))}"
                             f" id {_mm(format_id(e['id']))}\n")
                for rd in legacy_rounds(c):
                    asked = "; ".join(_asked(rd.get("asked") or {}))
                    stream.write(f"    S->>C: round {rd['round']} ({_mm(asked)})\n")
                    if rd.get("response_message") is not None:
                        stream.write(f"    Note over C: user answered in {_ms(rd.get('wait_ms'))}\n")
                        ans = "; ".join(_answered(rd.get("answered")))
                        stream.write(f"    C-->>S: {_mm(str(rd.get('response')))} ({_mm(ans)})\n")
            resp = e.get("response")
            if resp == "input_required":
                rd = rounds.get(e.get("response_message"))
                asked = "; ".join(_asked(rd["asked"])) if rd else ""
                stream.write(f"    S-->>C: input_required ({_mm(asked)})\n")
            elif resp == "error":
                stream.write(f"    S-->>C: error {_mm(str(e.get('error_code')))}\n")
            elif resp in ("result", "task"):
                stream.write(f"    S-->>C: {'complete' if resp == 'result' else 'task'}\n")
            elif resp == "cancelled":
                stream.write("    Note over C,S: cancelled\n")
        stream.write("\n")
    return n


def render_json(chains: Iterable[dict], stream: IO[str], hops: list[dict] | None = None) -> int:
    items = list(chains)
    doc: dict = {"chains": items}
    if hops is not None:
        doc["hops"] = hops
    stream.write(json_printable(json.dumps(doc, ensure_ascii=False, indent=2, default=str)) + "\n")
    return len(items)


# -- two hops (RULES.md §11): a front chain and the back chains it caused, as one story --------------


def hop_line(h: dict) -> str:
    """One line per linked pair: `c1 (front) → c2 (back)  link target+args  front 52 ms, back 40 ms, gateway 3 ms`."""
    return printable(f"{h['front']} ({h.get('front_hop')}) → {h['back']} ({h.get('back_hop')})  link {h['link']}  "
                     f"front {_ms(h['front_ms'])}, back {_ms(h['back_ms'])}, gateway {_ms(h['gateway_ms'])}")


def _grouped(hops: list[dict]) -> dict[str, list[dict]]:
    """The pairs of each front chain, in the order of the report."""
    out: dict[str, list[dict]] = {}
    for h in hops:
        out.setdefault(h["front"], []).append(h)
    return out


def hop_story(chains: Iterable[dict], hops: list[dict] | None) -> list[tuple[dict, list[tuple[dict, dict]]]]:
    """What `show` draws: each chain with the back chains linked to it ((pair, back chain)); a back
    chain that is linked is drawn under its front chain, not again on its own."""
    items = list(chains)
    pairs = _grouped(hops or [])
    by_id = {c["id"]: c for c in items}
    linked_backs = {h["back"] for h in hops or ()}
    return [(c, [(h, by_id[h["back"]]) for h in pairs.get(c["id"], []) if h["back"] in by_id])
            for c in items if c["id"] not in linked_backs]


def render_text(chains: Iterable[dict], stream: IO[str], color: bool = False, hops: list[dict] | None = None) -> int:
    """`show`: each chain's tree; with named hops (`hops`, the report's pairs), each front chain's tree
    with, under it, the tree of each back chain it caused (the gateway's share of the time on the node)."""
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, width=120)
    n = 0
    for c, backs in hop_story(chains, hops):
        tree = chain_tree(c)
        if c.get("hop"):
            tree.label = _text((f"[{c['hop']}] ", "cyan"), (chain_line(c), "bold"))
        for h, b in backs:
            node = tree.add(_text(("⇢ through the gateway: ", "cyan"), hop_line(h)))
            sub = chain_tree(b)
            sub.label = _text((f"[{b.get('hop')}] ", "cyan"), (chain_line(b), "bold"))
            node.children.append(sub)
        console.print(tree)
        n += 1
    if n == 0:
        console.print(_text("no chains (no tools/call, prompts/get or resources/read in this recording)"))
    return n


def _steps(c: dict, near: str, far: str, offset: float = 0.0) -> list[tuple[float, int, str]]:
    """The arrows of one chain between `near` (its client) and `far` (its server), each with its time
    (on the front hop's clock: `offset` added) and its order within the chain."""
    out: list[tuple[float, int, str]] = []
    rounds = {r["message"]: r for r in c.get("round_details", [])}
    method = _mm(str(c.get("method")))

    def add(t: float | None, line: str) -> None:
        out.append(((t if t is not None else c.get("end") or 0.0) + offset, len(out), line))

    for e in c.get("timeline", []):
        if e.get("retries_round"):
            add(e["time"], f"    Note over {near}: answered in {_ms(e.get('wait_ms'))}")
            ans = "; ".join(_answered(e.get("answered")))
            add(e["time"], f"    {near}->>{far}: {method} id {_mm(format_id(e['id']))} (retry{', ' + _mm(ans) if ans else ''})")
        else:
            add(e["time"], f"    {near}->>{far}: {method} {_mm(str(c.get('target')))} id {_mm(format_id(e['id']))}")
        resp, rt = e.get("response"), e.get("response_time")
        if resp == "input_required":
            rd = rounds.get(e.get("response_message"))
            add(rt, f"    {far}-->>{near}: input_required ({_mm('; '.join(_asked(rd['asked'])) if rd else '')})")
        elif resp == "error":
            add(rt, f"    {far}-->>{near}: error {_mm(str(e.get('error_code')))}")
        elif resp in ("result", "task"):
            add(rt, f"    {far}-->>{near}: {'complete' if resp == 'result' else 'task'}")
        elif resp == "cancelled":
            add(c.get("end"), f"    Note over {near},{far}: cancelled")
    for rd in legacy_rounds(c):
        add(rd["time"], f"    {far}->>{near}: round {rd['round']} ({_mm('; '.join(_asked(rd.get('asked') or {})))})")
        if rd.get("response_message") is not None:
            ans = "; ".join(_answered(rd.get("answered")))
            add(rd["response_time"], f"    {near}-->>{far}: {_mm(str(rd.get('response')))} ({_mm(ans)})")
        else:
            add(c.get("end"), f"    Note over {near},{far}: never answered ({_ms(rd.get('unanswered_ms'))})")
    return out


def render_mermaid_hops(chains: Iterable[dict], hops: list[dict] | None, stream: IO[str]) -> int:
    """`show --format mermaid` of recordings with named hops: a front chain and the back chains it
    caused as one sequence, host → gateway → upstream and back, as the first seed draws them; the
    other chains as `render_mermaid` draws them."""
    n = 0
    for c, backs in hop_story(chains, hops):
        if not backs:
            n += render_mermaid([c], stream)
            continue
        n += 1
        stream.write("%% " + _mm_comment(f"{c['id']} {c.get('method')} {c.get('target')}: {c.get('outcome')}, "
                                         f"{plural(c.get('rounds'), 'round')}, through the gateway: "
                                         + "; ".join(hop_line(h) for h, _ in backs)) + "\n")
        stream.write("sequenceDiagram\n    participant H as Host\n    participant G as Gateway\n"
                     "    participant U as Upstream\n")
        steps = [(t, 0, i, line) for t, i, line in _steps(c, "H", "G")]
        for k, (h, b) in enumerate(backs, 1):
            steps += [(t, k, i, line) for t, i, line in _steps(b, "G", "U", h.get("offset_ms", 0.0) / 1000.0)]
        # by time; at one instant the front's request comes before the back's, and the back's answer before the front's
        for _, _, _, line in sorted(steps, key=lambda s: (s[0], s[1] if "->>" in s[3] and "-->>" not in s[3] else -s[1], s[2])):
            stream.write(line + "\n")
        for h, _ in backs:
            stream.write(f"    Note over G: gateway {_ms(h['gateway_ms'])} of {_ms(h['front_ms'])}\n")
        stream.write("\n")
    return n
