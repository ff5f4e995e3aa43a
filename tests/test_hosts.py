"""hosts.py: the Host and Origin a request to a listener of ours must carry (DNS rebinding)."""

from __future__ import annotations

import json

import pytest

from mrtr_inspect.hosts import HostPolicy, allow_host, forbidden_body, refusals


@pytest.mark.parametrize("host, origin", [
    ("localhost:8788", None), ("127.0.0.1", None), ("[::1]:8788", None), ("LocalHost:1", "http://localhost:3000"),
    ("127.0.0.1:8788", "https://127.0.0.1"), ("localhost", "http://[::1]:6274"),
])
def test_loopback_names_with_any_port_are_served(host, origin):
    assert HostPolicy().refusal(host, origin) is None


@pytest.mark.parametrize("host, origin, said", [
    ("evil.example:8788", None, "Host 'evil.example:8788'"),
    ("localhost.evil.example", None, "Host 'localhost.evil.example'"),
    ("127.0.0.1.nip.io:80", None, "Host '127.0.0.1.nip.io:80'"),
    ("localhost:8788", "http://evil.example:8788", "Origin 'http://evil.example:8788'"),
    ("localhost:8788", "null", "Origin 'null'"),
    ("localhost:8788", "file://localhost", "Origin 'file://localhost'"),
    ("localhost:x", None, "Host 'localhost:x'"),
    ("localhost:8788 evil", None, "Host"),
    (None, None, "without a Host header"),
])
def test_a_foreign_name_is_refused(host, origin, said):
    reason = HostPolicy().refusal(host, origin)
    assert reason is not None and said in reason


def test_the_listening_and_the_local_address_are_names_of_the_listener():
    assert HostPolicy(listen="10.1.2.3").refusal("10.1.2.3:8788", "http://10.1.2.3:8788") is None
    assert HostPolicy().refusal("10.1.2.3:8788", None, local="10.1.2.3") is None
    assert HostPolicy().refusal("[fe80::1]:8788", None, local="fe80::1%eth0") is None
    # near misses: another address than the one the connection came in on; a wildcard listen address
    assert HostPolicy().refusal("10.1.2.4:8788", None, local="10.1.2.3") is not None
    assert HostPolicy(listen="0.0.0.0").refusal("0.0.0.0:8788", None) is not None


def test_allow_host_widens_host_and_origin():
    p = HostPolicy(["mcp.internal", "[fd00::1]"])
    assert p.refusal("MCP.internal:443", "https://mcp.internal") is None
    assert p.refusal("[fd00::1]:8788", None) is None
    assert p.refusal("other.internal", None) is not None
    assert HostPolicy(["*"]).refusal("anything.example", "null") is None


@pytest.mark.parametrize("value", ["mcp.internal:8788", "http://mcp.internal", "", "a b", "x/y"])
def test_a_bad_allow_host_is_refused_with_a_reason(value):
    with pytest.raises(ValueError, match="--allow-host takes a host name or address"):
        allow_host(value)


def test_the_403_body_is_a_json_rpc_error_without_an_id():
    doc = json.loads(forbidden_body("Host 'evil.example' is not a name of this listener"))
    assert set(doc) == {"jsonrpc", "error"} and doc["error"]["code"] == -32000
    assert "DNS rebinding" in doc["error"]["message"] and "--allow-host NAME" in doc["error"]["message"]


def test_each_refusal_is_said_once():
    said: list[str] = []
    tell = refusals(said.append)
    for _ in range(3):
        tell("Host 'a' is not a name of this listener")
    tell("Host 'b' is not a name of this listener")
    assert len(said) == 2 and said[0].startswith("refused (403): Host 'a'") and "--allow-host NAME" in said[0]
