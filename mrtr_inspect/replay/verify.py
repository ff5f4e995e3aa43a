"""`replay verify`: a recording's client side, played against a live server.

The recorded client messages are sent in recorded order, each request with a new JSON-RPC id. A
message waits only for the responses that had arrived before it was sent in the recording, so
overlapping requests overlap again. A retry answers the live round, not the recorded one: it carries
the recorded `inputResponses` and, where the recorded client echoed the server's `requestState`, the
state the live server issued (a sealed state is bound to the process and expires). A retry of a
round the live server did not open is not sent.

Each response (and the notifications sent for its request) is compared with the recorded one,
ignoring ids, requestState values, times (`createdAt`, `lastUpdatedAt`, `lastModified`; timing is
never compared), the values the recording holds redacted (a placeholder, in a string or as one)
and the paths given.

Each recorded session is played against a fresh server process on stdio (one tee run was one
process); on HTTP all go to the same URL.
"""

from __future__ import annotations

import difflib
import http.client
import itertools
import json
import re
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from typing import IO, Any, Callable
from urllib.parse import urlsplit

from ..config import Config
from ..core.events import UPSTREAM_ERROR, Direction, Headers
from ..core.framing import SseDecoder, is_event_stream, parse_sse_event
from ..core.messages import ERROR, NOTIFICATION, REQUEST, RESULT, Message, decode_message, format_id, id_key, target_of
from ..outputs.text import printable
from .live import LiveLog
from ..recording.redaction import PLACEHOLDERS, is_placeholder
from .matching import ABSENT, Diff, differences, parse_paths, strip_paths
from .script import Exchange, HttpSide, ReplayError, Script, Step
from .wire import dumps, set_member

TIME_PATHS = ("**.createdAt", "**.lastUpdatedAt", "**.lastModified")
_HOP = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
                  "accept-encoding", "content-encoding"})


class VerifyError(ReplayError):
    """The live server cannot be started or reached."""


@dataclass
class VerifyOptions:
    ignore: tuple[str, ...] = ()
    timeout: float = 30.0  # seconds to wait for one response
    headers: tuple[tuple[str, str], ...] = ()  # HTTP: headers set on every request (a real token…)


@dataclass
class Played:
    """One recorded request, played live."""

    exchange: Exchange
    live_id: Any = None
    sent: Message | None = None
    note: str | None = None  # what was changed beyond the id
    skipped: str | None = None
    messages: list[Message] = field(default_factory=list)  # what the live server sent for it
    response: Message | None = None
    status: int | None = None
    error: str | None = None
    unreachable: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    diffs: list[Diff] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "failed"
        return "differs" if self.diffs else "same"

    def answered(self, m: Message) -> None:
        self.messages.append(m)
        self.response = m
        self.done.set()

    def fail(self, why: str) -> None:
        if not self.done.is_set():
            self.error = why
            self.done.set()


@dataclass
class VerifyResult:
    played: list[Played]
    findings: list = field(default_factory=list)
    ignore: list[tuple] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out = {"same": 0, "differs": 0, "skipped": 0, "failed": 0}
        for p in self.played:
            out[p.verdict] += 1
        return out

    @property
    def ok(self) -> bool:
        return all(p.verdict == "same" for p in self.played)


# -------------------------------------------------------------------------------------------------
# comparing


def _normalized(value: Any, ignore: list[tuple]) -> Any:
    if type(value) is not dict:
        return value
    v = {k: x for k, x in value.items() if k != "id"}
    result = v.get("result")
    if type(result) is dict and type(result.get("requestState")) is str:
        v["result"] = {**result, "requestState": "<requestState>"}
    return strip_paths(v, ignore)


def _notifications(msgs: list[Message], ignore: list[tuple]) -> list:
    """The notifications sent for a request, as compared: without those whose method an ignore
    pattern names (`notifications/progress`: their number may vary from run to run), each without
    the ignored paths, and the list without what a `notifications.…` pattern names (the paths a
    difference is shown with: `notifications.*.params.message`, `notifications.2`)."""
    methods = {p[0] for p in ignore if len(p) == 1 and "/" in p[0]}
    out = [_normalized(m.value, ignore) for m in msgs
           if m.kind == NOTIFICATION and not (methods and type(m.value) is dict and m.value.get("method") in methods)]
    listed = [p[1:] for p in ignore if len(p) > 1 and p[0] == "notifications"]
    return strip_paths(out, listed) if listed else out


