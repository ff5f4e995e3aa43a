"""FastMCP's client (the `fastmcp` pinned in the test extra) as the interop matrix drives it: its
defaults (no timeout given), an elicitation handler that answers each form field by its type.

    python bench/interop/fastmcp_client.py URL      # calls deploy(env=production), prints the result
"""

from __future__ import annotations

import sys

import anyio
from fastmcp import Client

VALUES = {"boolean": True, "number": 1, "integer": 1}


async def on_elicit(message, response_type, params, context):
    props = (getattr(params, "requested_schema", None) or {}).get("properties", {})
    return {name: VALUES.get(spec.get("type"), "yes") for name, spec in props.items()}


async def main(url: str) -> None:
    async with Client(url, elicitation_handler=on_elicit, mode="2026-07-28") as client:
        r = await client.call_tool("deploy", {"env": "production"})
        print("deploy:", " ".join(getattr(c, "text", "") for c in r.content), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
