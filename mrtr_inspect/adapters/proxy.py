"""`mrtr-inspect --upstream URL`: a reverse proxy in front of a Streamable HTTP MCP server.

mitmproxy 12 runs embedded (a DumpMaster inside our own asyncio loop) with its console output off
and its configuration folder under the user's cache folder, in reverse mode towards the upstream's
origin; the upstream's path (`/mcp`) is not part of a mitmproxy reverse spec, and needs not be:
paths pass through unchanged, so the client uses the same path on the proxy. The addon
(`mitm_addon.MrtrInspect`) records and analyses what passes.

Startup: a bad URL or listen address, an unwritable recording, or a port in use is one line on
stderr and exit status 2. Once the proxy accepts connections it says so on stderr:
`mrtr-inspect: listening on http://HOST:PORT/PATH`. An upstream that is down is not fatal: each
request gets mitmproxy's 502 and an `upstream-error` finding.

Shutdown (SIGINT, SIGTERM): the listening sockets are closed first, then the open client
connections (mitmproxy leaves both open when its run ends), their exchanges ending as
`capture-ended`; then the addon finishes: the recording is flushed and closed, the report written.
Exit status 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import IO
from urllib.parse import urlsplit

from mitmproxy import exceptions, options
from mitmproxy.tools.dump import DumpMaster

from ..config import Config
from ..outputs.live import LiveView
from ..recording.writer import RecordingError, RecordingWriter, cache_dir
from .mitm_addon import MrtrInspect

DEFAULT_LISTEN = "127.0.0.1:8788"
SHUTDOWN_GRACE = 5.0  # seconds for the open connections to close once cancelled


def split_upstream(url: str) -> tuple[str, str]:
    """`http://127.0.0.1:3000/mcp` → (`http://127.0.0.1:3000`, `/mcp`); ValueError with a reason."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as e:
        raise ValueError(f"bad --upstream URL {url!r}: {e}") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"--upstream needs an http:// or https:// URL with a host, not {url!r}")
    if u.username is not None or u.password is not None:
        raise ValueError("--upstream must not carry credentials; the client's own headers pass through")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    origin = f"{u.scheme}://{host}" + (f":{port}" if port is not None else "")
    path = u.path or "/"
    return origin, path + (f"?{u.query}" if u.query else "")


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `PORT` → (host, port); ValueError with a reason."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen takes HOST:PORT (port 0 picks a free one), not {text!r}")
    return host, int(port)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _Ready:
    """Tells `_serve` that mitmproxy has tried to bring up its servers."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def running(self) -> None:
        self.event.set()


class _MitmLog(logging.Handler):
    """mitmproxy's own errors once it serves, as our one-liners; the rest of its log stays quiet
    (a startup failure is said once, by us)."""

    def __init__(self, say) -> None:
        super().__init__(logging.ERROR)
        self.say = say
        self.serving = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.serving:
            try:
                self.say(f"mitmproxy: {record.getMessage().splitlines()[0]}")
            except Exception:  # pragma: no cover
                pass


def _why(e: BaseException | None) -> str:
    if isinstance(e, OSError) and e.errno:
        return os.strerror(e.errno).lower()
    return str(e).splitlines()[0] if e is not None else "not started"


def run_proxy(upstream: str, *, listen: str = DEFAULT_LISTEN, record: str | None = None, report: str | None = None,
              quiet: bool = False, config: Config | None = None, stderr: IO[str] | None = None) -> int:
    """Run the proxy until SIGINT or SIGTERM; returns the exit status (0, or 2 for a startup error)."""
    err = stderr if stderr is not None else sys.stderr

    def say(text: str) -> None:
        err.write(f"mrtr-inspect: {text}\n")
        err.flush()

    try:
        origin, path = split_upstream(upstream)
        host, port = parse_listen(listen)
        writer = RecordingWriter(record, "http", {"upstream": upstream}) if record else None
    except (ValueError, RecordingError) as e:
        say(str(e))
        return 2
    view = None if quiet else LiveView(err)
    addon = MrtrInspect(config, writer=writer, report=report, view=view, upstream=upstream, embedded=True)
    mitm_log = logging.getLogger("mitmproxy")
    handler, propagate = _MitmLog(say), mitm_log.propagate
    mitm_log.addHandler(handler)
    mitm_log.propagate = False
    try:
        return asyncio.run(_serve(addon, origin, path, host, port, view, say, handler))
    except KeyboardInterrupt:  # a SIGINT before our handler was in place: nothing was served yet
        return 0
    finally:
        mitm_log.removeHandler(handler)
        mitm_log.propagate = propagate
        if writer is not None and not writer.closed:  # the session never began
            writer.close({"error": "the proxy did not start"})


async def _serve(addon: MrtrInspect, origin: str, path: str, host: str, port: int, view: LiveView | None,
                 say, log: _MitmLog) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    master = DumpMaster(options.Options(), with_termlog=False, with_dumper=False)
    check = master.addons.get("errorcheck")  # it would exit the process on a startup error: ours say why
    check.finish()
    master.addons.remove(check)
    ready = _Ready()
    master.addons.add(addon, ready)
    try:
        master.options.update(mode=[f"reverse:{origin}"], listen_host=host, listen_port=port,
                              connection_strategy="lazy", confdir=str(cache_dir() / "mitmproxy"))
    except exceptions.OptionsError as e:
        say(str(e))
        return 2
    run = asyncio.create_task(master.run())
    await asyncio.wait([run, asyncio.create_task(ready.event.wait())], return_when=asyncio.FIRST_COMPLETED)
    proxyserver = master.addons.get("proxyserver")
    addrs = proxyserver.listen_addrs()
    if not addrs:
        failure = next((s.last_exception for s in proxyserver.servers if s.last_exception), None)
        say(f"cannot listen on {_url_host(host)}:{port}: {_why(failure)}")
        await _stop(master, proxyserver, addon, run)
        return 2
    say(f"listening on http://{_url_host(host)}:{addrs[0][1]}{path}")
    log.serving = True
    if view is not None:
        view.start()
    try:
        await asyncio.wait([run, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        await _stop(master, proxyserver, addon, run)
    finally:
        if view is not None:
            view.stop()
    return 0


async def _stop(master: DumpMaster, proxyserver, addon: MrtrInspect, run: asyncio.Task) -> None:
    """Close the listening sockets and the open connections, then let mitmproxy (and the addon) finish."""
    addon.stopping = True
    for server in list(proxyserver.servers):
        if server.is_running:
            await server.stop()
    handlers = [io.handler for conn in list(proxyserver.connections.values())
                for c, io in list(conn.transports.items()) if c is conn.client and io.handler is not None]
    for task in handlers:
        task.cancel()
    if handlers:
        await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
    master.shutdown()
    await run
