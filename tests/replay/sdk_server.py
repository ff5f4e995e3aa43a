"""The sample MRTR server (official Python SDK) for the replay tests, with changed variants and an
HTTP recorder. Test-only.

    python tests/replay/sdk_server.py [--variant renamed|extra-round] [--http [--record PATH]]

* `--variant renamed`: deploy asks its question under the key `approval` instead of `confirm`;
* `--variant extra-round`: deploy asks `confirm`, then a second round `reason`;
* `--http`: Streamable HTTP on 127.0.0.1, a free port; prints `listening on URL` on stdout once it
  accepts connections;
* `--record PATH`: over HTTP, records every exchange into PATH through `core.framing.HttpFramer`
  and `recording.writer.RecordingWriter`, the way the proxy records (an ASGI middleware around the
  SDK app; it stands in for `mrtr-inspect --upstream … --record` in the fixtures made so far).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

from mcp.server.mcpserver import Context
from mcp.types import InputRequiredResult

from mrtr_inspect.core.framing import HttpFramer
from mrtr_inspect.recording.writer import RecordingWriter
from mrtr_inspect.samples.server import _accepted, _form, build_server


async def renamed(env: str, ctx: Context) -> str | InputRequiredResult:
    """deploy, asking under the key `approval`."""
    answers = ctx.input_responses or {}
    if "approval" not in answers:
        return InputRequiredResult(input_requests={"approval": _form(f"Deploy to {env}?", "confirm", "boolean")},
                                   request_state="deploy:ask")
    return f"deployed to {env}" if _accepted(answers["approval"], "confirm") else f"deployment to {env} cancelled"


async def extra_round(env: str, ctx: Context) -> str | InputRequiredResult:
    """deploy, asking `confirm` and then `reason`."""
    answers = ctx.input_responses or {}
    if "confirm" not in answers and "reason" not in answers:
        return InputRequiredResult(input_requests={"confirm": _form(f"Deploy to {env}?", "confirm", "boolean")},
                                   request_state="deploy:ask")
    if "reason" not in answers:
        return InputRequiredResult(input_requests={"reason": _form("Why deploy now?", "reason")},
                                   request_state="deploy:reason")
    return f"deployed to {env}"


def swap(mcp, name: str, fn) -> None:
    """The tool keeps its name, description, schema and place in tools/list; only what it does changes."""
    mcp._tool_manager.get_tool(name).fn = fn


VARIANTS = {"renamed": renamed, "extra-round": extra_round}


class RecordingMiddleware:
    """ASGI middleware: every HTTP exchange, chunk by chunk, through an HttpFramer into a recording."""

    def __init__(self, app, writer: RecordingWriter) -> None:
        self.app = app
        self.writer = writer
        self.framer = HttpFramer(writer.session)
        self.lock = threading.Lock()
        self.x = 0

    def emit(self, frames: list) -> None:
        with self.lock:
            for f in frames:
                self.writer.write(f)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.lock:
            self.x += 1
            x = self.x
        fr = self.framer
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"])
        path = scope["path"] + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        self.emit(fr.request_head(time.time(), x, scope["method"], path, headers, (scope.get("client") or [""])[0]))
        ended = []

        async def recv():
            msg = await receive()
            if msg["type"] == "http.request" and not ended:
                self.emit(fr.request_data(time.time(), x, msg.get("body", b"")))
                if not msg.get("more_body"):
                    ended.append(True)
                    self.emit(fr.request_end(time.time(), x))
            return msg

        async def snd(msg):
            await send(msg)
            t = time.time()
            if msg["type"] == "http.response.start":
                if not ended:
                    ended.append(True)
                    self.emit(fr.request_end(t, x))
                hs = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in msg.get("headers", ()))
                self.emit(fr.response_head(t, x, msg["status"], hs))
            elif msg["type"] == "http.response.body":
                self.emit(fr.response_data(t, x, msg.get("body", b"")))
                if not msg.get("more_body"):
                    self.emit(fr.response_end(t, x))

        await self.app(scope, recv, snd)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=sorted(VARIANTS))
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--record")
    args = ap.parse_args(argv)
    server = build_server()
    if args.variant:
        swap(server, "deploy", VARIANTS[args.variant])
    if not args.http:
        server.run()
        return
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=TransportSecuritySettings(
        enable_dns_rebinding_protection=False))
    writer = None
    if args.record:
        writer = RecordingWriter(args.record, "http", {"upstream": "sdk_server.py (recording middleware)"})
        app = RecordingMiddleware(app, writer)
    # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on the accepted connections (it checks the proto)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, so the URL can be given before uvicorn runs
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on")).run(sockets=[sock])
    finally:
        if writer is not None:
            writer.close()

if __name__ == "__main__":
    main()