def compare(p: Played, ignore: list[tuple]) -> list[Diff]:
    """How the live answer differs from the recorded one."""
    ex = p.exchange
    rec = ex.response
    out: list[Diff] = []
    if ex.http is not None and p.status is not None and ex.http.status is not None and ex.http.status != p.status:
        out.append(Diff("HTTP status", ex.http.status, p.status))
    if rec is None and p.response is None:
        pass
    elif rec is None or p.response is None:
        out.append(Diff("response", rec.value if rec else ABSENT, p.response.value if p.response else ABSENT))
    else:
        out += differences(_normalized(rec.value, ignore), _normalized(p.response.value, ignore))
    rec_n = _notifications([r.msg for r in ex.replies if r.msg is not None], ignore)
    live_n = _notifications(p.messages, ignore)
    methods = ([n.get("method") for n in rec_n], [n.get("method") for n in live_n])
    if methods[0] != methods[1]:
        out.append(Diff("notifications (methods)", methods[0], methods[1]))
    else:
        out += differences(rec_n, live_n, ("notifications",))
    return [d for d in out if not _redacted_there(d)]


def _redacted_there(d: Diff) -> bool:
    """Whether the recording holds a redacted secret where the live value differs: a placeholder for a
    live string (a token a server issues anew each run), or a text whose placeholders stand for the
    live text's parts (a result's JSON text mirroring a redacted member): not a difference, as a
    filtered value is not in vcrpy."""
    rec, live = d.recorded, d.live
    if type(rec) is not str or type(live) is not str:
        return False
    if is_placeholder(rec):
        return True
    parts = PLACEHOLDERS.split(rec)
    if len(parts) < 2 or len(parts) > 20:
        return False
    return re.fullmatch(".+?".join(re.escape(p) for p in parts), live, re.S) is not None


def _extra_round(p: Played) -> str | None:
    """`the live server asks for another round: …` when it answers input_required where the
    recording completed."""
    rec, live = p.exchange.response, p.response
    if rec is None or live is None or type(live.result) is not dict:
        return None
    if live.result.get("resultType") != "input_required":
        return None
    if type(rec.result) is dict and rec.result.get("resultType") == "input_required":
        return None
    ir = live.result.get("inputRequests")
    keys = ", ".join(sorted(ir)) if type(ir) is dict else "none"
    return f"the live server asks for a round the recording does not have (inputRequests: {keys})"


# -------------------------------------------------------------------------------------------------
# playing


class Peer:
    """A live server: `send` a request for a Played (answer it when its response comes), `notify`."""

    def send(self, p: Played, data: bytes, side: HttpSide | None) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def notify(self, data: bytes, side: HttpSide | None) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _new_id(recorded: Any, n: int) -> Any:
    return f"verify-{n}" if type(recorded) is str else n


def _live_request(ex: Exchange, played: dict[int, Played], p: Played) -> bytes | None:
    """The bytes to send for a recorded request; None (with p.skipped) when it cannot be sent."""
    data = set_member(ex.request.raw, ("id",), p.live_id)
    if ex.round_of is None:
        return data
    src = played.get(ex.round_of.request.index)
    if src is None or src.response is None:
        p.skipped = f"the request that opened round {ex.round} had no live response"
        return None
    result = src.response.result if type(src.response.result) is dict else {}
    if src.response.kind != RESULT or result.get("resultType") != "input_required":
        what = "an error" if src.response.kind == ERROR else f"resultType {result.get('resultType')!r}"
        p.skipped = f"the live server did not ask for round {ex.round} (it answered {what})"
        return None
    if ex.echoed_state is None:
        return data
    live_state = result.get("requestState")
    if type(live_state) is str:
        if live_state != ex.echoed_state:
            p.note = "sent with the live requestState"
        return set_member(data, ("params", "requestState"), live_state)
    p.note = "sent without requestState: the live round carried none"
    return set_member(data, ("params", "requestState"))


