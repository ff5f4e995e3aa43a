"""The mitmproxy addon: mitmproxy's events → steps → frames, recorded at once, then analysed elsewhere.

    mitmproxy event loop                                          the analysis (a process, or a thread)
    requestheaders ─┐                                             ┌▶ Inspector ─▶ report,
    request body    ├─ (step, args) ─▶ HttpRecorder: FlowFramer ──┤              live view,
    responseheaders │   each chunk framed and its frames written  │              flow notes
    response body   │   to the recording, then returned unchanged │
    response/error ─┘   to be forwarded                           └ (the frames recorded are the frames analysed)

Forward first, analyse after: request bodies and response bodies go through stream callbacks that
hand each chunk to the recorder and back to mitmproxy untouched, so every server-sent event reaches
the client when the server sends it, and nothing is buffered. The recorder (recorder.HttpRecorder)
frames the steps where they happen (content-encoding removed on a copy, SSE split into events),
redacts the frames and appends them to the recording before the hook returns, so a kill loses no
message that crossed; the callbacks and hooks never raise: a chunk is never dropped for the
recording's or the analysis' sake. The rules run elsewhere (live_analysis.HttpAnalysis): in a process
of its own for the embedded proxy (adapters/proxy.py), on a thread in stock mitmproxy (`mitmdump -s
addons/mrtr_inspect.py`, options declared in `load()`). A JSON body is analysed whole once it is over.

Flows read from a file (`mitmdump -r FILE`, mitmweb's open) go through the same hooks, but no body
comes through a stream callback: each is analysed whole when its request headers are announced, from
the bodies and times the file holds, as `import` reads them (flows.py translates flows, live or read,
for both).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections import OrderedDict, deque
from typing import Any, Callable, Optional

from mitmproxy import ctx, exceptions, hooks, http
from mitmproxy.connection import ConnectionState
from mitmproxy.proxy.mode_specs import ReverseMode

from ..config import Config
from ..core.events import CAPTURE_ENDED, CLIENT_DISCONNECTED, UPSTREAM_ERROR, SessionStart
from ..core.findings import Finding
from ..core.hops import hop_problem
from ..core.messages import Message
from ..outputs.live import LiveView
from ..outputs.report import ReportBuilder
from ..recording.files import unwritable
from ..recording.writer import RecordingError, RecordingWriter, new_session_id, redactor_for
from ..settings import SettingsError, load_project
from .host_guard import refused
from .flows import flow_client, flow_exchange, flow_headers, is_streamed, unkept_note
from .exports import Exports
from .live_analysis import HttpAnalysis
from .recorder import HttpRecorder

logger = logging.getLogger("mrtr_inspect")

NOTES_KEY = "mrtr-inspect"
MARKS = {"error": ":red_circle:", "warning": ":warning:"}  # flow.marked by the worst finding of a flow


class ThreadedAnalysis:
    """An `HttpAnalysis` on a thread of mitmproxy's process: `put(step)` from the event loop (the
    step framed and recorded there by `recorder`, its frames queued for the thread), `finish(info)`
    to end the session."""

    def __init__(self, analysis: HttpAnalysis, recorder: HttpRecorder) -> None:
        self.analysis = analysis
        self.recorder = recorder
        self.status: int | None = None  # the end's: 0, or REPORT_FAILED
        q: queue.SimpleQueue = queue.SimpleQueue()
        self._put = q.put
        self._get = q.get
        self.thread = threading.Thread(target=self._run, name="mrtr-inspect-analysis", daemon=True)
        self.thread.start()

    def put(self, step: tuple) -> None:
        self.recorder.feed(step, self._put)

    def after(self, fn: Callable[[], Any]) -> None:
        """`fn()` on the analysis thread once the steps put before it are analysed."""
        self.recorder.in_order(fn, self._put)

    def finish(self, info: dict) -> None:
        t = time.time()
        self.recorder.drain()
        for step in self.recorder.end_open(t, CAPTURE_ENDED):
            self.put(step)
        self.recorder.finish(info, t)
        self._put((info, t))
        self.thread.join()

    def _run(self) -> None:
        a = self.analysis
        a.eof(time.time(), "c2s")
        while True:
            item = self._get()
            if type(item) is tuple:
                self.status = a.end(*item)
                return
            if callable(item):  # what waits for the steps before it to be analysed (`after`)
                item()
                continue
            a.frames(item)


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


class FlowNotes:
    """Writes what the analysis learnt about each flow into `flow.metadata["mrtr-inspect"]`: its
    messages with their chain and round, and the findings that name them; and says it in mitmweb's
    flow list: `flow.comment` (what the flow is: `c2 tools/call release · retry of round 1 → round
    2: input_required`) and `flow.marked` (:red_circle: for an error finding, :warning: for a
    warning), unless the user set them. The "MCP JSON-RPC" contentview heads each message with its
    note. The notes are applied on mitmproxy's event loop (`outbox`); flows are held weakly."""

    MAX_INDEXES = 10_000

    def __init__(self, outbox: LoopOutbox) -> None:
        self.outbox = outbox
        self.core_view: Any = None  # the analysis' InspectorView: the pairing of the messages of a frame
        self.flows: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._where: OrderedDict[int, int] = OrderedDict()  # message index → exchange, the latest ones

    def track(self, x: int, flow: http.HTTPFlow) -> None:
        self.flows[x] = flow

    def add(self, out: Any) -> None:
        t = type(out)
        if t is Message and out.exchange is not None:
            self._where[out.index] = out.exchange
            if len(self._where) > self.MAX_INDEXES:
                self._where.popitem(last=False)
            self._note(out.exchange, "messages", message_note(out, self.core_view))
        elif t is Finding:
            for x in {self._where.get(i) for i in out.messages} - {None}:
                self._note(x, "findings", {"rule": out.rule, "severity": out.severity, "message": out.message})

    def _note(self, x: int, kind: str, note: dict) -> None:
        flow = self.flows.get(x)
        if flow is not None:
            self.outbox.post(_apply_note, flow, kind, note)


