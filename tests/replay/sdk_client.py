"""The official SDK client as the code under test: calls tools, answers their input requests
(the sample client's answers; its roots are `file:///srv/project`)."""

from __future__ import annotations

import anyio
import mcp.types as types
from mcp import StdioServerParameters
from mcp.client import Client

from mrtr_inspect.samples.client import CALLS, on_elicit, on_sample

EVERY_CHAIN = ("deploy", "release", "summarize", "workspace", "slow_deploy")


async def on_roots(ctx) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project", name="project")])


async def _calls(target, calls) -> list[str]:
    out = []
    async with Client(target, elicitation_callback=on_elicit, sampling_callback=on_sample,
                      list_roots_callback=on_roots) as client:
        for name, args in calls:
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            try:
                result = await client.call_tool(name, args, progress_callback=on_progress)
                text = f"{name}: " + " ".join(getattr(c, "text", "") for c in result.content)
                out.append(text + (f" ({len(progress)} progress notifications)" if progress else ""))
            except Exception as e:
                out.append(f"{name}: error: {e}")
    return out


def call(target: str | list[str], *tools: str, **args: dict) -> list[str]:
    """Call each tool (with its sample arguments, or `args[tool]`) through one client session;
    `target` is a URL or a stdio command line. One line per call: `name: text` (with the number of
    progress notifications the client received for it, if any), or `name: error: …`."""
    if isinstance(target, list):
        target = StdioServerParameters(command=target[0], args=target[1:])
    calls = [(t, args.get(t, CALLS.get(t, {}))) for t in tools]
    return anyio.run(_calls, target, calls)


EXPECTED = {
    "deploy": "deploy: deployed to production",
    "release": "release: released 1.0.0 as v1.0.0: first release",
    "summarize": "summarize: summary: one request, several rounds",
    "workspace": "workspace: roots: file:///srv/project",
    "slow_deploy": "slow_deploy: deployed to staging (6 progress notifications)",
}
