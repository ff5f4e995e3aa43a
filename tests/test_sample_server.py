"""The bundled sample server asks only for what the request's client declared it can answer; a
client without the capability gets the specification's missing-required-client-capability error
(-32021, with `requiredCapabilities`), not a question it cannot answer. Real SDK client, in memory."""

from __future__ import annotations

import anyio
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import MISSING_REQUIRED_CLIENT_CAPABILITY

from mrtr_inspect.samples.client import CALLS, on_elicit, on_roots, on_sample
from mrtr_inspect.samples.server import build_server

CALLBACKS = {"elicitation": ("elicitation_callback", on_elicit), "sampling": ("sampling_callback", on_sample),
             "roots": ("list_roots_callback", on_roots)}
NEEDS = [("deploy", "elicitation", {"form": {}}), ("release", "elicitation", {"form": {}}),
         ("slow_deploy", "elicitation", {"form": {}}), ("summarize", "sampling", {}), ("workspace", "roots", {})]


async def _call(tool: str, declared: set[str]):
    callbacks = dict(v for k, v in CALLBACKS.items() if k in declared)
    async with Client(build_server(), **callbacks) as client:
        try:
            result = await client.call_tool(tool, CALLS[tool])
        except MCPError as e:
            return e
        return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize(("tool", "capability", "shape"), NEEDS)
def test_a_tool_asks_only_a_client_that_declared_what_it_asks_for(tool, capability, shape):
    err = anyio.run(_call, tool, set(CALLBACKS) - {capability})
    assert isinstance(err, MCPError), err
    assert err.code == MISSING_REQUIRED_CLIENT_CAPABILITY and capability in err.message
    assert err.error.data == {"requiredCapabilities": {capability: shape}}
    answered = anyio.run(_call, tool, {capability})  # near miss: declared, so asked and answered
    assert isinstance(answered, str) and answered and "error" not in answered
