"""`serve(app)`: how a test server over HTTP starts. It binds 127.0.0.1 on a free port, says
`listening on http://127.0.0.1:PORT/mcp` on stdout, then serves its ASGI app; the test starts it with
`tests.replay.conftest.Running`, which waits for that line.
"""

from __future__ import annotations

import socket
import sys


def serve(app, path: str = "/mcp") -> None:
    """Serve an ASGI app on 127.0.0.1, a free port; say where on stdout. The socket listens before the
    line is printed, so a client that has read it can connect."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}{path}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


def command(module: str, *args: str) -> list[str]:
    """`python -m MODULE ARGS` with this interpreter (run it in the checkout)."""
    return [sys.executable, "-m", module, *args]
