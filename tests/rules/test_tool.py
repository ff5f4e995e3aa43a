"""Rules of the tool itself (rules/tool.py): `inspector-error`, the pipeline failing on a frame;
`upstream-not-mcp`, an HTTP error page where an MCP answer was due; `upstream-error`, the upstream
gave no answer (a stdio server that exited with requests unanswered among them)."""

from __future__ import annotations

import gzip

import pytest

from mrtr_inspect.config import Config
from mrtr_inspect.core import chains
from mrtr_inspect.core.events import HttpBody, HttpEnd, SessionEnd
from tests.traffic import ACCEPT, ELICIT, Traffic


def _call() -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    return t


def test_a_frame_the_pipeline_fails_on_is_an_inspector_error_and_the_analysis_goes_on(monkeypatch):
    def broken(self, *args):
        raise RuntimeError("stitching broke")

    monkeypatch.setattr(chains.Stitcher, "on_request", broken)
    r = _call().run()
    [f] = r.of("inspector-error")
    assert f.severity == "warning" and f.chain is None and f.messages == []
    assert f.message == ("could not analyse a StdioLine frame: RuntimeError: stitching broke; the traffic was not "
                         "affected, analysis goes on")
    assert f.time == r.messages[0].time  # the time of the frame it failed on
    assert [m.label() for m in r.messages] == ["tools/call id=1", "result id=1"]  # the next frame is analysed


def test_a_failure_while_closing_says_so(monkeypatch):
    def broken(self, now, session=None):
        raise RuntimeError("closing broke")

    monkeypatch.setattr(chains.Stitcher, "close_all", broken)
    [f] = _call().run().of("inspector-error")
    assert f.message == "could not close the analysis: RuntimeError: closing broke"


def test_near_miss_the_same_traffic_analysed_whole_is_no_inspector_error():
    r = _call().run()
    assert r.of("inspector-error") == [] and [c["outcome"] for c in r.chains] == ["complete"]


def test_near_miss_a_disabled_inspector_error_reports_nothing(monkeypatch):
    monkeypatch.setattr(chains.Stitcher, "on_request", lambda self, msg, peer, covered: 1 / 0)
    assert _call().run(Config(disabled={"inspector-error"})).of("inspector-error") == []


# -- message-too-large -------------------------------------------------------------------------------------


def _big_result(size: int) -> Traffic:
    t = Traffic()
    a = t.tool("dump")
    t.result(a, {"content": [{"type": "text", "text": "x" * size}]})
    return t


def test_a_stdio_line_past_the_limit_is_message_too_large_and_not_parsed():
    t = _big_result(5000)
    size = len(t.frames[-1].data)  # the result's line
    r = t.run(Config(max_message_bytes=4096))
    [f] = r.of("message-too-large")
    assert f.severity == "warning" and f.messages == [1]
    assert f.message == (f"message #1 from the server (stdout) is {size / 1024:.1f} KiB ({size} bytes), more than 4 KiB: "
                         "forwarded and recorded unchanged, not analysed (max_message_bytes)")
    assert r.messages[1].raw == b"" and r.messages[1].problem_reason == "size"  # nothing of it kept
    assert "stdio-framing" not in r.rules() and "jsonrpc-envelope-invalid" not in r.rules()


def test_a_line_the_framer_cut_is_message_too_large_by_its_whole_size():
    from mrtr_inspect.core.events import StdioLine

    t = Traffic()
    t.frames.append(StdioLine(t.tick(), t.session, "s2c", b"", cut=500 << 20))
    [f] = t.run().of("message-too-large")
    assert "is 500 MiB (524288000 bytes), more than 64 MiB" in f.message


def test_a_body_that_decodes_past_the_limit_is_message_too_large_not_an_invalid_envelope():
    from mrtr_inspect.core.framing import decode_body

    bomb = gzip.compress(b"\0" * (1 << 20))
    body, note = decode_body(bomb, "gzip", limit=4096)
    t = Traffic("http")
    a = t.tool("dump")
    t.respond(t._x, 200, b"", headers=(("content-type", "application/json"), ("content-encoding", "gzip")))
    t.frames.insert(-1, HttpBody(t.tick(), t.session, t._x, body, True, note))
    r = t.run(Config(max_message_bytes=4096))
    [f] = r.of("message-too-large")
    assert f.message == (f"message #1 from the server (HTTP exchange 1) decodes to more than 4 KiB (content-encoding; "
                         f"{len(bomb) / 1024:.1f} KiB on the wire): forwarded and recorded unchanged, not analysed "
                         "(max_message_bytes)")
    assert "jsonrpc-envelope-invalid" not in r.rules() and a is not None


