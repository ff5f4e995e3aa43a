"""DNS rebinding: every listener of ours answers a request whose Host or Origin is a foreign name
with 403, before anything else (the proxy before forwarding, recording or analysing it), and serves
the loopback names (and `--allow-host NAME`) as before. The transport specification asks servers to
refuse an invalid Origin with 403 (basic/transports/streamable-http.mdx, "Security Warning"); the
proxy rewrites Host, so a server's own check never sees the name: ours must."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest

from mrtr_inspect.hosts import HostPolicy
from tests.e2e.test_http_addon import mitmdump
from tests.e2e.test_http_proxy import (CALL, DONE, MCP_HEADERS, ROOT, WAIT, LineReader, child_env, frames,  # noqa: F401
                                       json_response, post, proxies, upstreams)  # proxies, upstreams: the fixtures

FOREIGN = [({"Host": "evil.example:{port}"}, "Host 'evil.example:{port}'"),
           ({"Origin": "http://evil.example:{port}"}, "Origin 'http://evil.example:{port}'")]


def _headers(headers: dict, port: int) -> dict:
    return {k: v.format(port=port) for k, v in headers.items()}


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _refused(status: int, body: bytes, said: str) -> None:
    assert status == 403
    doc = json.loads(body)
    assert "id" not in doc and said in doc["error"]["message"]


# -- the proxy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers, said", FOREIGN)
def test_the_proxy_refuses_a_foreign_name_before_forwarding(proxies, upstreams, tmp_path, headers, said):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    rec = tmp_path / "r.jsonl"
    p = proxies(up.url, "--quiet", "--record", str(rec)).ready()
    status, _, body = post(p.url, CALL, {**MCP_HEADERS, **_headers(headers, p.port)})
    _refused(status, body, said.format(port=p.port))
    assert up.received == []  # never forwarded
    # the loopback names pass, and the upstream sees its own Host, as before
    for host in ("localhost", "127.0.0.1", "[::1]"):
        status, _, body = post(p.url, CALL, {**MCP_HEADERS, "Host": f"{host}:{p.port}", "Origin": f"http://{host}:6274"})
        assert (status, body) == (200, DONE)
    assert [r.header("host") for r in up.received] == [f"127.0.0.1:{up.port}"] * 3
    assert p.stop() == 0
    assert p.err.rest().count("refused (403)") == 1
    assert sum(1 for f in frames(rec) if type(f).__name__ == "HttpRequest") == 3  # the refused one is not recorded


def test_allow_host_widens_the_proxy(proxies, upstreams):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    p = proxies(up.url, "--quiet", "--allow-host", "mcp.internal").ready()
    status, _, body = post(p.url, CALL, {**MCP_HEADERS, "Host": f"mcp.internal:{p.port}", "Origin": "https://mcp.internal"})
    assert (status, body) == (200, DONE)
    assert up.received[0].header("host") == f"127.0.0.1:{up.port}"
    status, _, _ = post(p.url, CALL, {**MCP_HEADERS, "Host": f"other.internal:{p.port}"})
    assert status == 403
    assert p.stop() == 0


def test_a_bad_allow_host_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "mrtr_inspect", "--upstream", "http://127.0.0.1:1/mcp", "--allow-host",
                        "http://x"], cwd=ROOT, env=child_env(), capture_output=True, timeout=WAIT)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [
        "mrtr-inspect: --allow-host takes a host name or address (any port is allowed), not 'http://x'"]


def test_the_metrics_server_refuses_a_foreign_name(proxies, upstreams):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    p = proxies(up.url, "--metrics", "127.0.0.1:0").ready()
    m = p.err.wait(r"metrics on (http://\S+)")
    assert m is not None, p.err.rest()
    url = m.group(1)
    with urllib.request.urlopen(url, timeout=WAIT) as r:
        assert r.status == 200
    for headers, _ in FOREIGN:
        req = urllib.request.Request(url, headers=_headers(headers, 0))
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=WAIT)
        assert e.value.code == 403 and b"DNS rebinding" in e.value.read()
    assert p.stop() == 0


# -- the addon in stock mitmproxy -----------------------------------------------------------------


@pytest.mark.parametrize("sets, host, status", [
    ((), "evil.example", 403), ((), "localhost", 200), (("mrtr_allow_host=evil.example",), "evil.example", 200)])
def test_the_addon_refuses_a_foreign_name_in_reverse_mode(tmp_path, upstreams, sets, host, status):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    rec = tmp_path / "r.jsonl"
    dump, out = mitmdump(tmp_path, up.port, f"mrtr_record={rec}", *sets)
    try:
        m = out.wait(r"listening at 127\.0\.0\.1:(\d+)")
        assert m is not None, out.rest()
        port = int(m.group(1))
        got, _, body = post(f"http://127.0.0.1:{port}/mcp", CALL, {**MCP_HEADERS, "Host": f"{host}:{port}"})
        assert got == status, body
        dump.send_signal(signal.SIGTERM)
        assert dump.wait(WAIT) == 0
    finally:
        _end(dump)
    if status == 403:
        assert up.received == [] and "refused (403)" in out.rest()
        assert not any(type(f).__name__ == "HttpRequest" for f in frames(rec))
    else:  # mitmproxy's own rewrite of Host, done by the guard after its check
        assert up.received[0].header("host") == f"127.0.0.1:{up.port}"


# -- replay serve (and the pytest plugin's HTTP replay, the same server) -----------------------------


def test_replay_serve_refuses_a_foreign_name(tmp_path):
    from tests.outputs.conftest import HTTP_FIXTURE

    serve = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "replay", "serve", str(HTTP_FIXTURE),
                              "--listen", "127.0.0.1:0", "--allow-host", "mcp.internal"],
                             cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    err = LineReader(serve.stderr)
    try:
        m = err.wait(r"listening on (http://127\.0\.0\.1:(\d+)(/\S*))")
        assert m is not None, err.rest()
        url, port = m.group(1), int(m.group(2))
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        for headers, said in FOREIGN:
            status, _, body = post(url, ping, _headers(headers, port))
            _refused(status, body, said.format(port=port))
        for host in ("localhost", "mcp.internal"):
            status, _, body = post(url, ping, {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}"})
            assert status == 200 and json.loads(body)["id"] == 1
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(WAIT) == 0
    finally:
        _end(serve)
    lines = err.rest()
    assert lines.count("refused (403)") == 2 and "2 pings answered" in lines  # the refused are no part of the replay


def test_the_plugins_http_replay_refuses_a_foreign_name():
    from mrtr_inspect.replay.script import load_script
    from mrtr_inspect.replay.serve import BackgroundHttpServer, ServeOptions, ServeSession
    from tests.outputs.conftest import HTTP_FIXTURE

    srv = BackgroundHttpServer(ServeSession(load_script(str(HTTP_FIXTURE)), ServeOptions(), "http"))
    url = srv.start()
    try:
        port = int(url.split(":")[2].split("/")[0])
        status, _, body = post(url, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', {"Host": f"evil.example:{port}"})
        _refused(status, body, "Host 'evil.example")
    finally:
        srv.stop()


# -- the demo's sample server ---------------------------------------------------------------------


def test_the_demo_sample_server_refuses_a_foreign_name():
    from mrtr_inspect.demo import sample_server

    init = (b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    with sample_server() as url:
        port = int(url.split(":")[2].split("/")[0])
        for headers, said in FOREIGN:
            status, _, body = post(url, init, _headers(headers, port))
            _refused(status, body, said.format(port=port))
        status, _, _ = post(url, init, {"Host": f"localhost:{port}"})
        assert status != 403


def test_no_listener_of_ours_is_left_unguarded():
    """Every place the package listens (a bind, asyncio.start_server, a WSGI/ASGI server, mitmproxy's
    listener) is one of the guarded ones above; a new one must be added here, guarded."""
    import re
    from pathlib import Path

    pkg = Path(ROOT) / "mrtr_inspect"
    listening = re.compile(r"\.listen\(|start_server\(|make_server\(|uvicorn\.(run|Server)\(|listen_host=")
    found = sorted(str(p.relative_to(pkg)) for p in pkg.rglob("*.py") if listening.search(p.read_text(encoding="utf-8")))
    assert found == ["adapters/proxy.py", "demo.py", "outputs/metrics.py", "replay/serve.py", "samples/server.py"]
    assert HostPolicy().refusal("evil.example", None) is not None


def test_allow_host_widens_the_metrics_server():
    """`--allow-host` of the tee and the proxy (`mrtr_allow_host` of the addon) reaches `/metrics`: a
    Prometheus scraping by name."""
    from mrtr_inspect.outputs.metrics import Metrics, MetricsServer

    server = MetricsServer("127.0.0.1", 0, Metrics(), ("prom.fleet",))
    server.start()
    try:
        codes = []
        for host in ("prom.fleet", "evil.example"):
            req = urllib.request.Request(server.url, headers={"Host": f"{host}:{server.port}"})
            try:
                with urllib.request.urlopen(req, timeout=WAIT) as r:
                    codes.append(r.status)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
        assert codes == [200, 403]
    finally:
        server.close()
