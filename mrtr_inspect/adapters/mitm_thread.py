"""The addon's analysis in stock mitmproxy: a thread of mitmproxy's process, and what it sends back to
mitmproxy's event loop.

    event loop: hooks ─ put(step) ─▶ HttpRecorder (framed, redacted, recorded) ─▶ queue ─▶ AnalysisThread:
                                                          (max_backlog_bytes at most)     LiveAnalysis
    event loop ◀── LoopOutbox.post(fn, …): flow notes, log lines, held flow saves ◀────────┘

The embedded proxy runs the same analysis in a process of its own (proxy.AnalysisProcess).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections import deque
from typing import Any, Callable

from mitmproxy import ctx, hooks, http

from ..core.events import CAPTURE_ENDED, HttpBody, HttpRequest, SseEvent
from ..core.findings import Severity
from .live_analysis import LiveAnalysis
from .recorder import HttpRecorder

logger = logging.getLogger("mrtr_inspect")


#: bytes counted for a frame besides its payload (its head: method, path, headers, status)
FRAME_BYTES = 256
BEGINS = frozenset({"request_head", "request_message", "exchange"})  # the steps an exchange begins with
ENDS = frozenset({"response_end", "response_message", "exchange"})  # and ends with


def held(frames: list) -> int:
    """The bytes of traffic frames stand for, as the backlog counts them: each payload (a request
    body, a response body, an event) and FRAME_BYTES a frame."""
    n = 0
    for f in frames:
        t = type(f)
        n += FRAME_BYTES + (len(f.body) if t is HttpRequest else len(f.data) if t is HttpBody else
                            len(f.raw) if t is SseEvent else 0)
    return n


def messages(frames: list) -> int:
    """The messages among frames the analysis does not get, as the proxy counts them in records: a
    POST's request, a response body, an event."""
    return sum(1 for f in frames if type(f) in (HttpBody, SseEvent) or (type(f) is HttpRequest and f.method == "POST"))


class AnalysisThread:
    """A `LiveAnalysis` on a thread of mitmproxy's process: `put(step)` from the event loop (the step
    framed and recorded there by `recorder`, its frames queued for the thread; a body that decodes
    far is framed on the recorder's own thread, in order: `HttpRecorder.feed`), `after(fn)`,
    `finish(info)` to end the session. proxy.AnalysisProcess is the same in a process.

    The queue is bounded as the proxy's hand-off is (`backlog`: max_backlog_bytes, counted by `held`):
    while more than that is queued, an exchange that begins is recorded whole and not queued, until the
    thread is back to half; the analysis hears it as a stretch begins (`behind`: the live line) and
    once more before the end (the report's note: how many messages it did not get, and that `check`
    of the recording gives the full verdict). An exchange already queued is queued whole."""

    def __init__(self, analysis: LiveAnalysis, recorder: HttpRecorder, backlog: int | None = None) -> None:
        self.analysis = analysis
        self.recorder = recorder
        self.status: int | None = None  # the end's: 0, or REPORT_FAILED
        self.backlog = backlog if backlog is not None else sys.maxsize
        self.queued = 0  # bytes queued (counted on the event loop)
        self.done = 0  # bytes analysed (counted on the thread)
        self.behind = False
        self._skipping: set[int] = set()  # the exchanges the thread does not get (begun while behind)
        self.skipped = 0  # messages not queued
        q: queue.SimpleQueue = queue.SimpleQueue()
        self._put = q.put
        self._get = q.get
        self.thread = threading.Thread(target=self._run, name="mrtr-inspect-analysis", daemon=True)
        self.thread.start()

    def put(self, step: tuple) -> None:
        name, args = step
        x = args[0] if name == "exchange" else args[1]
        if name in BEGINS and (self.behind or self.queued - self.done > self.backlog) and self._is_behind():
            self._skipping.add(x)
        if x in self._skipping:
            if name in ENDS:
                self._skipping.discard(x)
            self.recorder.feed(step, self._skip)
        else:
            self.recorder.feed(step, self._queue)

    def _queue(self, frames: list) -> None:
        self.queued += held(frames)
        self._put(frames)

    def _skip(self, frames: list) -> None:  # recorded, not queued
        self.skipped += messages(frames)

    def _is_behind(self) -> bool:
        held_now = self.queued - self.done
        if not self.behind and held_now > self.backlog:
            self.behind = True
            self._put(("behind", time.time(), self.skipped))
        elif self.behind and held_now <= self.backlog // 2:
            self.behind = False
        return self.behind

    def after(self, fn: Callable[[], Any]) -> None:
        """`fn()` on the analysis thread once the steps put before it are analysed."""
        self.recorder.in_order(fn, self._put)

    def finish(self, info: dict) -> None:
        t = time.time()
        self.recorder.drain()
        for step in self.recorder.end_open(t, CAPTURE_ENDED):
            self.put(step)
        self.recorder.finish(info, t)
        if self.skipped:
            self._put(("behind", t, self.skipped))
        self._put(("end", info, t))
        self.thread.join()

    def _run(self) -> None:
        a = self.analysis
        a.ready()
        while True:
            item = self._get()
            if type(item) is tuple:
                if item[0] == "behind":
                    a.behind(item[1], item[2])
                    continue
                self.status = a.end(item[1], item[2])
                return
            if callable(item):  # what waits for the steps before it to be analysed (`after`)
                item()
                continue
            a.frames(item)
            self.done += held(item)


