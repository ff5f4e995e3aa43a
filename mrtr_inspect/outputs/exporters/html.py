"""`export --to html`: one self-contained page (no script, no external asset) for a bug report.

The chains round by round (what was asked, what was answered, how long the user took), the
findings with their specification links, and every message, collapsed (`<details>`), pretty-printed
when it is JSON. Everything that comes from the recording is escaped; a Content-Security-Policy
that allows no script and no fetch backs that up.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from html import escape
from typing import Iterable

from ...version import __version__
from ...core.findings import spec_url
from ...core.messages import format_id
from ..show import _answered, _asked, _ms, legacy_rounds
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
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


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


def _chain(c: dict, findings: list[dict]) -> str:
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
    meta = (f"{_e(c.get('rounds'))} round(s) · {_e(_ms(c.get('duration_ms')))} · link {_e(c.get('link') or '—')} · "
            f"era {_e(c.get('era') or '?')} · started {_e(_clock(start))}")
    title = chain_label(c)
    return (f'<article class="chain" id="{_e(c["id"])}"><h3>{_e(title)} {_badge(c.get("outcome"))}</h3>'
            f'<p class="meta">{meta}</p><ol class="steps">{"".join(steps)}</ol>'
            + (f"<h4>Findings</h4>{_findings_table(findings)}" if findings else "") + "</article>")


def _findings_table(findings: list[dict]) -> str:
    rows = []
    for f in findings:
        url = spec_url(f.get("spec"))
        rule = f'<a href="{_e(url)}">{_e(f["rule"])}</a>' if url else _e(f["rule"])
        chain = f'<a href="#{_e(f["chain"])}">{_e(f["chain"])}</a>' if f.get("chain") else ""
        rows.append(f"<tr><td>{_badge(f['severity'])}</td><td class=mono>{rule}</td><td>{_e(f['message'])}</td>"
                    f"<td>{chain}</td><td>{' '.join(_mref(m) for m in f.get('messages') or ())}</td></tr>")
    return ("<table><tr><th>severity</th><th>rule</th><th>finding</th><th>chain</th><th>messages</th></tr>"
            + "".join(rows) + "</table>")


def _pretty(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def to_html(cap: Capture) -> str:
    roles = cap.roles()
    flagged: dict[int, list[str]] = {}
    for f in cap.findings:
        for m in f.get("messages") or ():
            flagged.setdefault(m, []).append(f"{f['severity']} {f['rule']}")
    by_chain: dict[str, list[dict]] = {}
    for f in cap.findings:
        by_chain.setdefault(f.get("chain") or "", []).append(f)
    counts = {s: sum(1 for f in cap.findings if f["severity"] == s) for s in ("error", "warning", "info")}
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
        f"<p>{len(cap.messages)} messages · {len(cap.chains)} chains · {counts['error']} errors · "
        f"{counts['warning']} warnings · {counts['info']} infos</p>",
        f'<p class="meta">sessions: {_e(sessions) or "none"} · written by mrtr-inspect {_e(__version__)}</p>',
        '<p><a href="#chains">Chains</a> · <a href="#findings">Findings</a> · <a href="#messages">Messages</a></p>',
        '<h2 id="chains">Chains</h2>',
    ]
    parts += [_chain(c, by_chain.get(c["id"], [])) for c in cap.chains] or ["<p>No chains (no tools/call, prompts/get or resources/read).</p>"]
    parts.append('<h2 id="findings">Findings</h2>')
    parts.append(_findings_table(cap.findings) if cap.findings else "<p>No findings.</p>")
    parts.append('<h2 id="messages">Messages</h2>')
    for i in sorted(cap.messages):
        m = cap.messages[i]
        role = roles.get(i)
        arrow = "→" if m.direction == "c2s" else "←"
        extra = f" · {role.label}: {role.step}" if role else ""
        if i in flagged:
            extra += " · " + ", ".join(flagged[i])
        where = f"exchange {m.exchange}" if m.exchange is not None else m.transport
        parts.append(f'<details id="m{i}"><summary><span class="mono">#{i}</span> <span class="t">{_e(_clock(m.time))}</span> '
                     f'<span class="{_e(m.direction)}">{arrow} {_e(m.label())}</span> <span class="t">({_e(where)}){_e(extra)}</span>'
                     f"</summary><pre>{_e(_pretty(m.raw))}</pre></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