def play_session(steps: list[Step], peer: Peer, timeout: float, counter: itertools.count,
                 sent: Any = None) -> list[Played]:
    """Play one session's steps; `sent`: an outputs.progress.Tally counting the requests sent."""
    played: dict[int, Played] = {}
    order: list[Played] = []
    live_ids: dict[Any, Any] = {}
    for step in steps:
        for p in order:
            rt = p.exchange.response_time
            if rt is not None and rt <= step.time and not p.done.wait(timeout):
                p.fail(f"no response within {timeout:g} s")
        if step.kind == "request":
            ex = step.exchange
            assert ex is not None
            p = Played(ex, _new_id(ex.request.id, next(counter)))
            played[ex.request.index] = p
            order.append(p)
            data = _live_request(ex, played, p)
            if data is None:
                p.done.set()
                continue
            live_ids[ex.request.idk] = p.live_id
            p.sent = decode_message(data)
            peer.send(p, data, step.http)
            if sent is not None:
                sent.n += 1
        elif step.kind == "notification":
            data = step.msg.raw
            params = step.msg.params if type(step.msg.params) is dict else {}
            if step.msg.method == "notifications/cancelled" and "requestId" in params:
                live = live_ids.get(id_key(params["requestId"]))
                if live is not None:
                    data = set_member(data, ("params", "requestId"), live)
            peer.notify(data, step.http)
    for p in order:
        if p.exchange.response is None and not p.exchange.unanswered:
            p.done.set()  # none was recorded (cancelled, or an HTTP response without one): none is awaited
        elif not p.done.wait(timeout):
            p.fail(f"no response within {timeout:g} s")
    return order


def verify_script(script: Script, make_peer: Callable[[str, LiveLog], Peer], options: VerifyOptions | None = None,
                  transport: str = "stdio", config: Config | None = None, record: str | None = None,
                  sent: Any = None) -> VerifyResult:
    """Play every session of the script against a peer of its own; compare. `sent`: see play_session."""
    options = options or VerifyOptions()
    ignore = parse_paths(TIME_PATHS + tuple(options.ignore))
    counter = itertools.count(1)
    result = VerifyResult([], ignore=ignore)
    sessions = list(dict.fromkeys(s.session for s in script.steps))
    for sid in sessions:
        steps = [s for s in script.steps if s.session == sid]
        if not any(s.kind == "request" for s in steps):
            continue
        log = LiveLog(transport, {"verify": script.path}, config, record)
        peer = make_peer(sid, log)
        try:
            result.played += play_session(steps, peer, options.timeout, counter, sent)
        finally:
            peer.close()
            result.findings += log.close()
    for p in result.played:
        if p.verdict not in ("skipped", "failed"):
            p.diffs = compare(p, ignore)
    tried = [p for p in result.played if not p.skipped]
    if tried and all(p.unreachable for p in tried):
        raise VerifyError(tried[0].error or "the server cannot be reached")
    return result


# -------------------------------------------------------------------------------------------------
# stdio


class StdioPeer(Peer):
    """A server process started for one recorded session."""

    def __init__(self, cmd: list[str], log: LiveLog, steps: list[Step], timeout: float) -> None:
        self.log = log
        self.timeout = timeout
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        except OSError as e:
            raise VerifyError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None
        self.lock = threading.Lock()
        self.waiting: dict[tuple, Played] = {}
        self.gone = False  # the process closed its output: nothing more is answered
        self.exit_status: int | None = None  # its status, when it had exited by then
        self.answered_any = False
        # the recorded client's answers to server requests (the legacy era), by the request's method
        self.answers: dict[str, list[bytes]] = {}
        for s in steps:
            if s.kind == "response" and s.answers is not None and s.answers.method:
                self.answers.setdefault(s.answers.method, []).append(s.msg.raw)
        self.reader = threading.Thread(target=self._read, name="mrtr-inspect-verify-stdout", daemon=True)
        self.reader.start()

    def _write(self, data: bytes) -> None:
        self.log.line(Direction.C2S, data)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data + b"\n")
        except (OSError, ValueError):
            pass  # the server is gone: the reader fails what waits

    def send(self, p: Played, data: bytes, side: HttpSide | None) -> None:
        with self.lock:
            gone = self.gone
            if not gone:
                self.waiting[p.sent.idk] = p  # type: ignore[union-attr]
        if gone:  # nobody would answer it: it would wait out the timeout
            self._fail(p)
            return
        self._write(data)

    def _fail(self, p: Played) -> None:
        """A request the process will never answer, failed now with its exit status. When it answered
        none before it went, it never served at all: the run counts that as a server that cannot be
        started (exit 2), as a refused connection on HTTP."""
        p.unreachable = not self.answered_any
        status = f"exit status {self.exit_status}" if self.exit_status is not None else "still running"
        p.fail(f"the server closed its output ({status}) before answering"
               + ("" if self.answered_any else " any request"))

    def notify(self, data: bytes, side: HttpSide | None) -> None:
        self._write(data)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            line = line[:-1] if line.endswith(b"\n") else line
            if line.strip():
                self.log.line(Direction.S2C, line)
                self._message(decode_message(line))
        try:  # its output is closed: what waits fails now, with the status if it comes soon
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:  # a process that closed its stdout and runs on
            code = None
        with self.lock:
            self.gone, self.exit_status = True, code
            left = list(self.waiting.values())
            self.waiting.clear()
        for p in left:
            self._fail(p)

    def _message(self, m: Message) -> None:
        with self.lock:
            if m.kind in (RESULT, ERROR):
                p = self.waiting.pop(m.idk, None) if m.idk is not None else None
                if p is not None:
                    self.answered_any = True
                    p.answered(m)
                return
            pending = list(self.waiting.values())
        if m.kind == NOTIFICATION and pending:
            _owner(pending, m).messages.append(m)
        elif m.kind == REQUEST:
            recorded = self.answers.get(m.method or "")
            if recorded:
                self._write(set_member(recorded.pop(0), ("id",), m.id))
            else:
                self._write(dumps({"jsonrpc": "2.0", "id": m.id, "error": {
                    "code": -32601, "message": f"mrtr-inspect verify: the recording has no answer to {m.method}"}}).encode())

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)


