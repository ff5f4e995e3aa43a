"""A Streamable HTTP server that compresses what it sends (test-only code): uvicorn and Starlette,
the answers compressed with the codings' own libraries (zlib, brotli, zstd), not mitmproxy's.

    python -m tests.e2e.compressing_server      says `listening on http://127.0.0.1:PORT/mcp`

One tool, `deploy`, asks one question (`input_required` with a form) and completes once answered.
The coding of each answer is the request's `Accept-Encoding` (one of identity, gzip, deflate, br,
zstd); a request body is taken in its `Content-Encoding`. `?sse=1` answers as an event stream: a
progress notification, then the result, each event compressed and flushed on its own (so the proxy
must decode the stream as it arrives); otherwise one JSON body.
"""

from __future__ import annotations

import json
import zlib

from mitmproxy.net import encoding as request_codings  # the server's own decoding of request bodies
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.e2e.servers import serve

ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "Deploy to prod?", "requestedSchema": {
    "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}


def _stream_compressor(coding: str):
    """(compress-and-flush one piece, finish) for a streamed body."""
    if coding in ("gzip", "deflate"):
        c = zlib.compressobj(6, zlib.DEFLATED, 31 if coding == "gzip" else 15)
        return (lambda b: c.compress(b) + c.flush(zlib.Z_SYNC_FLUSH)), c.flush
    if coding == "br":
        import brotli

        br = brotli.Compressor()
        return (lambda b: br.process(b) + br.flush()), br.finish
    if coding == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]
        except ImportError:
            from backports import zstd
        z = zstd.ZstdCompressor()
        return (lambda b: z.compress(b, zstd.ZstdCompressor.FLUSH_BLOCK)), (lambda: z.flush())
    return (lambda b: b), (lambda: b"")


def _answer(msg: dict) -> dict:
    params = msg.get("params") or {}
    if params.get("requestState") == "st-1" and "confirm" in (params.get("inputResponses") or {}):
        result = {"resultType": "complete", "content": [{"type": "text", "text": "deployed"}], "isError": False}
    else:
        result = {"resultType": "input_required", "inputRequests": {"confirm": ASK}, "requestState": "st-1"}
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


async def mcp(request: Request) -> Response:
    body = await request.body()
    enc = request.headers.get("content-encoding")
    if enc:
        body = request_codings.decode(body, enc)
    msg = json.loads(body)
    coding = request.headers.get("accept-encoding", "identity")
    head = {} if coding == "identity" else {"content-encoding": coding}
    answer = json.dumps(_answer(msg)).encode()
    if request.query_params.get("sse") != "1":
        compress, finish = _stream_compressor(coding)
        return Response(compress(answer) + finish(), media_type="application/json", headers=head)
    progress = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
        "progressToken": msg["id"], "progress": 1, "total": 2}}).encode()

    async def events():
        compress, finish = _stream_compressor(coding)
        yield compress(b"event: message\ndata: " + progress + b"\n\n")
        yield compress(b"event: message\ndata: " + answer + b"\n\n")
        yield finish()

    return StreamingResponse(events(), media_type="text/event-stream", headers=head)


app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])

if __name__ == "__main__":
    serve(app)
