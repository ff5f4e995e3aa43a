"""The mutations without a server: what they change, and the loopback check."""

from __future__ import annotations

import base64

import pytest

from mrtr_inspect.core.messages import decode_message
from mrtr_inspect.probe.command import is_loopback
from mrtr_inspect.probe.mutations import broken_content, outcome, tamper


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
