"""pytest: client probes (`mrtr-inspect probe-client`, RULES.md §14) for a client's own test suite.
Registered with the `mrtr_replay` plugin (`mrtr_inspect.replay.plugin` names it in `pytest_plugins`).

    @pytest.mark.mrtr_probe_client("fixtures/session.jsonl", mutations=["state-rotated", "fault-delay"])
    def test_my_client_copes(mrtr_probe_client):
        run_my_client(mrtr_probe_client.url)        # HTTP; over stdio: mrtr_probe_client.command

The test runs once per mutation (`test_my_client_copes[state-rotated]`, …; default: all thirteen),
its body as the client under test against that mutation's probe server; each run's result is the
mutation's verdict: `fail` fails it (with the finding), `skipped` skips it (with the reason), `pass`
passes it. An exception from the body stands, except where the verdict says the client coped by
giving up (the fault mutations, `missing-capability`, `undeclared-kind`, `many-rounds`: an error to
its caller is how a client gives up). Findings the passive rules make of the run's traffic at or
above `fail_on` (default `error`) fail it too. `fault-delay` holds its answer `timeout` seconds
(default 10) and then sends it: a body that only returns after that hung (`client-hung`). Options:
`transport` ('http' default, or 'stdio'), `timeout`, `window`, `fail_on`, `record` (a folder:
each run's traffic, NN-MUTATION.jsonl). `mrtr_probe_client.report` is the verdict as the JSON report
has it, after the body.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ..core.findings import SEVERITIES, Severity

OPTIONS = ("mutations", "transport", "timeout", "window", "fail_on", "record")
MARKER = ("mrtr_probe_client(path, *, mutations=(), transport='http', timeout=10.0, window=2.0, fail_on='error', "
          "record=None): run the test once per client-probe mutation (docs/probe-client.md), its body the client "
          "under test against the probe server (fixture mrtr_probe_client; mrtr-inspect)")
LEVELS = (*SEVERITIES, "never")
# mutations a client passes by giving up: an error raised to its caller (the test body) is the coping
GIVING_UP = frozenset({"fault-delay", "fault-disconnect", "fault-malformed", "missing-capability", "undeclared-kind",
                       "many-rounds"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def _usage(message: str) -> None:
    pytest.fail(f"mrtr-inspect: {message}", pytrace=False)


def _names(marker) -> list[str]:
    from .client_mutations import DIRECTORS

    given = marker.kwargs.get("mutations") or ()
    if isinstance(given, str):
        given = [n.strip() for n in given.split(",") if n.strip()]
    return [str(n) for n in given] or list(DIRECTORS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("mrtr_probe_client")
    if marker is None or "mrtr_probe_client" not in metafunc.fixturenames:
        return
    metafunc.parametrize("_mrtr_probe_mutation", _names(marker), ids=str)


@pytest.fixture
def _mrtr_probe_mutation() -> str:  # parametrized per marker (pytest_generate_tests)
    return ""


class MrtrProbeClient:
    """One mutation's probe server, for the test body (the client under test)."""

    def __init__(self, mutation: str, server: Any) -> None:
        self.mutation = mutation
        self._server = server
        self.report: dict | None = None  # the verdict, after the body

    @property
    def url(self) -> str:
        if not self._server.url:
            _usage("mrtr_probe_client.url: this probe server is served over stdio (transport='stdio'): use .command")
        return self._server.url

    @property
    def command(self) -> list[str]:
        if not self._server.command:
            _usage("mrtr_probe_client.command: this probe server is served over HTTP: use .url, or transport='stdio'")
        return list(self._server.command)


