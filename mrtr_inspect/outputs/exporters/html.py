"""`export --to html`: one self-contained page (no script, no external asset) for a bug report.

It opens with what is wrong (the errors, then the warnings); then each chain as a timeline drawn
to scale (inline SVG: each exchange, the user's answering time, the final result, the findings
pinned to the message they name) and round by round (what was asked, what was answered, how long
the user took); the findings with their specification links; every message, collapsed
(`<details>`), pretty-printed when it is JSON. Everything that comes from the recording is escaped; a Content-Security-Policy
that allows no script and no fetch backs that up.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from html import escape
from typing import Iterable

from ...version import __version__
from ...core.findings import SEVERITIES, Severity, plural, spec_url
from ...core.events import Direction
from ...core.messages import format_id
from ..show import _answered, _asked, _ms, legacy_rounds
from ..text import printable_lines
from .capture import Capture, chain_label

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#1d1d1f}
h1{font-size:1.4em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all;margin:.3em 0 .8em}
.chain{border:1px solid #ddd;border-radius:6px;padding:.3em 1em .6em;margin:1em 0}
.chain h3{margin:.4em 0}.meta{color:#555;margin:.2em 0}
ol.steps{list-style:none;padding-left:.5em}ol.steps li{margin:.25em 0}ol.steps ul{margin:.1em 0 .3em 1.5em;padding:0}
.wait{color:#777;font-style:italic}.t{color:#777}
.badge{display:inline-block;border-radius:3px;padding:0 .4em;font-size:.85em;color:#fff;background:#666}
.complete,.result{background:#1a7f37}.error{background:#cf222e}.warning{background:#9a6700}.info{background:#0969da}
.input_required{background:#bf8700}.abandoned,.cancelled{background:#8250df}.open,.task,.none{background:#666}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:.3em .5em;text-align:left;vertical-align:top}
details{border-bottom:1px solid #eee}summary{cursor:pointer;padding:.2em 0}
.c2s{color:#0550ae}.s2c{color:#6639ba}
#wrong{border:1px solid #ddd;border-left:6px solid #1a7f37;border-radius:6px;padding:.2em 1em .5em;margin:1em 0}
#wrong.has-error{border-left-color:#cf222e}#wrong.has-warning{border-left-color:#9a6700}
#wrong h2{border:0;margin:.4em 0;font-size:1.15em}#wrong ol{padding-left:1.2em;margin:.2em 0}#wrong li{margin:.25em 0}
svg.timeline{display:block;width:100%;height:auto;margin:.4em 0 .2em;font:11px system-ui,sans-serif}
svg.timeline text{fill:#444}svg.timeline text.on-bar{fill:#fff}svg.timeline .lane{fill:#f6f8fa}svg.timeline .axis{stroke:#bbb}
svg.timeline .ex{fill:#666}svg.timeline .ex.input_required{fill:#bf8700}svg.timeline .ex.result{fill:#1a7f37}
svg.timeline .ex.error{fill:#cf222e}svg.timeline .ex.task{fill:#0969da}svg.timeline .ex.pending{fill:#bbb}
svg.timeline .ex.cancelled,svg.timeline .ex.none{fill:#8250df}svg.timeline .wait{fill:#d8b9ff}
svg.timeline .req{stroke:#0550ae;stroke-width:2}svg.timeline .end{fill:#1d1d1f}
svg.timeline .pin.error{fill:#cf222e}svg.timeline .pin.warning{fill:#9a6700}svg.timeline .pin.info{fill:#0969da}
"""


def _e(text: object) -> str:
    """Text as HTML shows it literally, and as a terminal shows it inert when the page is read as
    text: each control character written as `printable` writes it (line breaks and tabs stay)."""
    return escape(printable_lines(text), quote=True)


def _clock(t: float | None) -> str:
    if not t:
        return "?"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _badge(kind: str | None) -> str:
    k = kind or "none"
    return f'<span class="badge {_e(k)}">{_e(k)}</span>'


def _mref(i: int | None) -> str:
    return f'<a href="#m{i}" class="mono">#{i}</a>' if i is not None else ""


def _lines(items: Iterable[str], prefix: str) -> str:
    items = list(items)
    return "<ul>" + "".join(f"<li>{_e(prefix)} {_e(x)}</li>" for x in items) + "</ul>" if items else ""


