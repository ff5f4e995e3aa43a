"""A sample MCP 2026-07-28 server whose tools ask for input the MRTR way (official Python SDK).

    python -m mrtr_inspect.samples.server                         # stdio
    python -m mrtr_inspect.samples.server --http --port 3000      # Streamable HTTP on /mcp

Tools:
  deploy(env)        one elicitation round (confirm)
  release(version)   three elicitation rounds (tag, confirm, notes), earlier answers in requestState
  summarize(text)    one sampling round
  workspace()        one roots round
  slow_deploy(env)   progress notifications, then one elicitation round
  flaky_deploy(env)  the server gives up after the answer (JSON-RPC error)

It asks only for what the request's client declared it can answer (form elicitation, sampling,
roots); otherwise the call fails with the specification's missing-required-client-capability error.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ElicitationCapability,
    FormElicitationCapability,
    InputRequiredResult,
    ListRootsRequest,
    RootsCapability,
    SamplingCapability,
    SamplingMessage,
    TextContent,
)


def _form(message: str, field: str, kind: str = "string") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _ask(ctx: Context, requests: dict, state: str) -> InputRequiredResult:
    """An input_required result for `requests`, if the request's client declared what they need
    (RULES.md: input-request-undeclared-capability); otherwise the specification's error naming it."""
    caps = ctx.client_capabilities
    need: dict = {}
    for req in requests.values():
        if isinstance(req, ElicitRequest):
            form = caps is not None and caps.elicitation is not None and (
                caps.elicitation.form is not None or caps.elicitation.url is None)  # a bare {} means form
            if not form:
                need["elicitation"] = ElicitationCapability(form=FormElicitationCapability())
        elif isinstance(req, CreateMessageRequest):
            if caps is None or caps.sampling is None:
                need["sampling"] = SamplingCapability()
        elif isinstance(req, ListRootsRequest):
            if caps is None or caps.roots is None:
                need["roots"] = RootsCapability()
    if need:
        required = ClientCapabilities(**need).model_dump(by_alias=True, mode="json", exclude_none=True)
        raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, f"the client did not declare {', '.join(need)}",
                       {"requiredCapabilities": required})
    return InputRequiredResult(input_requests=requests, request_state=state)


def _accepted(answer, field: str):
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return answer.content.get(field)
    return None


def build_server(name: str = "mrtr-sample") -> MCPServer:
    mcp = MCPServer(name)

    @mcp.tool(description="Deploy to an environment after the user confirms.")
    async def deploy(env: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "confirm" not in answers:
            return _ask(ctx, {"confirm": _form(f"Deploy to {env}?", "confirm", "boolean")}, "deploy:ask")
        return f"deployed to {env}" if _accepted(answers["confirm"], "confirm") else f"deployment to {env} cancelled"

    @mcp.tool(description="Cut a release: asks for the tag, a confirmation and release notes, one round each.")
    async def release(version: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        state = json.loads(ctx.request_state) if ctx.request_state else {}
        for key in ("tag", "confirm", "notes"):
            if key in answers:
                state[key] = _accepted(answers[key], key)
        if "tag" not in state:
            return _ask(ctx, {"tag": _form(f"Tag for release {version}?", "tag")}, json.dumps(state))
        if "confirm" not in state:
            return _ask(ctx, {"confirm": _form(f"Publish {version} as {state['tag']}?", "confirm", "boolean")},
                        json.dumps(state))
        if "notes" not in state:
            return _ask(ctx, {"notes": _form("Release notes?", "notes")}, json.dumps(state))
        if not state["confirm"]:
            return f"release {version} cancelled"
        return f"released {version} as {state['tag']}: {state['notes']}"

    @mcp.tool(description="Summarize a text with the client's model.")
    async def summarize(text: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "summary" not in answers:
            ask = CreateMessageRequest(params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(text=f"Summarize: {text}"))],
                max_tokens=100))
            return _ask(ctx, {"summary": ask}, "summarize:ask")
        content = getattr(answers["summary"], "content", None)
        return f"summary: {getattr(content, 'text', '')}"

    @mcp.tool(description="List the client's workspace roots.")
    async def workspace(ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "roots" not in answers:
            return _ask(ctx, {"roots": ListRootsRequest()}, "roots:ask")
        roots = getattr(answers["roots"], "roots", [])
        return "roots: " + ", ".join(str(r.uri) for r in roots)

    @mcp.tool(description="Deploy with progress: checks, then asks to confirm.")
    async def slow_deploy(env: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        for step in range(1, 4):
            await ctx.report_progress(step, 4, f"checking {env} ({step}/3)")
            await anyio.sleep(0.05)
        if "confirm" not in answers:
            return _ask(ctx, {"confirm": _form(f"Deploy to {env}?", "confirm", "boolean")}, "slow:ask")
        return f"deployed to {env}"

    @mcp.tool(description="Asks, then fails whatever the answer.")
    async def flaky_deploy(env: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "confirm" not in answers:
            return _ask(ctx, {"confirm": _form(f"Deploy to {env}?", "confirm", "boolean")}, "flaky:ask")
        raise MCPError(-32603, f"the deployment of {env} failed after the confirmation")

    return mcp


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    server = build_server()
    if "--http" in argv:
        import uvicorn
        from mcp.server.transport_security import TransportSecuritySettings

        port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 3000
        from ..hosts import asgi_guard

        app = asgi_guard(server.streamable_http_app(streamable_http_path="/mcp", transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=False)))  # loopback names only, 403 otherwise (hosts.py)
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")
    else:
        server.run()


if __name__ == "__main__":
    main()
