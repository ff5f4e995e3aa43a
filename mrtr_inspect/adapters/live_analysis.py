"""A live session's analysis, the same for the tee, the proxy and the addon: what crossed is redacted,
recorded, analysed, then printed, reported and exported. `new_analysis` makes it for all three.

    tee chunks ──────────▶ StdioInput: lines ──▶ redact ─┐                     ┌▶ report (at the end)
    proxy/addon records ─▶ HttpInput: frames (redacted) ─┼▶ (record) ▶ analyse ─┼▶ printer (stderr)
    steps (tests, tools) ▶ HttpInput: FlowFramer ▶ redact┘                     └▶ sinks: live view, flow
                                                                                   notes, OTLP, metrics

`LiveAnalysis` runs away from the traffic: in the analysis process of the tee and of the embedded
proxy (analysis_process.py, whose protocol `chunk`, `skip`, `behind`, `upto`, `eof`, `end` it speaks), or on a thread
of stock mitmproxy's process (mitm_thread.AnalysisThread, which hands it `frames`). Its input turns
what it is handed into frames: `RecordedInput` reads the tee's session back from its recording as
the tee writes it (`upto`: the tee sends only how far its writes reached); without a recording,
`StdioInput` splits the tee's chunks into lines (`StdioFramer`); `RecordedHttpInput` reads the
embedded proxy's session back from its recording the same way (from where its header ended: `follow`);
without one, `HttpInput` decodes the records the forwarding process made of its exchange steps where
it forwarded them (recorder.HttpRecorder), or frames steps itself (`step`).

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
import time
from typing import TYPE_CHECKING, Callable, Protocol

from ..analysis import Analysis
from ..config import Config
from ..core.events import HttpBody, HttpRequest, SessionEnd, SessionStart, SseEvent, StdioLine
from ..core.findings import Finding
from ..core.framing import mib, parse_sse_event
from ..core.inspector import ChainEvent
from ..core.messages import Message
from ..outputs.report import ReportBuilder
from ..outputs.text import FindingPrinter, chain_line, tool_line
from ..recording.files import open_private, why
from ..recording.secrets import SecretScan
from ..recording.writer import RecordingWriter, new_session_id, redactor_for
from .analysis_process import QUIET, Yielding
from .live_inputs import HttpInput, RecordedHttpInput, RecordedInput, StdioInput

if TYPE_CHECKING:
    from ..outputs.live import LiveView
    from .exports import Exports

#: seconds between the proxy follower's looks at its recording: while it grows; doubling to the most, while it does not
LOOK_AFTER = (0.01, 0.25)
REPORT_FAILED = 1  # the analysis process' exit status when the report could not be written at the end
NOT_STARTED = "not_started"  # in the end's info: the capture never began (a proxy that could not listen): no report


class Sink(Protocol):
    """A consumer of the outputs besides the report and the printer (the live view, the flow notes)."""

    def add(self, out) -> None: ...


def http_info(upstream: str, live: bool = True, hop: str | None = None) -> dict:
    """What a proxy session's header says of it: its upstream, whether it forwards traffic (not flows
    read from a file, which may have begun late: RULES.md §10.8), its hop."""
    info: dict = {"upstream": upstream, "live": live}
    if hop:
        info["hop"] = hop
    return info


def session_start(writer: RecordingWriter | None, transport: str, info: dict) -> SessionStart:
    """A capture session's start: the recording's header when there is one."""
    return writer.start if writer is not None else SessionStart(time.time(), new_session_id(), transport, dict(info))


def new_analysis(start: SessionStart, config: Config, writer: RecordingWriter | None = None,
                 report_path: str | None = None, *, record: str | None = None, printer: FindingPrinter | None = None,
                 view: LiveView | None = None, notes: Sink | None = None, forwarder_records: bool = False,
                 exports: Exports | None = None, follow: tuple | None = None) -> LiveAnalysis:
    """The analysis of one live session (the tee's, the proxy's, the addon's), its input chosen by
    `start.transport` (and `follow`: the recording, read as it grows: `RecordedInput` for the tee,
    `RecordedHttpInput` for the proxy, whose offset comes later, by `LiveAnalysis.follow`). `report_path`: where the report goes at the end (it names `record`, else the
    writer's file); `printer`: findings on a terminal (the tee); `view`: the proxy's live view;
    `notes`: the addon's flow notes; `forwarder_records`: an `HttpRecorder` or `StdioRecorder`
    records where the bytes are forwarded; `exports`: the live OTLP and metrics exports."""
    recorded = record if record else str(writer.path) if writer is not None else None
    builder = ReportBuilder([recorded] if recorded else []) if report_path else None
    return LiveAnalysis(start, config, writer, printer, builder, report_path, view=view, notes=notes,
                        forwarder_records=forwarder_records, exports=exports, follow=follow)


def _payload(item) -> bytes | None:
    """The JSON text a record's redaction paths apply to (a line, a request or response body, an
    event's data), or None."""
    t = type(item)
    if t is tuple:
        return item[3]
    if t is StdioLine or t is HttpBody:
        return item.data
    if t is HttpRequest:
        return item.body
    if t is SseEvent:
        return parse_sse_event(item.raw).data
    return None


class LiveAnalysis:
    """Records and analyses the frames of one session, in order (`_analyse`), then ends it (`end`).

    It speaks the analysis-process protocol (`chunk`, `skip`, `eof`, `end`: analysis_process.py);
    `frames(list)` takes frames redacted and recorded where they were forwarded (the addon's thread),
    `step(name, args)` an HTTP step to frame here (`HttpInput.step`). The outputs go to the report,
    the printer, the live view, the flow notes and the exports."""

    say: Callable[[str], None] | None = None  # where its own lines go without a printer (default stderr)

    def __init__(self, start: SessionStart, config: Config, writer: RecordingWriter | None,
                 printer: FindingPrinter | None, report: ReportBuilder | None, report_path: str | None = None,
                 *, view: LiveView | None = None, notes: Sink | None = None, forwarder_records: bool = False,
                 exports: Exports | None = None, follow: tuple | None = None) -> None:
        self.session = start.session
        limit = config.max_message_bytes
        self.input: StdioInput | HttpInput
        if follow is not None and start.transport != "stdio":  # (file, None): the proxy says where to begin
            self.input = RecordedHttpInput(start.session, limit, self.ready, follow[0], config.max_backlog_bytes,
                                           self._skipping)
        elif follow is not None:  # (file, offset): the tee's recording, read from the end of its header on
            self.input = RecordedInput(start.session, limit, follow[0], follow[1], config.max_backlog_bytes,
                                       self._skipping)
        elif start.transport == "stdio":
            self.input = StdioInput(start.session, limit)
        else:
            self.input = HttpInput(start.session, limit, self.ready)
        self.writer = writer
        self.forwarder_records = forwarder_records  # the forwarding process writes the recording
        self.inspector = Analysis(config)
        self.printer = printer
        self.report = report
        self.report_path = report_path
        self.view = view
        self.errors = 0
        # what the recording holds is what the analysis sees (docs/recording-format.md, Redacted)
        self.redactor = writer.redactor if writer is not None else redactor_for(config)
        self.redact = self.redactor.frame
        self.exports = exports  # the live OTLP and metrics exports: sinks too (adapters/exports.py)
        sinks: tuple = tuple(s for s in (view, notes) if s is not None)
        self.sinks = sinks + tuple(self._exports(self.redact(start)))
        if notes is not None:
            self.inspector.observe = notes.observe  # type: ignore[attr-defined]  # each message's chain, before its frame's outputs
        self.secrets = SecretScan()  # what the redaction missed, said at the end
        self.skipped = 0  # messages the forwarding side did not hand over, the analysis behind (`behind`)
        self._backlog = config.max_backlog_bytes
        self._said_behind = False
        self._look = LOOK_AFTER[0]
        #: a follower yields to the traffic (analysis_process.Yielding, `live_yield_seconds`): the
        #: proxy's in `look`, the tee's in `analysis_main`, which acts on its notices
        self.yielding = Yielding(config.live_yield_seconds)
        self._size = -1  # the proxy's recording's size at the last look
        self._analyse([start], record=False)  # the writer wrote the header when it opened the file

    # -- what it is handed ------------------------------------------------------------------------
    def follow(self, t: float, offset: int) -> None:
        """The proxy listens: its session's records begin at `offset` of the recording."""
        if type(self.input) is RecordedHttpInput:
            self.input.start(offset)

    def look(self) -> float | None:
        """The proxy's recording, read as far as it is whole (its writes wake nothing: the proxy's
        event loop makes no system call and wakes no thread for its analysis); returns the seconds
        until the next look (LOOK_AFTER: soon while it grows, less often while it does not; QUIET
        while it yields to the traffic: `Yielding`), or None when there is nothing to look at (the
        tee's follower is sent notices, `upto`)."""
        inp = self.input
        if type(inp) is not RecordedHttpInput or inp.follower is None or inp.stopped:
            return None
        size = inp.follower.size()
        if size == self._size:  # not grown since the last look: a pause in the traffic
            self.yielding.paused()
        else:
            self._size = size
            if not self.yielding.news(time.monotonic()):  # it flows: the analysis waits (the file holds it)
                return QUIET
        pos = inp.follower.pos
        self.upto(time.time(), 0)
        self._look = LOOK_AFTER[0] if inp.follower.pos != pos else min(2 * self._look, LOOK_AFTER[1])
        return self._look

    def upto(self, t: float, offset: int, final: bool = False) -> None:
        """The recording reached `offset`: the session's records since the last notice, analysed
        (redacted where they were recorded)."""
        inp = self.input
        if not inp.follows:  # pragma: no cover - only a follower is sent UPTO
            return
        feed, feed_line, handle = self.inspector.feed, self.inspector.feed_line, self._handle
        # the forwarding process redacted the records: which configured paths matched is counted
        # here, as the analysis' own redaction counted it (said at the end: `SecretScan.lines`), until all did
        unhit = bool(self.redactor.paths) and not all(self.redactor.hits)
        try:
            for item in inp.items(offset, final):
                if unhit and (raw := _payload(item)) is not None:
                    unhit = self.redactor.note_paths(raw)
                outs = feed_line(*item) if type(item) is tuple else feed(item)
                if outs:
                    handle(outs)
        except Exception as e:  # an unreadable record is said by the reader's notes; this is the file itself
            self._internal(e, "reading the recording")

    def _skipping(self) -> None:
        self.behind(0.0, 0)  # the live line (the follower counts what it skips: `RecordedInput.skipped`)

    def chunk(self, t: float, direction: str, data: bytes) -> None:
        if self.input.follows:
            self.input.stopped = True  # type: ignore[union-attr]  # the recording stopped: chunks are handed again
        try:
            frames = self.input.chunk(t, direction, data)
        except Exception as e:  # pragma: no cover - the framers do not raise; the records were encoded by format.encode
            self._internal(e, "framing")
            return
        if self.input.redacted and self.redactor.paths and not all(self.redactor.hits):
            self._note_paths(frames)  # redacted where they were recorded: the paths' hits counted here
        self._analyse(frames, redacted=self.input.redacted)

    def _note_paths(self, frames: list) -> None:
        for f in frames:
            if (raw := _payload(f)) is not None and not self.redactor.note_paths(raw):
                return

    def skip(self, t: float, direction: str, n: int) -> None:
        self.input.skip(direction, n)

    def behind(self, t: float, n: int) -> None:
        """The analysis fell `max_backlog_bytes` behind: the tee skips ahead, and has skipped `n`
        messages so far (the live line once, as it begins; the total in the report at the end)."""
        if not self._said_behind:
            self._said_behind = True
            self._say(f"the live analysis fell {mib(self._backlog)} behind the traffic (max_backlog_bytes): it skips "
                      f"ahead, whole messages, until it catches up; {self._where_all()}")
        self.skipped = max(self.skipped, n)

    def _where_all(self) -> str:
        if self.input.follows and self.input.stopped:  # type: ignore[union-attr]
            return "the recording stopped (it could not be written): it does not keep every message either"
        if self.writer is None:
            return "without a recording, what it skips is not analysed anywhere"
        return f"the recording keeps every message: `mrtr-inspect check {self.writer.path}` gives the full verdict"

    def eof(self, t: float, direction: str) -> None:
        if type(self.input) is RecordedInput:
            self.input.stopped = True
        self._analyse(self.input.eof(t, direction))

    def frames(self, frames: list) -> None:
        """Frames redacted (and recorded) where they were forwarded."""
        self._analyse(frames, redacted=True)

    def step(self, name: str, args: tuple) -> None:
        try:
            frames = self.input.step(name, args)  # type: ignore[union-attr]
        except Exception as e:  # pragma: no cover - the framer does not raise
            self._internal(e, "framing")
            return
        self._analyse(frames)

    def ready(self) -> None:
        """The forwarding side is ready (the proxy listens, its recording's header written): the live
        view may take the screen."""
        if self.writer is not None:
            self.writer.began()
        if self.view is not None:
            self.view.start()

    def end(self, info: dict, t: float, gone: bool = False) -> int:
        """The session is over: what the streams ended in, the session end, the recording closed, the
        report. Returns the analysis process' exit status: REPORT_FAILED when the report could not be
        written, else 0. `gone`: the forwarding process went away without ending the session (killed)."""
        inp = self.input
        if inp.follows:  # to the last notice (after a kill: every whole line)
            self.upto(t, inp.last, final=not gone)  # type: ignore[union-attr]
        self._analyse(inp.rest(t), record=not gone)  # after a kill the forwarder never recorded it
        if inp.follows:
            self.skipped += inp.skipped  # type: ignore[union-attr]  # (the forwarder's, `behind`, only if the recording stopped)
        if self.skipped:
            stopped = inp.follows and inp.stopped  # type: ignore[union-attr]
            note = (f"the live analysis skipped {self.skipped} messages, "
                    f"{'as the recording it read stopped, or ' if stopped else ''}behind the traffic by "
                    f"max_backlog_bytes ({mib(self._backlog)}); {self._where_all()}")
            self._say(note)
            if self.report is not None:
                self.report.notes.append(note)
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
        if self.view is not None:
            self.view.stop()  # the session's totals
        return status

    # -- the pipeline -----------------------------------------------------------------------------
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
