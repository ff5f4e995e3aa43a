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

        # the engine's findings end each frame's outputs (the Inspector empties the list)
        self.inspector = Inspector(self.config, sink, engine.findings)
        self.view: InspectorView = self.inspector.view
        engine.set_view(self.view)
        #: analyse one frame: its messages and chain events, then its findings
        self.feed: Callable[[Frame], list] = self.inspector.feed
        #: `feed` of a `StdioLine` frame, given as its fields (the recording reader's line tuples)
        self.feed_line: Callable[..., list] = self.inspector.feed_line
        #: the capture is over (`Inspector.close`): what that ends, then the last findings
        self.close: Callable[..., list] = self.inspector.close

    @property
    def open_chains(self) -> list[Chain]:
        return self.inspector.open_chains