def _legacy_steps(rd: dict, start: float) -> list[str]:
    """A legacy round (RULES.md §13): the server's question, the user's time, the client's answer."""
    rel = _ms((rd["time"] - start) * 1000.0)
    steps = [f"<li>← {_badge('asks')} round {_e(rd['round'])}: server request id <code>{_e(format_id(rd['server_request']))}"
             f"</code> {_mref(rd['message'])} <span class=\"t\">+{_e(rel)}, linked via {_e(rd.get('link'))}</span>"
             f"{_lines(_asked(rd.get('asked') or {}), 'asks')}</li>"]
    if rd.get("response_message") is None:
        steps.append(f'<li class="wait">… no answer ({_e(_ms(rd.get("unanswered_ms")))} waited)</li>')
        return steps
    steps.append(f'<li class="wait">… the user took {_e(_ms(rd.get("wait_ms")))} to answer round {_e(rd["round"])}</li>')
    what = "answer" if rd.get("response") == "result" else f"error {rd.get('error_code')}"
    when = _ms((rd["response_time"] - start) * 1000.0)
    steps.append(f"<li>→ {_e(what)} to id <code>{_e(format_id(rd['server_request']))}</code> {_mref(rd['response_message'])} "
                 f'<span class="t">+{_e(when)}</span>{_lines(_answered(rd.get("answered")), "answers")}</li>')
    return steps


def _chain(c: dict, findings: list[dict], times: dict[int, float], numbers: dict[int, int]) -> str:
    start = c.get("start") or 0.0
    rounds = {r["message"]: r for r in c.get("round_details") or ()}
    steps = []
    for e in c.get("timeline") or ():
        rel = _ms((e["time"] - start) * 1000.0)
        if e.get("retries_round"):
            steps.append(f'<li class="wait">… the user took {_e(_ms(e.get("wait_ms")))} to answer round '
                         f'{_e(e["retries_round"])}</li>')
            link = f", linked via {_e(e['link'])}" if e.get("link") else ""
            steps.append(f"<li>→ retry id <code>{_e(format_id(e['id']))}</code> {_mref(e['message'])} "
                         f'<span class="t">+{_e(rel)}{link}</span>{_lines(_answered(e.get("answered")), "answers")}</li>')
        else:
            steps.append(f"<li>→ request id <code>{_e(format_id(e['id']))}</code> {_mref(e['message'])} "
                         f'<span class="t">+0 ms</span></li>')
            for rd in legacy_rounds(c):
                steps += _legacy_steps(rd, start)
        resp = e.get("response")
        rt = e.get("response_time")
        when = f' <span class="t">+{_e(_ms((rt - start) * 1000.0))}</span>' if rt else ""
        ref = _mref(e.get("response_message"))
        if resp == "input_required":
            rd = rounds.get(e.get("response_message"))
            asked = _lines(_asked(rd["asked"]) if rd else (), "asks")
            steps.append(f"<li>← {_badge(resp)} round {_e(rd['round'] if rd else '?')} {ref}{when}{asked}</li>")
        elif resp == "error":
            steps.append(f"<li>← {_badge('error')} {_e(e.get('error_code'))} {ref}{when}</li>")
        elif resp in ("result", "task"):
            steps.append(f"<li>← {_badge('complete' if resp == 'result' else 'task')} {ref}{when}</li>")
        elif resp in ("cancelled", "none"):
            steps.append(f"<li>✗ {_badge(resp)} {'cancelled' if resp == 'cancelled' else 'no response (the stream ended)'}</li>")
        else:
            steps.append('<li class="wait">… no response yet</li>')
    meta = (f"{_e(plural(c.get('rounds'), 'round'))} · {_e(_ms(c.get('duration_ms')))} · link {_e(c.get('link') or '—')} · "
            f"era {_e(c.get('era') or '?')} · started {_e(_clock(start))}")
    title = chain_label(c)
    return (f'<article class="chain" id="{_e(c["id"])}"><h3>{_e(title)} {_badge(c.get("outcome"))}</h3>'
            f'<p class="meta">{meta}</p>{_timeline(c, findings, times, numbers)}<ol class="steps">{"".join(steps)}</ol>'
            + (f"<h4>Findings</h4>{_findings_table(findings)}" if findings else "") + "</article>")

# -- the timeline of a chain (inline SVG, to scale) -------------------------------------------------

