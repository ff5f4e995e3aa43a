"""pytest plugin (entry point `pytest11`): recordings served to the code under test.

    @pytest.mark.mrtr_replay(server=[sys.executable, "-m", "my_server"])
    def test_my_client(mrtr_replay):
        assert run_my_client(mrtr_replay.command) == ...        # stdio: a server command line

    @pytest.mark.mrtr_replay(transport="http", server=["my-server", "--port", "{port}"])
    def test_my_client_http(mrtr_replay):
        assert run_my_client(mrtr_replay.url) == ...            # HTTP: the server's URL

The recording is `<rootdir>/fixtures/<test module>/<test name>.jsonl` (ini `mrtr_fixtures_dir`, or a
path given to the marker). Record modes, as pytest-recording has them (`--mrtr-record-mode`):

* `none`: only replay; a missing recording fails the test (the default when `CI` is set, and not
  empty, 0, false, no or off);
* `once`: replay when the recording exists, else record it (the default otherwise);
* `new_episodes`: record again, adding the sessions that are new to the recording;
* `all`: record again, replacing the recording: once per session for each recording, by the first test
  that names a server to record it from; tests without one (and later tests sharing it) replay it.
  A recording that means what the fixture did (meaning.py: times, ids, sealed states aside) leaves
  the fixture as it was, in both.

To record, the marker names the real server: `server=[...]` (a stdio command; with
`transport="http"` an HTTP server whose `{port}` is filled in) or `upstream=URL`. The test then
talks to the real server through `mrtr-inspect stdio --record` (or the HTTP proxy), and the session
is exported as a fixture (`export --to fixture`: redacted, machine details out of its headers),
unless the test failed: a failing test leaves the fixture as it was (a warning says where its
session is kept). Paths redacted when recording (the marker's, `mrtr_config`'s and the project
settings' `redact_paths`) are redacted in the live requests too before matching: the same secret
matches its placeholder, and a recording made with another machine's redaction key matches any
redacted value there (docs/replay.md, "Redacted values").

In replay, a request that matches no recorded one is answered with a JSON-RPC error naming the
closest recorded request; after the test body, misses fail the test unless `allow_misses=True`.
Over stdio every process started from `mrtr_replay.command` replays the recording from its start
(as a new server process would be new) and keeps a summary of its own; the test's verdict and
`mrtr_replay.misses`, `.findings` (the live client checked by the rules, e.g.
`request-state-altered`), `.summary()` count them all.

`mrtr_config` (a fixture to override) gives defaults for every marker option, and the redaction
hooks applied when recording: `redact_paths`, `redact_headers`, `before_record(frame) -> frame | None`.
Options are checked before anything starts: a wrong one is a one-line error of the test.
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

MODES = ("none", "once", "new_episodes", "all")
OPTIONS = ("server", "upstream", "transport", "order", "ignore", "pace", "allow_repeats", "allow_misses",
           "redact_paths", "redact_headers", "before_record", "match_on", "faults", "fault_seed")
MARKER = ("mrtr_replay(path=None, *, server=None, upstream=None, transport=None, order='any', ignore=(), "
          "pace=False, allow_repeats=False, allow_misses=False, redact_paths=(), redact_headers=(), "
          "before_record=None, match_on=(), faults=(), fault_seed=None): serve a recording to the code under test, or record it from the real server "
          "(fixture mrtr_replay; mrtr-inspect, docs/replay.md)")
_MATCHERS: dict[str, Any] = {}  # register_matcher's
_DEFAULT_PATHS = pytest.StashKey[dict]()  # default recording path -> nodeids of the tests that use it
_RECORDED = pytest.StashKey[set]()  # recordings made again in this session (record mode all)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mrtr-inspect", "mrtr-inspect recordings (mrtr_replay marker)")
    group.addoption("--mrtr-record-mode", choices=MODES, default=None,
                    help="none: only replay; once: record what has no recording yet; new_episodes: record "
                         "again, adding what is new to the recording; all: record again, replacing it (kept as it "
                         "was when nothing meaningful changed). Default: none when CI is set, else once.")
    parser.addini("mrtr_fixtures_dir", "Where recordings named after tests live, from the rootdir.", default="fixtures")
    parser.addini("mrtr_start_timeout", "Seconds a server to record (or the recording proxy) may take to listen.",
                  default="60")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    config.stash[_DEFAULT_PATHS] = {}
    config.stash[_RECORDED] = set()


def on_ci() -> bool:
    """Whether `CI` says this is a CI run: set, and not empty, 0, false, no or off."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def record_mode(config: pytest.Config) -> str:
    mode = config.getoption("--mrtr-record-mode", default=None)
    return mode or ("none" if on_ci() else "once")


