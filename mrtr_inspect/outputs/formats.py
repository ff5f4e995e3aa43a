"""`check --format sarif|junit`: the report for code scanning and for CI test reporters.

SARIF 2.1.0: one run; the driver lists the rules that fired; each finding is a result located at
the line of the recording that holds its message (the latest one it names; the others are related
locations), with the chain and message as a logical location and a fingerprint that stays the same
from run to run. JUnit XML: a test suite per input, a test case per chain, and one for the findings
outside chains; findings at or above `--fail-on` are failures, the rest go to the case's output.

Messages are numbered over all the inputs of a `check`, so finding their files and lines takes one
more pass over the inputs with the rules off (`exporters.capture.locate`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
import re
from typing import IO
from urllib.parse import quote
from xml.etree import ElementTree as ET

from ..version import __version__
from ..core.findings import RANK, Severity, spec_url
from ..rules.registry import REGISTRY
from .exporters.capture import Located, chain_label, locate
from .text import json_printable

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}  # SARIF's levels
FINGERPRINT = "mrtrFinding/v1"


def write(fmt: str, builder, out: IO[str], fail_on: str = Severity.ERROR) -> None:
    if fmt == "sarif":
        write_sarif(sarif(builder), out)
    elif fmt == "junit":
        out.write(junit(builder, fail_on))
    else:  # pragma: no cover - click restricts the choice
        raise ValueError(f"unknown format {fmt!r}")


def write_sarif(log: dict, out: IO[str]) -> None:
    """Indented, but one result a line: readable, diffable, and written by the C encoder (indented
    JSON takes the slow one)."""
    run = log["runs"][0]
    results, run["results"] = run["results"], _SLOT
    head, _, tail = json_printable(json.dumps(log, ensure_ascii=False, indent=2)).partition(json.dumps(_SLOT))
    out.write(head + "[")
    sep = "\n        "
    for r in results:
        out.write(sep + json_printable(json.dumps(r, ensure_ascii=False)))
        sep = ",\n        "
    out.write(("\n      ]" if results else "]") + tail + "\n")
    run["results"] = results


_SLOT = "\0results\0"


def artifact_uri(path: str) -> str:
    """A relative path as a relative URI (what code scanning resolves against the checkout), an
    absolute one as a file: URI."""
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def _primary(f: dict, chains: dict[str, dict]) -> int | None:
    """The message a finding is placed at: the latest it names (the one whose arrival raised it),
    else the first request of its chain."""
    if f.get("messages"):
        return max(f["messages"])
    c = chains.get(f.get("chain") or "")
    tl = c.get("timeline") if c else None
    return tl[0]["message"] if tl else None


# -- SARIF ----------------------------------------------------------------------------------------


def _rule_descriptor(rid: str) -> dict:
    r = REGISTRY.get(rid)
    if r is None:  # a finding of a rule this build does not know (cannot happen from the core)
        return {"id": rid, "shortDescription": {"text": rid}}
    full = " ".join(p for p in (r.detects, r.why) if p)
    help_lines = [r.summary]
    if r.quote:
        help_lines.append(f"Specification: \"{r.quote}\"")
    if r.why:
        help_lines.append(f"Why it matters: {r.why}")
    if r.example:
        help_lines.append(f"Example: {r.example}")
    d: dict = {
        "id": rid,
        "name": "".join(w.capitalize() for w in rid.split("-")),
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": full or r.summary},
        "help": {"text": "\n\n".join(help_lines)},
        "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]},
        "properties": {"conformance": r.conformance, "section": r.section, "tags": ["mcp", "mrtr-inspect"]},
    }
    url = spec_url(r.spec)
    if url:
        d["helpUri"] = url
    return d


def _physical(uri_of: list[str], where: Located, index: int | None, fallback: tuple[int, int]) -> dict:
    place = where.places.get(index) if index is not None else None
    i, line = (place.input, place.line) if place is not None else fallback
    return {"artifactLocation": {"uri": uri_of[i], "index": i}, "region": {"startLine": max(line, 1)}}


def sarif(builder) -> dict:
    findings = list(builder.findings())
    chains = {c["id"]: c for c in builder.chains()}
    primaries = [_primary(f, chains) for f in findings]
    wanted = {m for f in findings for m in f.get("messages") or ()} | {p for p in primaries if p is not None}
    where = locate(builder.inputs, wanted) if findings else Located()
    uris = [artifact_uri(p) for p in builder.inputs]
    rule_ids = sorted({f["rule"] for f in findings})
    rule_index = {rid: n for n, rid in enumerate(rule_ids)}
    seen: dict[str, int] = {}
    results = []
    for f, primary in zip(findings, primaries):
        session = where.session_at(f.get("time") or 0.0)
        fallback = (session[1], session[2]) if session else (0, 1)
        place = where.places.get(primary) if primary is not None else None
        logical = {"name": f.get("chain") or "session",
                   "fullyQualifiedName": "/".join(
                       x for x in (place.session if place else (session[3] if session else ""),
                                   f.get("chain") or "", f"message {primary}" if primary is not None else "") if x),
                   "kind": "object"}
        loc = {"physicalLocation": _physical(uris, where, primary, fallback), "logicalLocations": [logical]}
        related = [{"id": n, "physicalLocation": _physical(uris, where, m, fallback),
                    "message": {"text": f"message #{m}"}}
                   for n, m in enumerate(sorted(set(f.get("messages") or ()) - {primary}))]
        key = _fingerprint(f, where, place.session if place else (session[3] if session else ""))
        seen[key] = seen.get(key, 0) + 1
        r: dict = {
            "ruleId": f["rule"],
            "ruleIndex": rule_index[f["rule"]],
            "level": SARIF_LEVEL.get(f["severity"], "none"),
            "message": {"text": f["message"]},
            "locations": [loc],
            "partialFingerprints": {FINGERPRINT: f"{key}:{seen[key]}"},
            "properties": {"severity": f["severity"], "chain": f.get("chain"), "messages": f.get("messages") or [],
                           "conformance": f.get("conformance")},
        }
        if related:
            r["relatedLocations"] = related
        results.append(r)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "mrtr-inspect", "version": __version__, "semanticVersion": __version__,
                                "rules": [_rule_descriptor(r) for r in rule_ids]}},
            "artifacts": [{"location": {"uri": u}} for u in uris],
            "results": results,
            "columnKind": "unicodeCodePoints",
            "properties": {"summary": builder.summary()},
        }],
    }


def _fingerprint(f: dict, where: Located, session: str) -> str:
    """The rule, the capture session and the bytes of the messages named: the same finding on the
    same recording always gets it; appending sessions or renumbering messages does not change it.
    Without messages, the finding's text stands in for them."""
    h = hashlib.sha256()
    for part in (f["rule"], session):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    msgs = sorted(f.get("messages") or ())
    digests = [where.places[m].digest for m in msgs if m in where.places]
    h.update(("\n".join(digests) if digests else f["message"]).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


# -- JUnit ----------------------------------------------------------------------------------------

# what XML 1.0 cannot carry (control characters, lone surrogates, U+FFFE/U+FFFF), and what a terminal
# acts on when the file is shown (a carriage return, DEL, C1 controls, bidirectional controls, line
# separators: `printable`'s characters but the line feed and the tab of a failure's lines)
_NOT_XML = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                      "\ud800-\udfff\ufffe\uffff]")


