"""`mrtr-inspect stats PATH... [--format text|json]`: per method and target, the chains, their
outcomes, rounds, and the percentiles of three times (docs/observability.md, "stats"):

- `duration_ms`: the whole chain, from its first request to its end (the report's `duration_ms`);
- `server_ms`: the server's time, over the chain's requests that got a response: the response's time
  minus the request's, summed (every round's work, not the user's);
- `waited_ms`: the user's answering time, over the chain's answered rounds: the retry's time minus
  the time of the `input_required` it answers, summed (`mrtr.waited_ms` of the span); only chains
  with an answered round count here, so a plain request does not pull the percentiles to 0.

Percentiles are nearest-rank (the smallest recorded value with at least p % of the values at or
below it), so each figure is one a chain really took; `null` where a group has no value.
JSON: `mrtr-inspect.stats/1` (CONTRACTS.md).

And what each definition costs a model's context (`offered`, `lists`; docs/observability.md): per
server, tool, prompt, resource and resource template, the bytes of its definition as it was offered
(its JSON in the list result, byte for byte), an estimate of its tokens, and the bytes of the
results it gave (p50, max); per server and list method, the bytes of the whole list result (its
pages summed). The token estimate is `TOKEN_METHOD`: no tokenizer is bundled (a real one needs
its vocabulary, downloaded), so it is a rule of thumb, named as such.
"""

from __future__ import annotations

import json
import math
from typing import IO, Iterable

from .exporters.otlp_spans import legacy_waits, server_ms, waited_ms

FORMAT = "mrtr-inspect.stats/1"
PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99))
BYTES_PER_TOKEN = 4
TOKEN_METHOD = ("estimate: UTF-8 bytes / 4, rounded up (the usual rule of thumb for BPE tokenizers on English "
                "text; JSON punctuation and other scripts take more tokens per byte)")


def tokens(size: int) -> int:
    return -(-size // BYTES_PER_TOKEN)


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    v = sorted(values)
    out: dict[str, float | None] = {name: v[max(math.ceil(p / 100 * len(v)) - 1, 0)] for name, p in PERCENTILES}
    out["max"] = v[-1]
    return out


def costs(servers: Iterable) -> dict:
    """`offered` and `lists` of the stats document: what each definition of the servers
    (offered.Server) costs."""
    from ..offered import LISTS, NOUN

    offered, lists = [], []
    for s in servers:
        for section, defs in sorted(s.definitions.items()):
            for name, d in sorted(defs.items()):
                sizes = sorted(s.results.get((section, name), ()))
                offered.append({"server": s.name, "kind": NOUN[section], "name": name, "definition_bytes": d.size,
                                "tokens_estimate": tokens(d.size), "results": len(sizes),
                                "result_bytes": {"p50": sizes[max(math.ceil(len(sizes) / 2) - 1, 0)] if sizes else None,
                                                 "max": sizes[-1] if sizes else None}})
        for method in LISTS:
            listing = s.listings.get(method)
            if listing is not None:
                lists.append({"server": s.name, "method": method, "bytes": listing.size,
                              "tokens_estimate": tokens(listing.size), "items": listing.items, "pages": listing.pages})
    return {"token_estimate": TOKEN_METHOD, "offered": offered, "lists": lists}


def stats(chains: Iterable[dict], servers: Iterable | None = None) -> dict:
    """The `mrtr-inspect.stats/1` document of the chains (report summaries, with their timelines)
    and, when `servers` are given (offered.Offered.servers()), of what they offered (`costs`)."""
    groups: dict[tuple, dict] = {}
    for c in chains:
        key = (str(c.get("method")), c.get("target"))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"method": key[0], "target": key[1], "chains": 0, "outcomes": {}, "rounds": {},
                               "_duration": [], "_server": [], "_waited": []}
        g["chains"] += 1
        outcome = c.get("outcome") or "open"
        g["outcomes"][outcome] = g["outcomes"].get(outcome, 0) + 1
        rounds = str(c.get("rounds") or 0)
        g["rounds"][rounds] = g["rounds"].get(rounds, 0) + 1
        g["_duration"].append(c.get("duration_ms") or 0.0)
        timeline = c.get("timeline") or ()
        if any(e.get("response_time") is not None for e in timeline):
            g["_server"].append(server_ms(c))
        if any("wait_ms" in e for e in timeline) or legacy_waits(c):
            g["_waited"].append(waited_ms(c))
    out = []
    for key in sorted(groups, key=lambda k: (k[0], str(k[1]))):
        g = groups[key]
        g["outcomes"] = dict(sorted(g["outcomes"].items()))
        g["rounds"] = dict(sorted(g["rounds"].items(), key=lambda kv: int(kv[0])))
        g["duration_ms"] = percentiles(g.pop("_duration"))
        g["server_ms"] = percentiles(g.pop("_server"))
        g["waited_ms"] = percentiles(g.pop("_waited"))
        out.append(g)
    return {"format": FORMAT, "groups": out, **(costs(servers) if servers is not None else {})}


