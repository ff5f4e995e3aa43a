"""pytest: a recording's probes (`mrtr-inspect probe`, RULES.md §12) against the server under test.
Registered with the `mrtr_replay` plugin (`mrtr_inspect.replay.plugin` names it in `pytest_plugins`).

    @pytest.mark.mrtr_probe("fixtures/session.jsonl", server=[sys.executable, "-m", "my_server"],
                            only=["tampered-state"])
    def test_my_server_rejects_a_tampered_state(mrtr_probe):
        assert [p["chain"] for p in mrtr_probe.passed("tampered-state")]   # or just `pass`

The probes run when the fixture is set up; after the test body a failed probe whose finding is at or
above `fail_on` (default `warning`: most of §12's failures are warnings) fails the test, with one line
per failure, unless `allow_failures=True`. `server` is a stdio command (a fresh process per probe
unless `reuse=True`); `upstream` a URL (loopback only unless `allow_remote=True`). The
`mrtr_probe_config` fixture (override it, e.g. to start an HTTP server and give its URL) gives
defaults for every option. `mrtr_probe.report` is the JSON report (`probes`, `findings`…).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from ..core.findings import SEVERITIES, Severity

OPTIONS = ("server", "upstream", "only", "timeout", "max_rounds", "reuse", "fail_on", "allow_remote", "record",
           "allow_failures", "headers")
MARKER = ("mrtr_probe(path, *, server=None, upstream=None, only=(), timeout=30.0, max_rounds=10, reuse=False, "
          "fail_on='warning', allow_remote=False, record=None, allow_failures=False, headers=()): run the "
          "recording's probes (docs/rules.md §12) against the server under test (fixture mrtr_probe; mrtr-inspect, "
          "docs/probes.md)")
LEVELS = (*SEVERITIES, "never")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@pytest.fixture
def mrtr_probe_config() -> dict:
    """Defaults for the mrtr_probe marker's options. Override it."""
    return {}


class MrtrProbe:
    """The probes' outcome: the JSON report, and its probes by verdict."""

    def __init__(self, path: Path, report: dict, fail_on: str) -> None:
        self.path = path
        self.report = report
        self.fail_on = fail_on

    @property
    def probes(self) -> list[dict]:
        return self.report["probes"]

    @property
    def findings(self) -> list[dict]:
        return self.report["findings"]

    def _of(self, verdict: str, mutation: str | None) -> list[dict]:
        return [p for p in self.probes if p["verdict"] == verdict and (mutation is None or p["mutation"] == mutation)]

    def passed(self, mutation: str | None = None) -> list[dict]:
        return self._of("pass", mutation)

    def failed(self, mutation: str | None = None) -> list[dict]:
        return self._of("fail", mutation)

    def skipped(self, mutation: str | None = None) -> list[dict]:
        return self._of("skipped", mutation)

    def failing(self) -> list[dict]:
        """The failures' findings at or above `fail_on`."""
        from ..core.findings import RANK

        if self.fail_on == "never":
            return []
        bar = RANK[self.fail_on]
        kinds = {(p["chain"], p["rule"]) for p in self.failed()}
        return [f for f in self.findings if (f["chain"], f["rule"]) in kinds and RANK.get(f["severity"], 0) >= bar
                and (f.get("details") or {}).get("probe")]


def _usage(message: str) -> None:
    pytest.fail(f"mrtr-inspect: {message}", pytrace=False)


def _options(request: pytest.FixtureRequest, config: dict) -> tuple[Any, dict]:
    if not isinstance(config, dict):
        _usage(f"the mrtr_probe_config fixture returns a dict, not {config!r}")
    marker = request.node.get_closest_marker("mrtr_probe")
    opts = dict(config)
    path = opts.pop("path", None)
    if marker is not None:
        if len(marker.args) > 1:
            _usage("mrtr_probe takes one path")
        path = marker.args[0] if marker.args else marker.kwargs.get("path", path)
        opts.update({k: v for k, v in marker.kwargs.items() if k != "path"})
    unknown = set(opts) - set(OPTIONS)
    if unknown:
        _usage(f"mrtr_probe: unknown option {', '.join(sorted(map(str, unknown)))} (known: path, {', '.join(OPTIONS)})")
    if not isinstance(path, (str, os.PathLike)):
        _usage("mrtr_probe: give the recording to probe (a path, from the rootdir)")
    if bool(opts.get("server")) == bool(opts.get("upstream")):
        _usage("mrtr_probe: give the server under test: server=[a stdio command] or upstream=URL (one of them)")
    if opts.get("fail_on", Severity.WARNING) not in LEVELS:
        _usage(f"mrtr_probe: fail_on is one of {', '.join(LEVELS)}, not {opts['fail_on']!r}")
    only = opts.get("only", ())
    if isinstance(only, str):
        only = tuple(n.strip() for n in only.split(",") if n.strip())
    opts["only"] = tuple(only)
    return path, opts


@pytest.fixture
def mrtr_probe(request: pytest.FixtureRequest, mrtr_probe_config: dict) -> MrtrProbe:
    """The recording's probes, run against the server under test."""
    from ..errors import UserError
    from .command import probe
    from .runner import ProbeOptions

    given, opts = _options(request, mrtr_probe_config)
    path = Path(given)
    if not path.is_absolute():
        path = request.config.rootpath / path
    options = ProbeOptions(opts["only"], float(opts.get("timeout", 30.0)), int(opts.get("max_rounds", 10)),
                           bool(opts.get("reuse")))
    fail_on = opts.get("fail_on", Severity.WARNING)
    try:
        _, _, report = probe(str(path), upstream=opts.get("upstream"),
                             cmd=tuple(str(a) for a in opts.get("server") or ()), options=options, fmt="json",
                             fail_on=fail_on, allow_remote=bool(opts.get("allow_remote")),
                             record=str(opts["record"]) if opts.get("record") else None,
                             headers=tuple(opts.get("headers") or ()), out=io.StringIO())
    except UserError as e:
        pytest.fail(f"mrtr-inspect: {e}", pytrace=False)
    obj = MrtrProbe(path, report, fail_on)
    request.node._mrtr_probe = (obj, bool(opts.get("allow_failures")))
    return obj


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After a passing test body: failed probes at or above fail_on fail it (unless allow_failures)."""
    result = yield
    got = getattr(item, "_mrtr_probe", None)
    if got is not None and not got[1]:
        failing = got[0].failing()
        if failing:
            lines = "\n".join(f"  {f['rule']} ({f['severity']}): {f['message']}" for f in failing)
            from ..core.findings import plural
            pytest.fail(f"mrtr-inspect: {plural(len(failing), 'probe')} of {got[0].path} failed:\n{lines}", pytrace=False)
    return result