def _options(marker) -> tuple[Path, dict]:
    from .client_mutations import DIRECTORS

    if len(marker.args) != 1:
        _usage("mrtr_probe_client takes one path, the recording")
    unknown = set(marker.kwargs) - set(OPTIONS)
    if unknown:
        _usage(f"mrtr_probe_client: unknown option {', '.join(sorted(unknown))} (known: {', '.join(OPTIONS)})")
    opts = dict(marker.kwargs)
    bad = [n for n in _names(marker) if n not in DIRECTORS]
    if bad:
        _usage(f"mrtr_probe_client: unknown mutation {', '.join(bad)} (known: {', '.join(DIRECTORS)})")
    if opts.get("transport", "http") not in ("http", "stdio"):
        _usage(f"mrtr_probe_client: transport is 'http' or 'stdio', not {opts['transport']!r}")
    if opts.get("fail_on", Severity.ERROR) not in LEVELS:
        _usage(f"mrtr_probe_client: fail_on is one of {', '.join(LEVELS)}, not {opts['fail_on']!r}")
    return Path(marker.args[0]), opts


@pytest.fixture
def mrtr_probe_client(request: pytest.FixtureRequest, _mrtr_probe_mutation: str, tmp_path_factory):
    """The probe server of this run's mutation."""
    from ..replay.script import ScriptError, load_script
    from .client_runner import ClientOptions, ProbeServer

    marker = request.node.get_closest_marker("mrtr_probe_client")
    if marker is None or not _mrtr_probe_mutation:
        _usage("the mrtr_probe_client fixture needs the mrtr_probe_client(path, ...) marker")
    given, opts = _options(marker)
    path = given if given.is_absolute() else request.config.rootpath / given
    try:
        script = load_script(path)
    except ScriptError as e:
        _usage(str(e))
    options = ClientOptions((_mrtr_probe_mutation,), opts.get("transport", "http"), float(opts.get("timeout", 10.0)),
                            float(opts.get("window", 2.0)), "127.0.0.1", opts.get("record"))
    work = tmp_path_factory.mktemp("mrtr-probe-client")
    folder = Path(str(opts["record"])) if opts.get("record") else work
    folder.mkdir(parents=True, exist_ok=True)
    from .client_mutations import DIRECTORS

    n = list(DIRECTORS).index(_mrtr_probe_mutation) + 1
    traffic = folder / f"{n:02d}-{_mrtr_probe_mutation}.jsonl"
    server = ProbeServer(script, _mrtr_probe_mutation, options.transport or "http", options, str(traffic), str(work),
                         None, hold=options.timeout)
    server.start()
    obj = MrtrProbeClient(_mrtr_probe_mutation, server)
    request.node._mrtr_probe_client = (obj, server, opts.get("fail_on", Severity.ERROR), time.monotonic())
    try:
        yield obj
    finally:
        server.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After the body: the mutation's verdict is the test's result."""
    got = getattr(item, "_mrtr_probe_client", None)
    if got is None:
        return (yield)
    obj, server, fail_on, started = got
    raised: BaseException | None = None
    try:
        result = yield
    except Exception as e:
        raised, result = e, None
    from ..core.findings import RANK
    from .client_runner import ClientRun, judge_run

    seconds = time.monotonic() - started
    timeout = server.options.timeout
    hung = seconds >= timeout  # the body ended only once the probe gave up waiting (fault-delay sends late)
    client = ClientRun(True, None if hung else (1 if raised is not None else 0), seconds=seconds,
                       killed_at=(time.time() - seconds + timeout) if hung else None)
    server.stop()
    res, findings = judge_run(server, client)
    obj.report = {**res.to_json(), "findings": [f.to_json() for f in findings]}
    if res.verdict == "skipped":
        pytest.skip(f"mrtr-inspect probe-client {obj.mutation}: {res.reason}")
    if res.verdict == "fail":
        pytest.fail(f"mrtr-inspect probe-client {obj.mutation}: {res.rule}: {res.reason}", pytrace=False)
    over = [f for f in findings if fail_on != "never" and RANK.get(f.severity, 0) >= RANK[fail_on]]
    if raised is not None and obj.mutation not in GIVING_UP:
        raise raised
    if over:
        lines = "\n".join(f"  {f.rule} ({f.severity}): {f.message}" for f in over)
        pytest.fail(f"mrtr-inspect probe-client {obj.mutation}: the client's traffic:\n{lines}", pytrace=False)
    return result

