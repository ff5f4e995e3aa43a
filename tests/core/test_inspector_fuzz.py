"""Inspector.feed survives anything: random frames carrying garbage or near-valid JSON-RPC give no
exception and no `inspector-error`, and the same frames always give the same outputs."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import (
    HttpBody,
    HttpEnd,
    HttpRequest,
    HttpResponse,
    SessionEnd,
    SessionStart,
    SseEvent,
    StdioClose,
    StdioLine,
)
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent
from mrtr_inspect.core.messages import Message
from tests.core.pipeline import analyse, digest
from tests.core.strategies import FUZZ


def _no_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


_word = st.sampled_from(["a", "k1", "k2", "s1", "s2", "1", "", "2026-07-28", "2025-11-25", "input_required", "complete",
                         "task", "accept", "\ud800", "tools/call", "file:///a"])
_scalar = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, -32602]) | _word
_value = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(
    st.sampled_from(["method", "params", "name", "content", "action", "roots", "model", "role", "mode", "message",
                     "requestedSchema", "url", "taskId", "code", "_meta"]) | _word, c, max_size=3), max_leaves=8)
_opt = lambda s: st.none() | s  # noqa: E731
_ids = st.integers(0, 3) | st.sampled_from(["1", "2", 1.0, True, None, [], {}])
_methods = st.sampled_from(["tools/call", "prompts/get", "resources/read", "initialize", "notifications/cancelled",
                            "notifications/initialized", "tools/list", "server/discover", "elicitation/create",
                            "tasks/get", "roots/list"])
_meta = _opt(_value | st.fixed_dictionaries({
    "io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28", "2025-11-25", 5]),
    "io.modelcontextprotocol/clientInfo": _value, "io.modelcontextprotocol/clientCapabilities": _value}))
_params = _value | st.builds(
    lambda m, n, a, rs, ir, u, rid, pv: _no_none({"_meta": m, "name": n, "arguments": a, "requestState": rs,
                                                  "inputResponses": ir, "uri": u, "requestId": rid, "protocolVersion": pv}),
    _meta, _opt(st.sampled_from(["t1", "t2", 3])), _value, _opt(st.sampled_from(["s1", "s2"]) | _value),
    _opt(st.dictionaries(st.sampled_from(["k1", "k2"]), _value, max_size=2) | _value), _opt(st.just("file:///a")),
    _ids, _opt(st.just("2025-11-25")))
_result = _value | st.builds(
    lambda rt, irq, rs, m: _no_none({"resultType": rt, "inputRequests": irq, "requestState": rs, "_meta": m}),
    _opt(st.sampled_from(["input_required", "complete", "task", "other"]) | _value),
    _opt(st.dictionaries(st.sampled_from(["k1", "k2"]), _value, max_size=2) | _value),
    _opt(st.sampled_from(["s1", "s2"]) | _value), _opt(_value))
_message = st.one_of(
    st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p}, _ids, _methods, _params),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, _methods, _params),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, _ids, _result),
    st.builds(lambda i, c: {"jsonrpc": "2.0", "id": i, "error": {"code": c, "message": "x"}}, _ids,
              st.integers(-32700, -32000) | _value),
)
payloads = st.one_of(
    _message.map(lambda v: json.dumps(v).encode()),
    st.lists(_message, max_size=3).map(lambda v: json.dumps(v).encode()),  # batches
    st.binary(max_size=40),  # garbage
)
_t = st.floats(0, 200)
_x = st.integers(0, 3)
_headers = st.lists(st.tuples(
    st.sampled_from(["content-type", "mcp-session-id", "mcp-protocol-version", "authorization", "mcp-method", "mcp-name"]),
    st.sampled_from(["application/json", "text/event-stream", "2025-11-25", "2026-07-28", "sid", "Bearer x", "tools/call"]),
), max_size=4).map(tuple)
frames = st.one_of(
    st.builds(lambda t, d, dr, eol: StdioLine(t, "s", dr, d, eol), _t, payloads, st.sampled_from(["c2s", "s2c"]), st.booleans()),
    st.builds(lambda t, dr: StdioClose(t, "s", dr), _t, st.sampled_from(["c2s", "s2c"])),
    st.builds(lambda t, d, x, m, h: HttpRequest(t, "h", x, m, "/mcp", h, d), _t, payloads, _x,
              st.sampled_from(["POST", "GET", "DELETE"]), _headers),
    st.builds(lambda t, x, s, h: HttpResponse(t, "h", x, s, h), _t, _x, st.sampled_from([200, 202, 400, 404]), _headers),
    st.builds(lambda t, d, x: HttpBody(t, "h", x, d), _t, payloads, _x),
    st.builds(lambda t, d, x: SseEvent(t, "h", x, b"event: message\ndata: " + d + b"\n\n"), _t, payloads, _x),
    st.builds(lambda t, d, x: SseEvent(t, "h", x, d), _t, st.binary(max_size=40), _x),
    st.builds(lambda t, x, e: HttpEnd(t, "h", x, e), _t, _x, st.sampled_from([None, "client-disconnected", "upstream-error: x"])),
    st.builds(lambda t, s, tr: SessionStart(t, s, tr, {}), _t, st.sampled_from(["s", "h"]), st.sampled_from(["stdio", "http"])),
    st.builds(lambda t, s: SessionEnd(t, s, {}), _t, st.sampled_from(["s", "h"])),
)


@FUZZ
@given(st.lists(frames, max_size=40), st.sampled_from([None, 5.0]))
def test_any_frames_no_exception_no_inspector_error_same_outputs_twice(frame_list, abandon_after):
    config = Config(abandon_after=abandon_after, remembered_states=2)
    outs = analyse(frame_list, config)
    broken = [o.message for o in outs if type(o) is Finding and o.rule == "inspector-error"]
    assert not broken, broken[0]
    assert digest(outs) == digest(analyse(frame_list, config))
    closed = [o.chain.id for o in outs if type(o) is ChainEvent and o.kind == "closed"]
    assert len(closed) == len(set(closed))  # a chain closes once
    opened = {o.chain.id for o in outs if type(o) is ChainEvent and o.kind == "opened"}
    assert opened <= set(closed)  # and every chain is closed by the end


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["c2s", "s2c"]), st.binary(max_size=60)), max_size=30))
def test_garbage_lines_are_invalid_messages_not_failures(lines):
    frame_list = [StdioLine(float(i), "s", d, data) for i, (d, data) in enumerate(lines)]
    outs = analyse(frame_list, Config())
    assert not [o for o in outs if type(o) is Finding and o.rule == "inspector-error"]
    assert len([o for o in outs if type(o) is Message and o.batch is None]) == len(lines)
