"""Recordings for the output tests, made from `tests.traffic` frames."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main
from mrtr_inspect.recording import format as fmt
from tests.traffic import ACCEPT, ELICIT, Traffic

ROOT = Path(__file__).resolve().parents[2]
HTTP_FIXTURE = ROOT / "fixtures" / "test_sdk_http" / "test_the_client_completes_every_chain.jsonl"
STDIO_FIXTURE = ROOT / "fixtures" / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"
HOSTILE = "</script><img src=x onerror=alert(1)>"


def save(frames: list, path: Path) -> Path:
    path.write_bytes(b"".join(fmt.encode(f) for f in frames))
    return path


def faulty(transport: str = "stdio", session: str = "s1", start: float = 1000.0) -> Traffic:
    """c1: a retry that reuses the first request's id (an error) and completes after the user took
    1.5 s; c2: a tool whose name and arguments carry markup and a control character, ending in a
    JSON-RPC error; then a server line that is not JSON (an error outside any chain on stdio)."""
    t = Traffic(transport, session=session, start=start)
    a = t.tool("deploy", {"env": "prod"}, id=2)
    t.irr(a, {"confirm": ELICIT}, state=f"{session}-state")
    t.tick(1.5)
    b = t.tool("deploy", {"env": "prod"}, id=2, inputResponses={"confirm": ACCEPT}, requestState=f"{session}-state")
    t.result(b, {"content": []})
    c = t.tool(HOSTILE + "\x1b[31m", {"note": "<b>bold</b> & </details>"})
    t.error(c, -32603, "boom </script>")
    if transport == "stdio":
        t.line("s2c", b"not json at all")
    return t


def run_cli(*args: str):
    """`mrtr-inspect ARGS` in this process (stdout and stderr apart)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def recording(tmp_path) -> Path:
    return save(faulty().frames, tmp_path / "faulty.jsonl")
