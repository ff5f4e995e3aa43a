"""A gateway's back side is a client: probe-client with the test gateway (tests/e2e/hopgw, 2026-07-28
era) as the client under test, the probe server as its upstream over stdio and our small client on
its front (hopgw/driver.py). The correct gateway passes; `--bug answer-not-delivered` (the retry's
answers never go upstream) shows: upstream, the gateway never comes back."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from mrtr_inspect.probe.client_command import probe_client
from mrtr_inspect.probe.client_runner import ClientOptions

ROOT = Path(__file__).resolve().parents[2]
REC = str(ROOT / "fixtures/test_sdk_stdio/test_the_client_completes_every_chain.jsonl")
DRIVER = [sys.executable, "-m", "tests.e2e.hopgw.driver"]


def run(only: tuple[str, ...], *bug: str) -> dict:
    out = io.StringIO()
    probe_client(REC, (*DRIVER, *bug, "--", "{server}"), fmt="json", out=out, err=io.StringIO(),
                 options=ClientOptions(only, None, 90.0))
    return json.loads(out.getvalue())


def test_the_gateway_back_side_echoes_states_and_answers_new_keys():
    doc = run(("state-rotated", "state-only", "extra-round", "unicode-state"))
    assert {p["mutation"]: p["verdict"] for p in doc["probes"]} == {
        "state-rotated": "pass", "state-only": "pass", "extra-round": "pass", "unicode-state": "pass"}, doc["probes"]
    assert not [f for f in doc["findings"] if f["severity"] != "info"], doc["findings"]


def test_answer_not_delivered_shows_on_the_upstream_side():
    """The bug keeps every retry on the front: upstream, the gateway never comes back, not even to a
    state-only result (`client-ignored-state-only`), and never retries a round (skipped)."""
    doc = run(("state-only", "state-rotated"), "--bug", "answer-not-delivered")
    v = {p["mutation"]: (p["verdict"], p["rule"], p["reason"]) for p in doc["probes"]}
    assert v["state-only"][:2] == ("fail", "client-ignored-state-only"), v
    assert v["state-rotated"] == ("skipped", None, "the client did not retry a round whose requestState was rotated")
    assert "client-ignored-state-only" in {f["rule"] for f in doc["findings"]}
