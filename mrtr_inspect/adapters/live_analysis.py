"""The analysis of a live session: frames inspected, the outputs printed and reported.

    tee chunks ─────▶ StdioAnalysis ─▶ lines ▶ redact ─┐                    ┌▶ report (at the end)
                                                       ├▶ (record) ▶ inspect ┼▶ printer (stderr)
    proxy/addon frames (or steps) ▶ HttpAnalysis ──────┘                    └▶ sinks: live view, flow notes

`StdioAnalysis` splits the tee's chunks into lines (`StdioFramer`); `HttpAnalysis` takes the frames
the proxy made of its exchange steps where it forwarded them (recorder.HttpRecorder), or makes
them itself from steps (`step`). They run away from the traffic: in the analysis process of the
tee and of the embedded proxy (analysis_process.py, whose protocol `chunk`, `eof`, `end` they
speak), or on a thread of stock mitmproxy's process (mitm_addon.ThreadedAnalysis).

A live session's recording is written where the bytes are forwarded (recorder.py), so a kill loses
nothing that crossed; the analysis then has `forwarder_records` and writes nothing to it, unless
the forwarding process died first (`end(…, gone=True)`): then it ends the session in the file.
Used on its own (tests, tools), the analysis records the frames itself, before analysing them;
recording and analysis are guarded each on its own, and nothing here can reach the forwarding side.

Each frame is redacted by `redactor_for(config)` (the defaults and the configured paths and headers)
before it is recorded and analysed, so the live findings are those of `check` on the recording
(docs/recording-format.md).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from ..config import Config
from ..core.events import CAPTURE_ENDED, SessionEnd, SessionStart, StdioLine
from ..core.findings import Finding
from ..core.framing import StdioFramer
from ..analysis import Analysis
from ..core.inspector import ChainEvent
from ..core.messages import Message
from ..outputs.report import ReportBuilder
from ..outputs.text import FindingPrinter, chain_line, tool_line
from ..recording.files import open_private, why
from ..recording.format import decode
from ..recording.secrets import SecretScan
from ..recording.writer import RecordingWriter, redactor_for
from .flows import FlowFramer

if TYPE_CHECKING:
    from ..outputs.live import LiveView
    from .exports import Exports

REPORT_FAILED = 1  # the analysis process' exit status when the report could not be written at the end
NOT_STARTED = "not_started"  # in the end's info: the capture never began (a proxy that could not listen): no report


class Sink(Protocol):
    """A consumer of the outputs besides the report and the printer (the live view, the flow notes)."""

    def add(self, out) -> None: ...


class LiveAnalysis:
    """Records and analyses the frames of one session, in order (`_analyse`), then ends it (`end`).

    The subclasses turn what they are handed into frames: `StdioAnalysis` the tee's chunks,
    `HttpAnalysis` the proxy's exchange steps.
    """

    say: Callable[[str], None] | None = None  # where its own lines go without a printer (default stderr)

    def __init__(self, start: SessionStart, config: Config, writer: RecordingWriter | None,
                 printer: FindingPrinter | None, report: ReportBuilder | None, report_path: str | None = None,
                 sinks: Iterable[Sink] = (), forwarder_records: bool = False, exports: Exports | None = None) -> None:
        self.session = start.session
        self.writer = writer
        self.forwarder_records = forwarder_records  # the forwarding process writes the recording
        self.inspector = Analysis(config)
        self.printer = printer
        self.report = report
        self.report_path = report_path
        self.errors = 0
        # what the recording holds is what the analysis sees (docs/recording-format.md, Redacted)
        self.redactor = writer.redactor if writer is not None else redactor_for(config)
        self.redact = self.redactor.frame
        self.exports = exports  # the live OTLP and metrics exports: sinks too (adapters/exports.py)
        self.sinks = tuple(sinks) + tuple(self._exports(self.redact(start)))
        self.secrets = SecretScan()  # what the redaction missed, said at the end
        self._analyse([start], record=False)  # the writer wrote the header when it opened the file

    def end(self, info: dict, t: float, gone: bool = False) -> int:
        """The session is over: the session end, the recording closed, the report. Returns the
        analysis process' exit status: REPORT_FAILED when the report could not be written, else 0.
        `gone`: the forwarding process went away without ending the session (killed)."""
        self._handle(self.inspector.feed(SessionEnd(t, self.session, info)))
        self._handle(self.inspector.close(t))
        if self.writer is not None:
            try:
                if not self.forwarder_records or gone:
                    self.writer.close(info, t, after_kill=gone)
                else:
                    self.writer.release()  # the forwarding process ended the recording
            except Exception as e:
                self._internal(e, "recording")
            try:
                for line in self.secrets.lines(self.redactor):
                    self._say(line)
            except Exception as e:
                self._internal(e, "output")
        if self.exports is not None:
            try:
                self.exports.close()
            except Exception as e:
                self._internal(e, "export")
        status = 0
        if self.report is not None and self.report_path:
            try:
                if not info.get(NOT_STARTED):
                    with open_private(self.report_path) as f:
                        self.report.write_json(f)
            except OSError as e:
                self._say(f"cannot write report {self.report_path}: {why(e)}")
                status = REPORT_FAILED
            self.report.close()
        return status

    def _exports(self, start: SessionStart) -> list:
        if self.exports is None:
            return []
        try:
            return self.exports.sinks(start, self._say)
        except Exception as e:  # the session goes on without them
            self._internal(e, "export")
            return []

    def _analyse(self, frames: list, record: bool = True, redacted: bool = False) -> None:
        if not redacted:
            try:
                frames = [self.redact(f) for f in frames]
            except Exception as e:  # neither recorded nor analysed: what could not be redacted goes nowhere
                self._internal(e, "redaction")
                return
        if record and self.writer is not None and not self.forwarder_records:
            try:
                for f in frames:
                    self.writer.write_redacted(f)
            except Exception as e:
                self._internal(e, "recording")
        for f in frames:
            self._handle(self.inspector.feed(f))  # feed never raises: a failure is a finding

    def _handle(self, outs: list) -> None:
        for o in outs:
            try:
                if type(o) is Message and self.writer is not None:
                    self.secrets.message(o)
                if self.report is not None:
                    self.report.add(o)
                if self.printer is not None:
                    if type(o) is Finding:
                        self.printer.finding(o)
                    elif type(o) is ChainEvent and o.kind == "closed":
                        self.printer.line(chain_line(o.chain.summary()), style="bold")
            except Exception as e:
                self._internal(e, "output")
        for sink in self.sinks:
            for o in outs:
                try:
                    sink.add(o)
                except Exception as e:
                    self._internal(e, "output")

    def _internal(self, e: BaseException, what: str) -> None:
        self.errors += 1
        if self.errors <= 3:
            self._say(f"internal {what} error (traffic unaffected): {type(e).__name__}: {e}")

    def _say(self, text: str) -> None:
        try:
            if self.printer is not None:
                self.printer.line(text, style="red")
            elif self.say is not None:
                self.say(text)
            else:
                sys.stderr.write(tool_line(text))
                sys.stderr.flush()
        except Exception:
            pass


class StdioAnalysis(LiveAnalysis):
    """The tee's session: the chunks of both pipes split into lines (`StdioFramer`)."""

    def __init__(self, start: SessionStart, config: Config, writer: RecordingWriter | None,
                 printer: FindingPrinter | None, report: ReportBuilder | None, report_path: str | None = None,
                 forwarder_records: bool = False, exports: Exports | None = None) -> None:
        self.framer = StdioFramer(start.session, config.max_message_bytes)  # a longer line: not held (cut)
        super().__init__(start, config, writer, printer, report, report_path, forwarder_records=forwarder_records,
                         exports=exports)

    def chunk(self, t: float, direction: str, data: bytes) -> None:
        self._analyse(self.framer.data(t, direction, data))  # type: ignore[arg-type]

    def skip(self, t: float, direction: str, n: int) -> None:
        """`n` bytes of a line past the limit the tee counted and did not send (stdio_tee.Tap)."""
        self.framer.skip(direction, n)  # type: ignore[arg-type]

    def eof(self, t: float, direction: str) -> None:
        self._analyse(self.framer.close(t, direction))  # type: ignore[arg-type]

    def end(self, info: dict, t: float, gone: bool = False) -> int:
        """A line the stream ended in, then the session's end (`LiveAnalysis.end`)."""
        for direction in ("c2s", "s2c"):
            rest = self.framer.close(t, direction)  # type: ignore[arg-type]
            # not an end of file: no close frame; after a kill the forwarder never recorded it
            self._analyse([f for f in rest if type(f) is StdioLine], record=not gone)
        return super().end(info, t, gone)


