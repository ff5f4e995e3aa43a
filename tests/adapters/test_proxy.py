"""The proxy's command-line values: the upstream URL split into mitmproxy's reverse spec and the path
that passes through, and the listen address."""

from __future__ import annotations

import pytest

from mrtr_inspect.adapters.proxy import parse_listen, split_upstream


@pytest.mark.parametrize("url, origin, path", [
    ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000", "/mcp"),
    ("https://mcp.example.com/api/v2/mcp", "https://mcp.example.com", "/api/v2/mcp"),
    ("http://localhost:3000", "http://localhost:3000", "/"),
    ("http://[::1]:3000/mcp?tenant=a", "http://[::1]:3000", "/mcp?tenant=a"),
])
def test_an_upstream_url_is_an_origin_and_a_path(url, origin, path):
    assert split_upstream(url) == (origin, path)


@pytest.mark.parametrize("url, why", [
    ("ftp://127.0.0.1/mcp", "http:// or https://"),
    ("127.0.0.1:3000/mcp", "http:// or https://"),
    ("http:///mcp", "with a host"),
    ("http://127.0.0.1:70000/mcp", "bad --upstream URL"),
    ("http://me:pw@127.0.0.1:3000/mcp", "credentials"),
])
def test_a_bad_upstream_url_says_why(url, why):
    with pytest.raises(ValueError, match=why):
        split_upstream(url)


@pytest.mark.parametrize("text, addr", [
    ("127.0.0.1:8788", ("127.0.0.1", 8788)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:9000", ("::1", 9000)),
    ("9000", ("127.0.0.1", 9000)), (":9000", ("127.0.0.1", 9000)),
])
def test_a_listen_address(text, addr):
    assert parse_listen(text) == addr


@pytest.mark.parametrize("text", ["127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1"])
def test_a_bad_listen_address(text):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(text)
