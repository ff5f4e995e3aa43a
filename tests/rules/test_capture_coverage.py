"""RULES.md §10.8: a live capture sees every peer from its start. On HTTP as on stdio, a request
whose `inputResponses` or `requestState` answer no round the capture saw is judged by its own rule
(`input-responses-unsolicited`, `request-state-unsolicited`); `capture-incomplete` (info) is for
captures that may have begun late or have holes: imports, recordings that declare left-out
exchanges, and a session that follows one of the same command or upstream that ended mid-chain."""

from __future__ import annotations

from tests.traffic import ACCEPT, ELICIT, Traffic

LIVE_HTTP = {"upstream": "http://127.0.0.1:3000/mcp", "live": True}
COMMAND = {"command": ["python", "server.py"], "live": True}


def _first_requests_with_mrtr_fields(t: Traffic):
    """A peer's first request carries inputResponses, another's first a requestState no round issued."""
    t.result(t.tool("deploy", {"env": "qa"}, inputResponses={"confirm": ACCEPT}), {"content": []})
    other = t.call("tools/call", {"name": "deploy", "arguments": {"env": "prod"}, "requestState": "never-issued"},
                   client_info={"name": "other-client", "version": "1.0"})
    t.result(other, {"content": []})
    return t.run()


def _verdicts(r) -> list[tuple[str, str]]:
    wanted = {"input-responses-unsolicited", "request-state-unsolicited", "capture-incomplete"}
    return [(f.rule, f.severity) for f in r.findings if f.rule in wanted]


def test_a_live_http_capture_judges_a_first_request_as_stdio_does():
    """The proxy's session says it is live: the first request of a peer that carries answers or a
    state is unsolicited, as on stdio (where the tee always saw the peer from its start)."""
    for t in (Traffic("http", info=LIVE_HTTP), Traffic("stdio", info=COMMAND), Traffic("stdio")):
        assert _verdicts(_first_requests_with_mrtr_fields(t)) == [
            ("input-responses-unsolicited", "warning"), ("request-state-unsolicited", "error")], t.transport


def test_near_miss_an_http_capture_not_declared_live_may_have_begun_late():
    """An import (or a recording that does not say it is live): a peer first seen with a retry may
    have had its round before the capture began: capture-incomplete, info, naming why."""
    imported = {"upstream": "http://127.0.0.1:3000/mcp", "imported": {"from": "f.flows", "format": "mitmproxy flows"}}
    for info in (imported, {"upstream": "http://127.0.0.1:3000/mcp"}, {"live": False}):
        r = _first_requests_with_mrtr_fields(Traffic("http", info=info))
        assert _verdicts(r) == [("capture-incomplete", "info")] * 2, info
        assert all("began with it" in f.message for f in r.of("capture-incomplete"))


def test_a_later_request_of_a_peer_an_import_saw_is_judged():
    """Near miss of the one above: once a peer was seen, its later stray answers are unsolicited."""
    t = Traffic("http", info={"imported": {"from": "f.har", "format": "HAR"}})
    t.result(t.call("tools/list"), {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    t.result(t.tool("deploy", inputResponses={"confirm": ACCEPT}), {"content": []})
    assert _verdicts(t.run()) == [("input-responses-unsolicited", "warning")]


def test_a_recording_that_declares_left_out_exchanges_has_holes_even_when_live():
    t = Traffic("http", info={**LIVE_HTTP, "imported": {"from": "f.flows", "format": "x", "left_out": 1}})
    t.result(t.call("tools/list"), {"tools": [], "ttlMs": 0, "cacheScope": "public"})
    t.result(t.tool("deploy", inputResponses={"confirm": ACCEPT}), {"content": []})
    assert _verdicts(t.run()) == [("capture-incomplete", "info")]


def _restart(first_ends: str, info: dict, second_info: dict | None = None, tool: str = "deploy",
             transport: str = "stdio", ended: bool = True):
    """Session s1 of `info` runs tools/call deploy, which ends `first_ends` (abandoned: asked and never
    retried; open: never answered; complete); session s2 (`second_info`, default the same) begins with
    a tools/call `tool` that carries answers."""
    t = Traffic(transport, info=info)
    a = t.tool("deploy", {"env": "prod"})
    if first_ends == "abandoned":
        t.irr(a, {"confirm": ELICIT}, state="s1")
    elif first_ends == "complete":
        t.result(a, {"content": []})
    t.next_session("s2", second_info if second_info is not None else info, end=ended)
    b = t.tool(tool, {"env": "prod"}, inputResponses={"confirm": ACCEPT})
    t.result(b, {"content": []})
    return t.run()


def test_a_session_that_follows_one_of_the_same_command_that_ended_mid_chain_is_a_restart():
    """The client restarted the server mid-chain and sent the answers to the new one: the round was
    in the session before, so the answers are not unsolicited (capture-incomplete, naming it)."""
    for ends in ("abandoned", "open"):
        r = _restart(ends, COMMAND)
        assert _verdicts(r) == [("capture-incomplete", "info")], ends
        assert "follows session s1 of the same command or upstream" in r.of("capture-incomplete")[0].message
    r = _restart("abandoned", COMMAND, ended=False)  # the first recorder was killed: no session end
    assert _verdicts(r) == [("capture-incomplete", "info")]
    r = _restart("abandoned", LIVE_HTTP, transport="http")  # the proxy restarted in front of one upstream
    assert _verdicts(r) == [("capture-incomplete", "info")]


def test_near_miss_a_session_after_a_finished_one_or_of_another_command_or_tool_is_judged():
    assert _verdicts(_restart("complete", COMMAND)) == [("input-responses-unsolicited", "warning")]
    other = {"command": ["python", "other.py"], "live": True}
    assert _verdicts(_restart("abandoned", COMMAND, other)) == [("input-responses-unsolicited", "warning")]
    assert _verdicts(_restart("abandoned", COMMAND, tool="rollback")) == [("input-responses-unsolicited", "warning")]
    other_upstream = {**LIVE_HTTP, "upstream": "http://127.0.0.1:4000/mcp"}
    assert _verdicts(_restart("abandoned", LIVE_HTTP, other_upstream, transport="http")) == [
        ("input-responses-unsolicited", "warning")]
