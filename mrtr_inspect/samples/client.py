"""A scripted MCP client (official Python SDK) that answers every input request.

    python -m mrtr_inspect.samples.client stdio -- CMD [ARG...]
    python -m mrtr_inspect.samples.client http URL
    python -m mrtr_inspect.samples.client ... --tools deploy,release

It calls each sample tool once and prints the result text, one line per tool. `tampered_deploy` is
a client bug on purpose: it alters the requestState of its retry.
"""

from __future__ import annotations

import sys

import anyio
import mcp.types as types
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.shared.exceptions import MCPError

ANSWERS = {"confirm": True, "tag": "v1.0.0", "notes": "first release"}
CALLS = {
    "deploy": {"env": "production"},
    "release": {"version": "1.0.0"},
    "summarize": {"text": "MRTR turns one request into several exchanges."},
    "workspace": {},
    "slow_deploy": {"env": "staging"},
    "flaky_deploy": {"env": "staging"},
}
DEFAULT_TOOLS = ("deploy", "release", "summarize", "workspace")


def _of_type(spec) -> object:
    """An answer of the type a form field asks for (a question the sample does not know)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    return {"boolean": True, "number": 1, "integer": 1}.get(kind, "yes")


async def on_elicit(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    props = getattr(params, "requested_schema", {}).get("properties", {})
    content = {name: ANSWERS.get(name, _of_type(spec)) for name, spec in props.items()}
    return types.ElicitResult(action="accept", content=content)


async def on_sample(ctx, params) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="one request, several rounds"),
                                     model="sample-model")


async def on_roots(ctx) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///workspace/project", name="project")])


async def tampered_deploy(client: Client) -> str:
    """A client bug on purpose: the retry alters the requestState (as the conformance suite's tamper
    probe does); the sealed state makes the server reject it."""
    first = await client.session.call_tool("deploy", CALLS["deploy"], allow_input_required=True)
    state = (first.request_state or "") + "-TAMPERED"
    answer = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
    try:
        await client.session.call_tool("deploy", CALLS["deploy"], input_responses=answer, request_state=state,
                                       allow_input_required=True)
    except MCPError as e:
        return f"the server rejected the altered requestState: {e.message}"
    return "the server accepted an altered requestState"


async def run(target, tools=DEFAULT_TOOLS) -> list[str]:
    out = []
    async with Client(target, elicitation_callback=on_elicit, sampling_callback=on_sample,
                      list_roots_callback=on_roots) as client:
        for name in tools:
            if name == "tampered_deploy":
                out.append(f"{name}: {await tampered_deploy(client)}")
                continue
            try:
                result = await client.call_tool(name, CALLS.get(name, {}))
                text = " ".join(getattr(c, "text", "") for c in result.content)
                out.append(f"{name}: {text}")
            except Exception as e:  # the flaky tool fails on purpose
                out.append(f"{name}: error: {e}")
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    tools = DEFAULT_TOOLS
    if "--tools" in argv:
        i = argv.index("--tools")
        tools = tuple(argv[i + 1].split(","))
        del argv[i:i + 2]
    if not argv or argv[0] not in ("stdio", "http"):
        raise SystemExit("usage: client.py stdio -- CMD [ARG...] | client.py http URL [--tools a,b]")
    if argv[0] == "stdio":
        cmd = argv[2:] if argv[1:2] == ["--"] else argv[1:]
        target = StdioServerParameters(command=cmd[0], args=cmd[1:])
    else:
        target = argv[1]
    for line in anyio.run(run, target, tools):
        print(line, flush=True)


if __name__ == "__main__":
    main()
