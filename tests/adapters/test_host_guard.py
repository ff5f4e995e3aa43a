"""The guard in-process: it remembers its verdicts (a client sends the same Host request after
request) and forgets them when its policy changes."""

from __future__ import annotations

from mitmproxy import http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow

from mrtr_inspect.adapters.host_guard import HostGuard, refused


def _flow(host: bytes) -> http.HTTPFlow:
    f = tflow.tflow()
    f.client_conn.proxy_mode = ProxyMode.parse("reverse:http://127.0.0.1:3000")
    f.client_conn.sockname = ("127.0.0.1", 8788)
    f.server_conn.address = ("127.0.0.1", 3000)
    f.response = None
    f.metadata.clear()
    f.request.headers = http.Headers([(b"Host", host)])
    return f


def test_a_remembered_verdict_holds_until_the_allowed_names_change():
    guard = HostGuard()
    with taddons.context(Proxyserver(), guard) as tctx:
        tctx.configure(guard, mode=["reverse:http://127.0.0.1:3000"])
        for _ in range(2):  # the second time from what it remembered
            evil, ok = _flow(b"evil.example:8788"), _flow(b"localhost:8788")
            guard.requestheaders(evil)
            guard.requestheaders(ok)
            assert refused(evil) and evil.response.status_code == 403
            assert not refused(ok) and ok.response is None
            assert ok.request.headers["Host"] == "127.0.0.1:3000"  # rewritten as mitmproxy would
        tctx.configure(guard, mrtr_allow_host=["evil.example"])
        again = _flow(b"evil.example:8788")
        guard.requestheaders(again)
        assert not refused(again) and again.response is None
