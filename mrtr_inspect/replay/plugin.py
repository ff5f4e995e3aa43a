"""pytest plugin (entry point `pytest11`): recordings served to the code under test.

    @pytest.mark.mrtr_replay(server=[sys.executable, "-m", "my_server"])
    def test_my_client(mrtr_replay):
        assert run_my_client(mrtr_replay.command) == ...        # stdio: a server command line

    @pytest.mark.mrtr_replay(transport="http", server=["my-server", "--port", "{port}"])
    def test_my_client_http(mrtr_replay):
        assert run_my_client(mrtr_replay.url) == ...            # HTTP: the server's URL

The recording is `<rootdir>/fixtures/<test module>/<test name>.jsonl` (ini `mrtr_fixtures_dir`, or a
path given to the marker). Record modes, as pytest-recording has them (`--mrtr-record-mode`):

* `none`: only replay; a missing recording fails the test (the default when `CI` is set);
* `once`: replay when the recording exists, else record it (the default otherwise);
* `all`: record every time, replacing the recording.

To record, the marker names the real server: `server=[...]` (a stdio command; with
`transport="http"` an HTTP server whose `{port}` is filled in) or `upstream=URL`. The test then
talks to the real server through `mrtr-inspect stdio --record` (or the HTTP proxy), and the session
is exported as a fixture (`export --to fixture`: redacted, machine details out of its headers).

In replay, a request that matches no recorded one is answered with a JSON-RPC error naming the
closest recorded request; after the test body, misses fail the test unless `allow_misses=True`.
The fixture also gives the summary: `mrtr_replay.misses`, `.findings` (the live client checked by
the rules, e.g. `request-state-altered`), `.summary()`.

`mrtr_config` (a fixture to override) gives defaults for every marker option, and the redaction
hooks applied when recording: `redact_paths`, `redact_headers`, `before_record(frame) -> frame | None`.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

MODES = ("none", "once", "all")
OPTIONS = ("server", "upstream", "transport", "order", "ignore", "pace", "allow_repeats", "allow_misses",
           "redact_paths", "redact_headers", "before_record")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mrtr-inspect", "mrtr-inspect recordings (mrtr_replay marker)")
    group.addoption("--mrtr-record-mode", choices=MODES, default=None,
                    help="none: only replay; once: record what has no recording yet; all: record again. "
                         "Default: none when CI is set, else once.")
    parser.addini("mrtr_fixtures_dir", "Where recordings named after tests live, from the rootdir.", default="fixtures")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mrtr_replay(path=None, *, server=None, upstream=None, transport=None, order='any', ignore=(), pace=False, "
        "allow_misses=False): serve a recording to the code under test (fixture mrtr_replay; mrtr-inspect)",
    )


def record_mode(config: pytest.Config) -> str:
    mode = config.getoption("--mrtr-record-mode", default=None)
    return mode or ("none" if os.environ.get("CI") else "once")


@pytest.fixture
def mrtr_config() -> dict:
    """Defaults for the mrtr_replay marker's options, and the redaction hooks. Override it."""
    return {}


@pytest.fixture
def mrtr_recording_path(request: pytest.FixtureRequest) -> Path:
    """The recording the test replays (or records)."""
    marker = request.node.get_closest_marker("mrtr_replay")
    given = None
    if marker is not None:
        given = marker.args[0] if marker.args else marker.kwargs.get("path")
    root = request.config.rootpath
    if given:
        p = Path(given)
        return p if p.is_absolute() else root / p
    name = request.node.name
    if request.node.cls is not None:
        name = f"{request.node.cls.__name__}.{name}"
    name = re.sub(r"[^\w.\[\]=-]+", "_", name)
    return root / request.config.getini("mrtr_fixtures_dir") / Path(str(request.node.path)).stem / f"{name}.jsonl"


class MrtrReplay:
    """What the test gets: where to reach the (replayed or real) server, and what happened."""

    def __init__(self, path: Path, mode: str, transport: str, options: dict) -> None:
        self.path = path
        self.mode = mode  # replay | record
        self.transport = transport
        self.options = options
        self.command: list[str] | None = None  # stdio: the server command line to start
        self.url: str | None = None  # HTTP: the server's URL
        self._summary_file: Path | None = None
        self._http: Any = None  # BackgroundHttpServer
        self._procs: list[subprocess.Popen] = []
        self._raw: Path | None = None

    def summary(self) -> dict | None:
        """The replay so far: served, misses, unused, findings (None while recording)."""
        if self._http is not None:
            return self._http.session.summary()
        if self._summary_file is not None and self._summary_file.exists():
            return json.loads(self._summary_file.read_text(encoding="utf-8"))
        return None

    @property
    def misses(self) -> list[dict]:
        s = self.summary()
        return s["misses"] if s else []

    @property
    def findings(self) -> list[dict]:
        s = self.summary()
        return s["findings"] if s else []


def _options(request: pytest.FixtureRequest, config: dict) -> dict:
    marker = request.node.get_closest_marker("mrtr_replay")
    opts = {k: v for k, v in config.items() if k in OPTIONS}
    if marker is not None:
        unknown = set(marker.kwargs) - set(OPTIONS) - {"path"}
        if unknown:
            pytest.fail(f"mrtr_replay: unknown option {', '.join(sorted(unknown))}", pytrace=False)
        opts.update({k: v for k, v in marker.kwargs.items() if k in OPTIONS})
    return opts


