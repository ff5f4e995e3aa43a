"""The MCP server's tools on their edges, through the official SDK client in process (the stdio and
tee runs are test_mcp_server.py): a file that is not a recording, a missing folder, `limit`, a chain
that is not there, a chain question declined."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp.client", reason="the official MCP Python SDK (the test extra's mcp==2.3.0)")

import mcp.types as types  # noqa: E402
from mcp.client import Client  # noqa: E402

from mrtr_inspect.agent.recordings import Folder  # noqa: E402
from mrtr_inspect.agent.server import AgentServer  # noqa: E402

SDK = Path(__file__).resolve().parents[2] / "fixtures" / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"


def calls(folder: Path, *todo: tuple[str, dict], decline: bool = False) -> list[types.CallToolResult]:
    async def on_elicit(ctx, params):
        return types.ElicitResult(action="decline")

    async def go():
        kw = {"elicitation_callback": on_elicit} if decline else {}
        async with Client(AgentServer(Folder(folder)), **kw) as c:
            return [await c.call_tool(name, args) for name, args in todo]
    return anyio.run(go)


def test_a_file_that_is_not_a_recording_is_a_tool_error_saying_so(tmp_path):
    (tmp_path / "bad.jsonl").write_text("hello\n")
    for r in calls(tmp_path, ("check_recording", {"recording": "bad"}), ("read_chain", {"recording": "bad", "chain": "c1"})):
        assert r.is_error and "not an mrtr-inspect recording" in r.content[0].text


def test_a_missing_folder_lists_nothing_and_says_why(tmp_path):
    (r,) = calls(tmp_path / "not-yet", ("list_recordings", {}))
    assert r.structured_content["recordings"] == [] and "does not exist yet" in r.structured_content["note"]


def test_limit_cuts_the_lists_and_counts_what_it_left_out(tmp_path):
    shutil.copy(SDK, tmp_path / "sdk.jsonl")
    whole, cut = calls(tmp_path, ("check_recording", {"recording": "sdk"}), ("check_recording", {"recording": "sdk", "limit": 2}))
    w, c = whole.structured_content, cut.structured_content
    assert "truncated" not in w and len(w["chains"]) > 2
    assert c["chains"] == w["chains"][:2] and c["findings"] == w["findings"][:2]
    assert c["truncated"] == {"chains": len(w["chains"]), "findings": len(w["findings"])}


def test_a_chain_that_is_not_there(tmp_path):
    shutil.copy(SDK, tmp_path / "sdk.jsonl")
    r1, r2 = calls(tmp_path, ("read_chain", {"recording": "sdk", "chain": "c99"}),
                   ("read_chain", {"recording": "sdk", "chain": "tool:nothing"}))
    assert r1.is_error and "no chain of sdk.jsonl matches 'c99'" in r1.content[0].text
    assert r2.is_error and "matches 'tool:nothing'" in r2.content[0].text


def test_a_declined_chain_question_is_a_tool_error(tmp_path):
    shutil.copy(SDK, tmp_path / "sdk.jsonl")
    (r,) = calls(tmp_path, ("read_chain", {"recording": "sdk", "chain": "tool:*deploy"}), decline=True)
    assert r.is_error and "no chain was chosen (the question was declined)" in r.content[0].text