def register_matcher(name: str, fn) -> None:
    """A custom matcher that `match_on=[name]` names, as vcrpy's `register_matcher`: `fn(recorded,
    live)` is given the two requests as JSON values and returns None (or True) when the recorded one
    may answer the live one, False or a reason (str) when not, or raises AssertionError. Over stdio
    it runs in the replay process: a function at module level of an importable module."""
    if not isinstance(name, str) or not name or name == "answers" or not callable(fn):
        raise ValueError("register_matcher(name, fn): a name other than 'answers', and a function of (recorded, live)")
    _MATCHERS[name] = fn


@pytest.fixture
def mrtr_config() -> dict:
    """Defaults for the mrtr_replay marker's options, and the redaction hooks. Override it."""
    return {}


def _given_path(node: pytest.Item) -> Any:
    """The path the marker gives (None: the default one)."""
    marker = node.get_closest_marker("mrtr_replay")
    if marker is None:
        return None
    if len(marker.args) > 1 or (marker.args and "path" in marker.kwargs):
        _usage(f"mrtr_replay takes one path, not {len(marker.args) + ('path' in marker.kwargs)}")
    given = marker.args[0] if marker.args else marker.kwargs.get("path")
    if given is not None and not isinstance(given, (str, os.PathLike)):
        _usage(f"mrtr_replay: the path is a str or a Path, not {_shown(given)}")
    return given


def _default_path(node: pytest.Item, config: pytest.Config) -> Path:
    name = node.name
    cls = getattr(node, "cls", None)
    if cls is not None:
        name = f"{cls.__name__}.{name}"
    name = re.sub(r"[^\w.\[\]=-]+", "_", name)
    return config.rootpath / config.getini("mrtr_fixtures_dir") / Path(str(node.path)).stem / f"{name}.jsonl"


