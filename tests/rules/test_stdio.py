"""RULES.md §4.7, stdio: raw lines, UTF-8, the era probe."""

from __future__ import annotations

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.rules.registry import REGISTRY
from tests.traffic import CLIENT_INFO, Traffic

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
INIT_RESULT = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}


def framing(r) -> list:
    return [(f.severity, f.messages) for f in r.of("stdio-framing")]


@pytest.mark.parametrize("line, says", [
    (b"Server started on stdio", "not JSON"),
    (b"", "a blank line"),
    (b'{"jsonrpc":"2.0","method":"notifications/message"}{"jsonrpc":"2.0","method":"notifications/message"}',
     "more than one JSON value"),
    (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":NaN}}', "NaN or Infinity"),
    (b'[{"jsonrpc":"2.0","method":"notifications/message","params":{}}]', "batch"),
])
def test_stdio_framing(line, says):
    t = Traffic()
    t.call("tools/list")
    t.server(line)
    r = t.run()
    f = r.of("stdio-framing")
    assert len(f) == 1 and says in f[0].message and "stdout" in f[0].message and f[0].severity == "error"


def test_stdio_framing_valid_lines():
    t = Traffic()
    a = t.call("tools/list")
    t.server(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"public",'
             b'"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}}\r')  # CR: JSON whitespace
    assert a == 1 and not t.run().findings


def test_stdio_framing_split_message():
    t = Traffic()
    t.server(b'{"jsonrpc": "2.0",')
    t.server(b'  "method": "notifications/message",')
    t.server(b'  "params": {"level": "info", "data": "a\\u000a"}}')
    t.server(b"not json either")
    found = framing(t.run())
    assert found == [("error", [0]), ("error", [1]), ("error", [2]), ("error", [0, 1, 2]), ("error", [3])]
    assert "split over 3 lines" in t.run().of("stdio-framing")[3].message


def test_stdio_framing_a_server_logging_to_stdout_is_reported_up_to_a_cap():
    t = Traffic()
    for i in range(150):
        t.server(b"DEBUG: step %d" % i)
    found = t.run().of("stdio-framing")
    assert len(found) == 101 and found[-1].messages == [100] and "not reported" in found[-1].message


def test_stdio_framing_split_across_streams_is_not_joined():
    t = Traffic()
    t.server(b'{"jsonrpc": "2.0",')
    t.line("c2s", b'"method": "x"}')
    assert framing(t.run()) == [("error", [0]), ("error", [1])]


def test_stdio_framing_no_newline_at_the_end():
    t = Traffic()
    t.call("tools/list")
    t.line("s2c", b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}',
           eol=False)
    t.line("c2s", b"garbage", eol=False)
    r = t.run()
    assert framing(r) == [("warning", [1]), ("error", [2])]
    assert "no newline ends it" in r.of("stdio-framing")[0].message
    assert "without a newline" in r.of("stdio-framing")[1].message


def test_stdio_framing_too_deep_is_info():
    t = Traffic()
    t.server(b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":' + b"[" * 30 + b"]" * 30 + b"}}")
    r = t.run(Config(max_depth=10))
    assert framing(r) == [("info", [0])] and "did not analyse" in r.of("stdio-framing")[0].message


def test_stdio_framing_is_for_stdio_only():
    h = Traffic("http")
    x = h.post(h.request("tools/list"))
    h.respond(x, 200, b"Internal Server Error")
    assert not h.run().of("stdio-framing")


def test_stdio_non_utf8():
    t = Traffic()
    t.server(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"caf\xe9"}}')
    t.line("c2s", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\xff"}}')
    r = t.run()
    found = r.of("stdio-non-utf8")
    assert [(f.severity, f.messages) for f in found] == [("error", [0]), ("error", [1])]
    assert "stdout" in found[0].message and "stdin" in found[1].message
    assert not r.of("stdio-framing")


def test_stdio_non_utf8_in_an_http_body():
    h = Traffic("http")
    x = h.post(h.request("tools/list"))
    h.respond(x, 200, b'{"jsonrpc":"2.0","id":1,"result":{"x":"\xc3("}}')
    assert "HTTP exchange 1" in h.run().of("stdio-non-utf8")[0].message


def test_stdio_utf8_and_bom():
    t = Traffic()
    t.server('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"café ✓"}}'.encode())
    t.server(b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"notifications/message","params":{}}')
    r = t.run()
    assert [(f.severity, f.messages) for f in r.of("stdio-non-utf8")] == [("info", [1])]
    assert not r.of("stdio-framing")


def test_stdio_era_probe():
    t = Traffic()
    a = t.call("server/discover")
    t.error(a, -32601, "Method not found")
    b = t.call("initialize", INIT, with_meta=False)
    t.result(b, INIT_RESULT, with_meta=False, result_type=None)
    r = t.run()
    f = r.of("stdio-era-probe")
    assert len(f) == 1 and f[0].messages == [0, 1, 2] and f[0].severity == "info"
    assert r.messages[-1].era == "legacy"
    assert not r.of("era-mixed-connection")  # the probe does not count as a modern request


def test_stdio_era_probe_unanswered():
    t = Traffic()
    t.call("server/discover")
    t.call("initialize", INIT, with_meta=False)
    assert "got no answer" in t.run().of("stdio-era-probe")[0].message


@pytest.mark.parametrize("answer", ["modern-error", "discover-result"])
def test_no_era_probe_when_the_server_answered_modern(answer):
    t = Traffic()
    a = t.call("server/discover")
    if answer == "modern-error":
        t.error(a, -32022, "unsupported", data={"supported": ["2027-01-01"], "requested": "2026-07-28"})
    else:
        t.result(a, {"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": 0, "cacheScope": "public"})
    t.call("initialize", INIT, with_meta=False)
    assert not t.run().of("stdio-era-probe")


def test_stdio_cancel_missing_is_documented_but_not_observable():
    r = REGISTRY["stdio-cancel-missing"]
    assert r.observable is False and r.check is None
