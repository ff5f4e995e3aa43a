"""RULES.md §4.7: stdio. What only the raw bytes of a pipe show: lines that are not one JSON-RPC
message, bytes that are not UTF-8, and the era probe a dual-era client runs before `initialize`.

A valid message that ends its stream without a newline is reported under `stdio-framing` by the
per-message pass of rules/base/ (it sees every message; this module sees only undecodable ones).
"""

from __future__ import annotations

import json

from ..core.messages import BATCH, Message
from ..core.observations import Answered, Decoded, SessionOver
from ..core.events import C2S, S2C
from . import spec
from .common import MODERN_CODES, at, error_code, side
from .registry import ERROR, INFO, declare, rule

BOM = b"\xef\xbb\xbf"
MAX_PIECES = 64  # lines of one run of fragments tried as one message split by raw newlines
MAX_PIECE_BYTES = 1 << 20
MAX_LINES = 100  # invalid lines reported per stream


def _stream(msg: Message) -> str:
    return "stdout" if msg.direction == S2C else "stdin"


def _bom_then_json(raw: bytes) -> bool:
    if not raw.startswith(BOM):
        return False
    try:
        json.loads(raw[len(BOM):])
        return True
    except ValueError:
        return False


_WHY = {
    "empty": "a blank line",
    "json": "not JSON",
    "extra-data": "more than one JSON value (two messages on one line?)",
    "constant": "JSON with NaN or Infinity, which JSON does not have",
}


@rule(
    "stdio-framing", ERROR, on=(Decoded, SessionOver), kinds=["invalid", "batch"], transports=["stdio"], section="4.7", spec=spec.STDIO,
    quote="Messages are delimited by newlines, and MUST NOT contain embedded newlines.",
    summary="A stdio line that is not exactly one JSON-RPC message.",
    why="The reader parses line by line: a log line on stdout, a pretty-printed message or two messages on one line "
        "break the pipe for every message after them in many clients.",
    example="a server printing \"Server started\" to stdout, or json.dumps(msg, indent=2)",
)
def stdio_framing(obs, ctx) -> None:
    """A line on stdin or stdout that is blank, not JSON, more than one JSON value, a JSON array (a
    batch: MCP messages are single requests, notifications or responses), or JSON with NaN or
    Infinity. When consecutive lines of one stream join into one JSON message, they are reported once
    more as one message split by raw newlines. A line nested deeper than the inspector's limit is
    reported at info (it was not analysed; that is not a violation). A valid message that ends its
    stream without a newline is reported as a warning (base.py)."""
    if type(obs) is SessionOver:
        for key in [k for k in ctx.mem if k[0] == obs.session]:
            del ctx.mem[key]
        return
    msg = obs.msg
    if msg.transport != "stdio":
        return
    note = f" ({msg.note})" if msg.note else ""
    if msg.kind == BATCH:
        if msg.batch is None:
            ctx.emit(f"message #{msg.index} on {_stream(msg)} is {msg.problem}; each stdio line is a single JSON-RPC "
                     f"request, notification or response{note}", messages=[msg.index])
        return
    reason = msg.problem_reason
    if reason == "depth":
        ctx.emit(f"message #{msg.index} on {_stream(msg)}: {msg.problem}; mrtr-inspect did not analyse it (deep "
                 f"nesting is valid JSON){note}", messages=[msg.index], severity=INFO)
    elif reason in _WHY and not _bom_then_json(msg.raw):
        if _within_cap(msg, ctx):
            ctx.emit(f"line of message #{msg.index} on {_stream(msg)} is {_WHY[reason]}: {msg.problem}; the "
                     f"{side(msg)} MUST NOT write anything that is not a valid MCP message{note}", messages=[msg.index])
        _fragments(msg, reason, ctx)


def _within_cap(msg: Message, ctx) -> bool:
    """A process that logs to stdout writes thousands of such lines: each stream reports the first
    MAX_LINES, then says once that it stops."""
    key = (msg.session, msg.direction, "lines")
    n = ctx.mem[key] = ctx.mem.get(key, 0) + 1
    if n == MAX_LINES + 1:
        ctx.emit(f"line of message #{msg.index} on {_stream(msg)} is not a JSON-RPC message either: after "
                 f"{MAX_LINES} such lines, further ones on this stream are not reported", messages=[msg.index])
    return n <= MAX_LINES


