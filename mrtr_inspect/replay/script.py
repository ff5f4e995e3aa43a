"""A recording as a script to play: the client's requests in order, each with what the server sent for it.

    script = load_script("session.jsonl")
    for ex in script.exchanges:          # one per recorded client request
        ex.request, ex.replies, ex.response, ex.chain, ex.round

The recording goes through the core (`Inspector`), the same path `check` takes: decoding, pairing
and chain stitching are the core's (the rules are not needed here: a script is played, not judged);
this module only files each message under the exchange it belongs to:

* HTTP: the request POSTed on an exchange, and the body or the events of its response;
* stdio: the request line, its response (paired by the core), and the server's other lines while it
  was in flight (a progress notification goes to the request whose progressToken it names, else to
  the latest request in flight; a line sent while nothing is in flight follows the last request).

A retry knows the round it answers (`round_of`, the exchange whose `input_required` opened it) and
the `requestState` it echoes when the recorded server issued that state (`echoed_state`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..core.events import (
    Direction,
    Headers,
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SessionStart,
    SseEvent,
    StdioLine,
)
from ..core.inspector import ChainEvent, Inspector
from ..core.messages import ERROR, NOTIFICATION, REQUEST, RESULT, Message, format_id, id_key, target_of
from ..core.observations import Decoded
from ..errors import UserError
from ..recording.reader import ReadNotes, UnreadableRecording, read_frames


class ReplayError(UserError):
    """A replay cannot run: the one-line reason the command line prints before exiting 2."""


class ScriptError(ReplayError):
    """The recording cannot be played."""


@dataclass
class Reply:
    """One thing the server sent for a request: a message, and on HTTP the SSE event that carried it."""

    time: float
    msg: Message | None  # None: an event without data (a keep-alive comment)
    event: bytes | None = None  # the raw SSE event, as it crossed the wire


@dataclass
class HttpSide:
    method: str
    path: str
    headers: Headers
    status: int | None = None
    response_headers: Headers = ()
    stream: bool = False  # the response was an event stream


@dataclass
class Exchange:
    """One recorded client request and what the server sent for it."""

    request: Message
    session: str
    transport: str
    http: HttpSide | None = None
    replies: list[Reply] = field(default_factory=list)
    response: Message | None = None
    frames: list[int] = field(default_factory=list)  # positions of its frames in the recording
    chain: str | None = None
    round: int = 0  # 0: the first request of its chain (or no chain); n: the retry answering round n
    round_of: "Exchange | None" = None  # the exchange whose input_required opened that round
    echo: str | None = None  # how the retry's requestState relates to its round's (core.observations.Linked)
    echoed_state: str | None = None  # the requestState it carries, when the recorded server issued it
    cancelled: bool = False  # the recorded client cancelled it (notifications/cancelled)

    @property
    def time(self) -> float:
        return self.request.time

    @property
    def response_time(self) -> float | None:
        return self.response.time if self.response is not None else None

    @property
    def unanswered(self) -> bool:
        """The recorded server never answered it (no response, and on HTTP no response at all), and
        the recorded client did not cancel it: the session ended first (a server that died). There is
        nothing to replay for it, and a live client would wait for ever."""
        return self.response is None and not self.cancelled and (self.http is None or self.http.status is None)

    @property
    def method(self) -> str | None:
        return self.request.method

    @property
    def target(self) -> str | None:
        return target_of(self.request.method, self.request.params)

    @property
    def issued_state(self) -> str | None:
        """The requestState of this exchange's input_required response, if it had one."""
        r = self.response
        if r is None or r.kind != RESULT or type(r.result) is not dict:
            return None
        if r.result.get("resultType") != "input_required":
            return None
        st = r.result.get("requestState")
        return st if type(st) is str else None

    @property
    def progress_token(self) -> Any:
        meta = self.request.meta
        return meta.get("progressToken") if meta is not None else None

    def label(self) -> str:
        """`tools/call deploy id=3 (#4, chain c1, retry of round 1)`."""
        what = f"{self.method} {self.target}" if self.target is not None else f"{self.method}"
        where = [f"#{self.request.index}"]
        if self.chain:
            where.append(f"chain {self.chain}")
            if self.round:
                where.append(f"retry of round {self.round}")
        return f"{what} id={format_id(self.request.id)} ({', '.join(where)})"


@dataclass
class Step:
    """One thing the recorded client sent, in order: a request (its exchange), a notification, or
    its answer to a server request (the legacy era)."""

    time: float
    session: str
    kind: str  # request, notification, response
    msg: Message
    exchange: Exchange | None = None
    http: HttpSide | None = None
    answers: Message | None = None  # a response: the server request it answers (None: none recorded)


