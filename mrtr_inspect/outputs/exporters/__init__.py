"""`export PATH --to har|html|mermaid|otlp --output PATH`: a recording in another format
(docs/formats.md). `--to fixture` is the replay package's (replay/export.py).

Each export runs the recording through the core once (`capture.load`), so the chains and findings
it shows are those `check` reports.
"""

from __future__ import annotations

import io
import json
import re
from html import escape
from dataclasses import replace
from typing import Callable, Iterable

from ...config import Config
from ...errors import UserError
from ...recording.files import named, write_private
from ..text import json_printable, printable
from .capture import Capture, chain_label, load

FORMATS = ("har", "html", "mermaid", "otlp")


class ExportError(UserError):
    """The recording cannot be exported in the format asked (the one-line reason)."""


def _har_doc(cap: Capture) -> dict:
    from .har import NoHttp, to_har

    try:
        return to_har(cap)
    except NoHttp as e:
        raise ExportError(f"{cap.inputs[0]}: {e}") from None


def _har_said(cap: Capture, har: dict) -> str:
    """What a HAR holds, which is less than the recording when it has stdio sessions too."""
    entries = har["log"]["entries"]
    chains = {e["_mrtr"]["chain"] for e in entries if e["_mrtr"]["chain"] is not None}
    findings = {(f["rule"], f["message"]) for e in entries for f in e["_mrtr"]["findings"]}
    stdio = sum(1 for s in cap.starts.values() if s.transport == "stdio")
    said = (f"{_count(len(entries), 'entry', 'entries')} of {_count(len(chains), 'chain')}, "
            f"{_count(len(findings), 'finding')} on them")
    if stdio:
        said += f" ({_count(stdio, 'stdio session')} left out: HAR holds HTTP exchanges only)"
    return said


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _html(cap: Capture) -> str:
    from .html import to_html

    return to_html(cap)


# what Markdown reads as emphasis, code, a link, a closing `#` sequence, a table cell or an escape
_MD_PUNCT = re.compile(r"[\\`*_\[\]#~|]")


def _md(text: str) -> str:
    """Text from the recording in a Markdown heading, shown literally: on one line (`printable`), its
    Markdown punctuation backslash-escaped, and `<`, `>`, `&`, quotes and `%` as HTML entities (no
    tag, no entity of the recording's survives, and no `%%{…}%%` a Mermaid-aware viewer might obey)."""
    return escape(_MD_PUNCT.sub(r"\\\g<0>", printable(text)), quote=True).replace("%", "&#37;")


def _mermaid(cap: Capture, markdown: bool = False) -> str:
    """The diagrams of `show --format mermaid`; in Markdown (an output named *.md), each in a
    ```mermaid block under a heading, as GitHub and most Markdown viewers draw them."""
    from ..show import hop_story, render_mermaid_hops

    parts = []
    for c, backs in hop_story(cap.chains, cap.hops):  # a front chain with the back chains it caused: one diagram
        out = io.StringIO()
        render_mermaid_hops([c, *(b for _, b in backs)], cap.hops, out)
        text = out.getvalue()
        parts.append(f"## {_md(chain_label(c))}\n\n```mermaid\n{text.rstrip()}\n```\n" if markdown else text)
    if not parts:
        parts.append("%% no chains (no tools/call, prompts/get or resources/read in this recording)\n")
    return "\n".join(parts) if markdown else "".join(parts)


def _otlp(cap: Capture) -> str:
    from .otlp import to_otlp

    return json_printable(json.dumps(to_otlp(cap), ensure_ascii=False, separators=(",", ":"))) + "\n"


RENDER: dict[str, Callable[[Capture], str]] = {"html": _html, "mermaid": _mermaid, "otlp": _otlp}  # HAR: in export


def _narrow(cap: Capture, flt, to: str) -> None:
    """`--filter`: the chains, findings and pairs it keeps; an HTML page lists only their
    messages, a HAR only the exchanges that carry them (docs/filter.md)."""
    from ..narrow import narrow_capture

    wanted = narrow_capture(cap, flt)
    if to == "html":
        cap.messages = {i: m for i, m in cap.messages.items() if i in wanted}
    elif to == "har":
        exchanges = {(m.session, m.exchange) for i, m in cap.messages.items() if i in wanted and m.exchange is not None}
        cap.frames = [(i, line, f) for i, line, f in cap.frames
                      if getattr(f, "exchange", None) is None or (f.session, f.exchange) in exchanges]


def export(path: "str | list[str]", to: str, output: str, config: Config | None = None,
           redact_paths: Iterable[str] = (), redact_headers: Iterable[str] = (), flt=None) -> list[str]:
    """Write `path` (or several recordings, as one capture) as `to` to `output` (mode 0600: it holds the recording's traffic), redacted as a
    live recording is (the defaults, the configuration's redaction settings, `redact_paths` and
    `redact_headers`): a recording made before a secret was known as one, or by another tool,
    does not carry it into the export. Returns the lines to tell the user (with a warning for each
    redaction path that matched nothing, and a note for each value that looks like a secret);
    raises a UserError with a one-line reason (UnreadableRecording, ExportError, CannotWrite).
    `flt`: a filter (mrtr_inspect.filter) narrowing what is exported."""
    from ...recording.secrets import SecretScan
    from ...recording.writer import redactor_for

    c = replace(config) if config is not None else Config()
    c.redact_paths = [*c.redact_paths, *redact_paths]
    c.redact_headers = [*c.redact_headers, *redact_headers]
    redactor = redactor_for(c)
    cap = load([path] if isinstance(path, str) else list(path), config, redactor.frame)
    if flt is not None:
        _narrow(cap, flt, to)
    said = f"{_count(len(cap.chains), 'chain')}, {_count(len(cap.findings), 'finding')}"
    if to == "har":
        har = _har_doc(cap)
        text, said = json_printable(json.dumps(har, ensure_ascii=False, indent=2)) + "\n", _har_said(cap, har)
    elif to == "mermaid" and output.endswith(".md"):
        text = _mermaid(cap, markdown=True)
    else:
        text = RENDER[to](cap)
    write_private(output, text.encode("utf-8", "backslashreplace"))
    scan = SecretScan()
    for m in cap.messages.values():
        scan.message(m)
    return cap.notes + [f"wrote {named(output)}: {to}, {said}"] + scan.lines(redactor, "--redact-path")
