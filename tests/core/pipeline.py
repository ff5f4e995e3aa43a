"""Run frames through one analysis (the core and the rules), and reduce its outputs to what a user
sees, to compare runs."""

from __future__ import annotations

from collections.abc import Iterable

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.config import Config
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from mrtr_inspect.core.observations import Decoded


class Outputs(list):
    """The outputs of a run, and what the pipeline paired: `answers[index]`, the index of the request
    the response `index` answers (`Decoded.request`)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[int, int] = {}

    def observe(self, obs) -> None:
        if type(obs) is Decoded and obs.request is not None:
            self.answers[obs.msg.index] = obs.request.index


def analyse(frames: Iterable, config: Config | None = None) -> Outputs:
    """Every output of the frames, the close included."""
    outs = Outputs()
    insp = Analysis(config, outs.observe)
    for f in frames:
        outs += insp.feed(f)
    outs += insp.close()
    return outs


def digest(outs: list) -> list:
    """Messages, chain events and findings as plain tuples (comparable across runs); a message with the
    request it answers when `outs` are `Outputs`."""
    answers = outs.answers if isinstance(outs, Outputs) else None
    out = []
    for o in outs:
        if type(o) is Message:
            out.append(("m", o.index, o.kind, o.era, o.raw, answers.get(o.index) if answers is not None else None))
        elif type(o) is ChainEvent:
            out.append(("c", o.kind, o.chain.id, o.time))
        elif type(o) is Finding:
            out.append(("f", o.rule, o.severity, o.message, tuple(o.messages), o.chain))
    return out