@dataclass
class Script:
    path: str
    exchanges: list[Exchange]
    steps: list[Step]
    sessions: list[SessionStart]
    notes: ReadNotes
    frames: list | None = None  # every frame, in order (kept on request, for export)
    skipped: list[str] = field(default_factory=list)  # what cannot be played, and why
    chains: dict[str, dict] = field(default_factory=dict)  # chain id -> the core's summary (as `check` reports it)

    @property
    def transport(self) -> str:
        return self.sessions[0].transport if self.sessions else "stdio"

    @property
    def http_path(self) -> str:
        """The path the recorded client POSTed to (`/mcp` for a stdio recording)."""
        for ex in self.exchanges:
            if ex.http is not None:
                return ex.http.path
        return "/mcp"

    def note_lines(self) -> list[str]:
        unanswered = [f"{self.path}: {ex.label()} has no recorded response (the recorded server never answered it)"
                      for ex in self.exchanges if ex.unanswered]
        return self.notes.lines(self.path) + [f"{self.path}: {s}" for s in self.skipped] + unanswered


def load_script(path: str | os.PathLike, keep_frames: bool = False, allow_empty: bool = False) -> Script:
    """Read a recording into a script. Raises ScriptError when it is unreadable or (unless
    `allow_empty`) holds no request."""
    loader = _Loader(str(path), keep_frames)
    try:
        for frame in read_frames(path, loader.notes):
            loader.feed(frame)
    except UnreadableRecording as e:
        raise ScriptError(str(e)) from None
    script = loader.script()
    if not script.exchanges and not allow_empty:
        raise ScriptError(f"{path}: the recording holds no client request to replay")
    return script


