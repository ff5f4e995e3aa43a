"""A stdio MRTR server (official Python SDK) that handles every probe of RULES.md §12 correctly, with
one switch per mutation that makes it fail that probe. Test-only.

    python -m tests.probe.switch_server                       the correct server
    python -m tests.probe.switch_server --break a,b           with switches a and b on

Its one tool, `deploy(env)`, asks to confirm (a form elicitation, boolean `confirm`) under a
requestState the SDK seals and binds to the request. Correct, it also consumes a state once, checks
the answer against the requestedSchema, asks again for a missing answer, ignores unknown keys, asks
only for what the client declared, and takes a decline as an answer. `Breaker`, an SDK middleware
outside the SDK's requestState boundary, holds what the switches change.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import anyio

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult, InputRequiredResult

from mrtr_inspect.samples.server import _accepted, _ask, _form

#: switch -> the mutation it makes the server fail
SWITCHES = {
    "unsealed": "tampered-state",  # requestState is neither sealed nor verified
    "replayable": "replayed-state",  # a state is accepted again after its chain completed
    "unbound": "state-on-other-request",  # a state is accepted on a call with other arguments
    "error-on-missing": "missing-answer",  # a retry without `confirm` fails instead of asking again
    "strict-keys": "unknown-answer-key",  # a retry with a key it did not ask for fails
    "no-validation": "invalid-answer",  # an answer whose content breaks the schema is taken
    "ignore-capabilities": "undeclared-capability",  # it asks for an elicitation whatever the client declared
    "error-on-decline": "declined",  # a declined confirmation fails
    # not a mutation's: how a probe copes with a server that fails it
    "die-on-retry": None,  # the process exits (status 3) on any retry
    "hang-on-retry": None,  # a retry is never answered
}


def build_server(broken: frozenset[str] = frozenset()) -> MCPServer:
    mcp = MCPServer("mrtr-probe-switches", version="1.0.0")

    @mcp.tool(description="Deploy to an environment after the user confirms.")
    async def deploy(env: str, ctx: Context) -> str | InputRequiredResult:
        answers = ctx.input_responses or {}
        answer = answers.get("confirm")
        if answer is None:
            ask = {"confirm": _form(f"Deploy to {env}?", "confirm", "boolean")}
            if "ignore-capabilities" in broken:
                return InputRequiredResult(input_requests=ask, request_state=f"deploy:{env}")
            return _ask(ctx, ask, f"deploy:{env}")
        if isinstance(answer, ElicitResult) and answer.action == "decline":
            if "error-on-decline" in broken:
                raise MCPError(-32603, "the deployment needs a confirmation")
            return f"deployment to {env} declined"
        return f"deployed to {env}" if _accepted(answer, "confirm") else f"deployment to {env} cancelled"

    if "unsealed" in broken:
        mcp.middleware[:] = [m for m in mcp.middleware if not isinstance(m, RequestStateBoundary)]
    mcp.middleware.insert(0, Breaker(broken))
    return mcp


class Breaker:
    """Outermost middleware: it sees the sealed state both ways, and the answers as sent."""

    def __init__(self, switches: frozenset[str]) -> None:
        unknown = switches - set(SWITCHES)
        if unknown:
            raise SystemExit(f"unknown switches: {', '.join(sorted(unknown))} (known: {', '.join(SWITCHES)})")
        self.on = switches
        self.used: set[str] = set()  # states whose chain completed
        self.issued: dict[str, tuple] = {}  # state -> (name, arguments) of the call it was issued on

    async def __call__(self, ctx, call_next):
        if ctx.method != "tools/call":
            return await call_next(ctx)
        on = self.on
        params = ctx.params or {}
        state = params.get("requestState")
        if type(state) is str:
            if state in self.used and "replayable" not in on:
                raise MCPError(-32602, "this requestState was used already")
            first = self.issued.get(state)
            if "unbound" in on and first is not None and first != (params.get("name"), params.get("arguments")):
                ctx = replace(ctx, params={**params, "name": first[0], "arguments": first[1]})
        if "inputResponses" in params and "die-on-retry" in on:
            os._exit(3)
        if "inputResponses" in params and "hang-on-retry" in on:
            await anyio.sleep(3600)
        if "inputResponses" in params:
            answers = params["inputResponses"]
            if type(answers) is not dict:
                raise MCPError(-32602, "inputResponses is not an object")
            if "confirm" not in answers and "error-on-missing" in on:
                raise MCPError(-32602, "inputResponses lacks confirm")
            if set(answers) - {"confirm"} and "strict-keys" in on:
                raise MCPError(-32602, f"unknown inputResponses keys: {', '.join(sorted(set(answers) - {'confirm'}))}")
            a = answers.get("confirm")
            if "no-validation" not in on and type(a) is dict and a.get("action") == "accept":
                content = a.get("content")
                if type(content) is not dict or type(content.get("confirm")) is not bool:
                    raise MCPError(-32602, "confirm: the answer does not match the requestedSchema (a boolean)")
        result = await call_next(ctx)
        rt = result.get("resultType") if isinstance(result, dict) else None
        if rt == "input_required" and type(result.get("requestState")) is str:
            self.issued[result["requestState"]] = (params.get("name"), params.get("arguments"))
        elif type(state) is str:
            self.used.add(state)
        return result


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    broken = frozenset(argv[argv.index("--break") + 1].split(",")) if "--break" in argv else frozenset()
    build_server(broken).run()


if __name__ == "__main__":
    main()