def write_json(doc: dict, stream: IO[str]) -> None:
    from .text import json_printable

    stream.write(json_printable(json.dumps(doc, ensure_ascii=False, indent=2)) + "\n")


def _ms(p: dict) -> str:
    if p["max"] is None:
        return "–"
    return " / ".join(_num(p[k]) for k in ("p50", "p90", "p99", "max"))


def _num(ms: float) -> str:
    if ms >= 10_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def write_text(doc: dict, stream: IO[str], color: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .text import printable

    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False,
                      width=None if color else 200)
    if not doc["groups"]:
        console.print("no chains (no tools/call, prompts/get or resources/read in these recordings)")
    else:
        _chain_table(doc, console)
    if doc.get("offered"):
        _cost_table(doc, console)


def _chain_table(doc: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from .text import printable

    table = Table(title="chains by method and target; times in ms: p50 / p90 / p99 / max", title_justify="left")
    for name, just in (("method", "left"), ("target", "left"), ("chains", "right"), ("outcomes", "left"),
                       ("rounds", "left"), ("whole chain", "right"), ("server", "right"), ("user answering", "right")):
        table.add_column(name, justify=just, no_wrap=name != "target", overflow="fold",  # type: ignore[arg-type]
                         min_width=min(max(len(printable(str(g["target"]))) for g in doc["groups"]), 32)
                         if name == "target" else None)
    for g in doc["groups"]:  # Text: what the traffic named is shown, never read as markup
        cells = (g["method"], str(g["target"]) if g["target"] is not None else "–", str(g["chains"]),
                 ", ".join(f"{k} {v}" for k, v in g["outcomes"].items()),
                 ", ".join(f"{k}×{v}" for k, v in g["rounds"].items()),
                 _ms(g["duration_ms"]), _ms(g["server_ms"]), _ms(g["waited_ms"]))
        table.add_row(*(Text(printable(x)) for x in cells))
    console.print(table)


def _cost_table(doc: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from .text import printable

    table = Table(title="what each definition costs a model's context: its bytes as offered, ~tokens (UTF-8 bytes "
                        "/ 4: an estimate), the bytes of its results p50 / max", title_justify="left")
    for name, just in (("server", "left"), ("kind", "left"), ("name", "left"), ("bytes", "right"),
                       ("~tokens", "right"), ("results", "right"), ("result bytes", "right")):
        table.add_column(name, justify=just, overflow="fold")  # type: ignore[arg-type]
    for o in doc["offered"]:
        rb = o["result_bytes"]
        cells = (o["server"], o["kind"], o["name"], f"{o['definition_bytes']:,}", f"{o['tokens_estimate']:,}",
                 str(o["results"]), f"{rb['p50']:,} / {rb['max']:,}" if rb["max"] is not None else "–")
        table.add_row(*(Text(printable(x)) for x in cells))
    console.print(table)
    for ls in doc["lists"]:
        pages = f" in {ls['pages']} pages" if ls["pages"] > 1 else ""
        console.print(Text(printable(f"{ls['server']}: {ls['method']} is {ls['bytes']:,} bytes{pages} "
                                     f"(~{ls['tokens_estimate']:,} tokens) for {ls['items']} items")))
