"""The probe report: the JSON report of CONTRACTS.md (`mrtr-inspect.report/1`) with its `probes`
list, and the same as text, SARIF (through `outputs.formats`) and JUnit XML (a test case per chain ×
mutation)."""

from __future__ import annotations

import json
from typing import IO, Iterator
from xml.etree import ElementTree as ET

from ..core.findings import RANK, Severity
from ..outputs.formats import _finding_line, _x
from ..outputs.report import FORMAT
from ..outputs.text import FindingPrinter, json_printable, printable
from ..version import __version__
from .runner import FAIL, PASS, SKIPPED, ProbeRun, describe


INTERRUPTED = "interrupted: the probes not run are not reported"


def counts(run: ProbeRun) -> dict[str, int]:
    out = {PASS: 0, FAIL: 0, SKIPPED: 0}
    for r in run.probes:
        out[r.verdict] += 1
    return out


def summary(run: ProbeRun, chains: list[dict]) -> dict:
    sev = {s: 0 for s in Severity}
    for f in run.findings:
        sev[f.severity] = sev.get(f.severity, 0) + 1
    return {"messages": run.messages, "chains": len(chains), "errors": sev[Severity.ERROR], "warnings": sev[Severity.WARNING],
            "infos": sev[Severity.INFO], "probes": counts(run)}


def report(run: ProbeRun, path: str, chains: list[dict], against: str) -> dict:
    """The JSON report: `inputs` the recording probed, `chains` its chains (the ids `probes` and the
    findings name), `messages` of the probes and findings indexes into the probe's own traffic
    (`traffic`: its recording, when kept)."""
    return {
        "format": FORMAT,
        "tool": {"name": "mrtr-inspect", "version": __version__},
        "inputs": [path],
        "against": against,
        "traffic": run.record,
        "summary": summary(run, chains),
        "chains": chains,
        "probes": [r.to_json() for r in run.probes],
        "findings": [f.to_json() for f in run.findings],
    } | ({"notes": [INTERRUPTED]} if run.interrupted else {})


def write_text(run: ProbeRun, out: IO[str], against: str, verbose: bool = False) -> None:
    out.write(printable(f"probe: against {against}") + "\n")
    if not run.probes:
        out.write("  no recorded chain has an input_required round: there is nothing to probe\n")
    for r in run.probes:
        out.write("  " + printable(describe(r)) + "\n")
    printer = FindingPrinter(out, min_severity=Severity.INFO if verbose else Severity.WARNING, color=False)
    if run.findings:
        out.write("findings:\n")
        for f in run.findings:
            printer.finding(f)
    c = counts(run)
    line = f"{c[PASS]} pass, {c[FAIL]} fail, {c[SKIPPED]} skipped"
    if run.record:
        line += f"; the probe's traffic is in {run.record}"
    out.write(printable(line) + "\n")
    if run.interrupted:
        out.write(f"note: {INTERRUPTED}\n")


def write_dry_run(run: ProbeRun, out: IO[str], against: str) -> None:
    """What each probe would send: the recorded requests with new ids (the live requestState
    stands where the recorded one is shown), then the mutated request."""
    out.write(printable(f"probe --dry-run: nothing is sent to {against}") + "\n")
    for r in run.probes:
        out.write("  " + printable(describe(r) if r.verdict == SKIPPED and not r.sent else
                                   f"{r.mutation} {r.chain} {r.label}") + "\n")
        for i, data in enumerate(r.sent):
            mark = "mutated" if i == len(r.sent) - 1 else "replay "
            out.write(f"    {mark} " + printable(data.decode("utf-8", "replace")) + "\n")
    out.write(f"{sum(1 for r in run.probes if r.sent)} probes would send requests\n")


class _Builder:
    """What outputs.formats.sarif reads of a report builder."""

    def __init__(self, run: ProbeRun, chains: list[dict], inputs: list[str]) -> None:
        self.run, self._chains, self.inputs = run, chains, inputs

    def findings(self) -> Iterator[dict]:
        return iter([f.to_json() for f in self.run.findings])

    def chains(self) -> Iterator[dict]:
        return iter(self._chains)

    def summary(self) -> dict:
        return summary(self.run, self._chains)


def write_sarif(run: ProbeRun, chains: list[dict], out: IO[str]) -> None:
    """SARIF: each finding located at the line of the probe's traffic recording that holds its message."""
    from ..outputs.formats import sarif, write_sarif as write_log

    write_log(sarif(_Builder(run, chains, [run.record] if run.record else [])), out)


def junit(run: ProbeRun, path: str, fail_on: str = Severity.ERROR, command: str = "probe") -> str:
    """A test suite for the recording, a test case per chain × mutation: a failure at or above
    `fail_on` fails it, a skipped probe is skipped."""
    root = ET.Element("testsuites", name=f"mrtr-inspect {command}")
    suite = ET.SubElement(root, "testsuite", name=_x(path))
    bar = RANK.get(fail_on, 99)
    n = {"tests": 0, "failures": 0, "skipped": 0}
    for r in run.probes:
        case = ET.SubElement(suite, "testcase", classname=_x(f"mrtr-inspect.{command}.{r.chain} {r.label}"),
                             name=_x(r.mutation), time="0.000")
        n["tests"] += 1
        f = r.finding
        if r.verdict == SKIPPED:
            ET.SubElement(case, "skipped", message=_x(r.reason))
            n["skipped"] += 1
        elif r.verdict == FAIL and f is not None and RANK.get(f.severity, 0) >= bar:
            fail = ET.SubElement(case, "failure", message=_x(f"{f.rule}: {f.message}"), type=f.rule)
            fail.text = _x(_finding_line(f.to_json()))
            n["failures"] += 1
        elif r.verdict == FAIL:  # below --fail-on: the case passes, and says what was found, not "fail"
            below = f" (below --fail-on {fail_on})"
            line = _finding_line(f.to_json()) if f is not None else r.reason
            ET.SubElement(case, "system-out").text = _x(line.replace("\n", below + "\n", 1) if "\n" in line
                                                        else line + below)
        else:
            ET.SubElement(case, "system-out").text = _x(f"{r.verdict}: {r.reason}")
    for k, v in n.items():
        suite.set(k, str(v))
        root.set(k, str(v))
    suite.set("errors", "0")
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_json(doc: dict, out: IO[str]) -> None:
    out.write(json_printable(json.dumps(doc, ensure_ascii=False, indent=2, default=str)) + "\n")
