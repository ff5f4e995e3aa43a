"""`replay serve`: a recording's server side, played to a live client over stdio or HTTP.

    session = ServeSession(load_script(path), ServeOptions(order="any"))
    serve_stdio(session)                                   # the client's server command
    asyncio.run(serve_http(session, "127.0.0.1", 0, ...))  # a Streamable HTTP endpoint

Each live request is matched to a recorded one (`matching.Matcher`); the recorded replies are sent
with the live request's JSON-RPC id (and progressToken), byte for byte otherwise. A recorded event
stream is sent as a stream, event by event, at its recorded pace with `pace`. A request that
matches nothing is answered with a JSON-RPC error naming the closest recorded request and the
fields that differ, and counted. The live traffic goes through the analysis too (`live.LiveLog`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

import h11

from ..config import Config
from ..core.events import CAPTURE_ENDED, CLIENT_DISCONNECTED, UPSTREAM_ERROR, Direction, Headers
from ..core.findings import Finding, Severity
from ..core.messages import ERROR, NOTIFICATION, REQUEST, RESULT, Message, decode_message, format_id
from ..hosts import HostPolicy, forbidden_body, header
from ..outputs.text import FindingPrinter, tool_line
from ..recording.files import open_private, unwritable, why
from ..recording.redaction import Redactor
from .faults import Fault, FaultPicker, cut, error_reply
from .live import OWN_REPLY, LiveLog
from .matching import Match, Matcher
from .script import Exchange, ReplayError, Script
from .wire import dumps, map_sse_data, set_member, sse_event

# outside the JSON-RPC reserved range, as MCP asks of codes it does not define (basic/index.mdx#error-codes)
MISS_CODE = -31404
_DROP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date"})
# an event stream the replay builds itself (its recording has none: a stdio one) is framed as the
# specification asks of a server (`X-Accel-Buffering: no`, rule sse-x-accel-buffering), so the live
# session's rules do not report the replay's own framing. A recorded stream keeps the recorded server's headers.
BUILT_STREAM_HEADERS: Headers = (("x-accel-buffering", "no"),)


@dataclass
class ServeOptions:
    order: str = "any"  # any | strict
    ignore: tuple[str, ...] = ()  # paths left out of matching
    repeats: bool = False  # serve a recorded exchange more than once
    pace: bool = False  # replies at their recorded pace
    # the live request as the recording was redacted (the project's redact_paths, this machine's key),
    # for matching only: a recorded placeholder then matches the same secret, and only it
    redact: Callable[[bytes], bytes] | None = None
    # the same, for the body (its redact_paths) and the HTTP path (secret-looking query parameters);
    # a recording whose placeholders another key made is matched leniently (matching.py)
    redactor: Redactor | None = None
    answers: bool = False  # compare the values of inputResponses too (match_on "answers")
    custom: tuple = ()  # (name, function) custom matchers (matching.custom_verdict)
    faults: tuple[Fault, ...] = ()  # faults injected on purpose (faults.py)
    fault_seed: int | None = None  # faults without @WHICH at random, from this seed
    fault_rate: float = 0.25  # ... with this probability per request after the handshake


class Gate:
    """An answer held until another is sent (probe-client's parallel mutation). Used on the
    transport's event loop only."""

    def __init__(self) -> None:
        self.opened = False
        self._callbacks: list[Callable[[], None]] = []

    def open(self) -> None:
        self.opened = True
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb()

    def on_open(self, cb: Callable[[], None]) -> None:
        if self.opened:
            cb()
        else:
            self._callbacks.append(cb)


@dataclass
class Answer:
    """What to send for one live request: (offset in seconds, message, SSE event or None) items."""

    items: list[tuple[float, bytes | None, bytes | None]]
    exchange: Exchange | None = None
    status: int = 200
    headers: Headers = ()
    stream: bool = False
    fault: str | None = None  # "delay" (held `hold` seconds, None: until the client or the replay stops), "disconnect"
    hold: float | None = None
    gate: Gate | None = None  # sent only once this gate opens (or after `hold` seconds)
    release: Gate | None = None  # opened once this answer is sent


def apply_fault(fault: Fault, ans: Answer, live_id: Any) -> Answer:
    """The answer as the fault changes it (faults.py)."""
    if fault.kind == "error":
        return Answer([(0.0, error_reply(live_id, fault.code), None)], ans.exchange)
    if fault.kind == "malformed":
        items = list(ans.items)
        last = max((i for i, it in enumerate(items) if it[1] is not None), default=None)
        if last is not None:
            offset, msg, _ = items[last]
            items[last] = (offset, cut(msg), None)  # type: ignore[arg-type]
        return Answer(items, ans.exchange, ans.status, ans.headers, ans.stream, release=ans.release)
    ans.fault, ans.hold = fault.kind, fault.seconds
    return ans


def recorded_keys(script: Script) -> set | None:
    """The ids of the keys the recording's placeholders were made with (None: a header says nothing,
    a recording older than the ids)."""
    keys: set = set()
    for s in script.sessions:
        red = s.info.get("redaction")
        ids = red.get("keys") if type(red) is dict else None
        if type(ids) is not list:
            return None
        keys.update(ids)
    return keys


class Replayer:
    """Answers live client messages from a script. No I/O."""

    def __init__(self, script: Script, options: ServeOptions | None = None) -> None:
        self.script = script
        self.options = options or ServeOptions()
        red = self.options.redactor
        self.lenient = red is not None and recorded_keys(script) != {red.key_id}
        self.matcher = Matcher(script.exchanges, self.options.ignore, self.options.order, self.options.repeats,
                               self.lenient, self.options.answers, self.options.custom)
        self.served = 0
        self.synthesized = 0
        self.misses: list[dict] = []

    def answer(self, raw: bytes, http_path: str | None = None) -> Answer | None:
        """The answer to one message from the live client; None when it takes none (a
        notification, or a response)."""
        live = decode_message(raw)
        if live.kind in (NOTIFICATION, RESULT, ERROR):
            return None
        if live.kind != REQUEST:
            why = "a batch (not replayed)" if live.kind == "batch" else f"not a JSON-RPC request ({live.problem})"
            self.misses.append({"request": live.kind, "message": why})
            return self._error(None, -32600, OWN_REPLY + why, None, 400)
        probe = live
        red = self.options.redactor
        redact = self.options.redact or (red.redact_json if red is not None else None)
        if redact is not None:
            redacted = redact(raw)
            if redacted is not raw:
                probe = decode_message(redacted)
        if red is not None and http_path is not None:
            http_path = red.url(http_path)
        m = self.matcher.match(probe, http_path)
        if m.exchange is not None and m.exchange.unanswered:
            return self._unanswered(m.exchange, live)
        if m.exchange is not None:
            self.served += 1
            return self._replay(m.exchange, live)
        if live.method == "ping":
            self.synthesized += 1
            return Answer([(0.0, dumps({"jsonrpc": "2.0", "id": live.id, "result": {}}).encode(), None)])
        text = m.explain(probe)  # never the secret: the live value as the recording would hold it
        self.misses.append({"request": f"{live.method} id={format_id(live.id)}", "message": text, **m.to_json()})
        return self._error(live.id, MISS_CODE, OWN_REPLY + text, m)

    @staticmethod
    def _error(rid: Any, code: int, text: str, m: Match | None, status: int = 200) -> Answer:
        err: dict = {"code": code, "message": text}
        if m is not None:
            err["data"] = m.to_json()
        return Answer([(0.0, dumps({"jsonrpc": "2.0", "id": rid, "error": err}).encode(), None)], status=status)

    def _unanswered(self, ex: Exchange, live: Message) -> Answer:
        """A request the recorded server never answered: what it sent for it (progress…), then an
        error of the replay's own, counted as a miss, rather than silence a client would wait on for
        ever (or until its own timeout, and a fallback that misses for another reason)."""
        text = f"the recording has no response to {ex.label()}: the recorded server never answered it"
        m = Match(None, ex, [], "no recorded response")
        self.misses.append({"request": f"{live.method} id={format_id(live.id)}", "message": text, **m.to_json()})
        ans = self._replay(ex, live)
        own = self._error(live.id, MISS_CODE, OWN_REPLY + text, m)
        offset = max((o for o, _, _ in ans.items), default=0.0)
        ans.items += [(offset, msg, None) for _, msg, _ in own.items]
        # no response was recorded, so neither were its status and headers (HttpSide.status is None)
        ans.stream, ans.headers = _built(ans.items)
        ans.status = 200
        return ans

    def _replay(self, ex: Exchange, live: Message) -> Answer:
        meta = live.meta or {}
        live_token = meta.get("progressToken")
        items: list[tuple[float, bytes | None, bytes | None]] = []
        for r in ex.replies:
            offset = max(0.0, r.time - ex.time)
            if r.msg is None:
                items.append((offset, None, r.event))
                continue
            fn = _rewriter(r.msg, ex, live.id, live_token)
            if fn is None:
                continue
            items.append((offset, fn(r.msg.raw), map_sse_data(r.event, fn) if r.event is not None else None))
        h = ex.http
        if h is not None:
            stream = h.stream
            headers = tuple((k, v) for k, v in h.response_headers if k.lower() not in _DROP_HEADERS)
        else:
            stream, headers = _built(items)
        return Answer(items, ex, (h.status or 200) if h else 200, headers, stream)

    def summary(self) -> dict:
        return {
            "recording": self.script.path,
            "served": self.served,
            "synthesized": self.synthesized,
            "misses": self.misses,
            "unused": [ex.label() for ex in self.matcher.unused],
        }


def _rewriter(msg: Message, ex: Exchange, live_id: Any, live_token: Any) -> Callable[[bytes], bytes] | None:
    """How a recorded reply changes for the live request (None: it is not sent)."""
    if msg is ex.response:
        return lambda data: set_member(data, ("id",), live_id)
    if msg.method == "notifications/progress" and ex.progress_token is not None:
        p = msg.params if type(msg.params) is dict else {}
        if p.get("progressToken") == ex.progress_token:
            if live_token is None:
                return None  # the live client asked for no progress
            return lambda data: set_member(data, ("params", "progressToken"), live_token)
    return lambda data: data


class ServeSession:
    """A Replayer, the live log, and the summary they make."""

    def __init__(self, script: Script, options: ServeOptions | None = None, transport: str = "stdio",
                 config: Config | None = None, record: str | None = None, summary_path: str | None = None,
                 printer: FindingPrinter | None = None, director: Any = None, info: dict | None = None) -> None:
        self.replayer = Replayer(script, options)
        self.options = self.replayer.options
        self.script = script
        # what answers instead of the replayer (probe-client's mutations): `director.answer(raw,
        # http_path, replayer) -> Answer | None`
        self.director = director
        o = self.options
        self.faults = FaultPicker(list(o.faults), o.fault_seed, o.fault_rate) if o.faults else None
        info = {"replay": os.path.basename(script.path), **(info or {})}
        if summary_path:
            summary_path = summary_file(summary_path)
        if summary_path and (reason := unwritable(summary_path, "summary")):
            raise ReplayError(reason)  # now, not once the client is done
        self.log = LiveLog(transport, info, config, record, printer)
        self.summary_path = summary_path
        self.summary_failed: str | None = None  # why the last write of the summary failed
        self.lock = threading.Lock()
        self.closed = False

    def answer(self, raw: bytes, http_path: str | None = None) -> Answer | None:
        with self.lock:
            if self.director is not None:
                ans = self.director.answer(raw, http_path, self.replayer)
            else:
                ans = self.replayer.answer(raw, http_path)
            if ans is not None and self.faults is not None:
                live = decode_message(raw)
                ex = ans.exchange
                fault = self.faults.pick(live, ex is not None and ex.chain is not None and ex.round == 0)
                if fault is not None:
                    ans = apply_fault(fault, ans, live.id)
        self.publish()
        return ans

    @property
    def findings(self) -> list[Finding]:
        return self.log.findings

    def summary(self) -> dict:
        with self.lock:
            s = self.replayer.summary()
            if self.faults is not None:
                s["faults"] = [{"request": what, "fault": f.text()} for what, f in self.faults.fired]
            if self.director is not None:
                s["probe"] = self.director.summary()
        s["findings"] = [f.to_json() for f in self.log.findings]
        return s

    def publish(self) -> None:
        """Write the summary (JSON) where asked, replacing the last one whole."""
        if not self.summary_path:
            return
        try:
            with open_private(self.summary_path) as f:  # a regular file replaced whole (recording/files.py)
                json.dump(self.summary(), f, indent=1)
        except OSError as e:  # the client is still served; the run's status tells (run.serve)
            failed = f"cannot write summary {self.summary_path}: {why(e)}"
            if failed != self.summary_failed:
                sys.stderr.write(tool_line(failed))
            self.summary_failed = failed
        else:
            self.summary_failed = None

    def close(self) -> dict:
        if not self.closed:
            self.closed = True
            self.log.close()
            self.publish()
        return self.summary()


def _built(items: list) -> tuple[bool, Headers]:
    """How the replay frames replies it has no recorded HTTP response for: a stream when there is more
    than one message, with the headers of a stream it builds."""
    stream = sum(1 for i in items if i[1] is not None) > 1
    return stream, BUILT_STREAM_HEADERS if stream else ()


PID_FIELD = "{pid}"


def summary_file(path: str) -> str:
    """Where this process keeps its summary: `{pid}` in the path is replaced by the process id, so
    several processes started from one command line (a client that starts its server command more
    than once, as the pytest plugin's stdio command may be) each keep their own, none overwriting
    another's."""
    return path.replace(PID_FIELD, str(os.getpid()))


def summary_lines(s: dict) -> list[str]:
    misses = s["misses"]
    head = (f"replay of {s['recording']}: {s['served']} request{'s' if s['served'] != 1 else ''} served, "
            f"{len(misses)} miss{'es' if len(misses) != 1 else ''}")
    if s.get("synthesized"):
        head += f", {s['synthesized']} ping{'s' if s['synthesized'] != 1 else ''} answered"
    if s["unused"]:
        head += f", {len(s['unused'])} recorded request{'s' if len(s['unused']) != 1 else ''} not asked for"
    out = [head]
    out += [f"miss: {m['request']}: {m['message']}" for m in misses]
    out += [f"fault: {f['fault']} on {f['request']}" for f in s.get("faults", ())]
    counts: dict[str, int] = {}
    for f in s["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    if counts:
        rules = sorted({f["rule"] for f in s["findings"] if f["severity"] != Severity.INFO})
        out.append("findings of the live session: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                   + (f" ({', '.join(rules)})" if rules else ""))
    return out


# -------------------------------------------------------------------------------------------------
# stdio


def serve_stdio(session: ServeSession, stdin=None, stdout=None) -> dict:
    """Answer the client's lines on stdin, on stdout, until stdin ends. Returns the summary."""
    src = stdin if stdin is not None else sys.stdin.buffer
    dst = stdout if stdout is not None else sys.stdout.buffer
    return asyncio.run(_stdio(session, src, dst))


async def _stdio(session: ServeSession, src, dst) -> dict:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue = asyncio.Queue()

    def read() -> None:
        try:
            for line in iter(src.readline, b""):
                loop.call_soon_threadsafe(lines.put_nowait, line)
            loop.call_soon_threadsafe(lines.put_nowait, None)
        except (OSError, ValueError, RuntimeError):  # stdin unreadable, or the loop already gone
            try:
                loop.call_soon_threadsafe(lines.put_nowait, None)
            except RuntimeError:
                pass

    closed: list[bool] = []  # the fault disconnect closed stdout

    def write(data: bytes) -> None:
        if closed:
            return
        try:
            dst.write(data + b"\n")
            dst.flush()
        except (OSError, ValueError):
            return  # the client went away
        session.log.line(Direction.S2C, data)

    async def paced(ans: Answer, start: float) -> None:
        for offset, msg, _ in ans.items:
            await asyncio.sleep(max(0.0, start + offset - loop.time()))
            if msg is not None:
                write(msg)

    async def held(ans: Answer) -> None:
        """An answer held back (a delay fault, a gate): sent once its time or gate comes."""
        await _hold(ans)
        send(ans)

    def send(ans: Answer) -> None:
        if session.options.pace:
            task = asyncio.create_task(paced(ans, loop.time()))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        else:
            for _, msg, _ in ans.items:
                if msg is not None:
                    write(msg)
        if ans.release is not None:
            ans.release.open()

    stopped = []

    def on_signal() -> None:
        stopped.append(True)
        lines.put_nowait(None)

    threading.Thread(target=read, name="mrtr-inspect-replay-stdin", daemon=True).start()
    _on_signals(loop, on_signal)
    tasks: set[asyncio.Task] = set()
    holding: set[asyncio.Task] = set()
    while True:
        line = await lines.get()
        if line is None:
            break
        line = line[:-1] if line.endswith(b"\n") else line
        if not line.strip():
            continue
        session.log.line(Direction.C2S, line)
        ans = session.answer(line)
        if ans is None:
            continue
        if ans.fault == "disconnect":
            closed.append(True)
            _close_output(dst)
        elif ans.fault == "delay" or ans.gate is not None:
            task = asyncio.create_task(held(ans))
            holding.add(task)
            task.add_done_callback(holding.discard)
        else:
            send(ans)
    for task in list(holding):  # the client is gone: what was held back is never sent
        task.cancel()
    if tasks and not stopped:
        await asyncio.wait(tasks)
    return session.close()


def _close_output(dst) -> None:
    """Close the server's stdout (the fault disconnect): the client reads its end. The descriptor is
    pointed at /dev/null rather than closed, so no file opened later takes its number."""
    try:
        dst.flush()
    except (OSError, ValueError):
        pass
    try:
        fd = dst.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if fd is None:
        try:
            dst.close()
        except (OSError, ValueError):
            pass
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


async def _hold(ans: Answer, *also: Any) -> asyncio.Future | None:
    """Wait until the answer may go: its gate opens, or `hold` seconds pass (None: for ever), or
    one of `also` (awaitables: the client going away, the replay stopping) completes first; that one
    is returned (None: the answer may go)."""
    waits: list[asyncio.Future] = [asyncio.ensure_future(a) for a in also]
    if ans.gate is not None:
        opened = asyncio.Event()
        ans.gate.on_open(opened.set)
        gate = asyncio.ensure_future(opened.wait())
        waits.append(gate)
    elif ans.hold is None:
        waits.append(asyncio.get_running_loop().create_future())  # only `also` ends it
    if not waits:
        await asyncio.sleep(ans.hold or 0.0)
        return None
    try:
        done, _ = await asyncio.wait(waits, timeout=ans.hold, return_when=asyncio.FIRST_COMPLETED)
    finally:
        pending = [w for w in waits if not w.done()]
        for w in pending:
            w.cancel()
        if pending:  # ended before anyone reads the client's stream again (one reader at a time)
            await asyncio.gather(*pending, return_exceptions=True)
    return next((w for w in waits[: len(also)] if w in done), None)


def _on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    import signal

    for s in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(s, stop)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
            pass


# -------------------------------------------------------------------------------------------------
# HTTP (asyncio + h11)


class HttpReplayServer:
    """A Streamable HTTP endpoint answering from a ServeSession. A request whose `Host` or `Origin`
    names another listener than this one (DNS rebinding: hosts.py) is answered 403 before it is
    read as MCP, and is no part of the session; `refused(reason)` hears of each."""

    def __init__(self, session: ServeSession, host: str = "127.0.0.1", port: int = 0, allow: tuple[str, ...] = (),
                 refused: Callable[[str], None] | None = None) -> None:
        self.session = session
        self.host = host
        self.port = port
        self.url = ""
        self.policy = HostPolicy(allow, host)
        self.refused = refused
        self._server: asyncio.Server | None = None
        self._x = 0
        self._stopping: asyncio.Event | None = None  # set on stop: answers held back are never sent

    async def start(self) -> str:
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        host, port = self._server.sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}{self.session.script.http_path}"
        return self.url

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        peer = writer.get_extra_info("peername")
        client = peer[0] if peer else ""
        sock = writer.get_extra_info("sockname")
        local = sock[0] if sock else None
        try:
            while True:
                req = await _next_event(conn, reader)
                if not isinstance(req, h11.Request):
                    break
                body = bytearray()
                while True:
                    ev = await _next_event(conn, reader)
                    if isinstance(ev, h11.Data):
                        body += ev.data
                    elif isinstance(ev, h11.EndOfMessage):
                        break
                    else:
                        return
                if not await self._guarded(conn, writer, req, local):
                    await self._respond(conn, writer, req, bytes(body), client, reader)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _guarded(self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request,
                       local: str | None) -> bool:
        """Answer 403 (and say so) when the request's Host or Origin is not allowed; True then."""
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers]
        reason = self.policy.refusal(header(headers, "host"), header(headers, "origin"), local)
        if reason is None:
            return False
        body = forbidden_body(reason)
        writer.write(conn.send(h11.Response(status_code=403, headers=[
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())])))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        if self.refused is not None:
            self.refused(reason)
        return True

    async def _respond(self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, body: bytes,
                       client: str, reader: asyncio.StreamReader | None = None) -> None:
        self._x += 1
        x = self._x
        log = self.session.log
        method = req.method.decode("ascii", "replace")
        target = req.target.decode("utf-8", "replace")
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers)
        log.request(x, method, target, headers, body, client)
        loop = asyncio.get_running_loop()
        start = loop.time()
        if method != "POST":
            await _send(conn, writer, log, x, 405, (("allow", "POST"),), [b""], stream=False)
            return
        ans = self.session.answer(body, target)  # the query counts: the recorded path has its own
        if ans is None:
            await _send(conn, writer, log, x, 202, (), [b""], stream=False)
            return
        if ans.fault == "disconnect":
            log.response_end(x, UPSTREAM_ERROR + "the replay closed the connection (fault disconnect)")
            raise ConnectionResetError("fault disconnect")
        if ans.fault == "delay" or ans.gate is not None:
            assert self._stopping is not None
            gone = reader.read(65536) if reader is not None else asyncio.get_running_loop().create_future()
            ended = await _hold(ans, gone, self._stopping.wait())
            if ended is not None:
                data = ended.result() if not ended.cancelled() and ended.exception() is None else b""
                if isinstance(data, bytes) and data:
                    conn.receive_data(data)  # the client sent more on this connection: h11 keeps it
                else:
                    log.response_end(x, CLIENT_DISCONNECTED if isinstance(data, bytes) else CAPTURE_ENDED)
                    raise ConnectionResetError("the client went away, or the replay stopped, before the answer")
            start = loop.time()
        pace = self.session.options.pace
        if not ans.stream:
            msgs = [(o, m) for o, m, _ in ans.items if m is not None]
            offset, data = msgs[-1] if msgs else (0.0, b"")
            if pace:
                await asyncio.sleep(max(0.0, start + offset - loop.time()))
            hdrs = _with_type(ans.headers, "application/json")
            await _send(conn, writer, log, x, ans.status, hdrs, [data], stream=False)
            if ans.release is not None:
                ans.release.open()
            return
        hdrs = _with_type(ans.headers, "text/event-stream")
        if not any(k.lower() == "cache-control" for k, _ in hdrs):
            hdrs += (("cache-control", "no-cache"),)
        events = [(o, ev if ev is not None else sse_event(m)) for o, m, ev in ans.items if ev is not None or m is not None]
        await _send(conn, writer, log, x, ans.status, hdrs, events, stream=True, pace_from=start if pace else None)
        if ans.release is not None:
            ans.release.open()


