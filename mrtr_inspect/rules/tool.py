"""Rules of the tool itself, not of the specification: what happened around the traffic.

`inspector-error` judges the pipeline's own failures (`InspectorFailed`); the rule engine reports
the same id for a check that raised (`registry.RuleEngine._internal_error`). `upstream-error` and
`upstream-not-mcp` say when the upstream gave no MCP answer at all; `message-too-large` says which
messages were past the size limit, and so not analysed.
"""

from __future__ import annotations

from ..core.events import S2C, UPSTREAM_ERROR, header
from ..core.findings import plural
from ..core.messages import INVALID
from ..core.observations import Decoded, ExchangeDone, InspectorFailed, ServerExited
from .common import at, foreign_answer, side
from .registry import WARNING, rule


@rule(
    "inspector-error", WARNING, on=InspectorFailed, section="tool",
    summary="The analysis failed on some input; the traffic passed unchanged and analysis went on.",
    why="A silent analysis failure would hide findings; a loud one must not break the session.",
    example="could not analyse a StdioLine frame: RecursionError: maximum recursion depth exceeded; the traffic was "
            "not affected, analysis goes on",
)
def inspector_error(obs: InspectorFailed, ctx) -> None:
    """An exception inside a rule or the decoder. mrtr-inspect never lets its own failure touch the
    traffic: the bytes were forwarded before analysis, and the failure is reported here instead."""
    e = obs.error
    if obs.frame is None:
        ctx.emit(f"could not close the analysis: {type(e).__name__}: {e}", time=obs.time)
    else:
        ctx.emit(f"could not analyse a {obs.frame} frame: {type(e).__name__}: {e}; the traffic was not affected, "
                 "analysis goes on", time=obs.time)


def _too_large(obs: Decoded) -> bool:
    return obs.msg.problem_reason == "size"


@rule(
    "message-too-large", WARNING, on=Decoded, kinds=[INVALID], section="tool", gate=_too_large,
    summary="A message past max_message_bytes (or a body that decodes past it): forwarded and recorded unchanged, "
            "not analysed.",
    why="Holding, decoding and parsing any size a peer sends would let one message (a long line, a compressed "
        "body of a few KiB that decodes to GiBs) exhaust the tool's memory and stall the traffic; what was not "
        "analysed must be said, since its findings (and an answer it carried) are missing.",
    example="message #7 from the server (stdout) is 500 MiB (524288000 bytes), more than 64 MiB: forwarded and "
            "recorded unchanged, not analysed (max_message_bytes)",
)
def message_too_large(obs: Decoded, ctx) -> None:
    """A stdio line, an HTTP body or an SSE event longer than `max_message_bytes`, or a body whose
    content-encoding decodes to more (decoding stops at the limit: the body is kept as its wire bytes).
    The traffic passed unchanged and the recording holds every byte; the analysis kept none of the
    message, so a response it was goes unpaired and its content is not checked."""
    msg = obs.msg
    where = "stdout" if msg.direction == S2C else "stdin"
    if msg.transport == "http":
        where = f"HTTP exchange {msg.exchange}" if msg.exchange is not None else "HTTP"
    ctx.emit(f"message #{msg.index} from the {side(msg)} ({where}) {msg.problem}: forwarded and recorded unchanged, "
             "not analysed (max_message_bytes)", messages=[msg.index], time=msg.time)


