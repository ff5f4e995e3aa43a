"""The MRTR interop matrix: `probe-client` against every real client we can install here, written to
docs/interop.md (client × mutation → verdict, with the finding).

    make interop                                   # the npm clients installed, then this
    .venv/bin/python bench/interop.py [--timeout 90] [--client NAME ...] [--output docs/interop.md]

The clients, each driven as a user would with its library's defaults (no timeout of ours), calling
`deploy(env=production)` of the recording fixtures/test_sdk_http/test_the_client_completes_every_chain.jsonl
over Streamable HTTP:

* the official Python SDK client (`mcp`, the version installed): mrtr_inspect/samples/client.py;
* FastMCP's client (`fastmcp`, pinned in pyproject's test extra): bench/interop/fastmcp_client.py;
* the official TypeScript SDK v2 client (`@modelcontextprotocol/client`, pinned in
  bench/interop/package.json): bench/interop/ts_client.mjs;
* the MCP Inspector CLI (`@modelcontextprotocol/inspector`, pinned there too): `--cli URL --method
  tools/call`.

`--timeout` (default 90 s) is longer than the 60 s default request timeout some clients have, so a
client that gives up at its own default counts as giving up. A client that cannot be run here (npm
missing) is a column saying so. What each failure means, checked against the specification, is in
NOTES below: docs/interop.md is all generated, so a note lives here.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mrtr_inspect.core.findings import spec_url  # noqa: E402
from mrtr_inspect.probe.client_command import probe_client  # noqa: E402
from mrtr_inspect.probe.client_mutations import DIRECTORS  # noqa: E402
from mrtr_inspect.probe.client_runner import ClientOptions  # noqa: E402
from mrtr_inspect.rules import load_rules  # noqa: E402
from mrtr_inspect.rules.registry import REGISTRY  # noqa: E402

RECORDING = "fixtures/test_sdk_http/test_the_client_completes_every_chain.jsonl"
NPM = ROOT / "bench" / "interop"
INSPECTOR = NPM / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"

# (client, mutation) -> what the failure means, checked against the specification before it was written
NOTES = {
    ("mcp", "fault-delay"): (
        "The client's: a tool call whose answer never comes is awaited for ever (the SDK's `call_tool` sets no "
        "request timeout unless the caller passes one). `basic/patterns/cancellation.mdx#timeouts`: "
        "\"Implementations SHOULD establish timeouts for all sent requests … the sender SHOULD cancel the request "
        "and stop waiting\". A SHOULD, not a MUST: the rule's error severity is the catalog's (RULES.md §14)."),
    ("fastmcp", "fault-delay"): (
        "The client's, as the official Python SDK's: FastMCP's `Client(timeout=None)` (the default) "
        "sets no read timeout on requests, so a held-back answer is awaited for ever. "
        "`basic/patterns/cancellation.mdx#timeouts` (SHOULD establish timeouts, SHOULD cancel and stop waiting)."),
    ("inspector", "*"): (
        "Not the Inspector's MRTR handling, which is never reached: its CLI opens every session with `initialize` "
        "(protocolVersion 2025-11-25) and has no option to choose 2026-07-28, and the recorded 2026-07-28 server "
        "has no `initialize` to answer (the replay's miss, -31404). So the Inspector CLI cannot be probed at "
        "2026-07-28 here; its verdicts say so as `skipped`."),
}


def clients() -> list[dict]:
    py = sys.executable
    node = shutil.which("node")
    out = [
        {"key": "mcp", "name": f"official Python SDK (`mcp` {_version('mcp')})",
         "cmd": [py, "-m", "mrtr_inspect.samples.client", "http", "{url}", "--tools", "deploy"]},
        {"key": "fastmcp", "name": f"FastMCP client (`fastmcp` {_version('fastmcp')})",
         "cmd": [py, str(NPM / "fastmcp_client.py"), "{url}"]},
    ]
    ts = NPM / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"
    out.append({"key": "ts", "name": f"official TypeScript SDK v2 (`@modelcontextprotocol/client` {_npm_version(ts)})",
                "cmd": [node or "node", str(NPM / "ts_client.mjs"), "{url}"],
                "missing": None if node and ts.exists() else "not installed: `make interop` installs it (npm)"})
    insp = NPM / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    out.append({"key": "inspector", "name": f"MCP Inspector CLI (`@modelcontextprotocol/inspector` {_npm_version(insp)})",
                "cmd": [node or "node", str(INSPECTOR), "--cli", "{url}", "--method", "tools/call", "--tool-name",
                        "deploy", "--tool-arg", "env=production"],
                "missing": None if node and INSPECTOR.exists() else "not installed: `make interop` installs it (npm)"})
    return out


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _npm_version(package_json: Path) -> str:
    import json

    try:
        return json.loads(package_json.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"


def run(client: dict, timeout: float) -> dict:
    if client.get("missing"):
        return {"missing": client["missing"]}
    started = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    _, _, doc = probe_client(str(ROOT / RECORDING), tuple(client["cmd"]), options=ClientOptions(timeout=timeout),
                             fmt="json", out=out, err=err)
    doc["seconds"] = time.monotonic() - started
    return doc


def cell(p: dict) -> str:
    return {"pass": "pass", "skipped": "skipped"}.get(p["verdict"], f"**fail** `{p['rule']}`")


def render(results: list[tuple[dict, dict]], timeout: float) -> str:
    load_rules()
    lines = [
        "# MRTR interop matrix",
        "",
        "<!-- generated by bench/interop.py (`make interop`): do not edit by hand -->",
        "",
        "`mrtr-inspect probe-client` (docs/probe-client.md) against real MCP clients: the recording "
        f"`{RECORDING}` (the sample server's `deploy`, one elicitation round) played over Streamable HTTP, changed "
        f"per mutation; each client calls `deploy` with its library's defaults. Probe time per mutation: "
        f"`--timeout {timeout:g}` s (longer than the 60 s default request timeout some clients have). Regenerate: "
        "`make interop`.",
        "",
        "| mutation | " + " | ".join(c["name"] for c, _ in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for name in DIRECTORS:
        row = []
        for _, doc in results:
            if "missing" in doc:
                row.append("—")
                continue
            p = next((p for p in doc["probes"] if p["mutation"] == name), None)
            row.append(cell(p) if p else "—")
        lines.append(f"| `{name}` | " + " | ".join(row) + " |")
    lines += ["", "## Each client", ""]
    for c, doc in results:
        lines += [f"### {c['name']}", ""]
        names = {sys.executable: "python", shutil.which("node") or "node": "node"}
        shown = " ".join(names.get(a, a) for a in c["cmd"]).replace(str(ROOT) + "/", "")
        lines += [f"Command: `{shown}`", ""]
        if "missing" in doc:
            lines += [f"Not run: {doc['missing']}.", ""]
            continue
        for p in doc["probes"]:
            if p["verdict"] != "pass":
                lines.append(f"- `{p['mutation']}` {p['verdict']}" + (f" (`{p['rule']}`)" if p["rule"] else "")
                             + f": {p['reason']}")
        others = sorted({f["rule"] for f in doc["findings"] if f["severity"] != "info"
                         and not any(f["rule"] == p["rule"] for p in doc["probes"])})
        if others:
            lines.append(f"- the passive rules on its traffic: {', '.join(f'`{r}`' for r in others)}")
        if all(p["verdict"] == "pass" for p in doc["probes"]):
            lines.append("- every mutation passed")
        note = NOTES.get((c["key"], "*"))
        if note:
            lines += ["", f"Whose failure: {note}"]
        for p in doc["probes"]:
            n = NOTES.get((c["key"], p["mutation"]))
            if n and p["verdict"] == "fail":
                lines += ["", f"Whose failure (`{p['mutation']}`): {n}"]
        lines.append("")
    failing = sorted({p["rule"] for _, doc in results if "probes" in doc for p in doc["probes"] if p["rule"]})
    if failing:
        lines += ["## The rules that failed", ""]
        for rid in failing:
            r = REGISTRY.get(rid)
            if r is not None:
                lines.append(f"- `{rid}` ({r.severity}): {r.summary} [spec]({spec_url(r.spec)})")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--client", action="append", help="only these (mcp, fastmcp, ts, inspector)")
    ap.add_argument("--output", default=str(ROOT / "docs" / "interop.md"))
    args = ap.parse_args(argv)
    os.chdir(ROOT)  # the clients' modules (mrtr_inspect.samples) import from the repository
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    results = []
    for c in clients():
        if args.client and c["key"] not in args.client:
            continue
        print(f"interop: {c['name']} …", file=sys.stderr, flush=True)
        doc = run(c, args.timeout)
        if "probes" in doc:
            counts = doc["summary"]["probes"]
            print(f"interop: {c['name']}: {counts} in {doc['seconds']:.0f} s", file=sys.stderr, flush=True)
        results.append((c, doc))
    text = render(results, args.timeout)
    Path(args.output).write_text(text, encoding="utf-8")
    print(f"interop: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