@pytest.fixture
def mrtr_replay(request: pytest.FixtureRequest, mrtr_config: dict, mrtr_recording_path: Path, tmp_path: Path):
    """The recording served to the test (or, in record mode, the real server, recorded)."""
    opts = _options(request, mrtr_config)
    mode = record_mode(request.config)
    path = mrtr_recording_path
    if mode == "none" and not path.exists():
        pytest.fail(f"mrtr-inspect: no recording at {path} (record mode none: run with --mrtr-record-mode=once "
                    "to record it from the real server)", pytrace=False)
    if mode == "all" or not path.exists():
        obj = _start_recording(path, opts, tmp_path)
    else:
        obj = _start_replay(path, opts, tmp_path)
    request.node._mrtr_replay = obj
    try:
        yield obj
    finally:
        _finish(obj)


def _start_replay(path: Path, opts: dict, tmp_path: Path) -> MrtrReplay:
    from .script import ScriptError, load_script
    from .serve import BackgroundHttpServer, ServeOptions, ServeSession

    try:
        script = load_script(path)
    except ScriptError as e:
        pytest.fail(f"mrtr-inspect: {e}", pytrace=False)
    transport = opts.get("transport") or script.transport
    obj = MrtrReplay(path, "replay", transport, opts)
    order = opts.get("order", "any")
    ignore = tuple(opts.get("ignore", ()))
    if transport == "http":
        options = ServeOptions(order, ignore, bool(opts.get("allow_repeats")), bool(opts.get("pace")))
        obj._http = BackgroundHttpServer(ServeSession(script, options, "http"))
        obj.url = obj._http.start()
        return obj
    obj._summary_file = tmp_path / "mrtr-replay-summary.json"
    cmd = [sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", "--quiet",
           "--summary", str(obj._summary_file)]
    if order == "strict":
        cmd.append("--strict")
    for p in ignore:
        cmd += ["--ignore", p]
    cmd += ["--allow-repeats"] * bool(opts.get("allow_repeats")) + ["--pace"] * bool(opts.get("pace"))
    obj.command = cmd + [str(path)]
    return obj


def _start_recording(path: Path, opts: dict, tmp_path: Path) -> MrtrReplay:
    server, upstream = opts.get("server"), opts.get("upstream")
    if not server and not upstream:
        pytest.fail(f"mrtr-inspect: nothing to record {path} from: give the mrtr_replay marker server=[...] "
                    "or upstream=URL", pytrace=False)
    transport = opts.get("transport") or ("http" if upstream else "stdio")
    obj = MrtrReplay(path, "record", transport, opts)
    obj._raw = tmp_path / "mrtr-recorded.jsonl"
    if transport == "stdio":
        obj.command = [sys.executable, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(obj._raw), "--",
                       *[str(a) for a in server]]
        return obj
    port = _free_port()
    if server:
        obj._procs.append(subprocess.Popen([str(a).replace("{port}", str(port)) for a in server]))
        _wait_port(port, obj._procs[-1])
    url = (upstream or "http://127.0.0.1:{port}/mcp").replace("{port}", str(port))
    proxy = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "--upstream", url, "--listen", "127.0.0.1:0",
                              "--record", str(obj._raw), "--quiet"], stderr=subprocess.PIPE, text=True)
    obj._procs.append(proxy)
    obj.url = _listening(proxy)
    if obj.url is None:
        _finish(obj)
        pytest.fail(f"mrtr-inspect: the recording proxy did not start (exit status {proxy.wait()})", pytrace=False)
    return obj


def _listening(proc: subprocess.Popen, timeout: float = 60.0) -> str | None:
    """The URL the proxy says it listens on (None if it exits or stays silent); its stderr is
    drained on a thread from then on, so it never blocks on a full pipe."""
    found: queue.Queue = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "listening on " in line and found.empty():
                found.put(line.split("listening on ", 1)[1].strip())
        found.put(None)

    threading.Thread(target=read, name="mrtr-inspect-proxy-stderr", daemon=True).start()
    try:
        return found.get(timeout=timeout)
    except queue.Empty:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until the server accepts connections (it says so no other way), or exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"mrtr-inspect: the server to record did not listen on port {port}", pytrace=False)


def _finish(obj: MrtrReplay) -> None:
    if obj._http is not None:
        obj._http.stop()
    for p in reversed(obj._procs):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    obj._procs.clear()
    if obj.mode == "record" and obj._raw is not None:
        _save(obj)
        obj._raw = None


def _save(obj: MrtrReplay) -> None:
    from .export import export_fixture
    from .script import ReplayError

    assert obj._raw is not None
    if not obj._raw.exists():
        warnings.warn(f"mrtr-inspect: nothing was recorded for {obj.path}", stacklevel=1)
        return
    o = obj.options
    try:
        done = export_fixture(str(obj._raw), str(obj.path), redact_paths=o.get("redact_paths", ()),
                              redact_headers=o.get("redact_headers", ()), before_write=o.get("before_record"))
    except ReplayError as e:
        warnings.warn(f"mrtr-inspect: {obj.path} not written: {e}", stacklevel=1)
        return
    for _, p in done.machine_paths[:1]:
        warnings.warn(f"mrtr-inspect: {obj.path} mentions the machine path {p!r}; redact it before committing",
                      stacklevel=1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After a passing test body: the misses of its replay fail it (unless allow_misses)."""
    result = yield
    obj = getattr(item, "_mrtr_replay", None)
    if obj is not None and obj.mode == "replay" and not obj.options.get("allow_misses"):
        misses = obj.misses
        if misses:
            lines = "\n".join(f"  {m['request']}: {m['message']}" for m in misses)
            pytest.fail(f"mrtr-inspect: {len(misses)} request(s) matched nothing in {obj.path}:\n{lines}",
                        pytrace=False)
    return result
