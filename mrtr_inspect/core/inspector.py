"""The pipeline: frames in; messages, chain updates and observations out, like h11's events.

    insp = Inspector(config)
    for frame in frames:                          # from an adapter's framer, or from a recording
        outputs, observations = insp.step(frame)  # Message and ChainEvent; what was seen, to judge
        ...
    outputs, observations = insp.end()

The core does not judge and calls nothing back: what it saw in a frame is handed out with the
frame's outputs as frozen observations (`observations.py`), each carrying the facts of its moment
that a judge reads. `analysis.py` gives them to the rule engine after the frame. `feed` and
`close` give the outputs alone.

No I/O, no clock, no threads: the same frames always give the same outputs, which is why a
recording analysed later shows exactly what the live session showed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..config import Config
from .chains import Chain, ChainRequest, Stitcher
from .era import LEGACY, EraTracker, probe_fallback
from .events import (
    C2S,
    CAPTURE_ENDED,
    CLIENT_DISCONNECTED,
    S2C,
    Frame,
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SessionEnd,
    SessionStart,
    SseEvent,
    StdioClose,
    StdioLine,
    UPSTREAM_ERROR,
    header,
)
from .exchanges import ExchangeTracker, HttpExchange
from .framing import media_type, over_limit, parse_sse_event
from .hops import HopWatcher
from .messages import (
    BATCH,
    CLIENT_INFO_KEY,
    ERROR,
    INPUT_REQUEST_METHODS,
    NOTIFICATION,
    REQUEST,
    RESULT,
    ERROR_FIELD,
    IDK,
    KIND,
    METHOD,
    PARAMS,
    Decoding,
    Message,
    built,
    decoded,
    id_key,
    members,
    meta_of,
    oversized,
    target_of,
)
from .observations import (
    Answered,
    fast_init,
    Cancelled,
    ChainClosed,
    Decoded,
    DuplicateMembers,
    ExchangeDone,
    InFlightReuse,
    InspectorFailed,
    LegacyAsked,
    Linked,
    RoundOpened,
    ServerExited,
    SessionOver,
    SseSeen,
)
from .vocabulary import Link, Outcome


@fast_init
@dataclass(frozen=True, slots=True)
class ChainEvent:
    """A chain changed: opened, retry (a retry linked), round (an input_required arrived, or a legacy
    server's question), answered (the client answered a legacy question), refused (a retry was
    answered with an error; a retry echoing the chain's state may still continue it, RULES.md
    decision 13), closed."""

    kind: str
    chain: Chain
    time: float


class _Session:
    """What the pipeline knows of one capture session: whether it saw each of its peers from that
    peer's first message (RULES.md §10.8), and what it left unfinished at its end."""

    __slots__ = ("id", "transport", "covered", "info", "ended", "holes", "resumable", "restart_of", "left_open",
                 "client_closed", "stdio_peer")

    def __init__(self, sid: str, transport: str, covered: bool, info: dict | None = None) -> None:
        self.id = sid
        self.stdio_peer = "stdio:" + sid  # its peer on stdio (the pipe): one string, hashed once, not one per message
        self.transport = transport
        self.info = info or {}
        # a live capture (the tee, the proxy, the addon; its header says `"live": true`) sees every
        # peer from its start, since a client reaches the server only through it once it runs; a
        # stdio session always does (the tee starts the server). An HTTP session that does not say
        # so (an import, a recording of an older version) may have begun after a peer's chain.
        self.covered = covered and (transport == "stdio" or self.info.get("live") is True)
        self.ended = False
        # exchanges an import left out (a body the flow file did not hold): what came in them is
        # unknown, so nothing can be said never to have been sent (RULES.md §3: capture-incomplete)
        imported = self.info.get("imported")
        self.holes = bool(imported.get("left_out")) if type(imported) is dict else False
        # a restart mid-chain: the (method, target) of the chains an earlier session of the same
        # command or upstream left open or abandoned, whose retries may come in this one
        self.resumable: frozenset = frozenset()
        self.restart_of: str | None = None
        self.left_open: frozenset = frozenset()  # this session's, once it ended
        self.client_closed = False  # stdio: the client closed the server's stdin (it ended the session)

    def close_client(self) -> None:
        """The client closed the server's stdin (stdio)."""
        self.client_closed = True

    def resume(self, left: frozenset, earlier: str) -> None:
        """It may continue the chains `left` of the earlier session `earlier` (a restart mid-chain)."""
        self.resumable |= left
        self.restart_of = earlier

    def end(self) -> None:
        self.ended = True

    def leave(self, left_open: frozenset) -> None:
        """Ended: the (method, target) of the chains it left open, abandoned or failed."""
        self.left_open = left_open

    def origin(self) -> tuple | None:
        """What it captured (the command or the upstream), for telling a restart of it."""
        what = self.info.get("command") if self.transport == "stdio" else self.info.get("upstream")
        return (self.transport, repr(what)) if what else None


