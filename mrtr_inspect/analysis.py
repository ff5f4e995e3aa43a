"""The analysis: the sans-IO core (`core.inspector.Inspector`) and the rule engine
(`rules.registry.RuleEngine`) wired together, for everything that analyses traffic: `check`,
`show` and the other commands that read recordings, the stdio tee, the proxy and the mitmproxy
addon, the exporters' pass over a recording, the live side of a replay, and the benches.

    a = Analysis(config)
    for frame in frames:               # from an adapter's framer, or from a recording
        for out in a.feed(frame):      # the frame's Message and ChainEvent outputs, then its Finding(s)
            ...
    for out in a.close():
        ...

The Inspector hands each observation to the engine as it makes it; the engine's findings wait
until the frame is done and come after its messages and chain events. The core knows nothing of
the rules: the engine reads the few facts it needs besides the observations from the Inspector's
view (`InspectorView`).
"""

from __future__ import annotations

from typing import Any, Callable

from .config import Config
from .core.chains import Chain
from .core.events import Frame
from .core.inspector import Inspector, InspectorView
from .rules import load_rules
from .rules.registry import RuleEngine

__all__ = ["Analysis"]


class Analysis:
    """An `Inspector` whose observations the rules judge. `feed`, `feed_line` and `close` return
    what the Inspector returns for the frame, then the findings made meanwhile (`Finding`); they
    never raise (a failure is an `inspector-error` finding).

    `observe`, when given, sees every observation just before the rules do (a test, a bench, or an
    output that wants the pairing of each message: `Decoded.request`, `Decoded.creq`)."""

    def __init__(self, config: Config | None = None, observe: Callable[[Any], None] | None = None) -> None:
        load_rules()
        self.config = config or Config()
        self.engine = engine = RuleEngine(self.config)
        sink: Callable[[Any], None] = engine.dispatch
        if observe is not None:
            judge = sink

            def sink(obs: Any) -> None:
                try:
                    observe(obs)
                finally:  # an observer that fails does not keep the rules from the observation
                    judge(obs)

        self.inspector = Inspector(self.config, sink)
        self.view: InspectorView = self.inspector.view
        engine.view = self.view
        self._feed = self.inspector.feed
        self._feed_line = self.inspector.feed_line

    def feed(self, frame: Frame) -> list:
        """Analyse one frame: its messages and chain events, then its findings."""
        out = self._feed(frame)
        if self.engine.findings:
            out += self.engine.drain()
        return out

    def feed_line(self, time: float, session: str, direction: str, data: bytes, eol: bool = True) -> list:
        """`feed` of a `StdioLine` frame, given as its fields (the recording reader's line tuples)."""
        out = self._feed_line(time, session, direction, data, eol)
        if self.engine.findings:
            out += self.engine.drain()
        return out

    def close(self, time: float | None = None) -> list:
        """The capture is over (`Inspector.close`): what that ends, then the last findings."""
        out = self.inspector.close(time)
        out += self.engine.drain()
        return out

    @property
    def open_chains(self) -> list[Chain]:
        return self.inspector.open_chains