def _with_type(headers: Headers, content_type: str) -> Headers:
    if any(k.lower() == "content-type" for k, _ in headers):
        return headers
    return headers + (("content-type", content_type),)


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader):
    while True:
        ev = conn.next_event()
        if ev is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
            continue
        return ev


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, log: LiveLog, x: int, status: int,
                headers: Headers, parts: list, stream: bool, pace_from: float | None = None) -> None:
    """The response: whole (`parts` is [body]) or as a stream of (offset, chunk) written one by one.
    Each part is logged before it is written, so the live log never sees the client's next request
    before the response it answered."""
    loop = asyncio.get_running_loop()
    hdrs = list(headers)
    if not stream:
        hdrs.append(("content-length", str(len(parts[0]))))
    log.response_head(x, status, tuple(hdrs))
    writer.write(conn.send(h11.Response(status_code=status, headers=[(k.encode("latin-1"), v.encode("latin-1"))
                                                                     for k, v in hdrs])))
    ended = False
    try:
        for part in parts:
            offset, chunk = part if stream else (0.0, part)
            if pace_from is not None:
                await asyncio.sleep(max(0.0, pace_from + offset - loop.time()))
            if chunk:
                log.response_data(x, chunk)
                writer.write(conn.send(h11.Data(data=chunk)))
                if stream:
                    await writer.drain()
        log.response_end(x)
        ended = True
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
    except ConnectionError:
        if not ended:
            log.response_end(x, CLIENT_DISCONNECTED)
        raise