def _owner(pending: list[Played], m: Message) -> Played:
    """The request a server notification belongs to: the one its progressToken names, else the latest."""
    p = m.params if type(m.params) is dict else {}
    token = p.get("progressToken")
    for q in pending:
        meta = q.sent.meta if q.sent is not None else None
        if token is not None and meta is not None and meta.get("progressToken") == token:
            return q
    return pending[-1]


# -------------------------------------------------------------------------------------------------
# HTTP


class HttpPeer(Peer):
    """A Streamable HTTP server: each request is one POST (on a thread of its own)."""

    def __init__(self, url: str, log: LiveLog, headers: tuple[tuple[str, str], ...], timeout: float) -> None:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise VerifyError(f"--upstream takes an http:// or https:// URL, not {url!r}")
        self.url = url
        self.u = u
        self.path = u.path if u.path not in ("", "/") else None
        self.log = log
        self.headers = headers
        self.timeout = timeout
        self.session_id: str | None = None
        self.lock = threading.Lock()
        self.x = 0
        self.threads: list[threading.Thread] = []

    def _conn(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.u.scheme == "https" else http.client.HTTPConnection
        return cls(self.u.hostname, self.u.port, timeout=self.timeout)

    def _headers(self, side: HttpSide | None, msg: Message) -> list[tuple[str, str]]:
        base = side.headers if side is not None else _standard_headers(msg)
        names = {k.lower() for k, _ in self.headers}
        out = [(k, v) for k, v in base if k.lower() not in _HOP and k.lower() not in names]
        if self.session_id is not None:
            out = [(k, v) for k, v in out if k.lower() != "mcp-session-id"] + [("mcp-session-id", self.session_id)]
        return out + list(self.headers)

    def send(self, p: Played, data: bytes, side: HttpSide | None) -> None:
        t = threading.Thread(target=self._post, args=(p, data, side), name="mrtr-inspect-verify-post", daemon=True)
        self.threads.append(t)
        t.start()

    def notify(self, data: bytes, side: HttpSide | None) -> None:
        self._post(None, data, side)

    def _post(self, p: Played | None, data: bytes, side: HttpSide | None) -> None:
        with self.lock:
            self.x += 1
            x = self.x
        path = self.path or (side.path if side is not None else "/mcp")
        headers = self._headers(side, decode_message(data))
        self.log.request(x, "POST", path, tuple(headers), data)
        conn = self._conn()
        error = None
        reason = ""
        try:
            conn.request("POST", path, body=data, headers=dict(headers))
            resp = conn.getresponse()
            reason = resp.reason
            rh: Headers = tuple(resp.getheaders())
            self.log.response_head(x, resp.status, rh)
            sid = resp.getheader("mcp-session-id")
            if sid:
                self.session_id = sid
            if p is not None:
                p.status = resp.status
            self._body(p, x, resp, is_event_stream(rh))
        except (OSError, http.client.HTTPException) as e:
            error = f"{UPSTREAM_ERROR}{e}"
            if p is not None:
                p.unreachable = isinstance(e, (ConnectionRefusedError, socket.gaierror))
                p.error = f"cannot reach {self.url}: {e}"
        finally:
            conn.close()
            self.log.response_end(x, error)  # logged before the next request may go
            if p is not None:
                if p.response is not None:
                    p.done.set()
                elif p.error is None and p.status is not None and not 200 <= p.status < 300:
                    # a 404 that is no JSON-RPC answer: no MCP endpoint there (a wrong path); when every
                    # request gets one, the server counts as not reached (exit 2)
                    p.unreachable = p.status == 404
                    p.error = f"{self.url} answered HTTP {p.status} {reason}".rstrip() + " without a JSON-RPC response"
                p.fail(p.error or "the response ended without a JSON-RPC response")

    def _body(self, p: Played | None, x: int, resp: http.client.HTTPResponse, stream: bool) -> None:
        if not stream:
            body = resp.read()
            self.log.response_data(x, body)
            if p is not None and body.strip():
                m = decode_message(body)
                p.messages.append(m)
                if m.kind in (RESULT, ERROR):
                    p.response = m
            return
        dec = SseDecoder()
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                return
            self.log.response_data(x, chunk)
            for ev in dec.feed(chunk):
                fields = parse_sse_event(ev)
                if fields.data is None or p is None:
                    continue
                m = decode_message(fields.data)
                p.messages.append(m)
                if m.kind in (RESULT, ERROR) and p.sent is not None and m.idk == p.sent.idk:
                    p.response = m
                    return

    def close(self) -> None:
        for t in self.threads:
            t.join(self.timeout)


def _standard_headers(msg: Message) -> tuple[tuple[str, str], ...]:
    """The headers a Streamable HTTP client sends with a message recorded on stdio."""
    out = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    meta = msg.meta or {}
    version = meta.get("io.modelcontextprotocol/protocolVersion")
    if type(version) is str:
        out.append(("mcp-protocol-version", version))
    if msg.method:
        out.append(("mcp-method", msg.method))
        target = target_of(msg.method, msg.params)
        if target is not None and msg.method in ("tools/call", "prompts/get", "resources/read") and target.isascii():
            out.append(("mcp-name", target))
    return tuple(out)


# -------------------------------------------------------------------------------------------------
# output


def render(result: VerifyResult, out: IO[str], against: str) -> None:
    """The verdict of each request, its differences and a diff of each differing response. Every line
    quotes the traffic (labels, paths, values, the live server's errors) or a file name: each is
    made `printable`, so neither a recorded nor a live peer writes to the terminal."""
    def line(text: str) -> None:
        out.write(printable(text) + "\n")

    line(f"verify: {against}")
    for p in result.played:
        ex = p.exchange
        label = ex.label().replace(f"id={format_id(ex.request.id)}", f"id={format_id(p.live_id)}", 1)
        extra = f"  [{p.note}]" if p.note else ""
        line(f"  {p.verdict:<8} {label}{extra}")
        if p.skipped:
            line(f"           {p.skipped}")
        if p.error:
            line(f"           {p.error}")
        if p.exchange.unanswered:
            line("           the recording has no response: the recorded server never answered it")
        if p.diffs:
            more = _extra_round(p)
            if more:
                line(f"           {more}")
            for d in p.diffs:
                line(f"           {d.text()}")
            for text in _unified(p, result.ignore):
                line(text)
    c = result.counts
    line(f"{c['same']} same, {c['differs']} differ, {c['skipped']} skipped, {c['failed']} failed")


def _pretty(m: Message | None, ignore: list[tuple]) -> list[str]:
    if m is None:
        return ["(no response)"]
    v = _normalized(m.value, ignore)
    return json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def _unified(p: Played, ignore: list[tuple], limit: int = 40) -> list[str]:
    lines = list(difflib.unified_diff(_pretty(p.exchange.response, ignore), _pretty(p.response, ignore),
                                      "recorded", "live",
                                      n=2, lineterm=""))
    if not lines:
        return []
    if len(lines) > limit:
        lines = lines[:limit] + [f"… {len(lines) - limit} more lines"]
    return [f"           {ln}" for ln in lines]