def _fragments(msg: Message, reason: str, ctx) -> None:
    """Lines that are not JSON on their own, one right after the other in one stream, may be one
    message with raw newlines inside (pretty-printed, or a newline inside a string)."""
    key = (msg.session, msg.direction)
    run = ctx.mem.get(key)
    if reason != "json" and reason != "extra-data":
        ctx.mem.pop(key, None)
        return
    if run is None or run[1] != msg.index - 1 or len(run[2]) >= MAX_PIECES or run[3] + len(msg.raw) > MAX_PIECE_BYTES:
        run = ctx.mem[key] = [msg.index, msg.index, [], 0]
    run[1] = msg.index
    run[2].append(msg.raw)
    run[3] += len(msg.raw)
    if len(run[2]) < 2:
        return
    try:
        value = json.loads(b"\n".join(run[2]).decode("utf-8", "replace"), strict=False)
    except ValueError:
        return
    if type(value) is dict:
        del ctx.mem[key]
        ctx.emit(f"messages #{run[0]}…#{run[1]} on {_stream(msg)} are one JSON message split over {len(run[2])} lines "
                 "by raw newlines; messages MUST NOT contain embedded newlines",
                 messages=list(range(run[0], run[1] + 1)))


@rule(
    "stdio-non-utf8", ERROR, on=Decoded, kinds=["invalid"], section="4.7", spec=spec.TRANSPORTS_MESSAGES,
    quote="JSON-RPC messages MUST be UTF-8 encoded.",
    summary="A message that is not valid UTF-8 (a stdio line, an HTTP body or an SSE event).",
    why="A peer that decodes strictly drops the message or the whole stream; one that replaces bytes changes data.",
    example='a line holding b"\\xff" or a Latin-1 encoded "é"',
)
def stdio_non_utf8(obs: Decoded, ctx) -> None:
    """A stdio line, an HTTP body or an SSE event's data holding byte sequences that are not UTF-8.
    A UTF-8 byte order mark before an otherwise valid message is reported at info: the MCP sources
    do not mention it (mrtr-inspect, like strict JSON parsers, does not analyse such a message)."""
    msg = obs.msg
    where = f"line of message #{msg.index} on {_stream(msg)}" if msg.transport == "stdio" else \
        f"message #{msg.index} from the {side(msg)} on HTTP exchange {msg.exchange}"
    if msg.problem_reason == "utf8":
        ctx.emit(f"{where} is not valid UTF-8: {msg.problem}; JSON-RPC messages MUST be UTF-8 encoded",
                 messages=[msg.index])
    elif _bom_then_json(msg.raw):
        ctx.emit(f"{where} starts with a UTF-8 byte order mark; strict JSON parsers reject it, so it was not analysed",
                 messages=[msg.index], severity=INFO)


declare(
    "stdio-cancel-missing", ERROR, section="4.7", spec=spec.STDIO_CANCEL, observable=False,
    quote="To cancel an in-flight request, the client MUST send a notifications/cancelled notification referencing "
          "the request's ID.",
    summary="A stdio client gave up on a request without notifications/cancelled.",
    doc="Not observable: a client that silently stops waiting leaves nothing on the wire.",
    why="The server keeps working on a request nobody waits for.",
)


@rule(
    "stdio-era-probe", INFO, on=(Decoded, Answered, SessionOver), methods=["server/discover", "initialize"],
    transports=["stdio"], section="4.7", spec=spec.STDIO_BACKCOMPAT,
    quote="A client that supports both modern (per-request-metadata) MCP versions and a legacy version that requires "
          "an initialize handshake SHOULD probe with server/discover before sending any other request",
    summary="A dual-era client probed with server/discover, got no modern answer and fell back to initialize.",
    why="Shows why the rest of this stdio process is legacy: the server failed the era probe.",
    example="server/discover → -32601 Method not found; then initialize",
)
def stdio_era_probe(obs, ctx) -> None:
    """On stdio, `server/discover` is answered with an error that is not a recognized modern one
    (not -32020, -32021, -32022), or not answered, and the client then sends `initialize`: the
    probe of stdio.mdx "Backward Compatibility" found a legacy server, and the process is legacy
    from there on. A fallback after a modern error is `fallback-after-modern-error` instead."""
    t = type(obs)
    if t is SessionOver:
        ctx.mem.pop(obs.session, None)
        return
    if t is Answered:
        req, resp = obs.request, obs.response
        if req.method == "server/discover" and req.transport == "stdio" and resp.direction == S2C:
            probe = ctx.mem.get(req.session)
            if probe is not None and probe[0] is req:
                probe[1] = resp
        return
    msg = obs.msg
    if msg.transport != "stdio" or msg.direction != C2S or msg.kind != "request":
        return
    if msg.method == "server/discover":
        ctx.mem.setdefault(msg.session, [msg, None])
        return
    probe = ctx.mem.pop(msg.session, None)
    if probe is None:
        return
    discover, answer = probe
    if answer is None:
        how = "got no answer"
    elif answer.kind == "error" and error_code(answer) not in MODERN_CODES:
        how = f"was answered with error {error_code(answer)} ({at(answer)})"
    else:
        return
    ctx.emit(f"the client probed with {at(discover)}, which {how}, and fell back to {at(msg)}: the server is taken "
             "for a legacy one and this process is legacy from here on",
             messages=[i for i in (discover.index, answer.index if answer else None, msg.index) if i is not None])
