"""Hostile traffic through the real proxy, over real sockets (docs/reliability.md, "Hostile traffic").

One proxy (`mrtr-inspect --upstream`, recording and reporting) in front of a raw-socket upstream of
our own (tests/e2e/rawhttp.py), and a raw client, both of which hash what they send and receive:

- hypothesis-made MCP requests, sent with Content-Length or chunked in random pieces, some of them
  broken (invalid UTF-8, JSON cut mid-message, nested past the depth limit), answered as JSON or as
  an SSE stream full of garbage fields: the upstream receives exactly the body the client sent and
  the client exactly the body the upstream sent (SHA-256 at both ends), the recording holds the
  request's bytes, and every broken message is a finding;
- malformed framing (bad chunk sizes, chunks shorter than they say, bodies cut mid-message by a
  client that leaves): no crash, nothing made whole that was not, a finding for each, the next
  client served;
- a 50 MB body each way, and a slow client sending a few bytes at a time.

The examples are few and derandomized (the same ones every run), so the suite stays quick and
deterministic.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_inspect.core.events import HttpRequest
from mrtr_inspect.recording.reader import read_frames
from tests.e2e.rawhttp import RawUpstream, Received, exchange, json_answer, request_bytes, sse_answer
from tests.e2e.test_http_proxy import ProxyRun

FUZZ = settings(max_examples=30, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"}}
BROKEN_BODY = "http-body-not-single-message"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@dataclass
class Harness:
    """The proxy between our upstream and our client; `answer` is what the upstream says next."""

    up: RawUpstream
    proxy: ProxyRun
    rec: object
    rep: object
    answer: bytes = b""
    sent: dict = field(default_factory=dict)  # path -> (request body sha, broken: whether a finding is due)
    n: int = 0

    def path(self) -> str:
        self.n += 1
        return f"/mcp?case={self.n}"

    def upstream_got(self, path: str) -> list[Received]:
        with self.up.lock:
            return [r for r in self.up.received if r.path == path]

    def served(self) -> None:
        """A well-formed request still gets its answer, byte for byte."""
        path = self.path()
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}).encode()
        self.answer = json_answer(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')
        got = exchange(self.proxy.port, [request_bytes(body, path)])
        assert got is not None and got.path == "200" and got.body == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
        assert [r.sha for r in self.upstream_got(path)] == [sha(body)]
        self.sent[path] = (sha(body), False)

    def stop(self) -> tuple[dict, list]:
        assert self.proxy.proc.poll() is None, "the proxy died"
        assert self.proxy.stop() == 0
        return json.loads(open(self.rep).read()), list(read_frames(self.rec))


@contextmanager
def harness(tmp_path):
    box: dict = {}
    up = RawUpstream(lambda req: box["h"].answer)
    rec, rep = tmp_path / "fuzz.jsonl", tmp_path / "report.json"
    proxy = ProxyRun(up.url, "--record", str(rec), "--report", str(rep), "--quiet")
    try:
        h = box["h"] = Harness(up, proxy.ready(), rec, rep)
        yield h
    finally:
        proxy.kill()
        up.close()


def _findings_by_path(report: dict) -> dict[str, set]:
    out: dict[str, set] = {}
    for f in report["findings"]:
        m = re.search(r"POST (/mcp\?case=\d+) ", f["message"])
        if m:
            out.setdefault(m.group(1), set()).add(f["rule"])
    return out


def _check_recording(h: Harness, frames: list) -> None:
    """The recording holds each request body as the client sent it."""
    recorded = {f.path: sha(f.body) for f in frames if type(f) is HttpRequest}
    for path, (digest, _) in h.sent.items():
        if digest is not None:
            assert recorded.get(path) == digest, path


# -- messages: well framed, their content hostile ---------------------------------------------------

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                           max_leaves=12)
GARBAGE_FIELD = st.one_of(
    st.tuples(st.text(alphabet="abcdefghijklmnopqrstuvwxyz:- ", min_size=1, max_size=12), st.text(max_size=20)).map(
        lambda kv: f"{kv[0]}: {kv[1]}".replace("\r", " ").replace("\n", " ").encode()),
    st.sampled_from([b"retry: soon", b"id: \x00x", b": keep-alive", b"event: weird", b"data", b"::::", b"\xff\xfe garbage"]),
)


@st.composite
def messages(draw):
    name = draw(st.text(max_size=30))
    args = draw(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=4))
    rid = draw(st.integers(min_value=1, max_value=2**31))
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": name, "arguments": args, "_meta": META}}, ensure_ascii=draw(st.booleans())).encode()
    broken = draw(st.sampled_from(["none", "none", "utf8", "cut", "deep"]))
    if broken == "utf8":
        at = draw(st.integers(min_value=0, max_value=len(body)))
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])) + body[at:]
    elif broken == "cut":
        body = body[:draw(st.integers(min_value=1, max_value=len(body) - 1))]
    elif broken == "deep":
        depth = draw(st.integers(min_value=201, max_value=5000))
        body = body[:-2] + b',"deep":' + b"[" * depth + b"]" * depth + b"}}"
    chunks = draw(st.none() | st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=5))
    result = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [], "resultType": "complete"}}).encode()
    if draw(st.booleans()):
        answer_body = b"\n".join(draw(st.lists(GARBAGE_FIELD, max_size=6))) + b"\ndata: " + result + b"\n\n"
        answer = sse_answer(answer_body)
    else:
        answer_body = result
        answer = json_answer(result)
    return body, broken, chunks, answer, answer_body


def test_fuzzed_messages_pass_byte_for_byte_and_each_broken_one_is_a_finding(tmp_path):
    with harness(tmp_path) as h:

        @FUZZ
        @given(case=messages())
        def one(case):
            body, broken, chunks, answer, answer_body = case
            path = h.path()
            h.answer = answer
            got = exchange(h.proxy.port, [request_bytes(body, path, chunks)])
            assert got is not None and got.path == "200", got
            assert sha(got.body) == sha(answer_body)  # the client got exactly what the upstream sent
            [up] = h.upstream_got(path)
            assert up.complete and up.sha == sha(body)  # the upstream got exactly what the client sent
            h.sent[path] = (sha(body), broken != "none")
            tally[(broken, "chunked" if chunks else "length", "sse" if b"event-stream" in answer[:80] else "json")] = (
                tally.get((broken, "chunked" if chunks else "length", "sse" if b"event-stream" in answer[:80] else "json"), 0) + 1)

        tally: dict = {}
        one()
        h.served()
        report, frames = h.stop()
    found = _findings_by_path(report)
    kinds = {broken for _, broken in h.sent.values()}
    assert kinds == {True, False}  # both kinds were sent
    for path, (_, broken) in h.sent.items():
        assert (BROKEN_BODY in found.get(path, set())) == broken, (path, found.get(path))
    assert not [f for f in report["findings"] if f["rule"] == "inspector-error"]
    _check_recording(h, frames)
    print(f"\n{len(h.sent)} exchanges, {sum(b for _, b in h.sent.values())} broken, each a finding: {sorted(tally.items())}")


# -- framing: the HTTP message itself broken -----------------------------------------------------------

CALL = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "deploy", "arguments": {}, "_meta": META}}).encode()


def _head(path: str, framing: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n{framing}\r\n").encode()


@st.composite
def bad_framings(draw):
    """(a function of the path giving the bytes, what it is): each ends with the client leaving."""
    cut = draw(st.integers(min_value=1, max_value=len(CALL) - 1))
    kind = draw(st.sampled_from(["length-cut", "chunk-short", "chunk-bad-size", "chunk-no-end", "chunk-negative",
                                 "chunk-garbage-ext"]))
    garbage = draw(st.text(alphabet="xyz!@#$% ", min_size=1, max_size=8))
    part = CALL[:cut]
    make = {
        "length-cut": lambda p: _head(p, f"Content-Length: {len(CALL)}\r\n") + part,
        "chunk-short": lambda p: _head(p, "Transfer-Encoding: chunked\r\n") + f"{len(CALL):x}\r\n".encode() + part,
        "chunk-bad-size": lambda p: _head(p, "Transfer-Encoding: chunked\r\n") + f"{garbage}\r\n".encode() + CALL + b"\r\n0\r\n\r\n",
        "chunk-no-end": lambda p: _head(p, "Transfer-Encoding: chunked\r\n") + f"{len(part):x}\r\n".encode() + part + b"\r\n",
        "chunk-negative": lambda p: _head(p, "Transfer-Encoding: chunked\r\n") + b"-5\r\n" + part,
        "chunk-garbage-ext": lambda p: _head(p, "Transfer-Encoding: chunked\r\n") + f"{len(part):x};{garbage}\r\n".encode() + part,
    }[kind]
    return make, kind


def test_malformed_framing_is_no_crash_nothing_is_made_whole_and_the_next_client_is_served(tmp_path):
    with harness(tmp_path) as h:
        h.answer = json_answer(b'{"jsonrpc":"2.0","id":5,"result":{"content":[],"resultType":"complete"}}')
        kinds: dict[str, str] = {}

        @FUZZ
        @given(case=bad_framings())
        def one(case):
            make, kind = case
            path = h.path()
            got = exchange(h.proxy.port, [make(path)], cut=True)
            assert got is None or got.path in ("400", "502"), got  # refused, or the connection simply closed
            # what reached the upstream was never made whole: cut, as the client cut it
            assert all(not r.complete or r.sha != sha(CALL) for r in h.upstream_got(path)), kind
            kinds[path] = kind
            h.served()  # the next client

        one()
        report, frames = h.stop()
    found = _findings_by_path(report)
    recorded = {f.path: f for f in frames if type(f) is HttpRequest}
    for path, kind in kinds.items():
        r = recorded.get(path)
        if r is not None:  # the proxy took it for a request: recorded as cut short, and a finding says so
            assert not r.complete and CALL.startswith(r.body), (kind, r)
            assert BROKEN_BODY in found.get(path, set()), (kind, path, found.get(path))
    assert len(recorded) > len(kinds)  # the well-formed ones, and some of the broken ones, were recorded
    assert not [f for f in report["findings"] if f["rule"] == "inspector-error"]
    taken = {}
    for path, kind in kinds.items():
        k = (kind, "recorded+finding" if path in recorded else "refused before a request")
        taken[k] = taken.get(k, 0) + 1
    print(f"\n{len(kinds)} malformed framings, each followed by a served client: {sorted(taken.items())}")


# -- size and pace ----------------------------------------------------------------------------------------


def test_a_50_mb_body_each_way_and_a_slow_client(tmp_path):
    big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "upload", "arguments": {"blob": "é" * (25 * 2**20)}, "_meta": META}}, ensure_ascii=False).encode()
    assert len(big) > 50 * 2**20
    answer_body = json.dumps({"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "x" * (50 * 2**20)}],
                                                                    "resultType": "complete"}}).encode()
    with harness(tmp_path) as h:
        for chunks in (None, [65536]):
            path = h.path()
            h.answer = json_answer(answer_body)
            got = exchange(h.proxy.port, [request_bytes(big, path, chunks)], timeout=120)
            assert got is not None and got.path == "200" and sha(got.body) == sha(answer_body)
            [up] = h.upstream_got(path)
            assert up.sha == sha(big)
            h.sent[path] = (sha(big), False)
        # a slow client: 7 bytes at a time, 5 ms apart, while other clients are served in between
        path = h.path()
        slow = request_bytes(CALL, path)
        h.answer = json_answer(b'{"jsonrpc":"2.0","id":5,"result":{"content":[],"resultType":"complete"}}')
        done: dict = {}
        t = threading.Thread(target=lambda: done.update(got=exchange(h.proxy.port, [slow[i:i + 7] for i in range(0, len(slow), 7)],
                                                                     pause=0.005)))
        t.start()
        for _ in range(3):
            h.served()
        t.join(60)
        assert done["got"] is not None and done["got"].path == "200"
        assert [r.sha for r in h.upstream_got(path)] == [sha(CALL)]
        h.sent[path] = (sha(CALL), False)
        report, frames = h.stop()
    _check_recording(h, frames)
    assert not [f for f in report["findings"] if f["rule"] in ("inspector-error", BROKEN_BODY, "upstream-error")]
    assert [len(f.body) for f in frames if type(f) is HttpRequest][:2] == [len(big)] * 2  # analysed whole
