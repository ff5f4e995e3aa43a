"""`mrtr-inspect demo`: the main job on a bundled sample.

The sample MRTR server (official Python SDK) runs behind the stdio tee, a scripted client (official
SDK) calls each of its tools through it, and the recording is then shown chain by chain.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_demo(out_dir: str, stream=None) -> int:
    stream = stream or sys.stdout
    try:
        import mcp  # noqa: F401
    except ImportError:
        stream.write("mrtr-inspect demo needs the official MCP SDK: pip install 'mcp==2.3.0'\n")
        return 2
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record = out / "demo-stdio.jsonl"
    report = out / "demo-stdio-report.json"
    for p in (record, report):
        if p.exists():
            p.unlink()
    py = sys.executable
    server = [py, "-m", "mrtr_inspect.samples.server"]
    tee = [py, "-m", "mrtr_inspect", "stdio", "--record", str(record), "--report", str(report), "--", *server]
    client = [py, "-m", "mrtr_inspect.samples.client", "--tools",
              "deploy,release,summarize,workspace,slow_deploy,flaky_deploy", "stdio", "--", *tee]
    stream.write("$ " + " ".join(["client", "stdio", "--", "mrtr-inspect", "stdio", "--record", str(record), "--",
                                  "sample-server"]) + "\n")
    stream.flush()
    done = subprocess.run(client, stdout=subprocess.PIPE, text=True)
    stream.write(done.stdout)
    if done.returncode != 0:
        stream.write(f"the scripted client failed (exit {done.returncode})\n")
        return 1
    stream.write(f"\n$ mrtr-inspect show {record}\n")
    stream.flush()
    shown = subprocess.run([py, "-m", "mrtr_inspect", "show", str(record)])
    stream.write(f"\nrecording: {record}\nreport:    {report}\n"
                 f"try:       mrtr-inspect check {record}\n")
    return shown.returncode