class HttpAnalysis(LiveAnalysis):
    """The proxy's (and the addon's) session, fed with frames or with HTTP steps.

    `frames(list)`: frames made, redacted and recorded where mitmproxy forwards them
    (recorder.HttpRecorder); the live proxy and the addon feed these. `step(name, args)`: a step
    framed here (`name` one of the framer's methods: `request_head`, `request_data`, `request_end`,
    `response_head`, `response_data`, `response_end`, or `exchange`: a whole exchange read from a
    file), then redacted, recorded and analysed. The outputs go to the report, the live view and
    the flow notes. It speaks the analysis-process protocol too (`chunk`: the frames' records,
    `eof`: the proxy is ready, `end`), so the embedded proxy runs it in a process of its own
    (adapters/proxy.py); in stock mitmproxy `mitm_addon.ThreadedAnalysis` runs it on a thread.
    """

    def __init__(self, start: SessionStart, config: Config, writer: RecordingWriter | None,
                 report: ReportBuilder | None, report_path: str | None, view: LiveView | None = None,
                 notes: Sink | None = None, forwarder_records: bool = False, exports: Exports | None = None) -> None:
        self.http = FlowFramer(start.session, config.max_message_bytes)
        self.view = view
        super().__init__(start, config, writer, None, report, report_path,
                         sinks=(s for s in (view, notes) if s is not None), forwarder_records=forwarder_records,
                         exports=exports)
        if notes is not None:
            notes.core_view = self.inspector.view  # type: ignore[attr-defined]  # each message's chain, read as its frame's outputs come

    def frames(self, frames: list) -> None:
        self._analyse(frames, redacted=True)

    def step(self, name: str, args: tuple) -> None:
        try:
            frames = getattr(self.http, name)(*args)
        except Exception as e:  # pragma: no cover - the framer does not raise
            self._internal(e, "framing")
            return
        self._analyse(frames)

    def chunk(self, t: float, direction: str, data: bytes) -> None:
        """Records as the forwarding process appended them to the recording (`HttpRecorder.records`)."""
        try:
            frames = [decode(line) for line in data.split(b"\n")[:-1]]
        except Exception as e:  # pragma: no cover - the records were encoded by format.encode
            self._internal(e, "framing")
            return
        self.frames(frames)

    def eof(self, t: float, direction: str) -> None:
        """The proxy says it is ready (its ready line is out, the recording's header written): the live
        view may take the screen."""
        if self.writer is not None:
            self.writer.began()
        if self.view is not None:
            self.view.start()

    def end(self, info: dict, t: float, gone: bool = False) -> int:
        for x in self.http.open_exchanges():  # of the steps framed here
            self._analyse(self.http.response_end(t, x, CAPTURE_ENDED))
        status = super().end(info, t, gone)
        if self.view is not None:
            self.view.stop()  # the session's totals
        return status