@rule(
    "upstream-error", WARNING, on=(ExchangeDone, ServerExited), section="tool",
    summary="The upstream server gave no answer: the proxy could not get one (the client got 502 or a cut stream), "
            "or a stdio server exited with requests unanswered.",
    why="A request that never reached the server, a response the server broke off, or a server process that died "
        "explains a chain that stops or a client that fails; it is the server's availability, not a breach of "
        "the specification.",
    example="POST /mcp tools/call: upstream-error: [Errno 111] Connect call failed ('127.0.0.1', 3000)",
)
def upstream_error(obs: ExchangeDone | ServerExited, ctx) -> None:
    """An HTTP exchange ended with `upstream-error: …`: the upstream could not be reached, or it closed
    the connection or sent something that is not HTTP before its response was over. On stdio: the
    server process exited (on its own, before the client closed its stdin, or with a failing status)
    while client requests were unanswered; the finding names the exit status and those requests, and
    the chains that waited on them end as `error`."""
    if type(obs) is ServerExited:
        _server_exited(obs, ctx)
        return
    x = obs.exchange
    if not x.error or not x.error.startswith(UPSTREAM_ERROR):
        return
    req = x.request
    what = req.label() if req is not None else f"{x.method} {x.path}"
    got = f"after status {x.status}" if x.status is not None else "the client got 502 Bad Gateway"
    creq = obs.creq
    ctx.emit(f"{what}: the upstream failed ({x.error[len(UPSTREAM_ERROR):]}); {got}",
             messages=[req.index] if req is not None else [], chain=creq.chain.id if creq is not None else None,
             time=x.end_time)


SHOWN = 10  # unanswered requests a finding names; the rest are counted (all are in its messages)


def _server_exited(obs: ServerExited, ctx) -> None:
    import signal  # only when a server died: not at startup

    code = obs.status
    if code < 0:
        try:
            how = f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    left = obs.unanswered
    names = ", ".join(at(m) for m in left[:SHOWN]) + (f" and {len(left) - SHOWN} more" if len(left) > SHOWN else "")
    ended = (f"; {plural(len(obs.chains), 'chain')} waiting on {'it' if len(left) == 1 else 'them'} "
             "ended as error" if obs.chains else "")
    ctx.emit(f"the server process {how}, leaving {plural(len(left), 'request')} unanswered: {names}{ended}",
             messages=[m.index for m in left], chain=obs.chains[0] if len(obs.chains) == 1 else None, time=obs.time)

def _status(code: int) -> str:
    from http import HTTPStatus  # only when an upstream answered with an error page: not at startup

    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return str(code)


def _hint(status: int, path: str) -> str:
    if status in (401, 403, 407):
        return "the upstream wants credentials, or refused the ones sent"
    if 300 <= status < 400:
        return "the upstream redirects elsewhere: the URL is probably wrong (a missing or extra trailing slash?)"
    if status >= 500:
        return f"the upstream failed before any MCP server answered; if it goes on, check that {path} is the MCP endpoint"
    return f"the URL is probably wrong: is {path} the server's MCP endpoint?"


@rule(
    "upstream-not-mcp", WARNING, on=ExchangeDone, section="tool",
    summary="A JSON-RPC POST answered with an HTTP error that is not JSON: most likely not the MCP endpoint.",
    why="A wrong path or a server that does not speak MCP answers with a web page or a bare status; saying the "
        "status and the Content-Type points at the URL, where JSON parse errors would point at the server.",
    example="POST /wrong tools/list: the upstream answered 404 Not Found (text/html, 35 bytes), not JSON-RPC; the URL "
            "is probably wrong: is /wrong the server's MCP endpoint?",
)
def upstream_not_mcp(obs: ExchangeDone, ctx) -> None:
    """A POST carrying a JSON-RPC message was answered with a status other than 2xx whose
    Content-Type is neither JSON nor an event stream, and no JSON-RPC message came back (a web
    server's 404 page, a 405, a redirect). Its body is not also reported as an invalid JSON-RPC
    message (`jsonrpc-envelope-invalid`): it was never meant as one."""
    x = obs.exchange
    if not x.request_messages or x.responses or x.error is not None or not foreign_answer(x):
        return
    assert x.status is not None  # foreign_answer: a status came
    msg = x.request or x.request_messages[0]
    ct = header(x.response_headers, "content-type")
    size = sum(len(m.raw) for m in x.body_messages)
    body = f"{size} bytes" if size else "no body"
    what = f"{ct}, {body}" if ct else f"no Content-Type, {body}"
    path = x.path.split("?", 1)[0]
    creq = obs.creq
    ctx.emit(f"{x.method} {path} {msg.label()}: the upstream answered {_status(x.status)} ({what}), not JSON-RPC; "
             f"{_hint(x.status, path)}", messages=[msg.index] + [m.index for m in x.body_messages],
             chain=creq.chain.id if creq is not None else None, time=x.end_time)
