"""mrtr-inspect: watch, stitch, check, record and replay MCP multi-round requests."""

__version__ = "0.1.0"
