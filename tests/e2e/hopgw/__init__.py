"""A test gateway with two hops (test-only code): a 2026-07-28 HTTP front, a 2025-11-25 stdio upstream.

    python -m tests.e2e.hopgw.upstream [--era legacy|modern]
        an MCP server on stdio (newline-delimited JSON-RPC, stdlib only) with the tools create_issue,
        connect, echo and fail; a legacy one asks with elicitation/create requests, a modern one
        answers input_required
    python -m tests.e2e.hopgw.gateway [--bug NAME] [--wrap] [--era legacy|modern] [-- CMD ARGS...]
        says `listening on http://127.0.0.1:PORT/mcp`; speaks 2026-07-28 on HTTP and drives ONE
        upstream process, CMD (default: the upstream above), over its stdin and stdout; each --bug
        switch makes it misbehave the way the first seed (shared/seeds/000_80286e4496e5d5fe.txt)
        says mcpx does
    client.HopClient(url)
        a plain-HTTP 2026-07-28 client that calls a tool and answers each input_required round,
        keeping the transcript

tests/e2e/test_hopgw.py checks the gateway itself; tests/e2e/test_hops_live.py records it through the
real proxy (front hop) and the real stdio tee (back hop) into one file.
"""