def _apply_note(flow: http.HTTPFlow, kind: str, note: dict) -> http.HTTPFlow:
    notes = flow.metadata.setdefault(NOTES_KEY, {"messages": [], "findings": []})
    ours = notes.get("comment"), notes.get("marked")
    notes[kind].append(note)
    comment = flow_comment(notes)
    if flow.comment in ("", ours[0]):  # a comment or a mark of the user's own stays
        flow.comment = notes["comment"] = comment
    mark = next((MARKS[s] for s in ("error", "warning") if any(f["severity"] == s for f in notes["findings"])), "")
    if mark and flow.marked in ("", ours[1]):
        flow.marked = notes["marked"] = mark
    return flow


def show_comment_column(options) -> None:
    """mitmweb's flow list shows the comment column, where each flow says what it is, added to the
    default columns: only while `web_columns` is mitmweb's default, never over columns the user set
    (`--set web_columns=…`, config.yaml). mitmdump has no such option."""
    if "web_columns" in options and not options.has_changed("web_columns") and "comment" not in options.web_columns:
        options.update(web_columns=[*options.web_columns, "comment"])


def flow_comment(notes: dict) -> str:
    """A flow in one line, for mitmweb's list: the request (its chain and step, else its label),
    what answered it, and the rules of its error and warning findings."""
    asked: list[str] = []
    answered: list[str] = []
    for n in notes["messages"]:
        kind = n["label"].split(" ", 1)[0]
        if n["direction"] == "c2s":
            text = f"{n['chain']} · {n['step']}" if n.get("chain") else n["label"]
            into = asked
        elif kind in ("result", "error"):
            text = n.get("step") or kind
            if n.get("step") and kind == "error":
                text += " (error)"
            into = answered
        else:  # a notification or a request of the server's, on an event stream
            continue
        if text not in into:
            into.append(text)
    line = ", ".join(asked) or "(no request)"
    if answered:
        line += " → " + ", ".join(answered)
    bad = [f"{f['severity']} {f['rule']}" for f in notes["findings"] if f["severity"] in ("error", "warning")]
    if bad:
        line += " · " + ", ".join(dict.fromkeys(bad))
    return line