def test_near_miss_a_message_at_the_limit_is_analysed():
    t = _big_result(0)
    r = t.run(Config(max_message_bytes=max(len(f.data) for f in t.frames[1:])))  # the longer line: at the limit
    assert not r.of("message-too-large") and r.messages[1].kind == "result"


# -- upstream-not-mcp: an HTTP error page where an MCP answer was due ---------------------------------


def _wrong_path(status: int, body: bytes, content_type: str | None) -> Traffic:
    t = Traffic("http")
    x = t.post(t.request("server/discover", {}), path="/wrong?tenant=a")
    t.respond(x, status, body, headers=((("content-type", content_type),) if content_type else ()))
    x = t.post(t.request("tools/list", {}), path="/wrong?tenant=a")
    t.respond(x, status, body, headers=((("content-type", content_type),) if content_type else ()))
    return t


def test_a_404_page_names_the_status_and_the_url_not_json():
    r = _wrong_path(404, b"<html><body>Not Found</body></html>", "text/html; charset=utf-8").run()
    assert r.of("jsonrpc-envelope-invalid") == []
    first, second = r.of("upstream-not-mcp")
    assert first.severity == "warning" and first.messages == [0, 1]
    assert first.message == ("POST /wrong server/discover id=1: the upstream answered 404 Not Found (text/html; "
                             "charset=utf-8, 35 bytes), not JSON-RPC; the URL is probably wrong: is /wrong the "
                             "server's MCP endpoint?")
    assert second.message.startswith("POST /wrong tools/list id=2: the upstream answered 404 Not Found")


@pytest.mark.parametrize("status, content_type, says", [
    (405, None, "405 Method Not Allowed (no Content-Type, 18 bytes), not JSON-RPC; the URL is probably wrong"),
    (501, "text/html", "501 Not Implemented (text/html, 18 bytes), not JSON-RPC; the upstream failed before any MCP "
                       "server answered"),
    (401, "text/plain", "401 Unauthorized (text/plain, 18 bytes), not JSON-RPC; the upstream wants credentials"),
    (307, "text/plain", "307 Temporary Redirect (text/plain, 18 bytes), not JSON-RPC; the upstream redirects"),
])
def test_each_kind_of_http_error_gets_its_hint(status, content_type, says):
    [f, _] = _wrong_path(status, b"Cannot POST /wrong", content_type).run().of("upstream-not-mcp")
    assert says in f.message


def test_an_http_error_with_no_body_is_said_too():
    [f, _] = _wrong_path(404, b"", None).run().of("upstream-not-mcp")
    assert "404 Not Found (no Content-Type, no body), not JSON-RPC" in f.message


def test_near_miss_an_http_error_that_carries_json_rpc_is_an_mcp_answer():
    t = Traffic("http")
    a = t.call("initialize", {})
    t.error(a, -32601, "Method not found", status=404)  # a modern server's answer to a removed method
    x = t.post(t.request("tools/list", {}))  # JSON-RPC in a text/plain 400: judged as JSON-RPC
    t.respond(x, 400, b'{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"bad"}}', (("content-type", "text/plain"),))
    assert t.run().of("upstream-not-mcp") == []


def test_near_miss_a_2xx_body_that_is_not_json_is_still_an_invalid_message():
    r = _wrong_path(200, b"<html>hello</html>", "text/html").run()
    assert r.of("upstream-not-mcp") == [] and len(r.of("jsonrpc-envelope-invalid")) == 2


def test_near_miss_a_get_answered_405_is_no_wrong_url():
    t = Traffic("http")
    x = t.post(b"", method="GET")
    t.respond(x, 405, b"Method Not Allowed", (("content-type", "text/plain"),))
    assert t.run().of("upstream-not-mcp") == []


def test_near_miss_an_upstream_that_could_not_be_reached_is_upstream_error_alone():
    t = Traffic("http")
    x = t.post(t.request("tools/list", {}))
    t.frames.append(HttpEnd(t.tick(), t.session, x, "upstream-error: connection refused"))
    r = t.run()
    assert r.of("upstream-not-mcp") == [] and len(r.of("upstream-error")) == 1


