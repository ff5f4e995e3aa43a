"""A target for the official conformance suite's input-required-result-* server scenarios, written
with the official Python SDK, and the same server broken on purpose.

    python -m tests.e2e.conformance_server                        the correct server
    python -m tests.e2e.conformance_server --break a,b            with switches a and b on

Says `listening on http://127.0.0.1:PORT/mcp` on stdout once it accepts connections.

The correct server is the SDK's MCPServer with the tools and the prompt the scenarios call (their
descriptions in the suite's src/scenarios/server/input-required-result.ts say what each must do);
the SDK seals and verifies requestState. Each switch (SWITCHES) is one deviation made in the SDK's
middleware chain, so the tools stay the correct ones: `Breaker`, outermost, rewrites the request the
handlers see or the result the client gets; unprotected-state takes the SDK's requestState boundary out.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.request_state import RequestStateBoundary
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    InputRequiredResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
)

from mrtr_inspect.samples.server import _accepted, _form

from .servers import serve

ELICITATION_TOOL = "test_input_required_result_elicitation"
SAMPLING_TOOL = "test_input_required_result_sampling"
ROOTS_TOOL = "test_input_required_result_list_roots"
STATE_TOOL = "test_input_required_result_request_state"
MULTIPLE_TOOL = "test_input_required_result_multiple_inputs"
MULTI_ROUND_TOOL = "test_input_required_result_multi_round"
TAMPER_TOOL = "test_input_required_result_tampered_state"
CAPABILITIES_TOOL = "test_input_required_result_capabilities"
PROMPT = "test_input_required_result_prompt"

SWITCHES = {
    "no-result-type": f"{ELICITATION_TOOL}'s input_required results go out without resultType",
    "irr-on-list": "tools/list and prompts/list answer input_required (an elicitation) along with their list",
    "unprotected-state": "requestState is neither sealed nor verified, and the tools trust what comes back",
    "ignore-capabilities": f"{CAPABILITIES_TOOL} asks for an elicitation whatever the client declared",
    "empty-irr": f"{STATE_TOOL} answers input_required with neither inputRequests nor requestState",
    "wrong-input-method": f"{ROOTS_TOOL} asks for the roots with method roots/get",
    "error-instead-of-reask": f"{ELICITATION_TOOL} fails (-32602) on a retry that does not answer user_name",
    "accept-invalid-input": f"{ELICITATION_TOOL} takes malformed inputResponses for an accepted answer",
}

# A fixed fixture key (the SDK wants >= 32 bytes); the state is sealed with AES-GCM under it.
STATE_KEY = b"mrtr-inspect-conformance-fixture-state-key"


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    return CreateMessageRequest(params=CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))], max_tokens=max_tokens))


def build_server(broken: frozenset[str] = frozenset()) -> MCPServer:
    mcp = MCPServer("mrtr-inspect-conformance-target", version="1.0.0",
                    request_state_security=RequestStateSecurity(keys=[STATE_KEY]))

    @mcp.tool(name=ELICITATION_TOOL)
    async def elicitation(ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "user_name" in answers:
            return f"Hello, {_accepted(answers['user_name'], 'name')}!"
        return InputRequiredResult(input_requests={"user_name": _form("What is your name?", "name")})

    @mcp.tool(name=SAMPLING_TOOL)
    async def sampling(ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "capital_question" in answers:
            return f"The model said: {getattr(answers['capital_question'].content, 'text', '?')}"
        return InputRequiredResult(input_requests={"capital_question": _sample("What is the capital of France?", 100)})

    @mcp.tool(name=ROOTS_TOOL)
    async def list_roots(ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "client_roots" in answers:
            return "Roots: " + ", ".join(str(r.uri) for r in getattr(answers["client_roots"], "roots", []))
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})

    @mcp.tool(name=STATE_TOOL)
    async def request_state(ctx: Context) -> str | InputRequiredResult:
        if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "confirm-asked":
            return "state-ok: the confirmation came back with the state"
        return InputRequiredResult(input_requests={"confirm": _form("Please confirm", "ok", "boolean")},
                                   request_state="confirm-asked")

    @mcp.tool(name=MULTIPLE_TOOL)
    async def multiple_inputs(ctx: Context) -> str | InputRequiredResult:
        if {"user_name", "greeting", "client_roots"} <= set(ctx.input_responses or {}):
            return "All three answers received."
        return InputRequiredResult(input_requests={
            "user_name": _form("What is your name?", "name"),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        }, request_state="three-asked")

    @mcp.tool(name=MULTI_ROUND_TOOL)
    async def multi_round(ctx: Context) -> str | InputRequiredResult:
        state = json.loads(ctx.request_state) if ctx.request_state else {}
        answers = ctx.input_responses or {}
        if state.get("step") == 1 and "step1" in answers:
            state = {"step": 2, "name": _accepted(answers["step1"], "name")}
            return InputRequiredResult(input_requests={"step2": _form("Step 2: What is your favorite color?", "color")},
                                       request_state=json.dumps(state))
        if state.get("step") == 2 and "step2" in answers:
            return f"{state['name']} likes {_accepted(answers['step2'], 'color')}."
        return InputRequiredResult(input_requests={"step1": _form("Step 1: What is your name?", "name")},
                                   request_state=json.dumps({"step": 1}))

    @mcp.tool(name=TAMPER_TOOL)
    async def tampered_state(ctx: Context) -> str | InputRequiredResult:
        if ctx.request_state is not None:  # the SDK verified it (unless the state is unprotected)
            return f"state-ok: {ctx.request_state}"
        return InputRequiredResult(input_requests={"confirm": _form("Please confirm", "ok", "boolean")},
                                   request_state="round-1")

    @mcp.tool(name=CAPABILITIES_TOOL)
    async def capabilities(ctx: Context) -> InputRequiredResult:
        caps = ctx.client_capabilities
        asks = {}
        if caps is not None and caps.sampling is not None:
            asks["sample"] = _sample("Say hello", 50)
        if caps is not None and caps.elicitation is not None:
            asks["ask"] = _form("What is your name?", "name")
        return InputRequiredResult(input_requests=asks, request_state="capability-gated")

    @mcp.prompt(name=PROMPT)
    async def prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
        answers = ctx.input_responses or {}
        if "user_context" in answers:
            context = _accepted(answers["user_context"], "context")
            return [UserMessage(role="user", content=TextContent(type="text", text=f"Use this context: {context}"))]
        return InputRequiredResult(input_requests={
            "user_context": _form("What context should the prompt use?", "context")})

    if "unprotected-state" in broken:
        mcp.middleware[:] = [m for m in mcp.middleware if not isinstance(m, RequestStateBoundary)]
    if broken:
        mcp.middleware.insert(0, Breaker(broken))
    return mcp


def _is_tool(ctx, name: str) -> bool:
    return ctx.method == "tools/call" and (ctx.params or {}).get("name") == name


def _valid_answers(value) -> bool:
    return type(value) is dict and all(type(v) is dict for v in value.values())


ANYONE = {"action": "accept", "content": {"name": "whoever you are"}}
NAME_QUESTION = _form("What is your name?", "name").model_dump(by_alias=True, exclude_none=True)


class Breaker:
    """The switches, as an SDK middleware: outermost, so it sees what the client sent and shapes
    what the client gets."""

    def __init__(self, switches: frozenset[str]) -> None:
        unknown = switches - set(SWITCHES)
        if unknown:
            raise SystemExit(f"unknown switches: {', '.join(sorted(unknown))} (known: {', '.join(SWITCHES)})")
        self.on = switches

    async def __call__(self, ctx, call_next):
        params = ctx.params or {}
        on = self.on
        if _is_tool(ctx, ELICITATION_TOOL) and "inputResponses" in params:
            answers = params["inputResponses"]
            if "accept-invalid-input" in on and not _valid_answers(answers):
                ctx = replace(ctx, params={**params, "inputResponses": {"user_name": ANYONE}})
            elif "error-instead-of-reask" in on and _valid_answers(answers) and "user_name" not in answers:
                raise MCPError(-32602, "inputResponses lacks user_name")
        result = await call_next(ctx)
        if "ignore-capabilities" in on and _is_tool(ctx, CAPABILITIES_TOOL):
            result = {**result, "inputRequests": {**result.get("inputRequests", {}), "ask": NAME_QUESTION}}
        if "no-result-type" in on and _is_tool(ctx, ELICITATION_TOOL) and result.get("resultType") == "input_required":
            result = {k: v for k, v in result.items() if k != "resultType"}
        if "empty-irr" in on and _is_tool(ctx, STATE_TOOL) and result.get("resultType") == "input_required":
            result = {k: v for k, v in result.items() if k not in ("inputRequests", "requestState")}
        if "wrong-input-method" in on and _is_tool(ctx, ROOTS_TOOL) and result.get("resultType") == "input_required":
            asks = {k: {**v, "method": "roots/get"} for k, v in result.get("inputRequests", {}).items()}
            result = {**result, "inputRequests": asks}
        if "irr-on-list" in on and ctx.method in ("tools/list", "prompts/list"):
            bogus = {"method": "elicitation/create", "params": {
                "message": "Why list?", "requestedSchema": {"type": "object", "properties": {}}}}
            result = {**result, "resultType": "input_required", "inputRequests": {"bogus": bogus}}
        return result


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    broken = frozenset(argv[argv.index("--break") + 1].split(",")) if "--break" in argv else frozenset()
    app = build_server(broken).streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    serve(app)


if __name__ == "__main__":
    main()
