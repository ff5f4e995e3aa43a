"""The live view: plain lines where there is no terminal, a live area on one."""

from __future__ import annotations

import io

from rich.console import Console

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.outputs.live import LiveView
from tests.traffic import ELICIT, Traffic


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def two_round_deploy(t: Traffic, wait: float = 2.5) -> list:
    """deploy: input_required (confirm), the user takes `wait` seconds, the retry completes."""
    args = {"name": "deploy", "arguments": {"env": "prod"}}
    rid = t.call("tools/call", args)
    t.irr(rid, {"confirm": ELICIT}, state="s1")
    t.tick(wait)
    rid2 = t.call("tools/call", {**args, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
                                 "requestState": "s1"})
    t.result(rid2, {"content": []})
    return t.frames


def feed(view: LiveView, frames: list, stop_after: int | None = None) -> None:
    insp = Analysis()
    for f in frames[:stop_after]:
        for o in insp.feed(f):
            view.add(o)


def test_plain_lines_follow_each_chain_step_when_not_a_terminal():
    out = io.StringIO()
    view = LiveView(out)
    assert view.console is None
    view.start()
    feed(view, two_round_deploy(Traffic("http")))
    view.stop()
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        "mrtr-inspect: c1 tools/call deploy: request id=1",
        "mrtr-inspect: c1 tools/call deploy: round 1 input_required, asks confirm",
        "mrtr-inspect: c1 tools/call deploy: retry id=2 after 2.5 s waiting for input (link: state)",
    ]
    assert lines[3].startswith("mrtr-inspect: c1 tools/call deploy  complete  1 round")
    assert "(waited 2502 ms for input)" in lines[3]  # 2.5 s, and the traffic builder's 1 ms per message
    assert lines[4:] == ["mrtr-inspect: 4 messages, 1 chain: 0 errors, 0 warnings, 1 info"]


def state_dropped() -> list:
    """deploy: input_required with a state; the retry drops it (request-state-dropped, an error)."""
    t = Traffic("http")
    rid = t.call("tools/call", {"name": "deploy", "arguments": {}})
    t.irr(rid, {"confirm": ELICIT}, state="s1")
    rid2 = t.call("tools/call", {"name": "deploy", "arguments": {},
                                 "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}})
    t.result(rid2, {"content": []})
    return t.frames


def test_findings_at_or_above_the_threshold_are_printed_plain():
    out = io.StringIO()
    view = LiveView(out, min_severity="warning")
    feed(view, state_dropped())
    text = out.getvalue()
    assert "mrtr-inspect: error request-state-dropped [c1" in text
    assert "chain-linked" not in text  # an info: counted, not shown
    assert view.counts["error"] >= 1 and view.counts["info"] >= 1


def test_the_live_area_shows_open_chains_and_the_time_spent_waiting_for_input():
    frames = two_round_deploy(Traffic("http", start=1000.0), wait=2.5)
    now = [0.0]
    view = LiveView(Tty(), clock=lambda: now[0])
    assert view.console is not None
    # up to the input_required: the chain waits for the user
    irr_at = next(i for i, f in enumerate(frames) if getattr(f, "data", b"").find(b"input_required") >= 0) + 1
    feed(view, frames, irr_at)
    irr_time = frames[irr_at - 1].time
    now[0] = irr_time + 3.2
    screen = Console(file=io.StringIO(), width=120, record=True)
    screen.print(view)
    text = screen.export_text()
    assert "c1 tools/call deploy" in text
    assert "round 1: waiting for input 3.2 s (confirm)" in text


def test_a_closed_chain_leaves_the_live_area_and_is_printed_in_colour():
    out = Tty()
    view = LiveView(out, clock=lambda: 0.0)
    feed(view, two_round_deploy(Traffic("http")))
    screen = Console(file=io.StringIO(), width=120, record=True)
    screen.print(view)
    assert screen.export_text().strip() == ""  # nothing open
    printed = out.getvalue()
    assert "c1 tools/call deploy  complete  1 round" in printed
    assert "\x1b[32m" in printed  # green: complete


def test_log_lines_go_through_a_writer_with_their_severity():
    got = []
    view = LiveView(write=lambda text, severity: got.append((severity, text)))
    feed(view, state_dropped())
    assert (None, "c1 tools/call deploy: request id=1") in got
    assert any(sev == "error" and "request-state-dropped" in text for sev, text in got)


def test_a_view_that_never_started_prints_no_totals():
    out = io.StringIO()
    view = LiveView(out)
    view.stop()
    assert out.getvalue() == ""


def test_a_refused_retry_shows_the_chain_waiting_for_a_retry_and_its_correction_continues_it():
    """RULES.md decision 13: a retry refused with an error leaves the round's question standing; the
    retry that echoes the state verbatim continues the same chain, which ends complete."""
    t = Traffic()
    args = {"name": "deploy", "arguments": {"env": "prod"}}
    answers = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    rid = t.call("tools/call", args)
    t.irr(rid, {"confirm": ELICIT}, state="s1")
    bad = t.call("tools/call", {**args, "inputResponses": answers, "requestState": "s1-TAMPERED"})
    t.error(bad, -32602, "Invalid or expired requestState")
    good = t.call("tools/call", {**args, "inputResponses": answers, "requestState": "s1"})
    t.result(good, {"content": []})
    out = io.StringIO()
    view = LiveView(out)
    view.start()
    feed(view, t.frames)
    view.stop()
    lines = out.getvalue().splitlines()
    assert "mrtr-inspect: c1 tools/call deploy: retry id=2 refused with error -32602; waiting for a retry" in lines
    assert any(ln.startswith("mrtr-inspect: c1 tools/call deploy  complete  1 round") for ln in lines)
    assert not any(" c2 " in ln for ln in lines)
