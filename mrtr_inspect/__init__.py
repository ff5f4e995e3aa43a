"""mrtr-inspect: watch, stitch, check, record and replay MCP multi-round requests.

The public Python API (docs/api.md); names outside `__all__` are internal.

    import mrtr_inspect
    report = mrtr_inspect.check(["session.jsonl"])      # what `mrtr-inspect check` computes
    for finding in report.findings:
        print(finding.rule, finding.severity, finding.message)

`check` and `Report` (its `chains`, `findings`, `to_dict()`); `Analysis`, the sans-IO pipeline with
the rules (frames in; messages, chain events and findings out), and `Inspector`, the core alone
(messages and chain events); the frames they are fed (`SessionStart`, `StdioLine`, `HttpRequest`…).
The names are imported when first used, so `import mrtr_inspect` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import Analysis
    from .api import ChainSummary, HopLink, Report, RequestSummary, RoundSummary, Summary, check
    from .config import Config
    from .core.events import Frame, HttpBody, HttpEnd, HttpRequest, HttpResponse, SessionEnd, SessionStart
    from .core.events import SseEvent, StdioClose, StdioLine
    from .core.findings import Finding
    from .core.inspector import ChainEvent, Inspector
    from .core.messages import Message
    from .recording.reader import UnreadableRecording

_WHERE = {
    "check": "api", "Report": "api", "Summary": "api", "ChainSummary": "api", "RequestSummary": "api",
    "RoundSummary": "api", "HopLink": "api",
    "Analysis": "analysis",
    "Inspector": "core.inspector", "ChainEvent": "core.inspector",
    "Message": "core.messages",
    "Finding": "core.findings",
    "Config": "config",
    "UnreadableRecording": "recording.reader",
    **{name: "core.events" for name in ("Frame", "SessionStart", "SessionEnd", "StdioLine", "StdioClose",
                                        "HttpRequest", "HttpResponse", "HttpBody", "SseEvent", "HttpEnd")},
}

__all__ = ["__version__", *_WHERE]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'mrtr_inspect' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