# -- upstream-error on stdio: the server process exited with requests unanswered -----------------------


def _died_mid_chain(exit_status: int | None, client_closed: bool = False) -> Traffic:
    """A chain's retry and a tools/list in flight when the server's stdout closes and it exits."""
    t = Traffic(info={"command": ["python", "server.py"]})
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.call("tools/list", {})
    if client_closed:
        t.close("c2s")
    t.close("s2c")
    t.frames.append(SessionEnd(t.tick(), t.session, {} if exit_status is None else {"exit": exit_status}))
    return t


def test_a_server_that_exits_mid_chain_names_its_status_and_the_requests_and_the_chain_ends_error():
    r = _died_mid_chain(3).run()
    [f] = r.of("upstream-error")
    assert f.severity == "warning" and f.chain == "c1" and f.messages == [2, 3]
    assert f.message == ("the server process exited with status 3, leaving 2 requests unanswered: tools/call id=2 "
                         "(message #2), tools/list id=3 (message #3); 1 chain waiting on them ended as error")
    assert [c["outcome"] for c in r.chains] == ["error"]
    [ended] = r.of("chain-ended-error")
    assert ended.message == ("chain c1 (tools/call deploy) ended with no JSON-RPC response (the server process "
                             "exited before answering) after 1 round")


def test_a_server_killed_by_a_signal_says_which():
    [f] = _died_mid_chain(-9).run().of("upstream-error")
    assert f.message.startswith("the server process was killed by signal 9 (SIGKILL), leaving 2 requests")


def test_a_server_that_quits_on_its_own_while_the_client_waits_is_said_too():
    [f] = _died_mid_chain(0).run().of("upstream-error")
    assert f.message.startswith("the server process exited with status 0, leaving 2 requests unanswered")


def test_near_miss_the_client_closed_stdin_and_the_server_exited_cleanly():
    """The client ended the session (closing stdin is how stdio shuts down): what it left in flight it
    gave up on; the chain stays open, as before."""
    r = _died_mid_chain(0, client_closed=True).run()
    assert r.of("upstream-error") == [] and [c["outcome"] for c in r.chains] == ["open"]


def test_near_miss_no_exit_status_known_keeps_the_chain_open():
    r = _died_mid_chain(None).run()  # a recording without the tee's exit status (an older one, a kill)
    assert r.of("upstream-error") == [] and [c["outcome"] for c in r.chains] == ["open"]


def test_near_miss_a_failing_exit_with_nothing_unanswered_is_no_finding():
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    t.close("s2c")
    t.frames.append(SessionEnd(t.tick(), t.session, {"exit": 3}))
    r = t.run()
    assert r.of("upstream-error") == [] and [c["outcome"] for c in r.chains] == ["complete"]


def test_a_retry_sent_again_to_the_restarted_server_is_no_unsolicited_answer():
    """stdio.mdx: the client can retry against the fresh process. The chain the server died in ended
    `error`, yet the next session of the same command may carry its retry (RULES.md §10.8): that is a
    restart mid-chain (capture-incomplete), not answers to a round never asked."""
    t = Traffic(info={"command": ["python", "server.py"]})
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT})
    t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT})
    t.close("s2c")
    t.frames.append(SessionEnd(t.tick(), t.session, {"exit": 3}))
    t.next_session("s2", info={"command": ["python", "server.py"]}, end=False)
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT})
    t.result(b, {"content": []})
    r = t.run()
    assert r.of("input-responses-unsolicited") == [] and len(r.of("capture-incomplete")) == 1
    assert [c["outcome"] for c in r.chains] == ["error", "complete"]


def test_an_http_upstream_that_fails_mid_chain_ends_the_chain_as_error_not_abandoned():
    t = Traffic("http")
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.frames.append(HttpEnd(t.tick(), t.session, t._x_of_id.pop(str(b)), "upstream-error: peer closed connection"))
    r = t.run()
    assert [c["outcome"] for c in r.chains] == ["error"] and len(r.of("upstream-error")) == 1


def test_near_miss_an_http_response_without_json_rpc_mid_chain_is_still_abandoned():
    t = Traffic("http")
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.respond(t._x_of_id.pop(str(b)), 200, b"")
    assert [c["outcome"] for c in t.run().chains] == ["abandoned"]