SVG_W, SVG_X0, SVG_X1 = 960, 78, 940  # the drawing's width, and where its time axis starts and ends
LANES = (("server", 14), ("user", 40), ("findings", 66))  # label, top of the lane
LANE_H, AXIS_Y, SVG_H = 18, 92, 112
MIN_W = 1.5  # the narrowest bar drawn, in drawing units (a 0 ms exchange still shows)


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _timeline(c: dict, findings: list[dict], times: dict[int, float], numbers: dict[int, int]) -> str:
    """The chain on a time axis from its first request to its end, to scale: on the server lane a
    bar per exchange (request to response, coloured by what came back), on the user lane the time
    the user took to answer each round, on the findings lane a pin per finding at the first
    message it names; each item links to its message or finding and says what it is (`<title>`)."""
    tl = c.get("timeline") or []
    start = c.get("start") or (tl[0]["time"] if tl else 0.0)
    ends = [c.get("end") or start] + [e.get("response_time") or e["time"] for e in tl]
    span = max(max(ends) - start, 0.001)  # seconds; one millisecond at least
    scale = (SVG_X1 - SVG_X0) / span

    def x(t: float) -> float:
        return SVG_X0 + (min(max(t, start), start + span) - start) * scale

    lane = dict(LANES)
    out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SVG_W} {SVG_H}" '
           f'role="img" aria-label="timeline of {_e(chain_label(c))}" data-chain="{_e(c["id"])}" '
           f'data-span-ms="{_fmt(span * 1000.0)}" data-x0="{SVG_X0}" data-x1="{SVG_X1}">']
    for name, top in LANES:
        out.append(f'<rect class="lane" x="{SVG_X0}" y="{top}" width="{SVG_X1 - SVG_X0}" height="{LANE_H}"/>'
                   f'<text x="4" y="{top + 13}">{name}</text>')
    for k in range(5):  # the axis, in ms from the first request
        tx = SVG_X0 + (SVG_X1 - SVG_X0) * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(f'<line class="axis" x1="{_fmt(tx)}" y1="{AXIS_Y - 4}" x2="{_fmt(tx)}" y2="{AXIS_Y}"/>'
                   f'<text x="{_fmt(tx)}" y="{AXIS_Y + 12}" text-anchor="{anchor}">+{_e(_ms(span * 1000.0 * k / 4))}</text>')
    out.append(f'<line class="axis" x1="{SVG_X0}" y1="{AXIS_Y}" x2="{SVG_X1}" y2="{AXIS_Y}"/>')
    top = lane["server"]
    for e in tl:
        n = e.get("retries_round")
        if n and e.get("wait_ms") is not None:  # the user's answering time, before the retry
            w0 = e["time"] - e["wait_ms"] / 1000.0
            width = max((e["time"] - max(w0, start)) * scale, MIN_W)
            out.append(f'<rect class="wait" x="{_fmt(x(w0))}" y="{lane["user"]}" width="{_fmt(width)}" height="{LANE_H}" '
                       f'data-ms="{_fmt(e["wait_ms"])}" data-round="{_e(n)}"><title>the user took {_e(_ms(e["wait_ms"]))} '
                       f'to answer round {_e(n)}</title></rect>')
            if width > 70:
                out.append(f'<text x="{_fmt(x(w0) + 4)}" y="{lane["user"] + 13}">answer {_e(n)}: {_e(_ms(e["wait_ms"]))}</text>')
        resp = e.get("response") or "pending"
        rt = e.get("response_time")
        t1 = rt if rt else (c.get("end") or e["time"])
        kind = resp if rt else ("cancelled" if resp == "cancelled" else "none" if resp == "none" else "pending")
        width = max((t1 - e["time"]) * scale, MIN_W)
        what = f"retry answering round {n}" if n else "request"
        got = {"input_required": "input_required", "result": "the final result", "error": f"error {e.get('error_code')}",
               "task": "a task", "cancelled": "cancelled", "none": "no response (the stream ended)"}.get(resp, "no response yet")
        ms = (t1 - e["time"]) * 1000.0
        out.append(f'<a href="#m{_e(e["message"])}"><rect class="ex {_e(kind)}" x="{_fmt(x(e["time"]))}" y="{top}" '
                   f'width="{_fmt(width)}" height="{LANE_H}" data-message="{_e(e["message"])}" data-ms="{_fmt(ms)}">'
                   f'<title>{_e(what)} id {_e(format_id(e["id"]))} (#{_e(e["message"])}) → {_e(got)} after '
                   f'{_e(_ms(ms))}</title></rect></a>'
                   f'<line class="req" x1="{_fmt(x(e["time"]))}" y1="{top - 3}" x2="{_fmt(x(e["time"]))}" y2="{top + LANE_H}"/>')
        if width > 60:
            label = f"round {n} retry" if n else "request"
            out.append(f'<text class="on-bar" x="{_fmt(x(e["time"]) + 4)}" y="{top + 13}">{_e(label)}</text>')
    if tl and (rt := tl[-1].get("response_time")) and tl[-1].get("response") in ("result", "error", "task"):
        ex = x(rt)  # the final result: a diamond where it came
        out.append(f'<path class="end" d="M{_fmt(ex)} {top - 4}l4 4-4 4-4-4z"><title>{_e(c.get("outcome"))} at '
                   f'+{_e(_ms((rt - start) * 1000.0))}</title></path>')
    stacked: dict[int, int] = {}
    for f in findings:
        when = [times[m] for m in f.get("messages") or () if m in times]
        t = min(when) if when else (c.get("end") or start)
        px = x(t)
        slot = stacked.get(round(px / 8), 0)
        stacked[round(px / 8)] = slot + 1
        num = numbers.get(id(f))
        first = min((m for m in f.get("messages") or () if m in times), key=lambda m: times[m], default=None)
        out.append(f'<a href="#f{num}"><circle class="pin {_e(f["severity"])}" cx="{_fmt(px + slot * 9)}" '
                   f'cy="{lane["findings"] + LANE_H / 2}" r="5" data-rule="{_e(f["rule"])}" data-severity="{_e(f["severity"])}" '
                   f'data-message="{_e(first if first is not None else "")}"><title>{_e(f["severity"])} {_e(f["rule"])}: '
                   f'{_e(f["message"])}</title></circle></a>')
    out.append("</svg>")
    return "".join(out)


