"""`mrtr-inspect probe`, for the command line and the pytest plugin: the checks before anything is
sent (a loopback upstream unless allowed otherwise), the run, the report; returns the exit status
(as `check`: 0, 1 for findings at or above --fail-on), or raises a UserError (exit 2)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from typing import IO
from urllib.parse import urlsplit

from ..config import Config
from ..core.findings import RANK, Severity
from ..recording.files import open_private
from ..replay.script import ReplayError, load_script
from ..rules.common import loopback_host
from . import output
from .runner import ProbeOptions, ProbeRun, run_probes
from .stop import StopSignals


def is_loopback(url: str) -> bool:
    return loopback_host(urlsplit(url).hostname)


def check_upstream(upstream: str, allow_remote: bool) -> None:
    u = urlsplit(upstream)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ReplayError(f"--upstream takes an http:// or https:// URL, not {upstream!r}")
    if not allow_remote and not is_loopback(upstream):
        raise ReplayError(f"probe sends mutated requests (a tampered state, a replayed retry: a deployment may run "
                          f"twice); {u.hostname} is not a loopback address: give --allow-remote to probe it")


def recorded_chains_report(path: str, config: Config | None) -> list[dict]:
    from ..api import analysed

    builder = analysed([path], config)
    try:
        return sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    finally:
        builder.close()


def probe(path: str, *, upstream: str | None = None, cmd: tuple[str, ...] = (), options: ProbeOptions | None = None,
          fmt: str = "text", output_path: str | None = None, fail_on: str = Severity.ERROR, allow_remote: bool = False,
          record: str | None = None, headers: tuple[tuple[str, str], ...] = (), config: Config | None = None,
          out: IO[str] | None = None, err: IO[str] | None = None,
          stop: StopSignals | None = None) -> tuple[int, ProbeRun, dict]:
    """Run the probes; write the report; return (exit status, the run, the JSON report). With `stop`
    (entered by the caller: the command line), Ctrl-C or SIGTERM ends the run, the server under test
    stops, what was judged is written, and the status is 130 or 143 (a shell's 128 + the signal)."""
    from ..replay.verify import HttpPeer, StdioPeer

    out, err = out or sys.stdout, err or sys.stderr
    options = options or ProbeOptions()
    if bool(upstream) == bool(cmd):
        raise ReplayError("probe needs the live server: --upstream URL, or -- CMD [ARG...] (one of them)")
    if upstream:
        check_upstream(upstream, allow_remote)
    script = load_script(path)
    if upstream:
        def make_peer(sid, log):
            return HttpPeer(upstream, log, headers, options.timeout)
        transport, against = "http", upstream
    else:
        def make_peer(sid, log):
            return StdioPeer(list(cmd), log, [s for s in script.steps if s.session == sid], options.timeout)
        transport, against = "stdio", " ".join(cmd)
    temp = None
    if record is None and not options.dry_run and fmt == "sarif":  # SARIF locates findings in the traffic
        # in a folder of its own (0700, random name): no name another user could plant a link at
        temp = os.path.join(tempfile.mkdtemp(prefix="mrtr-probe-"), "traffic.jsonl")
    try:
        run = run_probes(script, make_peer, options, transport, config, record or temp, stop=stop)
        with stop.held() if stop is not None else contextlib.nullcontext():  # the report is written whole
            doc = _write(run, path, against, fmt, options.dry_run, output_path, fail_on, config, out,
                         temp is not None)
    finally:
        if temp is not None:
            shutil.rmtree(os.path.dirname(temp), ignore_errors=True)
    if run.interrupted or (stop is not None and stop.signum):
        return 128 + ((stop.signum if stop is not None else 0) or signal.SIGINT), run, doc
    bad = fail_on != "never" and any(RANK.get(f.severity, 0) >= RANK[fail_on] for f in run.findings)
    return (1 if bad else 0), run, doc


def _write(run: ProbeRun, path: str, against: str, fmt: str, dry_run: bool, output_path: str | None, fail_on: str,
           config: Config | None, out: IO[str], temp: bool) -> dict:
    chains = recorded_chains_report(path, config)
    doc = output.report(run, path, chains, against)
    if temp:
        doc["traffic"] = None
    with open_private(output_path) if output_path else contextlib.nullcontext(out) as stream:
        if dry_run:
            output.write_dry_run(run, stream, against)
        elif fmt == "json":
            output.write_json(doc, stream)
        elif fmt == "sarif":
            output.write_sarif(run, chains, stream)
        elif fmt == "junit":
            stream.write(output.junit(run, path, fail_on))
        else:
            output.write_text(run, stream, against)
        stream.flush()
    return doc