def message_note(msg: Message, view: Any = None) -> dict:
    """A message's place: its label, and for MRTR traffic its chain and round (from `view`, the
    analysis' `InspectorView`, as the message's frame left it: the answer that closed its chain
    too)."""
    note: dict[str, Any] = {"index": msg.index, "label": msg.label(), "direction": msg.direction}
    creq = view.chain_place(msg) if view is not None else None
    if creq is not None:
        chain = creq.chain
        note["chain"] = f"{chain.id} {chain.method} {chain.target}"
        if msg.direction == "c2s":
            note["step"] = f"retry of round {creq.round.n}" if creq.round is not None else "first request"
        else:
            rd = next((r for r in chain.rounds if r.irr_index == msg.index), None)
            note["step"] = f"round {rd.n}: input_required" if rd is not None else "final response"
    return note


class _Flow:
    __slots__ = ("x", "request_done", "streamed", "kept")

    def __init__(self, x: int) -> None:
        self.x = x
        self.request_done = False
        self.streamed = False  # the body in hand (request, then response) goes through a stream callback
        self.kept: bytearray | None = None  # the streamed response body so far, under store_streamed_bodies


LEVELS = {"error": logging.ERROR, "warning": logging.WARNING}  # a live-view line's level, by its finding's severity


def _log_line(outbox: LoopOutbox) -> Callable[[str, str | None], None]:
    """The live view's lines into mitmproxy's log, on its event loop (where mitmproxy prints its own)."""
    def write(text: str, severity: str | None) -> None:
        outbox.post(outbox.log, LEVELS.get(severity or "", logging.INFO), text)
    return write


def session_info(upstream: str, live: bool = True, hop: str | None = None) -> dict:
    """What a proxy session's header says of it: its upstream, whether it forwards traffic, its hop."""
    info: dict = {"upstream": upstream, "live": live}
    if hop:
        info["hop"] = hop
    return info


def session_start(writer: RecordingWriter | None, upstream: str, live: bool = True, hop: str | None = None) -> SessionStart:
    """A capture session's start: the recording's header when there is one."""
    return writer.start if writer is not None else SessionStart(time.time(), new_session_id(), "http",
                                                                 session_info(upstream, live, hop))


def new_analysis(config: Config, writer: RecordingWriter | None, report_path: str | None, upstream: str,
                 view: LiveView | None = None, notes: FlowNotes | None = None, start: SessionStart | None = None,
                 forwarder_records: bool = False, live: bool = True, exports: Exports | None = None) -> HttpAnalysis:
    """The analysis of one capture session (`start`: by default `session_start`). With
    `forwarder_records`, it takes frames an `HttpRecorder` made and recorded where they were forwarded.
    `live`: the session forwards traffic (it sees every client from its start, RULES.md §10.8),
    not flows read from a file. `exports`: the live OTLP and metrics exports."""
    start = start if start is not None else session_start(writer, upstream, live)
    builder = ReportBuilder([str(writer.path)] if writer is not None else []) if report_path else None
    return HttpAnalysis(start, config, writer, builder, report_path, view, notes, forwarder_records, exports)