def _wrong(findings: list[dict], numbers: dict[int, int]) -> str:
    """What is wrong, first: the errors, then the warnings (the infos are in the findings table)."""
    bad = [f for f in findings if f["severity"] == Severity.ERROR] + [f for f in findings if f["severity"] == Severity.WARNING]
    errors = sum(1 for f in bad if f["severity"] == Severity.ERROR)
    if not bad:
        return ('<section id="wrong"><h2>Nothing wrong</h2><p>No errors, no warnings'
                f'{" (the infos are under Findings)" if findings else ""}.</p></section>')
    cls = "has-error" if errors else "has-warning"
    items = []
    for f in bad:
        url = spec_url(f.get("spec"))
        rule = f'<a href="{_e(url)}">{_e(f["rule"])}</a>' if url else _e(f["rule"])
        where = f' in <a href="#{_e(f["chain"])}">{_e(f["chain"])}</a>' if f.get("chain") else ""
        items.append(f'<li class="wrong-{_e(f["severity"])}">{_badge(f["severity"])} <span class="mono">{rule}</span>{where}: '
                     f'{_e(f["message"])} <a href="#f{numbers[id(f)]}" class="t">details</a></li>')
    return (f'<section id="wrong" class="{cls}"><h2>What is wrong: {errors} error{"s" if errors != 1 else ""}, '
            f'{len(bad) - errors} warning{"s" if len(bad) - errors != 1 else ""}</h2><ol>{"".join(items)}</ol></section>')



def _findings_table(findings: list[dict], numbers: dict[int, int] | None = None) -> str:
    """The findings as a table; with `numbers` (id(finding) -> n), each row is the target `#fN`
    that the timelines' pins and the summary at the top link to."""
    rows = []
    for f in findings:
        n = numbers.get(id(f)) if numbers is not None else None
        row_id = f' id="f{n}"' if n is not None else ""
        url = spec_url(f.get("spec"))
        rule = f'<a href="{_e(url)}">{_e(f["rule"])}</a>' if url else _e(f["rule"])
        chain = f'<a href="#{_e(f["chain"])}">{_e(f["chain"])}</a>' if f.get("chain") else ""
        rows.append(f"<tr{row_id}><td>{_badge(f['severity'])}</td><td class=mono>{rule}</td><td>{_e(f['message'])}</td>"
                    f"<td>{chain}</td><td>{' '.join(_mref(m) for m in f.get('messages') or ())}</td></tr>")
    return ("<table><tr><th>severity</th><th>rule</th><th>finding</th><th>chain</th><th>messages</th></tr>"
            + "".join(rows) + "</table>")


