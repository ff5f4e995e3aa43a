"""A real session over stdio (official SDK client and sample server, recorded through
`mrtr-inspect stdio --record` by the plugin), replayed to the real client and verified against a
fresh real server and against servers changed on purpose."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mrtr_inspect.core.events import StdioLine
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.serve import MISS_CODE

from .conftest import FIXTURES, ROOT, SAMPLE, cli, sdk_server
from .sdk_client import EVERY_CHAIN, EXPECTED, call

RECORDING = FIXTURES / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"


@pytest.mark.mrtr_replay(server=SAMPLE)
def test_the_client_completes_every_chain(mrtr_replay):
    assert call(mrtr_replay.command, *EVERY_CHAIN) == [EXPECTED[t] for t in EVERY_CHAIN]
    if mrtr_replay.mode == "replay":
        s = mrtr_replay.summary()
        # discovery, tools/list, and 12 requests in 5 chains: every recorded request asked for once
        assert (s["served"], s["misses"], s["unused"]) == (14, [], [])
        assert [f["rule"] for f in s["findings"] if f["severity"] != "info"] == []


@pytest.mark.mrtr_replay(RECORDING.relative_to(ROOT))
def test_another_order_is_served_with_the_live_ids(mrtr_replay):
    """In any order the chains still complete: the live ids (not the recorded ones) come back, and
    each retry finds its chain by the requestState it was served."""
    order = tuple(reversed(EVERY_CHAIN))
    assert call(mrtr_replay.command, *order) == [EXPECTED[t] for t in order]
    assert mrtr_replay.summary()["served"] == 14


@pytest.mark.mrtr_replay(RECORDING.relative_to(ROOT), allow_misses=True)
def test_a_miss_names_the_closest_request_and_the_field(mrtr_replay):
    lines = call(mrtr_replay.command, "deploy", deploy={"env": "staging"})
    assert lines[0].startswith("deploy: error: mrtr-inspect replay: no recorded request matches tools/call deploy; "
                               "closest: tools/call deploy id=2 (#2, chain c1); ")
    assert 'differs in params.arguments.env: recorded "production", live "staging"' in lines[0]
    [miss] = mrtr_replay.misses
    assert miss["closest_message"] == 2
    assert [d["field"] for d in miss["differences"]] == ["params.arguments.env"]


@pytest.mark.mrtr_replay(RECORDING.relative_to(ROOT), order="strict", allow_misses=True)
def test_strict_order_names_the_request_expected_next(mrtr_replay):
    lines = call(mrtr_replay.command, "release")
    assert "closest: tools/call deploy id=2 (#2, chain c1)" in lines[0]
    assert "strict order: this is the next recorded request" in lines[0]


def test_a_client_that_alters_the_state_misses_and_is_reported(tmp_path):
    """A hand-driven client echoes the served requestState with one character changed: the retry
    matches nothing (the state differs from the one served), and the live session's rules report it,
    live and in the recording of the live session."""
    live = tmp_path / "live.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", "--record", str(live),
                          str(RECORDING)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    recorded = [json.loads(f.data) for f in read_frames(RECORDING) if type(f) is StdioLine and f.direction == "c2s"]
    first = next(m for m in recorded if m.get("method") == "tools/call")
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(json.dumps({**first, "id": 40}).encode() + b"\n")
    p.stdin.flush()
    irr = json.loads(p.stdout.readline())
    assert irr["id"] == 40 and irr["result"]["resultType"] == "input_required"
    state = irr["result"]["requestState"]
    retry = next(m for m in recorded if m.get("params", {}).get("requestState") == state)
    bad = state[:-1] + ("A" if state[-1] != "A" else "B")
    retry = {**retry, "id": 41, "params": {**retry["params"], "requestState": bad}}
    out, err = p.communicate(json.dumps(retry).encode() + b"\n", timeout=60)
    answer = json.loads(out)
    assert answer["id"] == 41 and answer["error"]["code"] == MISS_CODE
    assert "differs in params.requestState" in answer["error"]["message"]
    assert p.returncode == 1
    assert b"request-state-altered" in err and b"1 miss" in err
    report = json.loads(cli("check", str(live), "--format", "json").stdout)
    assert "request-state-altered" in [f["rule"] for f in report["findings"]]


def test_verify_passes_against_a_fresh_server_with_new_sealed_states():
    r = cli("replay", "verify", str(RECORDING), "--", *SAMPLE)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert out.splitlines()[-1] == "14 same, 0 differ, 0 skipped, 0 failed"
    # the fresh server sealed new states, and each of the 7 retries carried the live one
    assert out.count("[sent with the live requestState]") == 7


def test_verify_fails_when_an_input_key_is_renamed():
    r = cli("replay", "verify", str(RECORDING), "--", *sdk_server("--variant", "renamed"))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "  differs  tools/call deploy id=2 (#2, chain c1)" in out
    assert "result.inputRequests.confirm: recorded {" in out and ", live absent" in out
    assert "result.inputRequests.approval: recorded absent, live {" in out
    # the recorded answer (under `confirm`) does not satisfy the live server: it asks again
    assert "the live server asks for a round the recording does not have (inputRequests: approval)" in out
    assert out.splitlines()[-1] == "12 same, 2 differ, 0 skipped, 0 failed"


def test_verify_fails_when_a_round_is_added():
    r = cli("replay", "verify", str(RECORDING), "--", *sdk_server("--variant", "extra-round"))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "the live server asks for a round the recording does not have (inputRequests: reason)" in out
    assert 'result.resultType: recorded "complete", live "input_required"' in out
    assert out.splitlines()[-1] == "13 same, 1 differ, 0 skipped, 0 failed"


@pytest.mark.parametrize("ignore", [("--ignore", "params.requestState"), ("--ignore", "params.arguments.nonce"), ()])
def test_the_real_client_completes_every_chain_whatever_is_ignored(ignore):
    """`--ignore params.requestState` made every retry a miss (`live absent`, though the client
    echoed it): the real client completes every chain with it, as without it (near misses)."""
    command = [sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", *ignore, str(RECORDING)]
    assert call(command, *EVERY_CHAIN) == [EXPECTED[t] for t in EVERY_CHAIN]