class MrtrInspect:
    """Records and analyses the MCP traffic mitmproxy forwards (one capture session per run).

    `analysis` is where the steps go (`put(step)`, `finish(info)`). The embedded proxy gives it
    (an analysis process of its own); in stock mitmproxy the addon makes one from its options
    (`--set mrtr_record=PATH` …) when mitmproxy runs, on a thread, logging to mitmproxy's event log.
    There, without a `config`, each session reads the project's settings as the command line does
    (`mrtr_config`, else the file found from the current directory; docs/configuration.md).
    """

    def __init__(self, config: Config | None = None, *, analysis=None) -> None:
        self.config = config or Config()
        self.embedded = analysis is not None
        self.settings_file = config is None and not self.embedded
        self.analysis = analysis
        self.notes: FlowNotes | None = None
        self.outbox: LoopOutbox | None = None
        self._ended: dict[str, int] = {}  # flow id → exchange, from its end until mitmproxy saves it (`_save`)
        self._saving: Callable | None = None  # the Save addon's save_flow, which `_save` calls when the flow is noted
        self.stopping = False  # errors from here on are the proxy closing, not the client leaving
        self._flows: dict[str, _Flow] = {}
        self._next = 0
        self.unkept = 0  # flows read from a file without a body they had (not analysed)

    # -- mitmproxy lifecycle ----------------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option("mrtr_record", Optional[str], None,
                          "Record the MCP traffic to this file (mrtr-inspect recording; an existing "
                          "recording gets a new session appended).")
        loader.add_option("mrtr_report", Optional[str], None,
                          "Write the mrtr-inspect JSON report (chains and findings) to this file on exit.")
        loader.add_option("mrtr_peer_header", Optional[str], None,
                          "A request header whose value identifies the client (principal) for chain "
                          "stitching, instead of Authorization, then client address plus clientInfo.")
        loader.add_option("mrtr_otlp_endpoint", Optional[str], None,
                          "Send one OTLP/HTTP span per chain to this collector (a base URL; /v1/traces is "
                          "appended). The OTEL_EXPORTER_OTLP_* variables set it too.")
        loader.add_option("mrtr_metrics", Optional[str], None,
                          "Serve Prometheus metrics at http://HOST:PORT/metrics.")
        loader.add_option("mrtr_hop", Optional[str], None,
                          "Name the hop this session records (front, back…): check of several hops' recordings "
                          "ties a gateway's front chains to the back chains they caused.")
        loader.add_option("mrtr_config", Optional[str], None,
                          "mrtr-inspect settings file (.mrtr-inspect.toml or pyproject.toml) instead of the "
                          "one found from the current directory.")

    def configure(self, updated: set[str]) -> None:
        if not self.embedded and self.analysis is not None and updated & {"mrtr_record", "mrtr_report",
                                                                          "mrtr_peer_header", "mrtr_config", "mrtr_hop",
                                                                          "mrtr_otlp_endpoint", "mrtr_metrics"}:
            self._end()  # a new session with the new settings
            self._begin()

    def running(self) -> None:
        try:
            self._session()
        except exceptions.OptionsError as e:  # one line, and mitmproxy's startup check stops it
            logger.error("mrtr-inspect: %s", e)
            return
        self._hold_saves()
        show_comment_column(ctx.options)

    def done(self) -> None:
        self._end()

    def _session(self):
        if self.analysis is None and not self.embedded:
            self._begin()
        return self.analysis

    def _begin(self) -> None:
        opts = ctx.options
        if self.settings_file:
            try:
                self.config, found = load_project(opts.mrtr_config)
            except SettingsError as e:
                raise exceptions.OptionsError(str(e)) from None
            for note in found.notes if found is not None else ():
                logger.info("mrtr-inspect: note: %s", note)
        if opts.mrtr_peer_header:
            self.config.peer_header = opts.mrtr_peer_header
        try:
            exports = Exports.open(opts.mrtr_otlp_endpoint, opts.mrtr_metrics, tuple(getattr(opts, "mrtr_allow_host", ())))
        except ValueError as e:
            raise exceptions.OptionsError(str(e)) from None
        if exports is not None and exports.metrics is not None:
            logger.info("mrtr-inspect: metrics on %s", exports.metrics.url)
        writer = None
        live = not getattr(opts, "rfile", None)  # flows read from a file (-r) may have begun late
        hop = getattr(opts, "mrtr_hop", None)
        try:
            if hop is not None and (reason := hop_problem(hop)):
                raise RecordingError(f"mrtr_hop: {reason}")
            if opts.mrtr_report and (reason := unwritable(opts.mrtr_report, "report")):
                raise RecordingError(reason)
            if opts.mrtr_record:
                writer = RecordingWriter(opts.mrtr_record, "http", session_info(self._upstream(), live, hop),
                                         redactor_for(self.config))
        except RecordingError as e:
            if exports is not None:
                exports.close()
            raise exceptions.OptionsError(str(e)) from None
        self.outbox = LoopOutbox(ctx.master.event_loop)
        self.notes = FlowNotes(self.outbox)
        view = LiveView(write=_log_line(self.outbox), color=False)
        start = session_start(writer, self._upstream(), live, hop)
        redactor = writer.redactor if writer is not None else redactor_for(self.config)
        recorder = HttpRecorder(start.session, redactor, writer, failed=lambda text: logger.warning("mrtr-inspect: %s", text),
                                limit=self.config.max_message_bytes)
        analysis = new_analysis(self.config, writer, opts.mrtr_report, self._upstream(), view, self.notes, start,
                                forwarder_records=True, exports=exports)
        analysis.say = lambda text: self.outbox.post(self.outbox.log, logging.ERROR, f"mrtr-inspect: {text}")
        self.analysis = ThreadedAnalysis(analysis, recorder)

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
            self._ended.clear()
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

    # -- flow files (`-w`): a flow is saved once the analysis noted it -----------------------------
    def _hold_saves(self) -> None:
        """mitmproxy's Save addon writes a flow when its response ends, before the analysis (which
        trails, on its thread) noted it: its response notes and findings would be missing from the
        file. The addon takes Save's `save_flow` so that each flow is written once the analysis has
        done its end (in the order they end: a flow's notes, then its save, on the loop)."""
        save = ctx.master.addons.get("save")
        fn = getattr(save, "save_flow", None)
        if self.embedded or fn is None or getattr(fn, "__self__", None) is self:
            return
        self._saving = fn
        save.save_flow = self._save

    def _save(self, flow) -> None:
        x = self._ended.pop(getattr(flow, "id", None), None)
        a, out, fn = self.analysis, self.outbox, self._saving
        if x is None or a is None or out is None or getattr(ctx.master.addons.get("save"), "stream", None) is None:
            fn(flow)  # not one of ours, or no file: as mitmproxy does
            return
        a.after(lambda: out.post(fn, flow))

    def _ended_flow(self, flow: http.HTTPFlow, x: int) -> None:
        if self._saving is not None:
            self._ended[flow.id] = x

    def _upstream(self) -> str:
        specs = [m for m in ctx.options.mode if m.startswith("reverse:")]
        return ReverseMode.parse(specs[0]).data if specs else ", ".join(ctx.options.mode)

    # -- HTTP events (mitmproxy's event loop: quick, and never raising) ----------------------------
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        try:
            a = self._session()
            if a is None or refused(flow):  # host_guard answered it 403: never forwarded, no part of the session
                return
            if not flow.live:  # read from a file: the whole flow is here, its bodies come through no callback
                self._read(a, flow)
                return
            x = self._next = self._next + 1
            st = self._flows[flow.id] = _Flow(x)
            req = flow.request
            a.put(("request_head", (time.time(), x, req.method, req.data.path.decode("latin-1"),
                                    flow_headers(req.headers), flow_client(flow))))
            if is_streamed(req):
                st.streamed = True
                req.stream = _Forward(a.put, "request_data", x)
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
        self._ended_flow(flow, x)

    def request(self, flow: http.HTTPFlow) -> None:
        st = self._flows.get(flow.id)
        if st is not None and self.analysis is not None:
            st.request_done = True
            self._whole_body(st, flow.request, "request_data")
            self.analysis.put(("request_end", (time.time(), st.x, True)))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        st = self._flows.get(flow.id)
        a = self.analysis
        if st is None or a is None or flow.response is None:
            return
        try:
            resp = flow.response
            a.put(("response_head", (time.time(), st.x, resp.status_code, flow_headers(resp.headers))))
            st.streamed = is_streamed(resp)
            if st.streamed:
                if getattr(ctx.options, "store_streamed_bodies", False):  # an option of proxyserver
                    st.kept = bytearray()
                resp.stream = _Forward(a.put, "response_data", st.x, st.kept)
        except Exception as e:
            self._failed(e)

    def response(self, flow: http.HTTPFlow) -> None:
        st = self._flows.pop(flow.id, None)
        if st is not None and self.analysis is not None and flow.response is not None:
            self._whole_body(st, flow.response, "response_data")
            self.analysis.put(("response_end", (time.time(), st.x, None)))
            self._ended_flow(flow, st.x)

    def _whole_body(self, st: _Flow, m: http.Message, step: str) -> None:
        """A body mitmproxy took whole (not streamed) goes to the analysis in one piece."""
        if not st.streamed and m.raw_content:
            self.analysis.put((step, (time.time(), st.x, m.raw_content)))

    def error(self, flow: http.HTTPFlow) -> None:
        st = self._flows.pop(flow.id, None)
        a = self.analysis
        if st is None or a is None:
            return
        t = time.time()
        if not st.request_done:  # the body never arrived whole
            a.put(("request_end", (t, st.x, False)))
        a.put(("response_end", (t, st.x, self._reason(flow))))
        self._keep_broken_stream(st, flow)
        self._ended_flow(flow, st.x)

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