async def serve_http(session: ServeSession, host: str, port: int, ready: Callable[[str], None],
                     stop: asyncio.Event | None = None, allow: tuple[str, ...] = (),
                     refused: Callable[[str], None] | None = None) -> dict:
    """Serve until `stop` is set (or SIGINT/SIGTERM in the main thread). Returns the summary.
    `allow`: names (`--allow-host`) served besides the loopback ones; `refused`: see HttpReplayServer."""
    server = HttpReplayServer(session, host, port, allow, refused)
    ready(await server.start())
    stop = stop or asyncio.Event()
    _on_signals(asyncio.get_running_loop(), stop.set)
    await stop.wait()
    await server.stop()
    return session.close()


class BackgroundHttpServer:
    """`serve_http` on a thread of its own (for the pytest plugin): `start()` gives the URL."""

    def __init__(self, session: ServeSession, host: str = "127.0.0.1", port: int = 0, allow: tuple[str, ...] = ()) -> None:
        self.session = session
        self.host, self.port = host, port
        self.allow = allow
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mrtr-inspect-replay-http", daemon=True)
        self._stopping = False
        self.result: dict | None = None

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            if self._stopping:  # stop() came before the loop was there to hear it
                self._stop.set()

            def ready(url: str) -> None:
                self.url = url
                self._ready.set()

            self.result = await serve_http(self.session, self.host, self.port, ready, self._stop, self.allow)

        try:
            asyncio.run(main())
        except BaseException as e:  # reported by start()
            self._error = e
            self._ready.set()

    def start(self, timeout: float = 10.0) -> str:
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            raise RuntimeError(f"the replay server did not start: {self._error!r}")
        return self.url

    def stop(self, timeout: float = 10.0) -> dict:
        """Also after a start() cut short (a KeyboardInterrupt while it waited)."""
        self._stopping = True
        if self._loop is not None and self._stop is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # its loop has ended already
                pass
        if self._thread.is_alive():
            self._thread.join(timeout)
        return self.result if self.result is not None else self.session.close()

