"""`mrtr-inspect demo`: the main job on a bundled sample, in a few seconds.

    scripted client (official SDK) ──HTTP──▶ mrtr-inspect --upstream … ──HTTP──▶ sample MRTR server
                                              live view, recording, report        (official SDK)

The sample server runs in this process (uvicorn on a port the system picks); the proxy and the
client are the real commands, each its own process. The proxy's live view comes through as it runs;
the recording and the report are left in the output folder and named at the end.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

TOOLS = "deploy,release,summarize,workspace,slow_deploy,flaky_deploy,tampered_deploy"  # the last: a client bug on purpose
READY = re.compile(r"listening on (http://\S+)")
WAIT = 60.0


@contextmanager
def sample_server() -> Iterator[str]:
    """The sample MRTR server over Streamable HTTP on 127.0.0.1 (a free port); yields its URL."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from .hosts import asgi_guard
    from .samples.server import build_server

    logging.getLogger("mcp").setLevel(logging.ERROR)  # the SDK's notes (start, stop, the rejected tampered state)

    # the SDK's own check answers a foreign Host 421; ours answers it 403 as every listener of ours does
    app = asgi_guard(build_server().streamable_http_app(
        streamable_http_path="/mcp", transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio turns Nagle off
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="sample-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def invocation() -> str:
    """How to run this mrtr-inspect from the shell the demo was started in: `mrtr-inspect` when that
    name on PATH is this one, else the path of the script beside this Python (`.venv/bin/mrtr-inspect`
    after `make demo`, relative to the current directory when inside it), else `PYTHON -m mrtr_inspect`."""
    script = Path(sys.executable).with_name("mrtr-inspect")
    found = shutil.which("mrtr-inspect")
    if found is not None and (not script.exists() or Path(found).resolve() == script.resolve()):
        return "mrtr-inspect"
    if not script.exists():
        return f"{shlex.quote(_near(Path(sys.executable)))} -m mrtr_inspect"
    return shlex.quote(_near(script))


def _near(path: Path) -> str:
    """`path` relative to the current directory when it is inside it, else absolute."""
    rel = os.path.relpath(path.absolute())
    return path.absolute().as_posix() if rel.startswith("..") else rel


def _relay(src: IO[bytes], dst: IO[str]) -> None:
    for line in src:
        dst.write(line.decode("utf-8", "replace"))
        dst.flush()


def run_demo(out_dir: str, stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    try:
        import mcp  # noqa: F401
    except ImportError:
        stream.write("mrtr-inspect demo needs the official MCP SDK: pip install 'mcp==2.3.0'\n")
        return 2
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record, report = out / "demo-http.jsonl", out / "demo-http-report.json"
    for p in (record, report):
        p.unlink(missing_ok=True)
    py, me = sys.executable, invocation()
    with sample_server() as upstream:
        stream.write(f"sample MRTR server (official SDK): {upstream}\n"
                     f"$ {me} --upstream {upstream} --listen 127.0.0.1:0 --record {record} --report {report}\n")
        stream.flush()
        proxy = subprocess.Popen([py, "-m", "mrtr_inspect", "--upstream", upstream, "--listen", "127.0.0.1:0",
                                  "--record", str(record), "--report", str(report)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert proxy.stderr is not None
            line = proxy.stderr.readline().decode("utf-8", "replace")
            stream.write(line)
            m = READY.search(line)
            if m is None:
                proxy.wait(WAIT)
                stream.write(f"the proxy did not start (exit {proxy.returncode})\n")
                return 1
            relay = threading.Thread(target=_relay, args=(proxy.stderr, stream), daemon=True)
            relay.start()
            stream.write(f"$ scripted client (official SDK) → {m.group(1)}\n")
            stream.flush()
            client = subprocess.run([py, "-m", "mrtr_inspect.samples.client", "--tools", TOOLS, "http", m.group(1)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    timeout=WAIT)
            proxy.send_signal(signal.SIGTERM)
            code = proxy.wait(WAIT)
            relay.join(WAIT)
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait()
    stream.write("client: " + client.stdout.decode("utf-8", "replace").replace("\n", "\n        ").rstrip() + "\n")
    if client.returncode != 0 or code != 0:
        stream.write(f"the demo failed (client exit {client.returncode}, proxy exit {code})\n")
        return 1
    shown = shlex.quote(str(record))
    stream.write(f"\nrecording: {record}\nreport:    {report}\n"
                 f"try:       {me} show {shown}\n           {me} check {shown}\n")
    return 0