def _uses_default_path(item: pytest.Item) -> bool:
    """The test replays (or records) the recording named after it: it uses the mrtr_replay fixture,
    its marker gives no path, and the mrtr_recording_path fixture is this plugin's."""
    if "mrtr_replay" not in getattr(item, "fixturenames", ()):
        return False
    marker = item.get_closest_marker("mrtr_replay")
    if marker is not None and (marker.args or marker.kwargs.get("path")):
        return False
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get("mrtr_recording_path")
    func = getattr(defs[-1], "func", None) if defs else None
    return func is None or (getattr(func, "__module__", None) == __name__
                            and getattr(func, "__name__", None) == "mrtr_recording_path")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Which tests use which default recording, over everything collected (before -k or -m
    deselect any): two tests named alike in modules of the same name, or with ids that differ only
    in what the file name cannot hold (`[a/b]`, `[a_b]`), would share one recording unasked."""
    paths: dict[Path, list[str]] = config.stash[_DEFAULT_PATHS]
    for item in items:
        if _uses_default_path(item):
            paths.setdefault(_default_path(item, config), []).append(item.nodeid)


@pytest.fixture
def mrtr_recording_path(request: pytest.FixtureRequest) -> Path:
    """The recording the test replays (or records)."""
    given = _given_path(request.node)
    root = request.config.rootpath
    if given:
        p = Path(given)
        return p if p.is_absolute() else root / p
    path = _default_path(request.node, request.config)
    users = request.config.stash[_DEFAULT_PATHS].get(path, [])
    others = [n for n in users if n != request.node.nodeid]
    if others:
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        _usage(f"{request.node.nodeid} and {', '.join(others)} would share the recording {shown}: give each "
               "its own path (@pytest.mark.mrtr_replay('fixtures/….jsonl'), or an mrtr_recording_path fixture in "
               "a conftest.py), or give them the same path in the marker to share it on purpose")
    return path


class WrongTransport(AttributeError):
    """`mrtr_replay.command` of a test served over HTTP, or `.url` of one over stdio."""


class MrtrReplay:
    """What the test gets: where to reach the (replayed or real) server, and what happened."""

    def __init__(self, path: Path, mode: str, transport: str, options: dict) -> None:
        self.path = path
        self.mode = mode  # replay | record
        self.record_mode = "once"  # --mrtr-record-mode (how a recording replaces the fixture)
        self.transport = transport
        self.options = options
        self._command: list[str] | None = None  # stdio: the server command line to start
        self._url: str | None = None  # HTTP: the server's URL
        self._summary_dir: Path | None = None  # stdio: where each replay process keeps its summary
        self._http: Any = None  # BackgroundHttpServer
        self._procs: list[subprocess.Popen] = []
        self._raw: Path | None = None
        self._stderr: Path | None = None  # record: what the server to record wrote on stderr
        self.cwd: Path | None = None  # record: where the server to record runs (the rootdir)

    @property
    def command(self) -> list[str]:
        """Over stdio, the server command line for the code under test to start."""
        if self._command is None:
            raise WrongTransport(self._wrong_transport("command"))
        return self._command

    @command.setter
    def command(self, value: list[str]) -> None:
        self._command = value

    @property
    def url(self) -> str:
        """Over HTTP, the URL of the (replayed or recorded) server."""
        if self._url is None:
            raise WrongTransport(self._wrong_transport("url"))
        return self._url

    @url.setter
    def url(self, value: str | None) -> None:
        self._url = value

    def _wrong_transport(self, asked: str) -> str:
        """Why `asked` has no value (the fixture runs over the other transport), and how to get it."""
        http = self.transport == "http"
        name = "HTTP" if http else "stdio"
        other = "url" if asked == "command" else "command"
        if self.options.get("transport"):
            why = f"the marker gives transport={self.transport!r}"
        elif self.mode == "replay":
            why = f"the recording {self.path} was recorded over {name}"
        else:
            why = "the marker names upstream=URL" if http else "the marker names a server command"
        wanted = "stdio" if http else "http"
        how = f"give the marker transport={wanted!r}"
        if self.mode == "record":
            how += (" with server=[...] a stdio server command" if http
                    else " with server=[...] an HTTP server command (its {port} filled in) or upstream=URL")
        else:
            how += " (a recording replays over either transport)"
        return (f"mrtr_replay.{asked}: this test's server runs over {name} ({why}), so it has no {asked}: "
                f"use mrtr_replay.{other} (mrtr_replay.transport says which one is set), or {how}")

    def summary(self) -> dict | None:
        """The replay so far: served, misses, unused, findings (None before the code under test
        started the stdio command). Over stdio, of every process started from `command`: counts
        added, misses and findings of all, unused what none of them served; `processes` says how
        many. While recording: the session recorded so far, checked by the rules (`mode`
        "record", `messages`, `chains`, `findings`; `processes`, the sessions recorded)."""
        if self.mode == "record":
            return self._recorded()
        if self._http is not None:
            return self._http.session.summary()
        if self._summary_dir is None:
            return None
        files = sorted(self._summary_dir.glob("summary-*.json"), key=lambda f: (f.stat().st_mtime_ns, f.name))
        return merge_summaries([json.loads(f.read_text(encoding="utf-8")) for f in files]) if files else None

    def _recorded(self) -> dict:
        from ..api import analysed

        out: dict[str, Any] = {"mode": "record", "recording": str(self.path), "served": 0, "misses": [], "unused": [],
                               "messages": 0, "chains": 0, "findings": [], "processes": 0}
        if self._raw is None or not self._raw.exists() or not self._raw.stat().st_size:
            return out
        builder = analysed([self._raw])
        try:
            report = builder.to_dict()
        finally:
            builder.close()
        from ..core.events import SessionStart
        from ..recording.reader import read_frames

        out.update(messages=report["summary"]["messages"], chains=len(report["chains"]), findings=report["findings"],
                   processes=sum(type(f) is SessionStart for f in read_frames(self._raw)))
        return out

    @property
    def misses(self) -> list[dict]:
        s = self.summary()
        return s["misses"] if s else []

    @property
    def findings(self) -> list[dict]:
        s = self.summary()
        return s["findings"] if s else []


def _usage(message: str) -> None:
    """A wrong option: the test errors with one line, no traceback."""
    pytest.fail(f"mrtr-inspect: {message}", pytrace=False)


def _shown(value: Any) -> str:
    return f"the {type(value).__name__} {value!r}"


def _check(opts: dict, where: str) -> None:
    """The option values, checked before anything starts: a typo must not be ignored silently (an
    `order` other than 'strict' was 'any') nor take a meaning of its own (a str as `ignore` was a
    tuple of its characters)."""
    for key, value in opts.items():
        if key in ("ignore", "redact_paths", "redact_headers"):
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                hint = f" (write {key}=[{value!r}])" if isinstance(value, str) else ""
                _usage(f"{where} {key} is a list of strings, not {_shown(value)}{hint}")
        elif key == "server":
            if (value is not None and (not isinstance(value, (list, tuple)) or not value
                                       or not all(isinstance(v, (str, os.PathLike, int)) for v in value))):
                _usage(f"{where} server is a command line as a list of strings, not {_shown(value)}")
        elif key == "upstream":
            if value is not None and not isinstance(value, str):
                _usage(f"{where} upstream is a URL (str), not {_shown(value)}")
        elif key == "transport":
            if value not in (None, "stdio", "http"):
                _usage(f"{where} transport is 'stdio' or 'http', not {value!r}")
        elif key == "order":
            if value not in ("any", "strict"):
                _usage(f"{where} order is 'any' or 'strict', not {value!r}")
        elif key in ("pace", "allow_repeats", "allow_misses"):
            if not isinstance(value, bool):
                _usage(f"{where} {key} is True or False, not {_shown(value)}")
        elif key == "match_on":
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) or callable(v) for v in value):
                _usage(f"{where} match_on is a list of matcher names ('answers', or one given to register_matcher) "
                       f"and functions, not {_shown(value)}")
            unknown = [v for v in value if isinstance(v, str) and v != "answers" and v not in _MATCHERS]
            if unknown:
                _usage(f"{where} match_on: no matcher {unknown[0]!r} (known: 'answers'"
                       + "".join(f", {n!r}" for n in _MATCHERS) + "; register_matcher(name, fn) adds one)")
        elif key == "faults":
            from .faults import parse_fault

            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                hint = f" (write {key}=[{value!r}])" if isinstance(value, str) else ""
                _usage(f"{where} faults is a list of strings, KIND[:ARG][@WHICH], not {_shown(value)}{hint}")
            for v in value:
                try:
                    parse_fault(v)
                except ValueError as e:
                    _usage(f"{where} faults: {e}")
        elif key == "fault_seed":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                _usage(f"{where} fault_seed is an integer, not {_shown(value)}")
        elif key == "before_record":
            if value is not None and not callable(value):
                _usage(f"{where} before_record is a function of a frame, not {_shown(value)}")


def merge_summaries(parts: list[dict]) -> dict:
    """One summary of several replay processes of one recording (each replayed it from its start)."""
    out = dict(parts[0])
    for key in ("served", "synthesized"):
        out[key] = sum(p.get(key, 0) for p in parts)
    out["misses"] = [m for p in parts for m in p["misses"]]
    out["findings"] = [f for p in parts for f in p["findings"]]
    out["unused"] = [u for u in parts[0]["unused"] if all(u in p["unused"] for p in parts[1:])]
    out["processes"] = len(parts)
    return out


def _options(request: pytest.FixtureRequest, config: dict) -> dict:
    if not isinstance(config, dict):
        _usage(f"the mrtr_config fixture returns a dict, not {_shown(config)}")
    unknown = set(config) - set(OPTIONS)
    if unknown:
        _usage(f"mrtr_config: unknown key {', '.join(sorted(map(str, unknown)))} (known: {', '.join(OPTIONS)})")
    _check(config, "mrtr_config:")
    opts = dict(config)
    marker = request.node.get_closest_marker("mrtr_replay")
    if marker is not None:
        unknown = set(marker.kwargs) - set(OPTIONS) - {"path"}
        if unknown:
            _usage(f"mrtr_replay: unknown option {', '.join(sorted(unknown))} (known: {', '.join(OPTIONS)})")
        given = {k: v for k, v in marker.kwargs.items() if k in OPTIONS}
        _check(given, "mrtr_replay:")
        opts.update(given)
    return opts


@pytest.fixture
def mrtr_replay(request: pytest.FixtureRequest, mrtr_config: dict, mrtr_recording_path: Path,
                tmp_path_factory: pytest.TempPathFactory):
    """The recording served to the test (or, in record mode, the real server, recorded)."""
    opts = _options(request, mrtr_config)
    mode = record_mode(request.config)
    path = mrtr_recording_path
    work = tmp_path_factory.mktemp("mrtr-replay")  # not the test's tmp_path: its files are its own
    if mode == "none" and not path.exists():
        pytest.fail(f"mrtr-inspect: no recording at {path} (record mode none: run with --mrtr-record-mode=once "
                    "to record it from the real server)", pytrace=False)
    if _records(request.config, mode, path, opts):
        request.config.stash[_RECORDED].add(path.resolve())
        obj = _start_recording(path, opts, work, _start_timeout(request.config), request.config.rootpath)
        obj.record_mode = mode
    else:
        obj = _start_replay(path, opts, work)
    request.node._mrtr_replay = obj
    try:
        yield obj
    finally:
        _finish(obj, getattr(request.node, "_mrtr_failed", False))


def _records(config: pytest.Config, mode: str, path: Path, opts: dict) -> bool:
    """Whether the test records (else it replays). A missing recording is recorded (where it cannot
    be, the test says why). In mode `all` an existing one is recorded again by the first test of the
    session that names a server for it: a test without one replays it (there is nothing to record
    from), and so do later tests sharing it, which would otherwise overwrite it each in turn."""
    if not path.exists():
        return True
    return (mode in ("all", "new_episodes") and bool(opts.get("server") or opts.get("upstream"))
            and path.resolve() not in config.stash[_RECORDED])


def _start_timeout(config: pytest.Config) -> float:
    raw = config.getini("mrtr_start_timeout")
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(f"mrtr-inspect: mrtr_start_timeout is a number of seconds, not {raw!r}") from None


def _start_replay(path: Path, opts: dict, work: Path) -> MrtrReplay:
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
    # what was redacted when recording holds a placeholder: the live value is redacted there too
    # (in process here; by `replay serve --redact-path` over stdio, which adds the project's settings)
    redact = tuple(opts.get("redact_paths", ()))
    match_on = list(opts.get("match_on", ()))
    answers = "answers" in match_on
    custom = [(m, _MATCHERS[m]) if isinstance(m, str) else (getattr(m, "__name__", "custom"), m)
              for m in match_on if m != "answers"]
    if transport == "http":
        from ..recording.writer import redactor_for
        from ..errors import UserError
        from ..settings import load_project

        try:
            project, _ = load_project()
        except UserError as e:
            pytest.fail(f"mrtr-inspect: {e}", pytrace=False)
        project.redact_paths = [*project.redact_paths, *redact]
        from .faults import parse_fault

        options = ServeOptions(order, ignore, bool(opts.get("allow_repeats")), bool(opts.get("pace")),
                               redactor=redactor_for(project), answers=answers, custom=tuple(custom),
                               faults=tuple(parse_fault(f) for f in opts.get("faults", ())),
                               fault_seed=opts.get("fault_seed"))
        obj._http = BackgroundHttpServer(ServeSession(script, options, "http"))
        obj.url = obj._http.start()
        return obj
    obj._summary_dir = work
    # each process started from the command keeps its own summary (serve.summary_file); one file for
    # all would hold only the last process's, hiding the misses of the others
    cmd = [sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", "--quiet",
           "--summary", str(work / "summary-{pid}.json")]
    if order == "strict":
        cmd.append("--strict")
    for p in ignore:
        cmd += ["--ignore", p]
    for p in redact:
        cmd += ["--redact-path", p]
    cmd += ["--allow-repeats"] * bool(opts.get("allow_repeats")) + ["--pace"] * bool(opts.get("pace"))
    for f in opts.get("faults", ()):
        cmd += ["--fault", f]
    if opts.get("fault_seed") is not None:
        cmd += ["--fault-seed", str(opts["fault_seed"])]
    cmd += ["--match-on", "answers"] * answers
    for name, fn in custom:
        where, ref = _importable(name, fn)
        cmd += ["--python-path", where, "--match-on", ref]
    obj.command = cmd + [str(path)]
    return obj


def _importable(name: str, fn) -> tuple[str, str]:
    """Where the replay process imports a custom matcher from, and its MODULE:FUNCTION."""
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    file = getattr(sys.modules.get(module or ""), "__file__", None)
    if not module or not file or "<" in qual:
        _usage(f"match_on: the matcher {name!r} runs in the replay process over stdio: give a function defined "
               "at module level (not a lambda, a local function or a method)")
    base = Path(file).resolve().parent
    for _ in range(module.count(".") + (Path(file).name == "__init__.py")):
        base = base.parent
    return str(base), f"{module}:{qual}"


def _start_recording(path: Path, opts: dict, work: Path, timeout: float, root: Path) -> MrtrReplay:
    server, upstream = opts.get("server"), opts.get("upstream")
    if not server and not upstream:
        pytest.fail(f"mrtr-inspect: nothing to record {path} from: give the mrtr_replay marker server=[...] "
                    "or upstream=URL", pytrace=False)
    transport = opts.get("transport") or ("http" if upstream else "stdio")
    obj = MrtrReplay(path, "record", transport, opts)
    obj._raw = work / "mrtr-recorded.jsonl"
    obj._stderr = work / "server-stderr.txt"
    obj.cwd = root
    if transport == "stdio":
        # the server runs from the rootdir (where its fixture is found), whatever pytest's cwd
        obj.command = [sys.executable, "-m", "mrtr_inspect.replay.launch", str(root), str(obj._stderr), "--",
                       sys.executable, "-m", "mrtr_inspect", "stdio", "--quiet", "--record", str(obj._raw), "--",
                       *[str(a) for a in server]]
        return obj
    try:
        _start_http_recording(obj, server, upstream, timeout, root)
    except BaseException:
        # the fixture has not yielded: its teardown will not run, so what started stops here
        _stop(obj)
        raise
    return obj


def _start_http_recording(obj: MrtrReplay, server: list | None, upstream: str | None, timeout: float,
                          root: Path) -> None:
    port = _free_port()
    if server:
        assert obj._stderr is not None
        with open(obj._stderr, "ab") as err:
            obj._procs.append(subprocess.Popen([str(a).replace("{port}", str(port)) for a in server], cwd=root,
                                               stderr=err))
        _wait_port(port, obj._procs[-1], timeout, obj._stderr)
    url = (upstream or "http://127.0.0.1:{port}/mcp").replace("{port}", str(port))
    proxy = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "--upstream", url, "--listen", "127.0.0.1:0",
                              "--record", str(obj._raw), "--quiet"], stderr=subprocess.PIPE, text=True)
    obj._procs.append(proxy)
    obj.url = _listening(proxy, timeout)
    if obj._url is None:
        _stop(obj)
        pytest.fail(f"mrtr-inspect: the recording proxy did not start (exit status {proxy.wait()})", pytrace=False)


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


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, stderr: Path | None = None) -> None:
    """Until the server accepts connections (it says so no other way), or exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    why = f"exited with status {proc.returncode}" if proc.poll() is not None else f"within {timeout:g} s"
    said = _tail(stderr)
    pytest.fail(f"mrtr-inspect: the server to record did not listen on port {port} ({why}; ini option "
                "mrtr_start_timeout)" + (f"; its stderr ends:\n{said}" if said else ""), pytrace=False)


