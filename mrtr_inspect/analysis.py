"""The analysis: the sans-IO core (`core.inspector.Inspector`) and the rule engine
(`rules.registry.RuleEngine`) one after the other, for everything that analyses traffic: `check`,
`show` and the other commands that read recordings, the stdio tee, the proxy and the mitmproxy
addon, the exporters' pass over a recording, the live side of a replay, and the benches.

    a = Analysis(config)
    for frame in frames:               # from an adapter's framer, or from a recording
        for out in a.feed(frame):      # the frame's Message and ChainEvent outputs, then its Finding(s)
            ...
    for out in a.close():
        ...

How a frame becomes findings: the Inspector decodes, pairs and stitches the frame and hands back its
outputs and its observations (frozen, each with the facts of its moment); then the engine judges
those observations in order, and their findings follow the frame's outputs. Neither calls the other.
"""

from __future__ import annotations

from typing import Any, Callable

from .config import Config
from .core.chains import Chain
from .core.events import Frame
from .core.inspector import Inspector
from .core.observations import InspectorFailed
from .rules import load_rules
from .rules.registry import RuleEngine

__all__ = ["Analysis"]


class Analysis:
    """An `Inspector` whose observations the rules judge. `feed`, `feed_line` and `close` return
    what the Inspector returns for the frame, then the findings its observations led to
    (`Finding`); they never raise (a failure is an `inspector-error` finding).

    `observe`, when given, sees every observation of a frame just before the rules judge it (a test,
    a bench, or an output that wants the pairing of each message: `Decoded.request`, `Decoded.creq`).
    An observer that raises is an `inspector-error` too; the rules still judge the observation.

    `chain_events=False`: of the chain events only `closed` ones are output (`Inspector`)."""

    def __init__(self, config: Config | None = None, observe: Callable[[Any], None] | None = None,
                 chain_events: bool = True) -> None:
        load_rules()
        self.config = config or Config()
        self.engine = RuleEngine(self.config)
        self.inspector = Inspector(self.config, chain_events)
        self.observe = observe

    def feed(self, frame: Frame) -> list:
        """Analyse one frame: its messages and chain events, then its findings."""
        out, observed = self.inspector.step(frame)
        if observed:
            if self.observe is None:
                out += self.engine.judge(observed, frame.time)
            else:
                out += self._judge(observed, frame.time, type(frame).__name__)
        return out

    def feed_line(self, time: float, session: str, direction: str, data: bytes, eol: bool = True) -> list:
        """`feed` of a `StdioLine` frame, given as its fields (the recording reader's line tuples)."""
        out, observed = self.inspector.step_line(time, session, direction, data, eol)
        if observed:
            if self.observe is None:  # the common case: `engine.judge` written out, one call less per message
                engine = self.engine
                engine.now = time
                dispatch = engine.dispatch
                for obs in observed:
                    dispatch(obs)
                if engine.findings:
                    out += engine.findings
                    engine.findings = []
            else:
                out += self._judge(observed, time, "StdioLine")
        return out

    def close(self, time: float | None = None) -> list:
        """The capture is over (`Inspector.end`): what that ends, then the last findings."""
        out, observed = self.inspector.end(time)
        if observed:
            out += self._judge(observed, self.inspector.now if time is None else time, None)
        return out

    def _judge(self, observed: list, now: float, frame: str | None) -> list:
        observe = self.observe
        if observe is not None:  # (feed and feed_line call the engine themselves when there is no observer)
            seen = []
            for obs in observed:
                seen.append(obs)
                try:
                    observe(obs)
                except Exception as e:  # the observer's failure is said; the rules judge the observation anyway
                    seen.append(InspectorFailed(frame, e, now))
            observed = seen
        return self.engine.judge(observed, now)

    @property
    def open_chains(self) -> list[Chain]:
        return self.inspector.open_chains