class _Loader:
    def __init__(self, path: str, keep_frames: bool) -> None:
        self.path = path
        self.notes = ReadNotes()
        self.insp = Inspector()
        self.paired: dict[Message, Decoded] = {}  # how the core paired the messages of the frame in hand
        self.frames: list | None = [] if keep_frames else None
        self.n = -1
        self.exchanges: list[Exchange] = []
        self.steps: list[Step] = []
        self.sessions: list[SessionStart] = []
        self.skipped: list[str] = []
        self.by_http: dict[tuple[str, int], Exchange] = {}
        self.http_steps: dict[tuple[str, int], Step] = {}
        self.by_request: dict[int, Exchange] = {}  # id(request message) -> exchange
        self.by_index: dict[int, Exchange] = {}  # message index of the request -> exchange
        self.inflight: dict[str, list[Exchange]] = {}  # stdio session -> requests not answered yet
        self.last: dict[str, Exchange] = {}  # stdio session -> latest request
        self.chains: dict[str, dict] = {}

    def feed(self, frame) -> None:
        self.n += 1
        if self.frames is not None:
            self.frames.append(frame)
        outs, observed = self.insp.step(frame)
        self.paired = {o.msg: o for o in observed if type(o) is Decoded and (o.request is not None or o.creq is not None)}
        msgs = [o for o in outs if type(o) is Message]
        if len(msgs) != len(outs):
            self._closed(outs)
        t = type(frame)
        if t is SessionStart:
            self.sessions.append(frame)
        elif t is StdioLine:
            for m in msgs:
                (self._client_line if frame.direction == Direction.C2S else self._server_line)(m)
        elif t is HttpRequest:
            self._http_request(frame, msgs)
        elif t in (HttpResponse, HttpBody, SseEvent, HttpEnd):
            self._http_response(frame, msgs)

    # -- stdio ------------------------------------------------------------------------------------
    def _client_line(self, m: Message) -> None:
        if m.batch is not None:
            return  # a member of a batch: the batch itself is noted
        if m.kind not in (REQUEST, NOTIFICATION, RESULT, ERROR):
            self._skip(m)
            return
        if m.kind == REQUEST:
            ex = self._exchange(m, "stdio", None)
            self.inflight.setdefault(m.session, []).append(ex)
            self.last[m.session] = ex
            return
        kind = "notification" if m.kind == NOTIFICATION else "response"
        req = self._request_of(m)
        owner = self.by_request.get(id(req)) if req is not None else None
        self.steps.append(Step(m.time, m.session, kind, m, owner, answers=req))
        target = owner or self.last.get(m.session)
        if target is not None:
            target.frames.append(self.n)

    def _server_line(self, m: Message) -> None:
        req = self._request_of(m)
        ex = self.by_request.get(id(req)) if req is not None and m.kind in (RESULT, ERROR) else None
        if ex is not None:
            self._answer(ex, m, None)
            ex.frames.append(self.n)
            pending = self.inflight.get(m.session, [])
            if ex in pending:
                pending.remove(ex)
            return
        ex = self._owner(m)
        if ex is None:
            self.skipped.append(f"message #{m.index} ({m.label()}) came before any request; it is not replayed")
            return
        ex.replies.append(Reply(m.time, m))
        ex.frames.append(self.n)

    def _owner(self, m: Message) -> Exchange | None:
        pending = self.inflight.get(m.session, [])
        p = m.params if type(m.params) is dict else {}
        token = p.get("progressToken")
        if m.method == "notifications/progress" and token is not None:
            for ex in pending:
                if ex.progress_token == token and type(ex.progress_token) is type(token):
                    return ex
        return pending[-1] if pending else self.last.get(m.session)

    # -- HTTP -------------------------------------------------------------------------------------
    def _http_request(self, f: HttpRequest, msgs: list[Message]) -> None:
        side = HttpSide(f.method, f.path, f.headers)
        key = (f.session, f.exchange)
        top = [m for m in msgs if m.batch is None]
        if len(top) == 1 and top[0].kind == REQUEST:
            self.by_http[key] = self._exchange(top[0], "http", side)
            return
        for m in top:
            if m.kind in (NOTIFICATION, RESULT, ERROR):
                kind = "notification" if m.kind == NOTIFICATION else "response"
                step = Step(m.time, m.session, kind, m, None, side, self._request_of(m))
                self.steps.append(step)
                self.http_steps[key] = step
            else:
                self._skip(m)
        if not top and f.method != "POST":
            self.skipped.append(f"{f.method} {f.path} (exchange {f.exchange}) is not replayed")

    def _http_response(self, f, msgs: list[Message]) -> None:
        ex = self.by_http.get((f.session, f.exchange))
        if ex is None:
            return
        ex.frames.append(self.n)
        t = type(f)
        if t is HttpResponse:
            assert ex.http is not None
            ex.http.status, ex.http.response_headers = f.status, f.headers
            ex.http.stream = any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in f.headers)
        elif t is SseEvent and not msgs:
            ex.replies.append(Reply(f.time, None, f.raw))
        elif t is HttpEnd:
            self.by_http.pop((f.session, f.exchange), None)
        for m in msgs:
            if m.kind in (RESULT, ERROR) and self._request_of(m) is ex.request and ex.response is None:
                self._answer(ex, m, f.raw if t is SseEvent else None)
            else:
                ex.replies.append(Reply(m.time, m, f.raw if t is SseEvent else None))

    # -- common -----------------------------------------------------------------------------------
    def _exchange(self, m: Message, transport: str, side: HttpSide | None) -> Exchange:
        ex = Exchange(m, m.session, transport, side)
        ex.frames.append(self.n)
        d = self.paired.get(m)
        creq = d.creq if d is not None else None
        if creq is not None and not (creq.link is not None and creq.chain.closed):  # a retry's place ends with its chain
            ex.chain = creq.chain.id
            if creq.round is not None:
                ex.round = creq.round.n
                ex.round_of = self.by_index.get(creq.round.request.index)
                ex.echo = creq.link.state if creq.link is not None else None
        self.exchanges.append(ex)
        self.by_request[id(m)] = ex
        self.by_index[m.index] = ex
        self.steps.append(Step(m.time, m.session, "request", m, ex, side))
        return ex

    def _request_of(self, m: Message) -> Message | None:
        """The request a response of the frame in hand answers."""
        d = self.paired.get(m)
        return d.request if d is not None else None

    def _answer(self, ex: Exchange, m: Message, event: bytes | None) -> None:
        ex.response = m
        ex.replies.append(Reply(m.time, m, event))

    def _skip(self, m: Message) -> None:
        what = "a batch" if m.kind == "batch" else f"a message that is not JSON-RPC ({m.problem})"
        self.skipped.append(f"message #{m.index} is {what}; it is not replayed")

    def _closed(self, outs: list) -> None:
        for o in outs:
            if type(o) is ChainEvent and o.kind == "closed":
                self.chains[o.chain.id] = o.chain.summary()

    def script(self) -> Script:
        self._closed(self.insp.close())
        issued = {s for ex in self.exchanges if (s := ex.issued_state) is not None}
        sent: dict[tuple, Exchange] = {}  # (session, id) -> the latest request with that id
        for step in self.steps:
            if step.kind == "request" and step.exchange is not None:
                sent[(step.session, step.msg.idk)] = step.exchange
            elif step.kind == "notification" and step.msg.method == "notifications/cancelled":
                p = step.msg.params if type(step.msg.params) is dict else {}
                ex = sent.get((step.session, id_key(p.get("requestId"))))
                if ex is not None:
                    ex.cancelled = True
        for ex in self.exchanges:
            p = ex.request.params if type(ex.request.params) is dict else {}
            st = p.get("requestState")
            if type(st) is str and st in issued:
                ex.echoed_state = st
        return Script(self.path, self.exchanges, self.steps, self.sessions, self.notes, self.frames, self.skipped,
                      self.chains)
