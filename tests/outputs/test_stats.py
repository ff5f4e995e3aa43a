"""`mrtr-inspect stats`: per method and target, chains, outcomes, rounds and the percentiles of the
whole chain, the server's time and the user's answering time, on traffic whose times are known."""

from __future__ import annotations

import json

import pytest

from mrtr_inspect.outputs.stats import percentiles
from tests.outputs.conftest import run_cli, save
from tests.traffic import ACCEPT, ELICIT, Traffic


def fleet() -> Traffic:
    """deploy ×3: the user answers in 1, 2 and 4 s, the server takes 1 ms per exchange (Traffic's
    tick); the third fails after the answer. greet ×1: one round-trip, no rounds."""
    t = Traffic("stdio")
    for n, wait in enumerate((1.0, 2.0, 4.0)):
        a = t.tool("deploy", {"n": n})
        t.irr(a, {"confirm": ELICIT}, state=f"st{n}")
        t.tick(wait)
        b = t.tool("deploy", {"n": n}, inputResponses={"confirm": ACCEPT}, requestState=f"st{n}")
        if n < 2:
            t.result(b, {"content": []})
        else:
            t.error(b, -32603, "failed")
    c = t.call("prompts/get", {"name": "greet"})
    t.result(c, {"messages": []})
    t.call("tools/call", {"name": "[b]x[/b]\x1b[31m", "arguments": {}})
    return t


def test_percentiles_are_nearest_rank():
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None, "max": None}
    assert percentiles([5.0]) == {"p50": 5.0, "p90": 5.0, "p99": 5.0, "max": 5.0}
    assert percentiles([float(x) for x in range(1, 11)]) == {"p50": 5.0, "p90": 9.0, "p99": 10.0, "max": 10.0}
    assert percentiles([3.0, 1.0, 2.0]) == {"p50": 2.0, "p90": 3.0, "p99": 3.0, "max": 3.0}


@pytest.fixture
def doc(tmp_path) -> dict:
    r = run_cli("stats", save(fleet().frames, tmp_path / "r.jsonl"), "--format", "json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_stats_json_per_method_and_target(doc):
    assert doc["format"] == "mrtr-inspect.stats/1"
    deploy = next(g for g in doc["groups"] if g["target"] == "deploy")
    assert set(deploy) == {"method", "target", "chains", "outcomes", "rounds", "duration_ms", "server_ms", "waited_ms"}
    assert (deploy["method"], deploy["chains"], deploy["outcomes"], deploy["rounds"]) == (
        "tools/call", 3, {"complete": 2, "error": 1}, {"1": 3})
    # the user's answering time is the waits, not the chain: 1, 2, 4 s (nearest rank: p50 is 2 s)
    w = deploy["waited_ms"]
    assert (w["p50"], w["p90"], w["max"]) == (pytest.approx(2000.0, abs=2), pytest.approx(4000.0, abs=2),
                                             pytest.approx(4000.0, abs=2))
    # the server's time: two exchanges of a tick (1 ms) each
    assert deploy["server_ms"]["max"] == pytest.approx(2.0, abs=0.01)
    assert deploy["duration_ms"]["max"] == pytest.approx(4000.0 + 3.0, abs=0.5)
    greet = next(g for g in doc["groups"] if g["target"] == "greet")
    assert greet["method"] == "prompts/get" and greet["rounds"] == {"0": 1}
    assert greet["waited_ms"]["p50"] is None and greet["server_ms"]["p50"] == pytest.approx(1.0, abs=0.01)
    hostile = next(g for g in doc["groups"] if g["target"] not in ("deploy", "greet"))
    assert hostile["outcomes"] == {"open": 1} and hostile["server_ms"]["max"] is None


def test_stats_text_is_a_table_showing_names_literally(tmp_path):
    r = run_cli("stats", save(fleet().frames, tmp_path / "r.jsonl"))
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "p50 / p90 / p99 / max" in out and "deploy" in out and "complete 2, error 1" in out
    assert "[b]x[/b]" in out and "\x1b" not in out  # markup and escapes from the traffic stay text
    row = next(line for line in out.splitlines() if " deploy " in line)
    assert "2001 / 4001 / 4001 / 4001" in row  # the user's answering times: p50 / p90 / p99 / max


def test_stats_of_an_unreadable_file_is_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    r = run_cli("stats", bad)
    assert r.exit_code == 2 and "not an mrtr-inspect recording" in r.stderr
