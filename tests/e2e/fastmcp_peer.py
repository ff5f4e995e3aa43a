"""FastMCP (pinned in the test extra) as a real third-party peer: a server whose tools ask the user, and
a client, both written only with FastMCP's public API.

    python -m tests.e2e.fastmcp_peer server stdio
    python -m tests.e2e.fastmcp_peer server http       # says `listening on http://127.0.0.1:PORT/mcp`
    python -m tests.e2e.fastmcp_peer client MODE STEPS -- CMD [ARG...]   # a stdio server
    python -m tests.e2e.fastmcp_peer client MODE STEPS URL               # a Streamable HTTP server

MODE is `modern` (2026-07-28 only) or `legacy` (2025-11-25, initialize). The server's tools:

  deploy(env)   asks the user to confirm: on a 2026-07-28 request it returns `input_required` with an
                elicitation form (FastMCP seals its requestState), and completes on the retry that
                answers it; on a 2025-11-25 session it asks with `ctx.elicit` (a server-initiated
                elicitation/create) while the call is open.
  slow(seconds) sleeps, then answers: the call the client cancels.

STEPS (a,b,c) are run in order, one line printed per step: `deploy` (`deploy: <text>`); `cancel`,
which calls `slow` and cancels it after CANCEL_AFTER seconds (`cancel: cancelled`); `tamper` (modern
only), which drives deploy by hand: it retries the input_required with an altered requestState, which
the server refuses, then with the state verbatim (`tamper: refused <code>, then <text>`). The client's
elicitation handler answers each form after WAIT seconds of "user" time.
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp_types
from fastmcp import Client, Context, FastMCP
from fastmcp.client.transports import StdioTransport
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

WAIT = 0.2  # seconds the "user" takes to confirm
CANCEL_AFTER = 0.3  # seconds before the client gives up on `slow`
SLOW = 30.0  # seconds `slow` sleeps: far longer than any test waits
STATE_PREFIX = "deploy:"  # what the modern deploy puts in its requestState (sealed by FastMCP on the wire)


def build_server():
    """The FastMCP server with the tools above."""
    server = FastMCP("fastmcp-peer")

    @server.tool
    async def deploy(env: str, ctx: Context) -> str:
        """Deploy to an environment, once the user confirms."""
        if ctx.request_context is not None and ctx.request_context.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answers = ctx.input_responses
            if answers is None or "confirm" not in answers:
                schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
                form = mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(
                    message=f"Deploy to {env}?", requested_schema=schema))
                return mcp_types.InputRequiredResult(input_requests={"confirm": form},
                                                     request_state=STATE_PREFIX + env)
            answer = answers["confirm"]
            ok = getattr(answer, "action", None) == "accept" and (answer.content or {}).get("confirm") is True
            return f"deployed to {env}" if ok else "not deployed"
        result = await ctx.elicit(f"Deploy to {env}?", response_type=bool)
        return f"deployed to {env}" if result.action == "accept" and result.data else "not deployed"

    @server.tool
    async def slow(seconds: float) -> str:
        """Sleep, then answer (the client cancels it first)."""
        await anyio.sleep(seconds)
        return "slept"

    return server


def serve(transport: str) -> None:
    server = build_server()
    if transport == "stdio":
        server.run("stdio", show_banner=False)
        return
    from tests.e2e.servers import serve as serve_asgi

    serve_asgi(server.http_app(path="/mcp"))


async def on_elicit(message, response_type, params, context):
    """Confirm, after the user's WAIT seconds."""
    await anyio.sleep(WAIT)
    return {"confirm": True} if "confirm" in (params.requested_schema or {}).get("properties", {}) else {"value": True}


async def run_client(mode: str, steps: list[str], target) -> list[str]:
    out = []
    async with Client(target, elicitation_handler=on_elicit, mode="legacy" if mode == "legacy" else "2026-07-28",
                      timeout=60) as client:
        for step in steps:
            if step == "deploy":
                r = await client.call_tool("deploy", {"env": "production"})
                out.append(f"deploy: {' '.join(getattr(c, 'text', '') for c in r.content)}")
            elif step == "cancel":
                with anyio.move_on_after(CANCEL_AFTER):
                    await client.call_tool("slow", {"seconds": SLOW})
                    out.append("cancel: answered")
                    continue
                out.append("cancel: cancelled")
            elif step == "tamper":
                out.append(f"tamper: {await tamper(client)}")
            else:
                raise SystemExit(f"unknown step {step!r}")
    return out


async def tamper(client: Client) -> str:
    """deploy to staging by hand: the retry with a requestState altered in its middle, then the verbatim one."""
    from mcp.shared.exceptions import MCPError

    args = {"env": "staging"}
    first = await client.session.call_tool("deploy", args, allow_input_required=True)
    state = first.request_state
    answers = {"confirm": mcp_types.ElicitResult(action="accept", content={"confirm": True})}
    middle = len(state) // 2
    altered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1:]
    try:
        await client.session.call_tool("deploy", args, input_responses=answers, request_state=altered)
        refused = "not refused"
    except MCPError as e:
        refused = f"refused {e.error.code}"
    r = await client.session.call_tool("deploy", args, input_responses=answers, request_state=state)
    return f"{refused}, then {' '.join(getattr(c, 'text', '') for c in r.content)}"


def client_main(argv: list[str]) -> None:
    mode, steps, rest = argv[0], argv[1].split(","), argv[2:]
    if rest[0] == "--":
        target = StdioTransport(command=rest[1], args=rest[2:], env=dict(os.environ), keep_alive=False)
    else:
        target = rest[0]
    for line in anyio.run(run_client, mode, steps, target):
        print(line, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2])
    else:
        client_main(sys.argv[2:])
