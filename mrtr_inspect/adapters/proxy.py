"""`mrtr-inspect --upstream URL`: a reverse proxy in front of a Streamable HTTP MCP server.

mitmproxy 12 runs embedded (a `Master` inside our own asyncio loop, with only the addons a reverse
proxy uses: `reverse_proxy_master`) with its console output off
and its configuration folder under the user's cache folder, in reverse mode towards the upstream's
origin; the upstream's path (`/mcp`) is not part of a mitmproxy reverse spec, and needs not be:
paths pass through unchanged, so the client uses the same path on the proxy. The addon
(`mitm_addon.MrtrInspect`) hands every step of every exchange to `AnalysisProcess`, which frames it
and appends its frames to the recording at once, on mitmproxy's event loop (so a kill loses no
message that crossed); an analysis process forked before mitmproxy starts (the stdio tee's) reads
the recording as it grows (without one, it is sent the records): the rules, the report and the
live view run there (live_analysis.LiveAnalysis, made by `new_analysis` as for the tee and the addon).

Startup: a bad URL or listen address, an unwritable recording or report, or a port in use is one
line on stderr and exit status 2. Once the proxy accepts connections it says so on stderr:
`mrtr-inspect: listening on http://HOST:PORT/PATH`. An upstream that is down is not fatal: each
request gets mitmproxy's 502 and an `upstream-error` finding.

Shutdown (SIGINT, SIGTERM): the listening sockets are closed first, then the open client
connections (mitmproxy leaves both open when its run ends), their exchanges ending as
`capture-ended`; then the addon finishes: the recording is ended and closed, the report written.
Exit status 0, or the analysis process' when it failed: 1 when the report could not be written after
all (`live_analysis.REPORT_FAILED`), 70 when the analysis stopped on an internal error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import IO
from urllib.parse import urlsplit

from mitmproxy import exceptions, options
from mitmproxy.addons import (block, core, disable_h2c, dns_resolver, next_layer, proxyserver, tlsconfig,
                              update_alt_svc)
from mitmproxy.master import Master

from ..config import Config
from ..core.events import CAPTURE_ENDED
from ..core.hops import hop_problem
from ..outputs.live import LiveView
from ..outputs.text import tool_line
from ..recording.files import unwritable
from ..recording.writer import RecordingError, RecordingWriter, cache_dir, redactor_for
from .exports import Exports, parse_host_port
from .host_guard import HostGuard
from .live_analysis import NOT_STARTED, LiveAnalysis, http_info, new_analysis, session_start
from .mitm_addon import MrtrInspect
from .mitm_thread import BEGINS, ENDS
from .recorder import HttpRecorder
from .analysis_process import BEHIND, C2S as RECORDS, C2S_EOF as READY, END, FOLLOW, SKIPPED, UPTO, fork_analysis

DEFAULT_LISTEN = "127.0.0.1:8788"
SHUTDOWN_GRACE = 5.0  # seconds for the open connections to close once cancelled
ANALYSIS_NICENESS = 10
FLUSH_AFTER = 0.01  # seconds a step may wait for others to travel to the analysis with


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
    return parse_host_port(text, "--listen")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def reverse_proxy_master() -> Master:
    """mitmproxy (on the running event loop) with the addons that act in a reverse proxy with default
    options, and no others.

    mitmdump loads 34 addons, and every hook of every flow (request headers, request, response
    headers, response, each followed by an update) visits each of them, whether it has that hook or
    not: measured with bench/http_cpu.py, mitmproxy's own CPU per MRTR chain (two exchanges) falls
    by about a third without the 26 left out here. Those wait for options that nobody sets here (our
    command line passes none to mitmproxy): scripts, client and server replay, map and modify rules,
    sticky cookies and auth, anticache, anticomp, blocklists, saving flows and HAR, proxy and upstream
    auth, the onboarding app, and commands for mitmproxy's own consoles. Kept: the core, the proxy
    server with its layers, TLS (an https upstream) and DNS, and those that act with default options:
    `Block` (clients from public addresses refused unless told otherwise), `DisableH2C` and
    `UpdateAltSvc` (Alt-Svc ports rewritten in reverse mode). errorcheck is left out too: it would
    exit the process on a startup error, where ours says why in one line.
    """
    master = Master(options.Options(), with_termlog=False)
    master.addons.add(core.Core(), block.Block(), disable_h2c.DisableH2C(), proxyserver.Proxyserver(),
                      dns_resolver.DnsResolver(), next_layer.NextLayer(), tlsconfig.TlsConfig(),
                      update_alt_svc.UpdateAltSvc())
    return master


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


class AnalysisProcess:
    """The addon's analysis (`LiveAnalysis`) in a process of its own, the tee's way (`stdio_tee.fork_analysis`: forked
    before any thread exists, fed through a pipe by a spooler thread), so mitmproxy's event loop never
    shares its GIL with the rules. `put(step)` frames the step and records its frames at once, on the
    event loop, before mitmproxy forwards what the step saw (`recorder.HttpRecorder`: a kill loses no
    message that crossed).

    `follow` (a recording on a regular file, which the analysis reads as it grows:
    live_inputs.RecordedHttpInput, looking at it every 10 ms while it grows): a step's write wakes
    nothing; `ready` says where the header ended (FOLLOW), `finish` where the session ended (UPTO).
    The backlog waits in the file. A recording that stops: the records are handed over again.
    Without one, the records appended travel in batches: FLUSH_AFTER seconds after the first one
    the batch goes to the spooler as one item (each item wakes a thread on both sides of the pipe:
    measured, per-step items cost the proxy more CPU than its own forwarding work per request)."""

    def __init__(self, make, recorder: HttpRecorder, backlog: int | None = None, follow: bool = False) -> None:
        self.recorder = recorder
        self.pid, self._spool = fork_analysis(make)
        self.following = follow and recorder.writer is not None
        if self.following:
            self._spool.follow(recorder.writer.fileno())  # type: ignore[union-attr]
        self._records: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._finished = False
        self.status = 0  # the analysis process' exit status, once finished
        #: bytes the analysis may fall behind (max_backlog_bytes): past them exchanges that begin are
        #: recorded and not handed to it, until it is back to half
        self.backlog = backlog if backlog is not None else sys.maxsize
        self.behind = False
        self._skipping: set = set()  # the exchanges the analysis does not get (begun while behind)
        self.skipped = 0  # messages (request bodies, response bodies, events) not handed over

    def put(self, step) -> None:  # on mitmproxy's event loop
        if self.following:
            self.recorder.feed(step, self._wrote, as_records=True)
            return
        name, args = step
        x = args[0] if name == "exchange" else args[1]
        if name in BEGINS and (
                self.behind or self._spool.queued - self._spool.written > self.backlog) and self._is_behind():
            self._skipping.add(x)
        if x in self._skipping:
            if name in ENDS:
                self._skipping.discard(x)
            self.recorder.feed(step, self._skip, as_records=True)
        else:
            self.recorder.feed(step, self._batch, as_records=True)

    def _is_behind(self) -> bool:
        """Whether the analysis is behind: more than `backlog` bytes held, until it is back to half.
        As a stretch begins, the analysis hears it (BEHIND: the live line)."""
        held = self._spool.queued - self._spool.written
        if not self.behind and held > self.backlog:
            self.behind = True
            self._spool.put(BEHIND, time.time(), SKIPPED.pack(self.skipped))
        elif self.behind and held <= self.backlog // 2:
            self.behind = False
        return self.behind

    def _wrote(self, records: bytes) -> None:  # on mitmproxy's event loop, in the order of the steps
        if self.following:
            if self.recorder.writer is not None:  # the analysis reads it (`LiveAnalysis.look`)
                return
            # the recording stopped with this step's write: the analysis reads the file to where it
            # stopped, then is handed the records; this step's it does not get (it cannot be told
            # which of them reached the file)
            self.following = False
            self._spool.put(UPTO, time.time())
            self._skip(records)
            return
        self._batch(records)  # a step fed before the recording stopped, framed after it

    def _skip(self, records: bytes) -> None:  # on mitmproxy's event loop: recorded, not handed over
        for line in records.split(b"\n"):
            kind = line[:96]
            if b'"k":"body"' in kind or b'"k":"sse"' in kind or (b'"k":"req"' in kind and b'"method":"POST"' in line[:512]):
                self.skipped += 1

    def _batch(self, records: bytes) -> None:  # on mitmproxy's event loop
        first = not self._records
        self._records.append(records)
        if first and not self._finished:  # `finish` flushes what its own steps gave
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_later(FLUSH_AFTER, self._flush)

    def _flush(self) -> None:
        if self._records:
            records, self._records = self._records, []
            self._spool.put(RECORDS, 0.0, b"".join(records))

    def ready(self) -> None:
        """The proxy listens (its recording's header written)."""
        t = time.time()
        writer = self.recorder.writer
        if self.following and writer is not None:
            try:
                self._spool.put(FOLLOW, t, SKIPPED.pack(os.lseek(writer.fileno(), 0, os.SEEK_CUR)))
            except OSError:  # pragma: no cover - the descriptor is open until the recorder finishes
                pass
        self._spool.put(READY, t)

    def finish(self, info: dict) -> None:
        """End the session (the exchanges still open, the recording's end: written here) and wait for
        the analysis to write the report."""
        if not self._finished:
            self._finished = True
            t = time.time()
            self.recorder.drain()
            for step in self.recorder.end_open(t, CAPTURE_ENDED):
                records = self.recorder.records(step)
                if not self.following and step[1][1] not in self._skipping:  # (one the analysis never got ends unseen)
                    self._records.append(records)
            following = self.following and self.recorder.writer is not None
            self.recorder.finish(info, t)
            if following:
                self._spool.put(UPTO, t)  # the final offset (the session's end is the analysis' own)
            self._flush()
            if self.skipped:
                self._spool.put(BEHIND, t, SKIPPED.pack(self.skipped))
            self._spool.put(END, t, json.dumps(info).encode())
            self._spool.thread.join()
            code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            self.status = code if code >= 0 else 128 - code


# a proxy that never listened writes nothing: no session in the recording (its header waits for the
# listening socket), no report
DID_NOT_START = {"error": "the proxy did not start", NOT_STARTED: True}


def run_proxy(upstream: str, *, listen: str = DEFAULT_LISTEN, record: str | None = None, report: str | None = None,
              quiet: bool = False, config: Config | None = None, stderr: IO[str] | None = None,
              exports: Exports | None = None, hop: str | None = None, allow_host: tuple[str, ...] = ()) -> int:
    """Run the proxy until SIGINT or SIGTERM; returns the exit status (0; 2 for a startup error; the
    analysis process' status when it failed, such as 1 for a report it could not write).
    `allow_host`: names besides the loopback ones a request's Host and Origin may carry (host_guard.py)."""
    err = stderr if stderr is not None else sys.stderr
    config = config or Config()

    def say(text: str) -> None:
        err.write(tool_line(text))
        err.flush()

    try:
        origin, path = split_upstream(upstream)
        host, port = parse_listen(listen)
        if report and (reason := unwritable(report, "report")):
            raise ValueError(reason)
        if hop is not None and (reason := hop_problem(hop)):
            raise ValueError(f"--hop: {reason}")
        guard = HostGuard(tuple(allow_host), say)
        writer = RecordingWriter(record, "http", http_info(upstream, True, hop), redactor_for(config),
                                 deferred=True) if record else None  # its header once the proxy listens
    except (ValueError, RecordingError) as e:
        say(str(e))
        return 2

    start = session_start(writer, "http", http_info(upstream, True, hop))
    redactor = writer.redactor if writer is not None else redactor_for(config)
    # with a recording the analysis process reads it as it grows (from where its header will end): no
    # second copy of the records
    reader = writer.reader() if writer is not None else None
    follow = (reader[0], None) if reader is not None else None

    def make() -> LiveAnalysis:  # in the analysis process
        os.nice(ANALYSIS_NICENESS)  # when the CPUs are short, forwarding goes first; the analysis trails
        return new_analysis(start, config, writer, report, view=None if quiet else LiveView(err), forwarder_records=True,
                            exports=exports, follow=follow)

    analysis = AnalysisProcess(make, HttpRecorder(start.session, redactor, writer, failed=say,
                                                    limit=config.max_message_bytes), config.max_backlog_bytes,
                               follow=follow is not None)
    if follow is not None:
        follow[0].close()  # the analysis process' copy is the one read
    if exports is not None:
        exports.forked()
    addon = MrtrInspect(config, analysis=analysis, guard=guard)
    mitm_log = logging.getLogger("mitmproxy")
    handler, propagate = _MitmLog(say), mitm_log.propagate
    mitm_log.addHandler(handler)
    mitm_log.propagate = False
    code = 0
    try:
        # the ready line names the path with its secret query values redacted, as the recording does
        code = asyncio.run(_serve(addon, analysis, origin, redactor.url(path), host, port, say, handler))
    except KeyboardInterrupt:  # a SIGINT before our handler was in place: nothing was served yet
        pass
    finally:
        mitm_log.removeHandler(handler)
        mitm_log.propagate = propagate
        analysis.finish(DID_NOT_START)  # unless mitmproxy's end already did
    return code or analysis.status


async def _serve(addon: MrtrInspect, analysis: AnalysisProcess, origin: str, path: str, host: str, port: int,
                 say, log: _MitmLog) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    master = reverse_proxy_master()
    ready = _Ready()
    master.addons.add(addon, ready)  # the guard (addon.guard) runs first in its hooks: a refused request goes no further
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
        analysis.finish(DID_NOT_START)  # before mitmproxy's end, which would end a session that never began
        await _stop(master, proxyserver, addon, run)
        return 2
    master.addons.remove(ready)  # one addon fewer for every hook of every flow to visit
    if analysis.recorder.writer is not None:
        analysis.recorder.writer.begin()  # the session's header: the proxy listens
    say(f"listening on http://{_url_host(host)}:{addrs[0][1]}{path}")
    log.serving = True
    analysis.ready()  # the live view may take the screen now
    await asyncio.wait([run, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    await _stop(master, proxyserver, addon, run)
    return 0


async def _stop(master: Master, proxyserver, addon: MrtrInspect, run: asyncio.Task) -> None:
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
