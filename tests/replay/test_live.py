"""The live side of a replay (`replay serve --record`, `replay verify --record`): redacted with the
project's settings, and analysed as recorded."""

from __future__ import annotations

from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpRequest, StdioLine
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.live import LiveLog

LINE = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"release","arguments":{"version":"1.0.0"}}}'
CONFIG = dict(redact_paths=["params.arguments.version"], redact_headers=["X-Tenant"])


def test_the_live_recording_redacts_the_configured_paths_and_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "k")
    stdio, http = tmp_path / "stdio.jsonl", tmp_path / "http.jsonl"
    log = LiveLog("stdio", {}, Config(**CONFIG), str(stdio))
    log.line("c2s", LINE)
    log.close()
    [line] = [f for f in read_frames(stdio) if type(f) is StdioLine]
    assert b'"version":"[redacted:' in line.data and b"1.0.0" not in stdio.read_bytes()

    log = LiveLog("http", {}, Config(**CONFIG), str(http))
    log.request(1, "POST", "/mcp", (("X-Tenant", "acme"), ("X-Trace", "t1")), LINE)
    log.close()
    [req] = [f for f in read_frames(http) if type(f) is HttpRequest]
    assert dict(req.headers)["X-Tenant"].startswith("[redacted:") and dict(req.headers)["X-Trace"] == "t1"
    assert b"acme" not in http.read_bytes() and b"1.0.0" not in http.read_bytes()


def test_without_settings_only_the_defaults_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "k")
    path = tmp_path / "r.jsonl"
    log = LiveLog("stdio", {}, None, str(path))
    log.line("c2s", LINE)
    log.close()
    [line] = [f for f in read_frames(path) if type(f) is StdioLine]
    assert line.data == LINE


MISS = b'{"jsonrpc":"2.0","id":1,"error":{"code":-31404,"message":"%s"}}'
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"release","arguments":{}}}'


def test_findings_about_the_replays_own_miss_replies_are_left_out():
    """The replay's reply to a miss is mrtr-inspect's, not the recorded server's: what the rules say
    of it is not reported (near miss: the same reply from a server, worded otherwise, is judged)."""
    own = LiveLog("stdio", {}, None, None)
    own.line("c2s", CALL)
    own.line("s2c", MISS % b"mrtr-inspect replay: no recorded request matches tools/call release")
    assert own.close() == [] and own.left_out == 1

    server = LiveLog("stdio", {}, None, None)
    server.line("c2s", CALL)
    server.line("s2c", MISS % b"no recorded request matches tools/call release")
    assert [f.rule for f in server.close()] == ["chain-ended-error"] and server.left_out == 0


def test_findings_about_the_client_stay_beside_an_own_reply():
    log = LiveLog("stdio", {}, None, None)
    log.line("c2s", b"not json")
    log.line("s2c", b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"mrtr-inspect replay: not a JSON-RPC '
                    b'request (not JSON)"}}')
    found = log.close()
    assert found and all(f.messages == [0] for f in found), [(f.rule, f.messages) for f in found]
