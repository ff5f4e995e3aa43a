"""Rules of the tool itself (rules/tool.py): `inspector-error`, the pipeline failing on a frame."""

from __future__ import annotations

from mrtr_inspect.config import Config
from mrtr_inspect.core import chains
from tests.traffic import Traffic


def _call() -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    return t


def test_a_frame_the_pipeline_fails_on_is_an_inspector_error_and_the_analysis_goes_on(monkeypatch):
    def broken(self, msg, peer, covered):
        raise RuntimeError("stitching broke")

    monkeypatch.setattr(chains.Stitcher, "on_request", broken)
    r = _call().run()
    [f] = r.of("inspector-error")
    assert f.severity == "warning" and f.chain is None and f.messages == []
    assert f.message == ("could not analyse a StdioLine frame: RuntimeError: stitching broke; the traffic was not "
                         "affected, analysis goes on")
    assert f.time == r.messages[0].time  # the time of the frame it failed on
    assert [m.label() for m in r.messages] == ["tools/call id=1", "result id=1"]  # the next frame is analysed


def test_a_failure_while_closing_says_so(monkeypatch):
    def broken(self, now, session=None):
        raise RuntimeError("closing broke")

    monkeypatch.setattr(chains.Stitcher, "close_all", broken)
    [f] = _call().run().of("inspector-error")
    assert f.message == "could not close the analysis: RuntimeError: closing broke"


def test_near_miss_the_same_traffic_analysed_whole_is_no_inspector_error():
    r = _call().run()
    assert r.of("inspector-error") == [] and [c["outcome"] for c in r.chains] == ["complete"]


def test_near_miss_a_disabled_inspector_error_reports_nothing(monkeypatch):
    monkeypatch.setattr(chains.Stitcher, "on_request", lambda self, msg, peer, covered: 1 / 0)
    assert _call().run(Config(disabled={"inspector-error"})).of("inspector-error") == []