def _tail(path: Path | None, lines: int = 12, chars: int = 2000) -> str:
    """The end of what a server wrote on stderr, indented (empty when it said nothing)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace") if path is not None else ""
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in text[-chars:].strip("\n").splitlines()[-lines:])


def _died_unanswered(obj: MrtrReplay) -> str | None:
    """Over stdio, while recording: a session in which the server exited without answering
    anything, told with its exit status and the end of its stderr (the client only sees the
    connection close)."""
    from ..core.events import Direction, SessionEnd, StdioLine
    from ..recording.reader import read_frames

    if obj._raw is None or obj.transport != "stdio" or not obj._raw.exists():
        return None
    answered, status = False, None
    try:
        for f in read_frames(obj._raw):
            t = type(f)
            if t is StdioLine and f.direction == Direction.S2C:
                answered = True
            elif t is SessionEnd:
                code = f.info.get("exit") if isinstance(f.info, dict) else None
                if not answered and isinstance(code, int):
                    status = code
                    break
                answered = False
    except Exception:  # an unreadable recording is said when it is exported
        return None
    if status is None:
        return None
    said = _tail(obj._stderr)
    return (f"mrtr-inspect: the server to record exited before answering (exit status {status}; it ran from "
            f"the rootdir {obj.cwd})" + (f"; its stderr ends:\n{said}" if said else "; it wrote nothing on stderr"))


def _stop(obj: MrtrReplay) -> None:
    """Stop what the fixture started: the replay server, the server to record and the proxy."""
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


def _finish(obj: MrtrReplay, failed: bool) -> None:
    _stop(obj)
    if obj._stderr is not None and obj._stderr.exists():  # the server's stderr, in the test's captured output
        sys.stderr.write(obj._stderr.read_text(encoding="utf-8", errors="replace"))
    if obj.mode == "record" and obj._raw is not None:
        _save(obj, failed)
        obj._raw = None


def _save(obj: MrtrReplay, failed: bool) -> None:
    from ..errors import UserError
    from .export import export_fixture

    assert obj._raw is not None
    if not obj._raw.exists():
        warnings.warn(f"mrtr-inspect: nothing was recorded for {obj.path}", stacklevel=1)
        return
    if failed:
        # a failing test's session (a server that crashed, an answer that changed) would be replayed
        # as the truth from then on: the fixture stays as it was, and the next run records again
        kept = "is left as it was" if obj.path.exists() else "is not written"
        warnings.warn(f"mrtr-inspect: {obj.path} {kept}: the test failed while recording it; the "
                      f"session recorded is at {obj._raw}", stacklevel=1)
        return
    o = obj.options
    hook = o.get("before_record")
    exported = obj._raw.with_name("mrtr-fixture.jsonl")
    try:
        done = export_fixture(str(obj._raw), str(exported), redact_paths=o.get("redact_paths", ()),
                              redact_headers=o.get("redact_headers", ()),
                              before_write=_guarded(hook) if hook is not None else None, how="redact_paths")
    except UserError as e:  # unplayable, or unwritable
        warnings.warn(f"mrtr-inspect: {obj.path} not written: {e}", stacklevel=1)
        return
    except _HookFailed as e:
        pytest.fail(f"mrtr-inspect: {obj.path} is not written: {e} (the session recorded is at {obj._raw})",
                    pytrace=False)
    try:
        _replace_fixture(obj, exported)
    except UserError as e:
        warnings.warn(f"mrtr-inspect: {obj.path} not written: {e}", stacklevel=1)
        return
    for _, p in done.machine_paths[:1]:
        warnings.warn(f"mrtr-inspect: {obj.path} mentions the machine path {p!r}; redact it before committing",
                      stacklevel=1)
    for note in done.notes:  # a redaction path that matched nothing, a value that looks like a secret
        warnings.warn(f"mrtr-inspect: {obj.path}: {note}", stacklevel=1)


def _replace_fixture(obj: MrtrReplay, exported: Path) -> None:
    """The fixture from the session exported: as it is where there was none; the file kept as it was
    when nothing meaningful changed (meaning.py: ids, times, sealed states, session ids…), so that
    re-recording leaves no diff to review; in `new_episodes`, the sessions that are new added to it."""
    from ..recording import format as fmt
    from ..recording.files import write_private
    from ..recording.reader import read_frames
    from .meaning import session_meaning, sessions

    if not obj.path.exists():
        write_private(str(obj.path), exported.read_bytes())
        return
    old = sessions(obj.path)
    if obj.record_mode != "new_episodes":
        if sessions(exported) != old:
            write_private(str(obj.path), exported.read_bytes())
        return
    frames: dict[str, list] = {}
    for f in read_frames(exported):
        frames.setdefault(f.session, []).append(f)
    new = [fs for fs in frames.values() if session_meaning(fs) not in old]
    if new:
        data = obj.path.read_bytes()
        data += (b"" if not data or data.endswith(b"\n") else b"\n") + b"".join(fmt.encode(f) for fs in new for f in fs)
        write_private(str(obj.path), data)


class _HookFailed(Exception):
    """before_record raised, or returned what is not a frame."""


def _guarded(hook):
    from ..core import events

    kinds = tuple(getattr(events, n) for n in ("SessionStart", "SessionEnd", "StdioLine", "StdioClose", "HttpRequest",
                                                "HttpResponse", "HttpBody", "SseEvent", "HttpEnd"))

    def call(frame):
        try:
            out = hook(frame)
        except Exception as e:
            raise _HookFailed(f"before_record raised {type(e).__name__}: {e} on a {type(frame).__name__} frame "
                              f"(docs/replay.md: before_record)") from None
        if out is not None and not isinstance(out, kinds):
            raise _HookFailed(f"before_record returned {_shown(out)} for a {type(frame).__name__} frame: return the "
                              "frame (changed with dataclasses.replace) or None to drop it")
        return out

    return call


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The test's outcome, for the fixture's teardown: a failing test does not write its recording."""
    report = yield
    if report.when in ("setup", "call") and report.failed:
        item._mrtr_failed = True
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After a passing test body: the misses of its replay fail it (unless allow_misses)."""
    obj = getattr(item, "_mrtr_replay", None)
    died = None
    try:
        result = yield
    except Exception:
        died = _died_unanswered(obj) if obj is not None and obj.mode == "record" else None
        if died is None:
            raise
    if died is None and obj is not None and obj.mode == "record":
        died = _died_unanswered(obj)
    if died is not None:  # instead of what the client raised (the SDK's "Connection closed")
        pytest.fail(died, pytrace=False)
    if obj is not None and obj.mode == "replay" and not obj.options.get("allow_misses"):
        misses = obj.misses
        if misses:
            lines = "\n".join(f"  {m['request']}: {m['message']}" for m in misses)
            hint = ""
            if record_mode(item.config) != "all":
                hint = ("\n  if the code under test changed on purpose, record the fixture again: pytest "
                        "--mrtr-record-mode=all" + ("" if obj.options.get("server") or obj.options.get("upstream")
                                                    else " (the marker needs server=[...] or upstream=URL)"))
            from ..core.findings import plural
            pytest.fail(f"mrtr-inspect: {plural(len(misses), 'request')} matched nothing in {obj.path}:\n{lines}{hint}",
                        pytrace=False)
    return result


# The probes' markers and fixtures (`mrtr_probe`, mrtr_inspect/probe/plugin.py; `mrtr_probe_client`,
# mrtr_inspect/probe/client_plugin.py) come with this plugin.
pytest_plugins = ("mrtr_inspect.probe.plugin", "mrtr_inspect.probe.client_plugin")