def _pretty(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _hops(hops: list[dict]) -> str:
    """The linked pairs of two hops (RULES.md §11): each front chain, the back chain it caused, the
    evidence and the three durations, the chains linked to their articles."""
    if not hops:
        return "<p>No front chain could be tied to a back chain.</p>"
    rows = "".join(
        f'<tr><td><a href="#{_e(h["front"])}">{_e(h["front"])}</a> ({_e(h.get("front_hop"))})</td>'
        f'<td><a href="#{_e(h["back"])}">{_e(h["back"])}</a> ({_e(h.get("back_hop"))})</td><td>{_e(h["link"])}</td>'
        f'<td>{_e(_fmt(h["front_ms"]))} ms</td><td>{_e(_fmt(h["back_ms"]))} ms</td><td>{_e(_fmt(h["gateway_ms"]))} ms</td></tr>'
        for h in hops)
    return ("<table><thead><tr><th>front</th><th>back</th><th>link</th><th>front</th><th>back</th><th>gateway</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>")


def to_html(cap: Capture) -> str:
    roles = cap.roles()
    flagged: dict[int, list[str]] = {}
    for f in cap.findings:
        for m in f.get("messages") or ():
            flagged.setdefault(m, []).append(f"{f['severity']} {f['rule']}")
    by_chain: dict[str, list[dict]] = {}
    for f in cap.findings:
        by_chain.setdefault(f.get("chain") or "", []).append(f)
    counts = {s: sum(1 for f in cap.findings if f["severity"] == s) for s in SEVERITIES}
    numbers = {id(f): n for n, f in enumerate(cap.findings, start=1)}
    times = {i: m.time for i, m in cap.messages.items()}
    title = "mrtr-inspect: " + ", ".join(cap.inputs)
    sessions = ", ".join(f"{s.session} ({s.transport}, {datetime.fromtimestamp(s.time, timezone.utc):%Y-%m-%d %H:%M:%S} UTC)"
                         for s in cap.starts.values())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{plural(len(cap.messages), 'message')} · {plural(len(cap.chains), 'chain')} · "
        f"{plural(counts[Severity.ERROR], 'error')} · {plural(counts[Severity.WARNING], 'warning')} · {plural(counts[Severity.INFO], 'info')}</p>",
        f'<p class="meta">sessions: {_e(sessions) or "none"} · written by mrtr-inspect {_e(__version__)}</p>',
        _wrong(cap.findings, numbers),
        '<p><a href="#chains">Chains</a> · <a href="#findings">Findings</a> · <a href="#messages">Messages</a></p>',
        '<h2 id="chains">Chains</h2>',
    ]
    if cap.hops is not None:  # some session named its hop: the pairs before the chains
        parts[-1:-1] = ['<h2 id="hops">Two hops</h2>', _hops(cap.hops)]
    parts += [_chain(c, by_chain.get(c["id"], []), times, numbers) for c in cap.chains] or ["<p>No chains (no tools/call, prompts/get or resources/read).</p>"]
    parts.append('<h2 id="findings">Findings</h2>')
    parts.append(_findings_table(cap.findings, numbers) if cap.findings else "<p>No findings.</p>")
    parts.append('<h2 id="messages">Messages</h2>')
    for i in sorted(cap.messages):
        m = cap.messages[i]
        role = roles.get(i)
        arrow = "→" if m.direction == Direction.C2S else "←"
        extra = f" · {role.label}: {role.step}" if role else ""
        if i in flagged:
            extra += " · " + ", ".join(flagged[i])
        where = f"exchange {m.exchange}" if m.exchange is not None else m.transport
        parts.append(f'<details id="m{i}"><summary><span class="mono">#{i}</span> <span class="t">{_e(_clock(m.time))}</span> '
                     f'<span class="{_e(m.direction)}">{arrow} {_e(m.label())}</span> <span class="t">({_e(where)}){_e(extra)}</span>'
                     f"</summary><pre>{_e(_pretty(m.raw))}</pre></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
