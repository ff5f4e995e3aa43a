"""`mrtr-inspect mcp`: the MCP server for coding agents over a folder of recordings (server.py,
docs/agents.md)."""