def _x(text: object) -> str:
    """Text from a recording as XML can hold it: a character XML 1.0 forbids is written as its escape."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text))


def _input_of(index: int | None, where: Located, default: int) -> int:
    place = where.places.get(index) if index is not None else None
    return place.input if place is not None else default


def _finding_line(f: dict) -> str:
    url = spec_url(f.get("spec"))
    msgs = ", ".join(f"#{m}" for m in f.get("messages") or ())
    return (f"{f['severity']} {f['rule']}: {f['message']}" + (f" (messages {msgs})" if msgs else "")
            + (f"\n    spec: {url}" if url else ""))


def _case(suite: ET.Element, classname: str, name: str, seconds: float, findings: list[dict], fail_on: str) -> int:
    """One test case; returns 1 when it fails."""
    case = ET.SubElement(suite, "testcase", classname=_x(classname), name=_x(name), time=f"{max(seconds, 0.0):.3f}")
    bar = RANK.get(fail_on, 99)
    failing = [f for f in findings if RANK.get(f["severity"], 0) >= bar]
    if failing:
        first = failing[0]
        more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
        fail = ET.SubElement(case, "failure", message=_x(f"{first['rule']}: {first['message']}{more}"), type=first["rule"])
        fail.text = _x("\n".join(_finding_line(f) for f in failing))
    rest = [f for f in findings if RANK.get(f["severity"], 0) < bar]
    if rest:
        ET.SubElement(case, "system-out").text = _x("\n".join(_finding_line(f) for f in rest))
    return 1 if failing else 0


def junit(builder, fail_on: str = Severity.ERROR) -> str:
    chains = sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    findings = list(builder.findings())
    by_chain = {c["id"]: c for c in chains}
    inputs = builder.inputs or ["(no input)"]
    last = len(inputs) - 1
    where = Located()
    if len(inputs) > 1:  # which input a chain or finding came from
        firsts = {c["timeline"][0]["message"] for c in chains if c.get("timeline")}
        where = locate(builder.inputs, firsts | {m for f in findings for m in (f.get("messages") or ())[:1]})

    def chain_input(c: dict) -> int:
        tl = c.get("timeline")
        return _input_of(tl[0]["message"] if tl else None, where, last)

    def finding_input(f: dict) -> int:
        if f.get("messages"):
            return _input_of(f["messages"][0], where, last)
        if f.get("chain") in by_chain:
            return chain_input(by_chain[f["chain"]])
        s = where.session_at(f.get("time") or 0.0)
        return s[1] if s else last

    of_chain: dict[str, list[dict]] = {}
    for f in findings:
        if f.get("chain") in by_chain:
            of_chain.setdefault(f["chain"], []).append(f)
    root = ET.Element("testsuites", name="mrtr-inspect")
    totals = {"tests": 0, "failures": 0, "time": 0.0}
    for i, path in enumerate(inputs):
        classname = "mrtr-inspect." + os.path.basename(path)
        suite = ET.SubElement(root, "testsuite", name=_x(path))
        tests = failures = 0
        seconds = 0.0
        for c in (c for c in chains if chain_input(c) == i):
            dur = (c.get("duration_ms") or 0.0) / 1000.0
            failures += _case(suite, classname, chain_label(c), dur, of_chain.get(c["id"], []), fail_on)
            tests += 1
            seconds += dur
        outside = [f for f in findings if f.get("chain") not in by_chain and finding_input(f) == i]
        failures += _case(suite, classname, "findings outside chains", 0.0, outside, fail_on)
        tests += 1
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", "0")
        suite.set("time", f"{seconds:.3f}")
        totals["tests"] += tests
        totals["failures"] += failures
        totals["time"] += seconds
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