class LoopOutbox:
    """What the analysis thread has for mitmproxy's event loop (flow notes, log lines, held flow
    saves), done there in the order it was posted: `post(fn, *args)` from any thread, `drain()` on
    the loop (scheduled by the first post of a batch; the addon drains what is left once the
    analysis thread ended, before mitmproxy closes its flow file and its log). The flows whose notes
    changed get one `update` per batch (mitmweb redraws them).

    While mitmproxy's startup error check watches the log (`-r` reads flows before it ends), a line
    at ERROR would stop mitmproxy: such lines wait, in order, until it is done."""

    def __init__(self, loop) -> None:
        self.loop = loop
        self._items: deque = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._lines: list[tuple[int, str]] = []  # log lines held while the startup check watches

    def post(self, fn: Callable, *args: Any) -> None:
        with self._lock:
            self._items.append((fn, args))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop is closed: the addon drains at the end
            pass

    def drain(self) -> None:
        with self._lock:
            items, self._items = self._items, deque()
            self._scheduled = False
        updated: dict[int, http.HTTPFlow] = {}
        for fn, args in items:
            try:
                flow = fn(*args)
                if flow is not None:
                    updated[id(flow)] = flow
            except Exception:  # pragma: no cover - a note or a line never stops the others
                pass
        if updated:
            try:
                ctx.master.addons.trigger(hooks.UpdateHook(list(updated.values())))
            except Exception:  # pragma: no cover
                pass

    def log(self, level: int, text: str) -> None:
        """A line of mitmproxy's log (on the loop: posted as `log`)."""
        if self._lines or (level >= logging.ERROR and _startup_check_watching()):
            self._lines.append((level, text))
            if len(self._lines) == 1:
                self._release_lines()
            return
        logger.log(level, text)

    def _release_lines(self) -> None:
        if _startup_check_watching():
            self.loop.call_later(0.05, self._release_lines)
            return
        lines, self._lines = self._lines, []
        for level, text in lines:
            logger.log(level, text)

    def flush(self) -> None:
        """The end of the session (the analysis thread ended): what is left, at once."""
        self.drain()
        lines, self._lines = self._lines, []
        for level, text in lines:
            logger.log(level, text)


def _startup_check_watching() -> bool:
    """Whether mitmproxy's startup error check still watches the log (an ERROR line then ends mitmproxy)."""
    ec = ctx.master.addons.get("errorcheck") if getattr(ctx, "master", None) is not None else None
    handler = getattr(ec, "logger", None)
    return handler is not None and handler in logging.getLogger().handlers


LEVELS = {Severity.ERROR: logging.ERROR, Severity.WARNING: logging.WARNING}  # a live-view line's level, by its finding's severity


def log_line(outbox: LoopOutbox) -> Callable[[str, str | None], None]:
    """The live view's lines into mitmproxy's log, on its event loop (where mitmproxy prints its own)."""
    def write(text: str, severity: str | None) -> None:
        outbox.post(outbox.log, LEVELS.get(severity or "", logging.INFO), text)
    return write


