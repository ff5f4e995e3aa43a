"""The mutations without a server: what they change, and the loopback check."""

from __future__ import annotations

import base64

import pytest

from mrtr_inspect.core.messages import decode_message
from mrtr_inspect.probe.command import is_loopback
from mrtr_inspect.probe.mutations import accepted, broken_content, outcome, tamper


@pytest.mark.parametrize("state", ["v1.M4znfPnQhbijKRhuY2ZFqczVFfcMyFcIxRGV3wl1B3dPkt8TBD0t", "deploy:ask",
                                   base64.b64encode(b"\x00\xff" * 20).decode(), "9", "-_-_-x-_-"])
def test_tamper_changes_one_character_and_keeps_the_alphabet(state):
    t = tamper(state)
    assert t != state and len(t) == len(state)
    diff = [i for i, (a, b) in enumerate(zip(state, t)) if a != b]
    assert len(diff) == 1
    a, b = state[diff[0]], t[diff[0]]
    assert (a.isdigit(), a.islower(), a.isupper()) == (b.isdigit(), b.islower(), b.isupper())


def test_tamper_of_a_state_without_letters_or_digits_still_differs():
    assert tamper("") == "A" and tamper("--") == "--A"


def test_broken_content_breaks_a_required_field_by_its_type():
    schema = {"type": "object", "properties": {"note": {"type": "string"}, "ok": {"type": "boolean"}},
              "required": ["ok"]}
    content, what = broken_content(schema, {"note": "x", "ok": True})
    assert content == {"note": "x", "ok": "not-a-boolean"} and "'ok' (boolean)" in what
    content, _ = broken_content({"properties": {"name": {"type": "string"}}}, {"name": "Ada"})
    assert content == {"name": 12345}


def test_outcome_says_what_answered():
    assert outcome(decode_message(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}')) == \
        "a JSON-RPC error -32602 (bad)"
    irr = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"b":{},"a":{}}}}'
    assert outcome(decode_message(irr)) == "input_required (asks a, b)"
    assert outcome(decode_message(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')) == "a complete result"


@pytest.mark.parametrize("url,ok", [("http://127.0.0.1:3000/mcp", True), ("http://127.9.9.9/mcp", True),
                                    ("http://[::1]:8/mcp", True), ("http://localhost/mcp", True),
                                    ("http://api.localhost/mcp", True), ("http://10.0.0.1/mcp", False),
                                    ("https://example.com/mcp", False), ("http://127.0.0.1.nip.io/", False)])
def test_only_loopback_upstreams_are_probed_by_default(url, ok):
    assert is_loopback(url) is ok


def test_a_failure_on_an_is_error_result_says_the_tool_failed_not_that_it_accepted():
    """Issue 25 item 16: "accepted it and answered a complete result with isError: true" read as a
    contradiction. Near miss: a plain complete result is acceptance, and says so."""
    tool_error = decode_message(b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}')
    v = accepted("server-accepted-invalid-input-responses", "the answer 'confirm'", tool_error)
    assert v.rule == "server-accepted-invalid-input-responses" and "accepted" not in v.reason
    assert v.reason == ("the answer 'confirm': the server did not refuse it with a JSON-RPC error; it ran the call, "
                        "which answered a complete result with isError: true (a tool failure, not a refusal)")
    done = decode_message(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')
    assert accepted("r", "the answer 'confirm'", done).reason == \
        "the answer 'confirm': the server accepted it and answered a complete result"


def test_junit_a_failure_below_fail_on_is_a_passing_case_that_does_not_say_fail():
    """Issue 25 item 16: a warning-level probe failure under --fail-on error is a passing test case;
    its output named the verdict `fail` inside it. It now gives the finding with its severity.
    Near miss: at or above --fail-on it is a failure."""
    from xml.etree import ElementTree as ET

    from mrtr_inspect.core.findings import Finding
    from mrtr_inspect.probe.output import junit
    from mrtr_inspect.probe.runner import FAIL, ProbeResult, ProbeRun

    f = Finding("server-rejected-unknown-key", "warning", "retry with an extra key → -32602", chain="c1",
                messages=[3, 4], spec="basic/patterns/mrtr")
    run = ProbeRun([ProbeResult("c1", "unknown-answer-key", FAIL, f.rule, [3, 4], f.message, "tools/call deploy",
                                finding=f)], [f], 5, None)
    [case] = ET.fromstring(junit(run, "r.jsonl", "error")).iter("testcase")
    assert case.find("failure") is None
    out = case.find("system-out").text
    assert out == ("warning server-rejected-unknown-key: retry with an extra key → -32602 (messages #3, #4) "
                   "(below --fail-on error)\n    spec: https://modelcontextprotocol.io/specification/2026-07-28/"
                   "basic/patterns/mrtr")
    [case] = ET.fromstring(junit(run, "r.jsonl", "warning")).iter("testcase")
    assert case.find("failure") is not None
