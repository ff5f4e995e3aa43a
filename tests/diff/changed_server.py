"""The sample server after a release that changes what its client sees (tests/diff):

* `deploy` takes a new `region` argument (its input schema changed) and asks a second question
  (one more round: the reason for the deployment);
* `deploy`'s first question is worded differently;
* `summarize` words its result differently;
* `workspace` fails once it has the roots (a JSON-RPC error);
* a new tool, `rollback`.

    python -m tests.diff.changed_server          # stdio
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import InputRequiredResult, ListRootsRequest

from mrtr_inspect.samples.server import _accepted, _ask, _form, build_server


def build_changed():
    mcp = build_server()
    mcp.remove_tool("deploy")
    mcp.remove_tool("workspace")

    @mcp.tool(description="Deploy to an environment after the user confirms.")
    async def deploy(env: str, ctx: Context, region: str = "eu") -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if ctx.request_state == "deploy:confirmed" and "reason" in answers:
            return f"deployed to {env}"
        if "confirm" not in answers:
            return _ask(ctx, {"confirm": _form(f"Deploy to {env} now?", "confirm", "boolean")}, "deploy:ask")
        return _ask(ctx, {"reason": _form("Why deploy now?", "reason")}, "deploy:confirmed")

    said = mcp._tool_manager.get_tool("summarize").fn  # the sample's, its answer reworded
    mcp.remove_tool("summarize")

    @mcp.tool(description="Summarize a text with the client's model.")
    async def summarize(text: str, ctx: Context) -> str | InputRequiredResult:
        out = await said(text, ctx)
        return out.replace("summary:", "in short:", 1) if isinstance(out, str) else out

    @mcp.tool(description="List the client's workspace roots.")
    async def workspace(ctx: Context) -> str | InputRequiredResult:
        if "roots" not in (ctx.input_responses or {}):
            return _ask(ctx, {"roots": ListRootsRequest()}, "roots:ask")
        raise MCPError(-32603, "the workspace is gone")

    @mcp.tool(description="Roll the last deployment back.")
    async def rollback(env: str) -> str:
        return f"rolled back {env}"

    return mcp


if __name__ == "__main__":
    build_changed().run()
