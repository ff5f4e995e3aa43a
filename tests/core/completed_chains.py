"""Completed chains by the thousand, as stdio or HTTP frames, for the memory tests (test_memory.py,
test_retired.py): each a tools/call, an input_required with its own state, the retry, the result."""

from __future__ import annotations

from collections.abc import Iterator

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, StdioLine
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.inspector import ChainEvent

REMEMBERED = 50
META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":'
        '{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}')
ASK = ('{"ok":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object",'
       '"properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}}')
SERVER = '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}'
DONE = '{"resultType":"complete","content":[],' + SERVER + '}'


def chain_messages(i: int, state: str | None = None) -> list[tuple[str, bytes]]:
    """Chain i: a tools/call, an input_required with its own state, the retry, the final result."""
    a, b = 2 * i + 1, 2 * i + 2
    st = state or f"state-{i}"
    call = f'"method":"tools/call","params":{{"name":"deploy","arguments":{{"n":{i}}},'
    msgs = [
        ("c2s", f'{{"jsonrpc":"2.0","id":{a},{call}{META}}}}}'),
        ("s2c", f'{{"jsonrpc":"2.0","id":{a},"result":{{"resultType":"input_required","inputRequests":{ASK},'
                f'"requestState":"{st}",{SERVER}}}}}'),
        ("c2s", f'{{"jsonrpc":"2.0","id":{b},{call}"inputResponses":{{"ok":{{"action":"accept","content":{{"ok":true}}}}}},'
                f'"requestState":"{st}",{META}}}}}'),
        ("s2c", f'{{"jsonrpc":"2.0","id":{b},"result":{DONE}}}'),
    ]
    return [(d, m.encode()) for d, m in msgs]


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def stdio_frames(chains: range, clock: Clock) -> Iterator[StdioLine]:
    for i in chains:
        for d, raw in chain_messages(i):
            yield StdioLine(clock(), "s", d, raw)  # type: ignore[arg-type]


REQUEST_HEADERS = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
                   ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "deploy"))


def http_frames(chains: range, clock: Clock) -> Iterator:
    x = 0
    for i in chains:
        msgs = chain_messages(i)
        for (_, req), (_, resp) in (msgs[0:2], msgs[2:4]):
            x += 1
            yield HttpRequest(clock(), "h", x, "POST", "/mcp", REQUEST_HEADERS, req, "10.0.0.1")
            yield HttpResponse(clock(), "h", x, 200, (("content-type", "application/json"),))
            yield HttpBody(clock(), "h", x, resp)
            yield HttpEnd(clock(), "h", x)


def feed_all(insp: Analysis, frames) -> tuple[int, set[str]]:
    """Feed; returns how many chains closed and the rules that reported more than info."""
    closed, rules = 0, set()
    for f in frames:
        for o in insp.feed(f):
            if type(o) is ChainEvent and o.kind == "closed":
                closed += 1
                assert len(insp.inspector.stitcher._open_chains) == 0  # the chain just closed is already forgotten
            elif type(o) is Finding and o.severity != "info":
                rules.add(o.rule)
    return closed, rules