_new = object.__new__
_C2S = C2S.value  # the frames' directions are plain strings: compared with one, `==` takes the fast path for str


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# A request's tie to its place in a chain, kept while the pipeline may still pair it: (its
# ChainRequest, whether the stitcher linked it to a round). A linked request's tie ends when its
# chain closes (closed chains keep no messages: a late answer to such a retry answers no chain); a
# first request's stays while the request is kept.
Tie = tuple[ChainRequest, bool]


def _live(tie: Tie | None) -> ChainRequest | None:
    if tie is None or (tie[1] and tie[0].chain.closed):
        return None
    return tie[0]


RELATED_KEYS = ("relatedRequestId", "io.modelcontextprotocol/relatedRequestId", "io.modelcontextprotocol/related-request")


def related_request(msg: Message) -> Any:
    """The client request a server request's `_meta` says it serves (`relatedRequestId` or an SDK's
    namespaced equivalent; the value an id, or an object with `requestId`), else None."""
    meta = msg.meta
    if meta is None:
        return None
    for key in RELATED_KEYS:
        v = meta.get(key)
        if type(v) is dict:
            v = v.get("requestId")
        if type(v) is int or type(v) is str:
            return v
    return None


class Inspector:
    """The sans-IO pipeline. `step` (and `step_line`, `end`) returns a frame's outputs, the messages
    and chain events (`ChainEvent`) in order, and its observations in the order they were made;
    `feed` (`feed_line`, `close`) the outputs alone. It calls nothing back.

    `chain_events=False`: of the `ChainEvent`s only `closed` ones are output (the observations stay
    all the same). For a consumer that reads nothing else of them: a report (`check`, the API's
    `analysed`) reads a chain once it closes, while a live view follows every step. That is about
    0.8 objects fewer per message of MRTR traffic (an `opened`, `retry` and `round` event per chain
    request, never read there)."""

    def __init__(self, config: Config | None = None, chain_events: bool = True) -> None:
        self.config = config or Config()
        self.chain_events = chain_events
        self.era = EraTracker()
        self.exchanges = ExchangeTracker()
        self.stitcher = Stitcher(self.config.abandon_after, self.config.remembered_states)
        self.messages = 0
        self._sessions: dict[str, _Session] = {}
        self._http: dict[tuple[str, int], HttpExchange] = {}
        self._x_ties: dict[HttpExchange, Tie] = {}  # the tie of the request POSTed on an open exchange
        self._peers_seen: set[str] = set()
        self._out: list = []
        self._observed: list = []
        self._dispatch = self._observed.append  # an observation that is no chain event (hops: see `_name_hop`)
        self._last_expire = 0.0
        self._now = 0.0
        self._seen: dict[str, float] = {}  # each session's last frame time
        self._by_origin: dict[tuple, list[_Session]] = {}  # the sessions of each command or upstream
        # the legacy chain requests in flight per server scope (the stdio session, the legacy HTTP
        # session): what a legacy server's question may serve (RULES.md §13)
        self._legacy_open: dict[str, dict[tuple, ChainRequest]] = {}
        # the chains of sessions that name their hop (RULES.md §11), kept from the first such session
        self.hops: HopWatcher | None = None

    # -- public -----------------------------------------------------------------------------------
    def step(self, frame: Frame) -> tuple[list, list]:
        """Analyse one frame: (its outputs, its observations). Never raises: a failure is an
        `InspectorFailed` observation."""
        self._seen[frame.session] = frame.time
        return self._run(frame.time, type(frame).__name__, self._feed, frame)

    def step_line(self, time: float, session: str, direction: str, data: bytes, eol: bool = True) -> tuple[list, list]:
        """`step(StdioLine(time, session, direction, data, eol))`, without the frame (the recording
        reader's common case)."""
        # `_run(time, "StdioLine", self._stdio_line, ...)` written out: this is once per message of a
        # recording, and the call with its packed arguments is a measurable part of it
        self._seen[session] = time
        out = self._out = []
        observed = self._observed = []
        if self.hops is None:
            self._dispatch = observed.append
        if time > self._now:
            self._now = time
        try:
            config = self.config
            if config.abandon_after is not None and time - self._last_expire >= 1.0:
                self._expire(time)
            # `_stdio_line(time, session, direction, data, eol)` written out too
            s = self._sessions.get(session)
            if s is None:
                s = self._session(session, "stdio")
            self._message(oversized(len(data), config.max_message_bytes) if len(data) > config.max_message_bytes
                          else decoded(data, config.max_depth), time, session, direction, "stdio", None,
                          None if eol else "the stream ended without a newline after this message",
                          session, s.stdio_peer, session, None, None)
        except Exception as e:  # the pipeline must survive anything
            self._failed("StdioLine", e, time)
        return out, observed

    def feed(self, frame: Frame) -> list:
        """The outputs of `step(frame)`, its observations left out."""
        return self.step(frame)[0]

    def feed_line(self, time: float, session: str, direction: str, data: bytes, eol: bool = True) -> list:
        """The outputs of `step_line`."""
        return self.step_line(time, session, direction, data, eol)[0]

    @property
    def now(self) -> float:
        """The latest frame time seen (what `end()` closes at when given no time)."""
        return self._now

    def _run(self, t: float, frame_type: str, step, *args) -> tuple[list, list]:
        out = self._out = []
        observed = self._observed = []
        if self.hops is None:
            self._dispatch = observed.append
        if t > self._now:
            self._now = t
        try:
            # rounds that waited too long expire first: a retry that comes after the timeout finds
            # its chain abandoned whether or not other traffic came in between
            if self.config.abandon_after is not None and t - self._last_expire >= 1.0:
                self._expire(t)
            step(*args)
        except Exception as e:  # the pipeline must survive anything
            self._failed(frame_type, e, t)
        return out, observed

    def _expire(self, t: float) -> None:
        self._last_expire = t
        self._obs_list(self.stitcher.expire(t))

    def _failed(self, frame_type: str | None, e: Exception, t: float) -> None:
        self._observed.append(InspectorFailed(frame_type, e, t))

    def end(self, time: float | None = None) -> tuple[list, list]:
        """The capture is over: open rounds are abandoned, requests in flight stay open. (Its
        outputs, its observations.)"""
        t = self._now if time is None else time
        out = self._out = []
        observed = self._observed = []
        if self.hops is None:
            self._dispatch = observed.append
        try:
            for key, x in list(self._http.items()):
                self._end_exchange(x, HttpEnd(t, x.session, x.number, CAPTURE_ENDED))
            for s in list(self._sessions.values()):
                if not s.ended:  # no session end recorded (a recorder killed, a file cut): its last frame
                    self._end_session(s, self._seen.get(s.id, t) if time is None else t, {})
            self._obs_list(self.stitcher.close_all(t))
            if self.hops is not None:  # every chain is closed: the hops can be tied (RULES.md §11)
                correlated = self.hops.correlate()
                observed.append(correlated)
                out.append(correlated)
        except Exception as e:  # the capture's end must survive anything too
            self._failed(None, e, t)
        return out, observed

    def close(self, time: float | None = None) -> list:
        """The outputs of `end(time)`."""
        return self.end(time)[0]

    @property
    def open_chains(self) -> list[Chain]:
        return self.stitcher.open_chains

    # -- dispatch ---------------------------------------------------------------------------------
    def _feed(self, f: Frame) -> None:
        tf = type(f)
        if tf is StdioLine:
            self._stdio_line(f.time, f.session, f.direction, f.data, f.eol, f.cut)  # type: ignore[union-attr]
        elif tf is SseEvent:
            self._sse_event(f)  # type: ignore[arg-type]
        elif tf is HttpRequest:
            self._http_request(f)  # type: ignore[arg-type]
        elif tf is HttpResponse:
            self._http_response(f)  # type: ignore[arg-type]
        elif tf is HttpBody:
            self._http_body(f)  # type: ignore[arg-type]
        elif tf is HttpEnd:
            x = self._http.get((f.session, f.exchange))
            if x is not None:
                self._end_exchange(x, f)  # type: ignore[arg-type]
        elif tf is StdioClose:
            s = self._session(f.session, "stdio")
            if f.direction == C2S:  # type: ignore[union-attr]
                s.close_client()
        elif tf is SessionStart:
            s = self._sessions[f.session] = _Session(f.session, f.transport, True, dict(f.info))
            self._restart(s)
            hop = s.info.get("hop")
            if type(hop) is str and hop:
                self._name_hop(f.session, hop)
        elif tf is SessionEnd:
            s = self._sessions.get(f.session)
            if s is not None and not s.ended:
                self._end_session(s, f.time, dict(f.info))

    def _name_hop(self, session: str, hop: str) -> None:
        """A session names its hop: from now on every observation is shown to the `HopWatcher` first
        (a capture without named hops pays nothing for it)."""
        if self.hops is None:
            watcher = self.hops = HopWatcher(self.config.hop_map)
            see = watcher.see

            def dispatch(obs: Any) -> None:
                try:
                    see(obs)
                except Exception as e:  # the hops' bookkeeping failing keeps nothing from the rules
                    self._failed("hops", e, self._now)
                self._observed.append(obs)

            self._dispatch = dispatch
        self.hops.name(session, hop)

    def _restart(self, s: _Session) -> None:
        """A session that follows one of the same command or upstream which ended with an open or
        abandoned chain (or is still open with one: its recorder was killed) is a restart mid-chain
        (RULES.md §10.8): a retry of those chains in it was never unsolicited."""
        origin = s.origin()
        if origin is None:
            return
        earlier = self._by_origin.setdefault(origin, [])
        for e in earlier:
            left = e.left_open if e.ended else frozenset(
                (c.method, c.target) for c in self.stitcher.open_chains if c.session == e.id)
            if left:
                s.resume(left, e.id)
        if len(earlier) >= 64:  # many runs of one command: the last ones are what a restart follows
            del earlier[0]
        earlier.append(s)

    def _session(self, sid: str, transport: str) -> _Session:
        s = self._sessions.get(sid)
        if s is None:
            # frames without a session start: the capture may have begun mid-way
            s = self._sessions[sid] = _Session(sid, transport, transport == "stdio")
        return s

    def _obs(self, obs: Any) -> None:
        self._obs_list((obs,))

    def _obs_list(self, items: list | tuple) -> None:
        """Hand out observations; those that change a chain give its `ChainEvent` too. (The stitcher
        makes one to three of them per chain request: the loop holds the body, one call for them all.)"""
        dispatch, out, every = self._dispatch, self._out, self.chain_events
        for obs in items:
            dispatch(obs)
            t = type(obs)
            if t is ChainClosed:
                out.append(ChainEvent.new("closed", obs.chain, self._now))
            elif not every:  # only `closed` events are output (`chain_events`)
                continue
            elif t is Linked:
                out.append(ChainEvent.new("retry", obs.chain, obs.request.time))
            elif t is RoundOpened:
                out.append(ChainEvent.new("round", obs.chain, self._now))
            elif t is LegacyAsked and obs.round is not None:
                out.append(ChainEvent.new("round", obs.round.chain, self._now))

    def _decode(self, raw: bytes, cut: int = 0, note: str | None = None) -> Decoding:
        limit = self.config.max_message_bytes
        if cut or len(raw) > limit or over_limit(note):
            return oversized(len(raw) + cut, limit, note)  # forwarded and recorded; not parsed
        return decoded(raw, self.config.max_depth)

    # -- stdio ------------------------------------------------------------------------------------
    def _stdio_line(self, time: float, session: str, direction: str, data: bytes, eol: bool, cut: int = 0) -> None:
        s = self._sessions.get(session)
        if s is None:
            s = self._session(session, "stdio")
        config = self.config
        limit = config.max_message_bytes
        # `_decode(data, cut)`, without the call
        d = oversized(len(data) + cut, limit) if cut or len(data) > limit else decoded(data, config.max_depth)
        self._message(d, time, session, direction, "stdio", None,
                      None if eol else "the stream ended without a newline after this message",
                      session, s.stdio_peer, session, None, None)

    # -- HTTP -------------------------------------------------------------------------------------
    def _http_request(self, f: HttpRequest) -> None:
        self._session(f.session, "http")
        d = self._decode(f.body, note=f.body_note) if f.body or f.method == "POST" else None
        x = HttpExchange(f.session, f.exchange, f.time, f.method, f.path, f.headers, f.client, f.body_note, f.complete,
                         len(f.body), self._http_peer(f, d[PARAMS] if d is not None else None))
        old = self._http.get((f.session, f.exchange))
        if old is not None:  # the same exchange number again: the earlier one is forgotten
            self._x_ties.pop(old, None)
        self._http[(f.session, f.exchange)] = x
        if d is not None:
            x.requested(self._message(d, f.time, f.session, "c2s", "http", f.exchange,
                                      (f.body_note or None) if f.complete else "the request body was cut short",
                                      f"{f.session}|{f.path}", x.peer, self._server_scope(x), f.headers, x))

    def _http_peer(self, f: HttpRequest, params: Any) -> str:
        base = f.session
        if self.config.peer_header:
            v = header(f.headers, self.config.peer_header)
            if v:
                return f"{base}|hdr:{_sha(v)}"
        auth = header(f.headers, "authorization")
        if auth:
            return f"{base}|auth:{_sha(auth)}"
        who = ""
        meta = meta_of(params)
        ci = meta.get(CLIENT_INFO_KEY) if meta is not None else None
        if type(ci) is dict:
            who = f"{ci.get('name')}/{ci.get('version')}"
        return f"{base}|ip:{f.client}|{who}"

    def _http_response(self, f: HttpResponse) -> None:
        x = self._http.get((f.session, f.exchange))
        if x is None:
            x = HttpExchange(f.session, f.exchange)
            self._http[(f.session, f.exchange)] = x
        x.respond(f.status, f.headers, f.time, media_type(header(f.headers, "content-type")) == "text/event-stream")

    def _http_body(self, f: HttpBody) -> None:
        x = self._http.get((f.session, f.exchange))
        if x is None:
            return
        if not f.data.strip():
            return
        x.body_messages.append(self._server_message_http(
            self._decode(f.data, note=f.body_note), f.time, (f.body_note or None) if f.complete else "the response body was cut short",
            x))

    def _sse_event(self, f: SseEvent) -> None:
        x = self._http.get((f.session, f.exchange))
        if x is None:
            return
        fields = parse_sse_event(f.raw)
        x.event(f.time)
        if fields.data is None:
            self._obs(SseSeen.new(x, fields, None, f.time))
        else:
            self._server_message_http(self._decode(fields.data), f.time,
                                      None if fields.complete else "the event stream ended in the middle of this event",
                                      x, fields)

    @staticmethod
    def _server_scope(x: HttpExchange) -> str:
        """Where server requests of the legacy era are answered: the legacy session, else the endpoint."""
        sid = header(x.headers, "mcp-session-id") or header(x.response_headers, "mcp-session-id")
        return f"{x.session}|legacy:{sid}" if sid else f"{x.session}|{x.path}"

    def _server_message_http(self, d: Decoding, time: float, note: str | None, x: HttpExchange,
                             sse: Any = None) -> Message:
        return self._message(d, time, x.session, "s2c", "http", x.number, note, f"{x.session}|{x.path}", x.peer,
                             self._server_scope(x), x.headers, x, None, sse)

    def _end_exchange(self, x: HttpExchange, f: HttpEnd) -> None:
        self._http.pop((x.session, x.number), None)
        tie = self._x_ties.pop(x, None)
        req = x.request
        creq = None
        if req is not None:
            answered = any(r.idk == req.idk for r in x.responses if r.idk is not None)
            inflight = self.exchanges.client_scope(x.peer)
            if not answered:
                inflight.discard(req)
                creq = _live(tie)
        cancelled = creq is not None and f.error == CLIENT_DISCONNECTED
        x.end(f.time, f.error, cancelled)
        if creq is not None:
            if cancelled:
                self._obs(Cancelled.new(req, req, creq))  # type: ignore[arg-type]
                self._obs_list(self.stitcher.on_cancel(creq, f.time))
            elif f.error != CAPTURE_ENDED:  # the capture ended first: the chain stays open (§10.3)
                failed = f.error is not None and f.error.startswith(UPSTREAM_ERROR)
                self._obs_list(self.stitcher.on_no_response(creq, f.time, failed))
        self._obs(ExchangeDone.new(x, _live(tie), self.era.legacy_session(header(x.headers, "mcp-session-id"))))

    # -- the common path --------------------------------------------------------------------------
    def _message(self, d: Decoding, time: float, session: str, direction: str, transport: str, exchange: int | None,
                 note: str | None, context: str, peer: str, scope: str, headers, x: HttpExchange | None,
                 batch: int | None = None, sse: Any = None) -> Message:
        """A decoded payload (`d`: `messages.decoded`) becomes a message, built complete once its era
        (and the request it answers) is known; then what it means is observed. Returns it."""
        index = self.messages
        self.messages += 1
        kind = d[KIND]
        c2s = direction == _C2S
        version = req = asked = tie = None
        if kind == REQUEST:
            if c2s:
                era, version = self.era.classify_request(d[METHOD], d[PARAMS], context, headers)
            else:
                era = self._context_era(direction, context, headers, x)
        elif kind == RESULT or kind == ERROR:
            if c2s:
                req, asked = self.exchanges.server_scope(scope).take(d[IDK])
            else:
                req, tie = self._paired(d[IDK], scope, x) if x is not None else self.exchanges.client_scope(scope).take(d[IDK])
            era = req.era if req is not None else self.era.context_era(context, headers)
            if kind == ERROR and not c2s and probe_fallback(req if req is not None else x.request if x is not None else None,
                                                            d[ERROR_FIELD]):
                era = LEGACY
        elif kind == BATCH:
            era = self.era.context_era(context, headers)
        else:
            era = self._context_era(direction, context, headers, x)
        msg = built(_new(Message), d, index, time, session, direction, transport, exchange, era, version,  # type: ignore[arg-type]
                    peer, batch, note)
        self._out.append(msg)
        if sse is not None:
            self._obs(SseSeen.new(x, sse, msg, time))  # type: ignore[arg-type]
        if msg.duplicates:
            self._obs(DuplicateMembers.new(msg, x))
        if kind == BATCH:
            self._dispatch(Decoded.new(msg, x, None, None, self.exchanges.flight(session if x is None else peer)))
            for member in members(msg):
                self._message(member, time, session, direction, transport, exchange, None, context, peer, scope, headers,
                              x, index)
            return msg
        if kind == REQUEST:
            if c2s:
                self._client_request(msg, context, peer, scope, headers, x)
            else:
                asking = self.exchanges.server_scope(scope)
                asking.add(msg)
                ask = None
                if self._legacy_open and era is LEGACY and msg.method in INPUT_REQUEST_METHODS:
                    ask = self._legacy_question(msg, scope, x)
                    if ask is not None and ask.round is not None:
                        asking.attach(msg, ask.round)
                self._dispatch(Decoded.new(msg, x, None, None, self.exchanges.flight(session if x is None else peer)))
                if ask is not None:
                    self._obs(ask)
            return msg
        if kind == RESULT or kind == ERROR:
            if c2s:
                if asked is not None:
                    self.stitcher.on_server_answer(asked, msg)
                    if not asked.chain.closed and self.chain_events:
                        self._out.append(ChainEvent.new("answered", asked.chain, time))
                self._dispatch(Decoded.new(msg, x, req, None, self.exchanges.flight(session if x is None else peer)))
                self._dispatch(Answered.new(msg, req, None, x, asked))
            else:
                self._server_response(msg, req, tie, context, scope, x)
            return msg
        self._dispatch(Decoded.new(msg, x, None, None, self.exchanges.flight(session if x is None else peer)))
        if kind == NOTIFICATION and c2s and msg.method == "notifications/cancelled":
            p = msg.params if type(msg.params) is dict else {}
            rid = id_key(p.get("requestId"))
            inflight = self.exchanges.client_scope(scope if x is None else peer)
            req = inflight.get(rid)
            creq = _live(inflight.tie(rid)) if req is not None else None
            inflight.cancel(rid)
            self._obs(Cancelled.new(msg, req, creq))
            if creq is not None:
                self._obs_list(self.stitcher.on_cancel(creq, time))
        return msg

    def _context_era(self, direction: str, context: str, headers, x: HttpExchange | None) -> str:
        """The era of a message no request pairs with: a server message on a request's POST response
        stream takes that request's era (RULES.md §2), any other the era of its context."""
        if x is not None and direction == S2C and x.request is not None:
            return x.request.era
        return self.era.context_era(context, headers)

    def _client_request(self, msg: Message, context: str, peer: str, scope: str, headers, x) -> None:
        s = self._sessions.get(msg.session)
        covered = (peer in self._peers_seen or (s is not None and s.covered)) and not (
            s is not None and (s.holes or s.resumable and (msg.method, target_of(msg.method, msg.params)) in s.resumable))
        self._peers_seen.add(peer)
        inflight = self.exchanges.client_scope(peer if x is not None else scope)
        prior = inflight.add(msg)
        creq, obs = self.stitcher.on_request(msg, peer, covered, s.restart_of if s is not None else None,
                                             self.hops.hop_for(msg.session) if self.hops is not None else None)
        if creq is not None:
            tie = (creq, creq.link is not None)
            inflight.attach(msg, tie)
            if msg.era is LEGACY and msg.idk is not None:
                self._legacy_request(creq, scope)
            if x is not None and msg.batch is None:  # the request POSTed on the exchange (`x.request`)
                self._x_ties[x] = tie
        self._dispatch(Decoded.new(msg, x, None, creq, inflight.snapshot()))
        if prior is not None:
            self._obs(InFlightReuse.new(msg, prior))
        if creq is not None and self.chain_events and creq.chain.requests[0] is creq:
            self._out.append(ChainEvent.new("opened", creq.chain, msg.time))
        if obs:
            self._obs_list(obs)

    def _paired(self, idk: tuple | None, scope: str, x: HttpExchange | None) -> tuple[Message | None, Tie | None]:
        """The client request a server's response with id `idk` answers (taken out of those in flight),
        and its tie to a chain."""
        tie: Tie | None = None
        if x is not None:
            req = x.request
            if req is not None and idk != req.idk:
                req = None
            inflight = self.exchanges.client_scope(x.peer)
            if req is not None:
                inflight.discard(req)
                tie = self._x_ties.get(x)
            elif idk is not None and x.request is None:
                req, tie = inflight.take(idk)
            return req, tie
        return self.exchanges.client_scope(scope).take(idk)

    def _server_response(self, msg: Message, req: Message | None, tie: Tie | None, context: str, scope: str,
                         x: HttpExchange | None) -> None:
        if x is not None:
            x.responses.append(msg)
        if req is not None and req.method == "initialize" and msg.kind == RESULT:
            self.era.initialize_answered(context, header(x.response_headers, "mcp-session-id") if x is not None else None)
        creq = None if tie is None or (tie[1] and tie[0].chain.closed) else tie[0]  # `_live(tie)`, without the call
        if creq is not None and self._legacy_open and req.idk is not None:
            waiting = self._legacy_open.get(scope)
            if waiting is not None and waiting.get(req.idk) is creq:
                del waiting[req.idk]
        self._dispatch(Decoded.new(msg, x, req, creq, self.exchanges.flight(msg.session if x is None else msg.peer)))
        self._dispatch(Answered.new(msg, req, creq, x))
        if creq is not None:
            self._obs_list(self.stitcher.on_response(creq, msg))
            if creq.chain.refused is not None and creq.response_index == msg.index and self.chain_events:
                self._out.append(ChainEvent.new("refused", creq.chain, msg.time))

    # -- legacy questions (RULES.md §13) ----------------------------------------------------------
    def _legacy_request(self, creq: ChainRequest, scope: str) -> None:
        """A legacy chain request is in flight in `scope`: a question of the server may serve it."""
        waiting = self._legacy_open.get(scope)
        if waiting is None:
            waiting = self._legacy_open[scope] = {}
        else:
            for k in [k for k, c in waiting.items() if not c.in_flight]:  # answered, cancelled, given up
                del waiting[k]
        waiting[creq.msg.idk] = creq  # type: ignore[union-attr]

    def _legacy_question(self, msg: Message, scope: str, x: HttpExchange | None) -> LegacyAsked | None:
        """The round a legacy server request is, by evidence in RULES.md §13's order: it came on the
        POST event stream of a chain's request (`stream`), its `_meta` names the request (`related`),
        or on stdio that request was the only one open (`time`: in flight and not cancelled, RULES.md
        decision 14). None: it serves no chain (it
        came on the stream of another request, or no legacy chain is open)."""
        waiting = self._legacy_open.get(scope)
        if not waiting:
            return None
        live = [c for c in waiting.values() if c.in_flight]
        if not live:
            return None
        creq, via = None, ""
        if x is not None and x.request is not None:  # on a POST's own event stream: that request's
            c = _live(self._x_ties.get(x))
            if c is None or not c.in_flight or c.chain.era is not LEGACY:
                return None
            creq, via = c, Link.STREAM
        if creq is None:
            rel = related_request(msg)
            c = waiting.get(id_key(rel)) if rel is not None else None
            if c is not None and c.in_flight:
                creq, via = c, Link.RELATED
        if creq is None and x is None:
            inflight = self.exchanges.client_requests(scope)
            only = inflight.sole_open()  # a cancelled request is not open (RULES.md decision 14)
            if only is not None:
                c = _live(inflight.tie(only.idk))
                if c is not None and waiting.get(only.idk) is c:
                    creq, via = c, Link.TIME
        if creq is None:
            return LegacyAsked.new(msg, None, len(live))
        return self.stitcher.on_server_request(msg, creq, via)

    def _server_exited(self, s: _Session, time: float, info: dict) -> frozenset:
        """A stdio server that exited on its own (the client had not closed its stdin) or with a
        failing status, with client requests unanswered: `ServerExited`, and their chains end as
        `error`. Returns the (method, target) of those chains."""
        status = info.get("exit")
        if s.transport != "stdio" or type(status) is not int or (status == 0 and s.client_closed):
            return frozenset()
        inflight = self.exchanges.client_requests(s.id)
        left = []
        for m in inflight:
            tie = inflight.tie(m.idk)
            if tie is None or not tie[0].cancelled:
                left.append(m)
        if not left:
            return frozenset()
        left.sort(key=lambda m: m.index)
        chains = [c for c in self.stitcher.open_chains if c.session == s.id and c.in_flight]
        self._obs(ServerExited(s.id, time, status, left, [c.id for c in chains]))
        self._obs_list(self.stitcher.on_server_gone(time, s.id))
        return frozenset((c.method, c.target) for c in chains)

    def _end_session(self, s: _Session, time: float, info: dict) -> None:
        s.end()
        for key, x in list(self._http.items()):
            if x.session == s.id:
                self._end_exchange(x, HttpEnd(time, s.id, x.number, CAPTURE_ENDED))
        failed = self._server_exited(s, time, info)
        closed = self.stitcher.close_all(time, s.id)
        # a chain the server died in the middle of may be retried against a restarted server too
        s.leave(frozenset((o.chain.method, o.chain.target) for o in closed
                          if type(o) is ChainClosed and o.chain.outcome in (Outcome.OPEN, Outcome.ABANDONED)) | failed)
        self._obs_list(closed)
        self.exchanges.drop_scope(s.id)
        if self._legacy_open:
            for scope in [k for k in self._legacy_open if k == s.id or k.startswith(s.id + "|")]:
                del self._legacy_open[scope]
        self._obs(SessionOver(s.id, s.transport, time, {**s.info, **info}))
