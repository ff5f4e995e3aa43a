"""What `replay serve`, `replay verify` and `export --to fixture` do, for the command line (cli.py
parses the options; these return the exit status, or raise ReplayError for a one-line exit 2)."""

from __future__ import annotations

import asyncio
import sys
from typing import IO

from ..config import Config
from ..core.findings import RANK, Severity
from ..hosts import allow_host as allow_host_name, refusals, stderr_line
from ..outputs.text import FindingPrinter, tool_line
from .script import ReplayError, Script, load_script

DEFAULT_LISTEN = "127.0.0.1:8788"


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ReplayError(f"--listen takes HOST:PORT, not {value!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def parse_header(value: str) -> tuple[str, str]:
    name, sep, v = value.partition(":")
    if not sep or not name.strip():
        raise ReplayError(f"--header takes 'Name: value', not {value!r}")
    return name.strip(), v.strip()


def _load(path: str, err: IO[str]) -> Script:
    script = load_script(path)
    for line in script.note_lines():
        err.write(tool_line(f"note: {line}"))
    return script


def _printer(quiet: bool, err: IO[str]) -> FindingPrinter | None:
    return None if quiet else FindingPrinter(err, min_severity=Severity.WARNING, prefix="mrtr-inspect: ")


def _over(findings: list, fail_on: str) -> bool:
    if fail_on == "never":
        return False
    sev = [f["severity"] if isinstance(f, dict) else f.severity for f in findings]
    return any(RANK.get(s, 0) >= RANK[fail_on] for s in sev)


def serve(path: str, *, listen: str | None = None, stdio: bool = False, options=None, record: str | None = None,
          summary: str | None = None, quiet: bool = False, fail_on: str = "never", config: Config | None = None,
          err: IO[str] | None = None, allow_host: tuple[str, ...] = ()) -> int:
    from .serve import ServeSession, serve_http, serve_stdio, summary_lines

    err = err or sys.stderr
    if listen and stdio:
        raise ReplayError("--listen and --stdio exclude each other")
    if allow_host and stdio:
        raise ReplayError("--allow-host and --stdio exclude each other (nothing listens on stdio)")
    try:
        allow = tuple(allow_host_name(a) for a in allow_host)
    except ValueError as e:
        raise ReplayError(str(e)) from None
    script = _load(path, err)
    http = bool(listen) or (not stdio and script.transport == "http")
    host, port = parse_listen(listen or DEFAULT_LISTEN) if http else ("", 0)
    if not http and "-" in (record, summary):
        raise ReplayError(f"--{'record' if record == '-' else 'summary'} -: standard output carries the replayed "
                          "server's messages; name a file")
    session = ServeSession(script, options, "http" if http else "stdio", config, record, summary, _printer(quiet, err))
    if http:
        def ready(url: str) -> None:
            err.write(f"mrtr-inspect: listening on {url}\n")
            err.flush()

        try:
            result = asyncio.run(serve_http(session, host, port, ready, allow=allow, refused=refusals(stderr_line(err))))
        except OSError as e:
            session.close()
            raise ReplayError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    else:
        result = serve_stdio(session)
    for line in summary_lines(result):
        err.write(tool_line(line))
    return 1 if result["misses"] or _over(result["findings"], fail_on) or session.summary_failed else 0


def verify(path: str, *, upstream: str | None = None, cmd: tuple[str, ...] = (), options=None,
           record: str | None = None, quiet: bool = False, fail_on: str = "never", config: Config | None = None,
           out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    from .verify import HttpPeer, StdioPeer, VerifyOptions, render, verify_script

    out, err = out or sys.stdout, err or sys.stderr
    if bool(upstream) == bool(cmd):
        raise ReplayError("replay verify needs the live server: --upstream URL, or -- CMD [ARG...] (one of them)")
    options = options or VerifyOptions()
    script = _load(path, err)
    if upstream:
        def make_peer(sid, log):
            return HttpPeer(upstream, log, options.headers, options.timeout)
        transport, against = "http", upstream
    else:
        def make_peer(sid, log):
            return StdioPeer(list(cmd), log, [s for s in script.steps if s.session == sid], options.timeout)
        transport, against = "stdio", " ".join(cmd)
    from ..outputs.progress import Progress, Tally

    sent = Tally()
    requests = sum(1 for s in script.steps if s.kind == "request")
    with Progress("replay verify", requests, sent, unit="requests", in_bytes=False, stream=err):
        result = verify_script(script, make_peer, options, transport, config, record, sent)
    render(result, out, f"{path} against {against}")
    out.flush()
    printer = _printer(quiet, err)
    for f in result.findings if printer is not None else ():
        printer.finding(f)
    return 0 if result.ok and not _over(result.findings, fail_on) else 1


def export(path: str, to: str, output: str, err: IO[str] | None = None, **options) -> int:
    from .export import export_fixture

    err = err or sys.stderr
    if to != "fixture":  # pragma: no cover - click restricts the choice
        raise ReplayError(f"export --to {to} is not available")
    done = export_fixture(path, output, **options)
    for line in done.lines():
        err.write(tool_line(line))
    return 0
