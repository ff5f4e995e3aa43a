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


def test_the_embedded_proxy_s_guard_reads_the_head_in_one_pass_as_the_guard_alone_does():
    """In the embedded proxy the addon reads Host and Origin for the guard from the raw fields (one
    pass) and sets Host itself: the same verdicts, 403s and forwarded fields as the guard's own hook,
    for Host in any case, twice, absent, with an Origin allowed or not; an HTTP/2 request is left to
    the guard's own reading."""
    from mrtr_inspect.adapters.mitm_addon import MrtrInspect
    from mrtr_inspect.config import Config

    class Analysis:
        def __init__(self) -> None:
            self.steps: list = []

        def put(self, step) -> None:
            self.steps.append(step)

    cases = [[(b"Host", b"localhost:8788")], [(b"host", b"127.0.0.1:8788"), (b"Accept", b"*/*")],
             [(b"HOST", b"localhost"), (b"Host", b"localhost")], [(b"Accept", b"*/*")],
             [(b"Host", b"evil.example")], [(b"Host", b"localhost"), (b"Origin", b"http://localhost:5173")],
             [(b"Host", b"localhost"), (b"origin", b"https://evil.example")]]
    guard = HostGuard((), lambda line: None)
    with taddons.context(Proxyserver(), guard) as tctx:
        tctx.configure(guard, mode=["reverse:http://127.0.0.1:3000"])
        analysis = Analysis()
        addon = MrtrInspect(Config(), analysis=analysis, guard=guard)
        for fields in cases:
            for version in (b"HTTP/1.1", b"HTTP/2.0"):
                alone, embedded = _flow(b""), _flow(b"")
                for f in (alone, embedded):
                    f.request.http_version = version.decode()
                    f.request.headers = http.Headers(fields)
                guard.requestheaders(alone)
                addon.requestheaders(embedded)
                assert refused(alone) == refused(embedded), fields
                assert alone.request.headers.fields == embedded.request.headers.fields, (fields, version)
                if refused(alone):
                    assert (alone.response.status_code, alone.response.content) == (embedded.response.status_code,
                                                                                    embedded.response.content)
                else:
                    assert embedded.response is None
        assert len(addon._flows) == sum(2 for fields in cases if not refused(_judged(guard, fields)))


def _judged(guard: HostGuard, fields) -> http.HTTPFlow:
    f = _flow(b"")
    f.request.headers = http.Headers(fields)
    guard.requestheaders(f)
    return f
