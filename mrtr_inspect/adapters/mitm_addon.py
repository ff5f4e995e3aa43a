"""The mitmproxy addon: mitmproxy's events → steps → frames, recorded at once, then analysed elsewhere.

    mitmproxy event loop                                          the analysis (a process, or a thread)
    requestheaders ─┐                                             ┌▶ LiveAnalysis ─▶ report,
    request body    ├─ (step, args) ─▶ HttpRecorder: FlowFramer ──┤                  live view,
    responseheaders │   each chunk framed and its frames written  │                  flow notes
    response body   │   to the recording, then returned unchanged │
    response/error ─┘   to be forwarded                           └ (the frames recorded are the frames analysed)

Forward first, analyse after: request bodies and response bodies go through stream callbacks that
hand each chunk to the recorder and back to mitmproxy untouched, so every server-sent event reaches
the client when the server sends it, and nothing is buffered. The recorder (recorder.HttpRecorder)
frames the steps where they happen (content-encoding removed on a copy, SSE split into events),
redacts the frames and appends them to the recording before the hook returns, so a kill loses no
message that crossed. A message mitmproxy takes whole (a small body of known length: flows.is_streamed)
is forwarded only once its body is in, so its head waits for it and both are framed and recorded in
one step (`request_message` at `request`, `response_message` at `response`, the head keeping the time
it came): one step per message instead of three, one write per response instead of two. The
callbacks and hooks never raise: a chunk is never dropped for the recording's or the analysis' sake. The rules run elsewhere (live_analysis.LiveAnalysis, made by
`new_analysis` as for the tee): in a process of its own for the embedded proxy
(proxy.AnalysisProcess), on a thread in stock mitmproxy (mitm_thread.AnalysisThread; `mitmdump -s
addons/mrtr_inspect.py`, options declared in `load()`, checked in `configure()`). A JSON body is
analysed whole once it is over.

Flows read from a file (`mitmdump -r FILE`, mitmweb's open) go through the same hooks, but no body
comes through a stream callback: each is analysed whole when its request headers are announced, from
the bodies and times the file holds, as `import` reads them (flows.py translates flows, live or read,
for both).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from mitmproxy import ctx, exceptions, http
from mitmproxy.connection import ConnectionState
from mitmproxy.proxy.mode_specs import ReverseMode

from ..config import Config
from ..core.events import CAPTURE_ENDED, CLIENT_DISCONNECTED, UPSTREAM_ERROR
from ..outputs.live import LiveView
from ..recording.writer import redactor_for
from .flow_notes import NOTES_KEY, FlowNotes, HeldSaves, show_comment_column
from .flows import (CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, as_text, flow_client, flow_exchange, flow_headers,
                    head_values, streamed, unkept_note, with_host)
from .host_guard import HostGuard, refused
from .live_analysis import new_analysis, session_start
from .mitm_options import SESSION_OPTIONS, Session, declare, open_session
from .mitm_thread import AnalysisThread, LoopOutbox, log_line
from .recorder import HttpRecorder

__all__ = ["MrtrInspect", "NOTES_KEY"]

logger = logging.getLogger("mrtr_inspect")

_HTTP1 = frozenset({b"HTTP/1.1", b"HTTP/1.0"})


class _Forward:
    """A stream callback: queues each chunk for the analysis, returns it unchanged. With `keep` (a
    response body under `store_streamed_bodies`) it also keeps what went by, for `error`."""

    __slots__ = ("put", "step", "x", "keep")

    def __init__(self, put: Callable, step: str, x: int, keep: bytearray | None = None) -> None:
        self.put, self.step, self.x, self.keep = put, step, x, keep

    def __call__(self, data: bytes) -> bytes:
        if data:  # b"" marks the end; the request/response hooks report that
            try:
                self.put((self.step, (time.time(), self.x, data)))
                if self.keep is not None:
                    self.keep += data
            except BaseException:  # never drop a chunk for the analysis' sake
                pass
        return data


class _Flow:
    __slots__ = ("x", "request_done", "streamed", "kept", "req_head", "resp_head")

    def __init__(self, x: int) -> None:
        self.x = x
        self.request_done = False
        self.streamed = False  # the body in hand (request, then response) goes through a stream callback
        self.kept: bytearray | None = None  # the streamed response body so far, under store_streamed_bodies
        # a head whose body mitmproxy takes whole: framed with its body, in one step, when the body is
        # in (nothing of the message is forwarded before that)
        self.req_head: tuple | None = None
        self.resp_head: tuple | None = None


class MrtrInspect:
    """Records and analyses the MCP traffic mitmproxy forwards (one capture session per run).

    `analysis` is where the steps go (`put(step)`, `finish(info)`). The embedded proxy gives it
    (an analysis process of its own); in stock mitmproxy the addon makes one from its options
    (`--set mrtr_record=PATH` …) when mitmproxy runs, on a thread, logging to mitmproxy's event log.
    There, without a `config`, each session reads the project's settings as the command line does
    (`mrtr_config`, else the file found from the current directory; docs/configuration.md).

    The options are checked (and the recording and metrics opened) in `configure`, as mitmproxy's
    own addons do: while mitmproxy runs, a bad value is an `OptionsError` and the session goes on
    with the settings it had; a good one ends the session and begins another. Before mitmproxy runs
    a bad value is one ERROR line at `running` (mitmproxy's startup check then stops mitmproxy):
    mitmproxy configures a script from a task of its script loader, where an `OptionsError` would
    be logged with a traceback.
    """

    def __init__(self, config: Config | None = None, *, analysis=None, guard: HostGuard | None = None) -> None:
        self.config = config or Config()
        # the embedded proxy's Host/Origin check, run first from these hooks: mitmproxy visits every
        # addon with every event of every flow, so one addon fewer saves that much on each
        self.guard = guard
        self.embedded = analysis is not None
        self.settings_file = config is None and not self.embedded
        self.analysis = analysis
        self.notes: FlowNotes | None = None
        self.outbox: LoopOutbox | None = None
        self.saves: HeldSaves | None = None  # mitmproxy's flow file waits for each flow's notes
        self.stopping = False  # errors from here on are the proxy closing, not the client leaving
        self.is_running = False
        self._next_session: Session | None = None  # checked by `configure`, begun by `running`
        self._options: tuple | None = None  # the values the next (or current) session was made of
        self._error: str | None = None  # what `configure` found wrong before mitmproxy ran
        self._flows: dict[str, _Flow] = {}
        self._next = 0
        self.unkept = 0  # flows read from a file without a body they had (not analysed)

    # -- mitmproxy lifecycle ----------------------------------------------------------------------
    def load(self, loader) -> None:
        if self.guard is not None:
            self.guard.load(loader)
        declare(loader)

    def configure(self, updated: set[str]) -> None:
        if self.guard is not None:
            self.guard.configure(updated)
        if self.embedded or not updated & SESSION_OPTIONS:
            return
        values = tuple(getattr(ctx.options, name, None) for name in sorted(SESSION_OPTIONS))
        if values == self._options:  # configured again as it is (mitmproxy's startup, a rollback)
            return
        try:
            session = open_session(ctx.options, None if self.settings_file else self.config, self._upstream())
        except exceptions.OptionsError as e:
            if self.is_running:
                raise  # mitmproxy puts the options back; the session goes on
            self._error = str(e)
            return
        self._error, self._options = None, values
        self._drop_next()
        self._next_session = session
        if self.is_running:
            self._end()  # a new session with the new settings
            self._begin()

    def running(self) -> None:
        if self._options is None and self._error is None and not self.embedded:  # never configured with ours
            self.configure(set(SESSION_OPTIONS))
        self.is_running = True
        if self._error is not None:  # one line, and mitmproxy's startup check stops it
            logger.error("mrtr-inspect: %s", self._error)
            return
        if self._session() is None or self.embedded:
            return
        self.saves = HeldSaves.hold(ctx.master, self._after_notes)
        show_comment_column(ctx.options)

    def done(self) -> None:
        self._end()
        self._drop_next()
        if self.saves is not None:
            self.saves.release()

    def _session(self):
        if self.analysis is None and not self.embedded:
            self._begin()
        return self.analysis

    def _drop_next(self) -> None:
        s, self._next_session = self._next_session, None
        if s is not None:
            s.drop()

    def _begin(self) -> None:
        s, self._next_session = self._next_session, None
        if s is None:  # its options were refused at startup (mitmproxy's startup check stops it)
            return
        self.config = s.config
        for note in s.notes:
            logger.info("mrtr-inspect: note: %s", note)
        if s.exports is not None and s.exports.metrics is not None:
            logger.info("mrtr-inspect: metrics on %s", s.exports.metrics.url)
        if s.writer is not None:
            s.writer.begin()
        self.outbox = outbox = LoopOutbox(ctx.master.event_loop)
        self.notes = FlowNotes(outbox)
        start = session_start(s.writer, "http", s.info)
        redactor = s.writer.redactor if s.writer is not None else redactor_for(s.config)
        recorder = HttpRecorder(start.session, redactor, s.writer, failed=lambda text: logger.warning("mrtr-inspect: %s", text),
                                limit=s.config.max_message_bytes)
        analysis = new_analysis(start, s.config, s.writer, s.report, view=LiveView(write=log_line(outbox), color=False),
                                notes=self.notes, forwarder_records=True, exports=s.exports)
        analysis.say = lambda text: outbox.post(outbox.log, logging.ERROR, f"mrtr-inspect: {text}")
        self.analysis = AnalysisThread(analysis, recorder, s.config.max_backlog_bytes)

    def _end(self) -> None:
        a, self.analysis = self.analysis, None
        if self.unkept:
            note = unkept_note(self.unkept, "did not analyse", "the file read")
            self.unkept = 0
            logger.warning("mrtr-inspect: note: %s", note)
            report = getattr(getattr(a, "analysis", None), "report", None)
            if report is not None:  # the analysis thread reads the notes after finish()
                report.notes.append(note)
        if a is not None:
            a.finish({"exchanges": self._next})
            self._flows.clear()
            if self.saves is not None:
                self.saves.ended.clear()
            if self.outbox is not None:  # the notes and saves still waiting, before mitmproxy closes its file
                self.outbox.flush()
            self._where_it_went(a)

    @staticmethod
    def _where_it_went(a) -> None:
        """Where the session's recording and report went (the last lines of the session's log)."""
        inner = getattr(a, "analysis", None)
        if inner is None:  # the embedded proxy's analysis process says it itself
            return
        writer = inner.writer
        if writer is not None:
            logger.info("mrtr-inspect: recording: %s", writer.path)
        if inner.report_path and getattr(a, "status", None) == 0:
            logger.info("mrtr-inspect: report: %s", inner.report_path)

    def _after_notes(self, fn: Callable, flow: Any) -> bool:
        """`fn(flow)` on the loop once the analysis has done what came before (`HeldSaves`)."""
        a, out = self.analysis, self.outbox
        if a is None or out is None:
            return False
        a.after(lambda: out.post(fn, flow))
        return True

    def _ended_flow(self, flow: http.HTTPFlow) -> None:
        if self.saves is not None:
            self.saves.ended_flow(flow)

    def _upstream(self) -> str:
        specs = [m for m in ctx.options.mode if m.startswith("reverse:")]
        return ReverseMode.parse(specs[0]).data if specs else ", ".join(ctx.options.mode)

    # -- HTTP events (mitmproxy's event loop: quick, and never raising) ----------------------------
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        values = None  # the head's fields the addon reads, in one pass (`head_values`)
        guard = self.guard
        if guard is not None and guard.applies(flow):
            if req.data.http_version in _HTTP1:  # (HTTP/2 and 3: Host is the authority, read by the guard itself)
                fields = req.headers.fields
                values = head_values(fields)
                if not guard.refuses(flow, as_text(values[HOST]), as_text(values[ORIGIN])):
                    value = guard.host_value(flow)
                    if value is not None:  # as mitmproxy sets `host_header`
                        req.headers.fields = with_host(fields, values[-1], value.encode("utf-8", "surrogateescape"))
            else:
                guard.requestheaders(flow)
        try:
            a = self._session()
            if a is None or refused(flow):  # host_guard answered it 403: never forwarded, no part of the session
                return
            if not flow.live:  # read from a file: the whole flow is here, its bodies come through no callback
                self._read(a, flow)
                return
            x = self._next = self._next + 1
            st = self._flows[flow.id] = _Flow(x)
            fields = req.headers.fields
            if values is None:
                values = head_values(fields)
            if streamed(values[CONTENT_TYPE], values[CONTENT_LENGTH]):
                st.streamed = True
                a.put(("request_head", (time.time(), x, req.method, req.data.path.decode("latin-1"), flow_headers(req.headers),
                                        flow_client(flow))))
                req.stream = _Forward(a.put, "request_data", x)
            else:  # mitmproxy's raw parts: the recorder reads them as `flow_headers` does (one step, at `request`)
                st.req_head = (req.method, req.data.path, fields, flow_client(flow))
            if self.notes is not None:
                self.notes.track(x, flow)
        except Exception as e:
            self._failed(e)

    def _read(self, a, flow: http.HTTPFlow) -> None:
        """A flow read from a file, analysed whole from what the file holds (as `import` does); the
        later hooks find no state for it. One whose body the file does not hold is left out."""
        ex = flow_exchange(flow)
        if ex is None:
            self.unkept += 1
            return
        x = self._next = self._next + 1
        if self.notes is not None:
            self.notes.track(x, flow)  # first: the analysis may note it at once
        a.put(("exchange", (x, ex)))
        self._ended_flow(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        st = self._flows.get(flow.id)
        if st is not None and self.analysis is not None:
            st.request_done = True
            head, st.req_head = st.req_head, None
            if head is not None:  # taken whole: one step
                self.analysis.put(("request_message", (time.time(), st.x, *head, flow.request.raw_content or b"", True)))
            else:
                self.analysis.put(("request_end", (time.time(), st.x, True)))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        st = self._flows.get(flow.id)
        a = self.analysis
        if st is None or a is None or flow.response is None:
            return
        try:
            resp = flow.response
            t = time.time()
            fields = resp.headers.fields
            values = head_values(fields)
            st.streamed = streamed(values[CONTENT_TYPE], values[CONTENT_LENGTH])
            if st.streamed:
                a.put(("response_head", (t, st.x, resp.status_code, flow_headers(resp.headers))))
                if getattr(ctx.options, "store_streamed_bodies", False):  # an option of proxyserver
                    st.kept = bytearray()
                resp.stream = _Forward(a.put, "response_data", st.x, st.kept)
            else:
                st.resp_head = (t, st.x, resp.status_code, fields)
        except Exception as e:
            self._failed(e)

    def response(self, flow: http.HTTPFlow) -> None:
        st = self._flows.pop(flow.id, None)
        if st is not None and self.analysis is not None and flow.response is not None:
            self._response_end(st, time.time(), flow.response.raw_content or b"", None)
            self._ended_flow(flow)

    def _response_end(self, st: _Flow, t: float, body: bytes, error: str | None) -> None:
        """The response is over: with its head and whole body in one step when mitmproxy took it
        whole (`body`: what it took), else the end of its stream."""
        head, st.resp_head = st.resp_head, None
        if head is not None:
            self.analysis.put(("response_message", (*head, body, t, error)))
        else:
            self.analysis.put(("response_end", (t, st.x, error)))

    def error(self, flow: http.HTTPFlow) -> None:
        st = self._flows.pop(flow.id, None)
        a = self.analysis
        if st is None or a is None:
            return
        t = time.time()
        if not st.request_done:  # the body never arrived whole
            head, st.req_head = st.req_head, None
            a.put(("request_message", (t, st.x, *head, b"", False)) if head is not None else
                  ("request_end", (t, st.x, False)))
        self._response_end(st, t, b"", self._reason(flow))
        self._keep_broken_stream(st, flow)
        self._ended_flow(flow)

    @staticmethod
    def _keep_broken_stream(st: _Flow, flow: http.HTTPFlow) -> None:
        """Asked to store streamed bodies, mitmproxy drops one whose stream broke off (the official
        SDK client closes an event stream on its answer, often before the server ends it): the body
        that went by is put in the flow, for the flow file (`-w` saves after this hook) and mitmweb.
        The response stays unfinished (no `timestamp_end`), the error stays."""
        resp = flow.response
        if st.kept is not None and resp is not None and resp.raw_content is None:
            try:
                resp.data.content = bytes(st.kept)
            except Exception:  # pragma: no cover - the flow is mitmproxy's, its checks are its own
                pass

    def _reason(self, flow: http.HTTPFlow) -> str:
        """Why an exchange broke off, in the words of `HttpEnd.error`."""
        if self.stopping:
            return CAPTURE_ENDED
        if not flow.client_conn.state & ConnectionState.CAN_READ:
            return CLIENT_DISCONNECTED
        return UPSTREAM_ERROR + (flow.error.msg if flow.error is not None else "unknown")

    def _failed(self, e: Exception) -> None:
        try:
            logger.warning("mrtr-inspect: internal error (traffic unaffected): %s: %s", type(e).__name__, e)
        except Exception:  # pragma: no cover
            pass
