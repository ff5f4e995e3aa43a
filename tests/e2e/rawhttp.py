"""Raw HTTP/1.1 over sockets for the hostile-traffic tests: an upstream that records what each request
brought (the SHA-256 of its body as it arrived, after its framing) and answers with bytes the test
scripts, and a client that sends bytes as they are and reads what comes back. Nothing here trusts the
peer: a connection cut short, a bad chunk size or a missing header is recorded, never raised."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

WAIT = 30.0


@dataclass
class Received:
    method: str = ""
    path: str = ""
    headers: list = field(default_factory=list)
    body: bytes = b""
    complete: bool = False  # the body arrived whole (by its framing)

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


class Reader:
    """Buffered reads from a socket that never raise on a peer that leaves (they return short)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self) -> bytes | None:
        while (i := self.buf.find(b"\n")) < 0:
            if not self._more():
                return None
        out = bytes(self.buf[:i + 1])
        del self.buf[:i + 1]
        return out

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n and self._more():
            pass
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def rest(self) -> bytes:
        while self._more():
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out


def read_message(r: Reader, head_only_status: bool = False) -> Received | None:
    """One HTTP/1.1 message (a request, or a response when the start line is a status line): its
    head, and its body by Content-Length, chunked framing, or (a response without either) to EOF."""
    start = r.line()
    while start in (b"\r\n", b"\n"):
        start = r.line()
    if not start:
        return None
    got = Received()
    parts = start.decode("latin-1").split(" ", 2)
    got.method, got.path = parts[0], parts[1] if len(parts) > 1 else ""
    while (h := r.line()) not in (b"\r\n", b"\n", None):
        k, _, v = h.decode("latin-1").partition(":")
        got.headers.append((k.strip(), v.strip()))
    if h is None:
        return got
    te = (got.header("transfer-encoding") or "").lower()
    if "chunked" in te:
        body = bytearray()
        while True:
            size_line = r.line()
            if size_line is None:
                got.body = bytes(body)
                return got
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                got.body = bytes(body)
                return got
            if size == 0:
                while (t := r.line()) not in (b"\r\n", b"\n", None):
                    pass
                got.body, got.complete = bytes(body), True
                return got
            data = r.exactly(size)
            body += data
            if len(data) < size:
                got.body = bytes(body)
                return got
            r.line()
    n = got.header("content-length")
    if n is not None:
        got.body = r.exactly(int(n))
        got.complete = len(got.body) == int(n)
    elif parts[0].startswith("HTTP/") and not head_only_status:
        status = parts[1] if len(parts) > 1 else ""
        if status not in ("204", "304") and not status.startswith("1"):
            got.body, got.complete = r.rest(), True
        else:
            got.complete = True
    else:
        got.complete = True
    return got


class RawUpstream:
    """An HTTP/1.1 server on 127.0.0.1:0: each request is read raw (`Received`, kept in `received`)
    and answered by `answer(received) -> bytes` (written as given, possibly in pieces: a list), then
    the connection is closed when the answer says `Connection: close` or has no framing."""

    def __init__(self, answer: Callable[[Received], bytes | list[bytes]]) -> None:
        self.answer = answer
        self.received: list[Received] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        r = Reader(conn)
        try:
            while (got := read_message(r)) is not None:
                with self.lock:
                    self.received.append(got)
                if not got.complete:
                    return
                out = self.answer(got)
                for piece in out if isinstance(out, list) else [out]:
                    conn.sendall(piece)
                head = (out[0] if isinstance(out, list) else out).split(b"\r\n\r\n", 1)[0].lower()
                if b"connection: close" in head or (b"content-length" not in head and b"chunked" not in head):
                    return
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def exchange(port: int, pieces: list[bytes], pause: float = 0.0, cut: bool = False,
             timeout: float = WAIT) -> Received | None:
    """Send `pieces` on a new connection to 127.0.0.1:`port` (`pause` seconds between them: a slow
    client), then read one response (None when the connection closed without one). `cut`: the
    client stops sending there (half-closes), as one that dies mid-message."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            for i, p in enumerate(pieces):
                if i and pause:
                    time.sleep(pause)
                s.sendall(p)
            if cut:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        return read_message(Reader(s))


def request_bytes(body: bytes, path: str = "/mcp", chunks: list[int] | None = None,
                  extra: str = "", close: bool = True) -> bytes:
    """A POST of `body`, by Content-Length, or chunked in pieces of the sizes given."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            f"{'Connection: close' + chr(13) + chr(10) if close else ''}{extra}")
    if chunks is None:
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    out, at, n = bytearray((head + "Transfer-Encoding: chunked\r\n\r\n").encode()), 0, 0
    sizes = [s for s in chunks if s > 0] or [max(len(body), 1)]
    while at < len(body):
        size = sizes[n % len(sizes)]
        n += 1
        piece = body[at:at + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        at += len(piece)
    out += b"0\r\n\r\n"
    return bytes(out)


def json_answer(body: bytes, status: str = "200 OK") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)


def sse_answer(events: bytes) -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {len(events)}\r\n\r\n"
            .encode() + events)
