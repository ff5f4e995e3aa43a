"""Run frames through one Inspector, and reduce its outputs to what a user sees, to compare runs."""

from __future__ import annotations

from collections.abc import Iterable

from mrtr_inspect.config import Config
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector
from mrtr_inspect.core.messages import Message


def analyse(frames: Iterable, config: Config | None = None) -> list:
    """Every output of the frames, the close included."""
    insp = Inspector(config)
    outs = []
    for f in frames:
        outs += insp.feed(f)
    return outs + insp.close()


def digest(outs: list) -> list:
    """Messages, chain events and findings as plain tuples (comparable across runs)."""
    out = []
    for o in outs:
        if type(o) is Message:
            out.append(("m", o.index, o.kind, o.era, o.raw, o.request.index if o.request is not None else None))
        elif type(o) is ChainEvent:
            out.append(("c", o.kind, o.chain.id, o.time))
        elif type(o) is Finding:
            out.append(("f", o.rule, o.severity, o.message, tuple(o.messages), o.chain))
    return out
