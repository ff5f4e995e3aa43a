"""`mrtr-inspect probe-client`, for the command line, the pytest marker and bench/interop.py: the
checks before anything runs (a loopback probe server unless allowed otherwise), the run, the report;
returns the exit status (as `probe`: 0, 1 for findings at or above --fail-on, 2 when the client
could not be driven at all, 130 when interrupted by Ctrl-C, 143 by SIGTERM; the report is written in
each case), or raises a UserError (exit 2)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
from typing import IO

from ..config import Config
from ..core.findings import RANK, Severity, plural
from ..outputs.text import FindingPrinter, printable
from ..recording.files import open_private
from ..replay.script import ReplayError, load_script
from ..rules.common import loopback_host
from . import output
from .client_runner import ClientOptions, ClientProbeRun, mutation_names, run_client_probes
from .mutations import FAIL, PASS, SKIPPED
from .runner import describe
from .stop import StopSignals

NOTE_LEFT_OUT = ("{n} about the probe server's own answers (recorded, or changed on purpose) left out: a client "
                 "probe judges the client")


def check_listen(host: str, allow_remote: bool) -> None:
    if not allow_remote and not loopback_host(host):
        raise ReplayError(f"probe-client serves a misbehaving server; {host} is not a loopback address: give "
                          "--allow-remote to listen there")


def notes(run: ClientProbeRun) -> list[str]:
    out = []
    if run.left_out:
        out.append(NOTE_LEFT_OUT.format(n=plural(run.left_out, "finding")))
    if run.interrupted:
        out.append("interrupted: the mutations not run are not reported")
    return out


def write_text(run: ClientProbeRun, out: IO[str], against: str, verbose: bool = False) -> None:
    out.write(printable(f"probe-client: {against}") + "\n")
    for r in run.probes:
        out.write("  " + printable(describe(r)) + "\n")
    printer = FindingPrinter(out, min_severity=Severity.INFO if verbose else Severity.WARNING, color=False)
    if any(f.severity != Severity.INFO or verbose for f in run.findings):
        out.write("findings:\n")
        for f in run.findings:
            printer.finding(f)
    for n in notes(run):
        out.write(printable(f"note: {n}") + "\n")
    c = output.counts(run)  # type: ignore[arg-type]
    line = f"{c[PASS]} pass, {c[FAIL]} fail, {c[SKIPPED]} skipped"
    if run.record:
        line += f"; each mutation's traffic is in {run.record}"
    out.write(printable(line) + "\n")


def sarif(run: ClientProbeRun, chains: list[dict]) -> dict:
    """One SARIF run: each mutation's findings located in its own traffic recording."""
    from ..outputs.formats import sarif as sarif_of

    merged: dict | None = None
    rules: dict[str, dict] = {}
    for traffic, found in run.groups or [("", [])]:
        doc = sarif_of(_Group(run, chains, traffic if run.record else None, found))
        r = dict(doc["runs"][0])
        if merged is None:
            merged = doc
            merged["runs"][0] = {**r, "results": [], "artifacts": []}
        m = merged["runs"][0]
        offset = len(m["artifacts"])
        m["artifacts"] += r["artifacts"]
        for d in r["tool"]["driver"]["rules"]:
            rules.setdefault(d["id"], d)
        for res in r["results"]:
            for loc in [*res["locations"], *res.get("relatedLocations", ())]:
                art = loc.get("physicalLocation", {}).get("artifactLocation")
                if art is not None and "index" in art:
                    art["index"] += offset
            m["results"].append(res)
    assert merged is not None
    m = merged["runs"][0]
    ids = sorted(rules)
    m["tool"]["driver"]["rules"] = [rules[i] for i in ids]
    for res in m["results"]:
        res["ruleIndex"] = ids.index(res["ruleId"])
    m["properties"]["summary"] = output.summary(run, chains)  # type: ignore[arg-type]
    return merged


class _Group(output._Builder):
    def __init__(self, run: ClientProbeRun, chains: list[dict], traffic: str | None, found: list) -> None:
        super().__init__(run, chains, [traffic] if traffic else [])  # type: ignore[arg-type]
        self.found = found

    def findings(self):
        return iter([f.to_json() for f in self.found])


def probe_client(path: str, cmd: tuple[str, ...], *, options: ClientOptions | None = None, fmt: str = "text",
                 output_path: str | None = None, fail_on: str = Severity.ERROR, allow_remote: bool = False,
                 config: Config | None = None, out: IO[str] | None = None,
                 err: IO[str] | None = None) -> tuple[int, ClientProbeRun, dict]:
    """Run the client probes; write the report; return (exit status, the run, the JSON report)."""
    out, err = out or sys.stdout, err or sys.stderr
    options = options or ClientOptions()
    if not cmd:
        raise ReplayError("probe-client needs the client under test: -- CMD [ARG...] ({url} or {server} in its "
                          "arguments)")
    if options.transport not in (None, "http", "stdio"):
        raise ReplayError(f"--transport is http or stdio, not {options.transport!r}")
    check_listen(options.host, allow_remote)
    mutation_names(options.only)
    script = load_script(path)
    for line in script.note_lines():
        err.write(f"mrtr-inspect: note: {line}\n")

    def progress(r) -> None:
        err.write(printable(f"mrtr-inspect: {describe(r)}") + "\n")
        err.flush()

    with StopSignals() as stop:  # Ctrl-C, SIGTERM: the client and the probe server stop, what was judged is written
        run = run_client_probes(script, list(cmd), options, config,
                                progress if fmt != "text" or output_path else None, stop)
        with stop.held():
            doc = _write(run, path, cmd, fmt, output_path, fail_on, config, out)
    if run.interrupted or stop.signum:  # 130 for Ctrl-C, 143 for SIGTERM (a shell's 128 + the signal)
        return 128 + (stop.signum or signal.SIGINT), run, doc
    if run.undriven is not None:  # as `probe` with a server it cannot reach: nothing was tested
        return 2, run, doc
    bad = fail_on != "never" and any(RANK.get(f.severity, 0) >= RANK[fail_on] for f in run.findings)
    return (1 if bad else 0), run, doc


def _write(run: ClientProbeRun, path: str, cmd: tuple[str, ...], fmt: str, output_path: str | None, fail_on: str,
           config: Config | None, out: IO[str]) -> dict:
    """The report (also when interrupted), then the temporary traffic folder removed."""
    from .command import recorded_chains_report

    try:
        chains = recorded_chains_report(path, config)
        against = " ".join(cmd)
        doc = output.report(run, path, chains, against)  # type: ignore[arg-type]
        doc["traffic"] = run.record
        doc["notes"] = notes(run)
        with open_private(output_path) if output_path else contextlib.nullcontext(out) as stream:
            if fmt == "json":
                output.write_json(doc, stream)
            elif fmt == "sarif":
                from ..outputs.formats import write_sarif

                write_sarif(sarif(run, chains), stream)
            elif fmt == "junit":
                stream.write(output.junit(run, path, fail_on, "probe-client"))  # type: ignore[arg-type]
            else:
                write_text(run, stream, against)
            stream.flush()
    finally:
        if run.temp is not None:
            shutil.rmtree(run.temp, ignore_errors=True)
    return doc
