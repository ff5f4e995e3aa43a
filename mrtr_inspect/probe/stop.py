"""Ctrl-C (SIGINT) and SIGTERM while a probe runs (`probe`, `probe-client`): the run stops what it
started and reports what was judged so far."""

from __future__ import annotations

import contextlib
import signal
import threading


class StopSignals:
    """Ctrl-C (SIGINT) and SIGTERM while a probe runs (`with StopSignals() as stop:`, main thread
    only; the previous handlers come back after).

    The first signal raises KeyboardInterrupt, as Python's own SIGINT handler does; the run stops
    what it started (probe-client: the client's process group and the probe server; probe: the
    server under test) and reports what was judged so far. Later signals are only noted: the clean-up they would cut short is itself bounded (SIGTERM, then SIGKILL).
    The handlers are installed whatever was inherited: a shell without job control (a script, `make
    test &`, many CI runners) starts a background command with SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler at all, so a Ctrl-C or `kill -INT` never reached the run
    (as `mrtr-inspect`'s proxy and `replay serve`, and mitmdump, which take SIGINT and SIGTERM
    whatever they inherited). `held()`: a signal is taken at the next `check()` instead (while the
    client starts, so that its process group is known and stopped)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = 0
        self._held = False
        self._old: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()

    def _on_signal(self, signum: int, frame) -> None:
        first = not self.signum
        self.signum = self.signum or signum
        if first and not self._held:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self):
        self._held = True
        try:
            yield
        finally:
            self._held = False

    def check(self) -> None:
        if self.signum:
            raise KeyboardInterrupt
