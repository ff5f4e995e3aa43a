"""Every bug the first seed describes (shared/seeds/000_80286e4496e5d5fe.txt: mcpx, a gateway) shows as
a finding in a recording of that behaviour.

gateway_like_server.py behaves as the seed says mcpx does; a client drives it through the real proxy
(`mrtr-inspect --upstream URL --record PATH`): the official SDK client where it can talk to it (a
conformant 2026-07-28 client keeps no session), plain HTTP where the seed's traffic needs what the SDK
would not do (keeping the Mcp-Session-Id minted on server/discover, dropping it, moving a state to
another call). Then `mrtr-inspect check` must show the finding, naming the chain and the messages.

The recordings are kept in fixtures/seed/ (test_seed_fixtures.py checks them offline); to make them
again: MRTR_UPDATE_SEED_FIXTURES=1 pytest tests/e2e/test_seed_gateway.py
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.replay.conftest import Running

from . import ROOT, env
from .gateway_like_server import ASK_ROUNDS, VERSION
from .servers import command
from .test_http_proxy import post, proxies  # noqa: F401 (proxies: the fixture)

FIXTURES = ROOT / "fixtures" / "seed"
TOKEN = "Bearer ghp_seedGatewayClientToken0123456789"  # redacted in the recordings
META = {"io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "seed-raw-client", "version": "1.0"}}
CONFIRM = {"action": "accept", "content": {"confirm": True}}


class RawClient:
    """A 2026-07-28 client in plain HTTP that keeps the Mcp-Session-Id a server mints, and sends it
    unless told not to."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = itertools.count(1)
        self.session: str | None = None

    def request(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        params = {**(params or {}), "_meta": META}
        headers = {"Authorization": TOKEN, "MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
        if session and self.session:
            headers["Mcp-Session-Id"] = self.session
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        _, response_headers, raw = post(self.url, json.dumps(body).encode(), headers)
        self.session = response_headers.get("mcp-session-id", self.session)
        return json.loads(raw)

    def call(self, tool: str, arguments: dict, session: bool = True, **retry) -> dict:
        return self.request("tools/call", {"name": tool, "arguments": arguments, **retry}, session)


def irr(response: dict) -> tuple[str, str]:
    """The key of an input_required response's single question, and its requestState."""
    result = response["result"]
    assert result["resultType"] == "input_required", response
    return next(iter(result["inputRequests"])), result["requestState"]


# -- the behaviours, one recording each ---------------------------------------------------------------


def gave_up_after_rounds(url: str) -> None:
    """The official SDK client keeps no session, so the gateway binds the state to nothing, never
    delivers the answers, and gives up after ASK_ROUNDS fully answered rounds with -32603."""
    import mcp.types as types
    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    async def confirm(ctx, params) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def run() -> None:
        async with Client(url, elicitation_callback=confirm) as client:
            with pytest.raises(MCPError, match=f"still asking for input after {ASK_ROUNDS} rounds"):
                await client.call_tool("github.create_issue", {"title": "Crash on start"})

    anyio.run(run)


def state_bound_to_session(url: str) -> None:
    """The state is bound to the Mcp-Session-Id of the first call; the retry, without the header
    (2026-07-28 has no sessions), echoes it verbatim and is refused."""
    c = RawClient(url)
    c.request("server/discover")
    key, state = irr(c.call("github.create_issue", {"title": "Crash on start"}))
    retry = c.call("github.create_issue", {"title": "Crash on start"}, session=False, inputResponses={key: CONFIRM},
                   requestState=state)
    assert retry["error"]["message"] == "this requestState belongs to another session"


def state_on_other_call(url: str) -> None:
    """The state names the upstream call, not the request: presented on another tools/call (other
    arguments; another tool) it is accepted, and that call gets the first call's result."""
    c = RawClient(url)
    c.request("server/discover")
    key, state = irr(c.call("github.create_issue", {"title": "Crash on start"}))
    moved = c.call("github.create_issue", {"title": "Delete the repository"}, inputResponses={key: CONFIRM},
                   requestState=state)
    assert moved["result"]["resultType"] == "complete"
    key, state = irr(c.call("github.connect", {}))
    moved = c.call("github.create_issue", {"title": "Rotate the keys"}, inputResponses={key: {"action": "accept"}},
                   requestState=state)
    assert moved["result"]["content"][0]["text"] == "GitHub account connected."


def elicitation_id_passed_through(url: str) -> None:
    """The upstream's URL-mode question goes out as it was asked, its 2025-11-25 elicitationId included."""
    c = RawClient(url)
    c.request("server/discover")
    asked = c.call("github.connect", {})
    key, state = irr(asked)
    assert "elicitationId" in asked["result"]["inputRequests"][key]["params"]
    done = c.call("github.connect", {}, inputResponses={key: {"action": "accept"}}, requestState=state)
    assert done["result"]["resultType"] == "complete"


def result_collapsed_to_text(url: str) -> None:
    """create_issue declares an outputSchema; the upstream's structured result comes back as one text block."""
    c = RawClient(url)
    c.request("server/discover")
    tools = c.request("tools/list")["result"]["tools"]
    assert "outputSchema" in next(t for t in tools if t["name"] == "github.create_issue")
    key, state = irr(c.call("github.create_issue", {"title": "Crash on start"}))
    done = c.call("github.create_issue", {"title": "Crash on start"}, inputResponses={key: CONFIRM},
                  requestState=state)
    assert "structuredContent" not in done["result"] and len(done["result"]["content"]) == 1


MINTED = {"http-session-id-minted": 1}  # every recording starts with server/discover
# name → (how to make it, {rule: how many findings of it})
SEED = {
    "gave_up_after_rounds": (gave_up_after_rounds, {"server-gave-up-after-rounds": 1, **MINTED}),
    "state_bound_to_session": (state_bound_to_session, {"server-rejected-own-state": 1, **MINTED}),
    "state_on_other_call": (state_on_other_call, {"server-accepted-state-on-other-request": 2, **MINTED}),
    "elicitation_id_passed_through": (elicitation_id_passed_through,
                                      {"url-elicitation-has-elicitation-id": 1, **MINTED}),
    "result_collapsed_to_text": (result_collapsed_to_text, {"tool-result-missing-structured-content": 1, **MINTED}),
}


def check(path: Path) -> dict:
    """`mrtr-inspect check PATH --format json`."""
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(path), "--format", "json",
                           "--fail-on", "never"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_seed_findings(name: str, report: dict) -> None:
    """The findings the seed's behaviour must give, as many as expected, each message naming its chain
    or its messages."""
    for rule, count in SEED[name][1].items():
        found = [f for f in report["findings"] if f["rule"] == rule]
        assert len(found) == count, f"{name}: {len(found)} {rule}, not {count}, among " \
                                    f"{sorted({f['rule'] for f in report['findings']})}"
        for f in found:
            assert f["messages"], f
            named = f"chain {f['chain']}" in f["message"] or any(f"#{i}" in f["message"] for i in f["messages"])
            assert named, f"{rule}: the message names neither its chain nor its messages: {f['message']}"


@pytest.fixture(scope="module")
def gateway():
    server = Running(command("tests.e2e.gateway_like_server"))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(SEED))
def test_the_seed_bug_shows_as_a_finding(gateway, proxies, tmp_path, name):
    recording = tmp_path / f"{name}.jsonl"
    proxy = proxies(gateway, "--record", str(recording), "--quiet").ready()
    SEED[name][0](proxy.url)
    assert proxy.stop() == 0, proxy.err.rest()
    assert_seed_findings(name, check(recording))
    if os.environ.get("MRTR_UPDATE_SEED_FIXTURES"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(recording, FIXTURES / recording.name)


# -- the committed recordings, offline ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SEED))
def test_the_committed_recording_still_shows_it(name):
    """fixtures/seed/NAME.jsonl, made by the test above: the same findings, without the servers."""
    assert_seed_findings(name, check(FIXTURES / f"{name}.jsonl"))


def test_the_committed_recordings_hold_no_machine_paths_and_no_secret():
    assert sorted(p.stem for p in FIXTURES.glob("*.jsonl")) == sorted(SEED)
    for path in FIXTURES.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        for leak in ("/work", "/tmp", "/root", "/home", TOKEN.partition(" ")[2]):
            assert leak not in text, f"{path.name} holds {leak!r}"
