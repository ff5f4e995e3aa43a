"""An official Python SDK client for the reference server-everything, or for the project's sample server.

    python -m tests.e2e.everything_client stdio TOOLS -- CMD [ARG...]
    python -m tests.e2e.everything_client http TOOLS URL

It calls each tool of TOOLS (a,b,c) once and prints one line per tool: `name: text` (`name: isError:
text` for an isError result, `name: error: …` for a JSON-RPC error). Its callbacks answer the way a
careful client does: an elicitation form with a value valid for each field (RULES.md §4.3), a sampling
request with a model's reply, roots/list with one root, each after WAIT seconds of "user" time.

server-everything also asks roots/list of its own accord 350 ms after initialize, a question that
serves no call; when TOOLS has get-roots-list, the client waits for that question before its first
call and answers it after its last (condition, not time), so that it never lands inside a call.
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp.types as types
from mcp import StdioServerParameters
from mcp.client import Client

WAIT = 0.2  # seconds the "user" takes to answer each question
ARGS = {  # the arguments of each tool
    "trigger-sampling-request": {"prompt": "Say hello", "maxTokens": 20},
    "get-roots-list": {},
    "trigger-elicitation-request": {},
    "simulate-research-query": {"topic": "tides"},
    "echo": {"message": "hello"},
    "summarize": {"text": "MRTR turns one request into several exchanges."},
    "workspace": {},
    "deploy": {"env": "production"},
}
ROOT = "file:///workspace/project"
FORMATS = {"email": "user@example.com", "uri": "https://example.com/me", "date": "2000-01-31",
           "date-time": "2000-01-31T10:00:00Z"}


def field_value(schema: dict):
    """A value valid for one field of a form (its default when it has one)."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("oneOf"):
        return schema["oneOf"][0]["const"]
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "array":
        items = schema.get("items") or {}
        options = items.get("enum") or [o["const"] for o in items.get("anyOf") or ()]
        return options[: max(1, schema.get("minItems", 1))]
    return FORMATS.get(schema.get("format", ""), "Ada")


async def on_elicit(ctx, params) -> types.ElicitResult:
    await anyio.sleep(WAIT)
    props = (getattr(params, "requested_schema", None) or {}).get("properties", {})
    return types.ElicitResult(action="accept", content={k: field_value(v) for k, v in props.items()})


async def on_sample(ctx, params) -> types.CreateMessageResult:
    await anyio.sleep(WAIT)
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="hello from the model"),
                                     model="test-model")


class _Calls:
    """Whether a call is in flight, and the roots/list the server asked of its own accord before any."""

    def __init__(self) -> None:
        self.calling = False
        self.own_ask = anyio.Event()  # the server asked roots/list before any call
        self.release = anyio.Event()  # the calls are done: that question may be answered


CALLS = _Calls()


async def on_roots(ctx) -> types.ListRootsResult:
    if not CALLS.calling and not CALLS.own_ask.is_set():
        # server-everything syncs the client's roots 350 ms after initialize: a question that serves no
        # call. It is answered once the calls are done, so that it never lands inside one of them and
        # get-roots-list still has to ask (the server asks only while it has no roots cached)
        CALLS.own_ask.set()
        await CALLS.release.wait()
    else:
        await anyio.sleep(WAIT)
    return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="project")])


async def run(target, tools: list[str]) -> list[str]:
    out = []
    async with Client(target, elicitation_callback=on_elicit, sampling_callback=on_sample,
                      list_roots_callback=on_roots) as client:
        if "get-roots-list" in tools:
            with anyio.fail_after(30):  # the server's own roots/list: asked before the calls, answered after
                await CALLS.own_ask.wait()
        for name in tools:
            CALLS.calling = True
            try:
                r = await client.call_tool(name, ARGS.get(name, {}))
                text = " ".join(getattr(c, "text", "") for c in r.content).replace("\n", " ")
                out.append(f"{name}: {'isError: ' if r.is_error else ''}{text}")
            except Exception as e:
                out.append(f"{name}: error: {e}")
            CALLS.calling = False
        CALLS.release.set()
    return out


def main(argv: list[str]) -> None:
    mode, tools = argv[0], argv[1].split(",")
    if mode == "stdio":
        cmd = argv[3:] if argv[2:3] == ["--"] else argv[2:]
        target = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ), cwd=os.getcwd())
    else:
        target = argv[2]
    for line in anyio.run(run, target, tools):
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
