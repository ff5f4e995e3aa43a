"""`export --to html` in a real headless Chromium: the page opens with what is wrong, each chain's
SVG timeline is drawn to scale (measured boxes, not the markup's numbers), findings are pinned to
the message they name, and the page's style applies under its CSP with no script at all."""

from __future__ import annotations

import json

import pytest

from tests.outputs.browser import Browser, chromium_path
from tests.outputs.conftest import HTTP_FIXTURE, faulty, run_cli, save

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no Chromium here (Debian: apt-get install "
                                "chromium; .ci/run installs it), so the HTML report is not rendered")

SVG_W, MIN_W = 960, 1.5  # outputs/exporters/html.py: the drawing's width, the narrowest bar

MEASURE = """JSON.stringify([...document.querySelectorAll('svg.timeline')].map(svg => {
  const box = svg.getBoundingClientRect();
  const item = el => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, width: r.width, cx: r.left + r.width / 2, ms: el.dataset.ms,
            message: el.dataset.message, rule: el.dataset.rule, severity: el.dataset.severity,
            cls: el.getAttribute('class')}; };
  return {chain: svg.dataset.chain, span: +svg.dataset.spanMs, x0: +svg.dataset.x0, x1: +svg.dataset.x1,
          svg: svg instanceof SVGSVGElement, left: box.left, width: box.width, height: box.height,
          ex: [...svg.querySelectorAll('rect.ex')].map(item), wait: [...svg.querySelectorAll('rect.wait')].map(item),
          pins: [...svg.querySelectorAll('circle.pin')].map(item),
          fill: getComputedStyle(svg.querySelector('rect.ex')).fill};
}))"""


@pytest.fixture(scope="module")
def browser():
    with Browser(width=1100, height=900) as b:
        yield b


def _export(src, out, *options) -> tuple:
    done = run_cli("export", src, "--to", "html", "--output", out, *options)
    assert done.exit_code == 0, done.stderr
    chains = json.loads(run_cli("show", src, "--format", "json").stdout)["chains"]
    report = json.loads(run_cli("check", src, "--format", "json", "--fail-on", "never", *options).stdout)
    return chains, report


def _times(chains: list[dict]) -> dict[int, float]:
    out = {}
    for c in chains:
        for e in c["timeline"]:
            out[e["message"]] = e["time"]
            if e.get("response_message") is not None:
                out[e["response_message"]] = e["response_time"]
    return out


def _to_scale(drawn: dict, chain: dict, times: dict[int, float], findings: list[dict]) -> None:
    k = drawn["width"] / SVG_W  # pixels per drawing unit
    axis = (drawn["x1"] - drawn["x0"]) * k
    span = drawn["span"]

    def px(t: float) -> float:
        return drawn["left"] + k * drawn["x0"] + (t - chain["start"]) * 1000.0 / span * axis

    assert len(drawn["ex"]) == len(chain["timeline"])
    for e, bar in zip(chain["timeline"], drawn["ex"]):
        assert bar["message"] == str(e["message"])
        assert bar["left"] == pytest.approx(px(e["time"]), abs=1.0)
        if e.get("response_time"):
            ms = (e["response_time"] - e["time"]) * 1000.0
            assert bar["width"] == pytest.approx(max(ms / span * axis, MIN_W * k), abs=1.0)
            assert bar["right"] == pytest.approx(max(px(e["response_time"]), bar["left"] + MIN_W * k), abs=1.0)
    retries = [e for e in chain["timeline"] if e.get("retries_round")]
    assert len(drawn["wait"]) == len(retries)
    for e, wait in zip(retries, drawn["wait"]):
        assert wait["width"] == pytest.approx(max(e["wait_ms"] / span * axis, MIN_W * k), abs=1.0)
        assert wait["right"] == pytest.approx(px(e["time"]), abs=1.0)  # the user's time ends with the retry
    mine = [f for f in findings if f.get("chain") == chain["id"]]
    assert sorted(p["rule"] for p in drawn["pins"]) == sorted(f["rule"] for f in mine)
    for pin in drawn["pins"]:
        t = times[int(pin["message"])]
        assert pin["cx"] == pytest.approx(px(t), abs=1.0 + 9 * k * len(mine))  # stacked pins step aside


def test_the_page_opens_with_what_is_wrong_errors_then_warnings(tmp_path, browser):
    src = save(faulty().frames, tmp_path / "faulty.jsonl")
    _export(src, tmp_path / "f.html", "--severity", "chain-linked=warning")
    page = browser.open(tmp_path / "f.html")
    order = page.evaluate("JSON.stringify([...document.body.children].map(e => e.id || e.tagName))")
    order = json.loads(order)
    assert order.index("wrong") < order.index("chains")  # before any chain
    assert order.index("wrong") == 3  # after the title, the counts and the sessions line
    items = json.loads(page.evaluate("JSON.stringify([...document.querySelectorAll('#wrong li')].map("
                                     "li => [li.className, li.querySelector('.mono').textContent]))"))
    assert items == [["wrong-error", "retry-reused-id"], ["wrong-error", "stdio-framing"],
                     ["wrong-warning", "chain-linked"]]
    assert page.evaluate("document.querySelector('#wrong h2').textContent") == "What is wrong: 2 errors, 1 warning"
    assert page.evaluate("document.scripts.length") == 0
    assert page.evaluate("getComputedStyle(document.querySelector('#wrong')).borderLeftColor") == "rgb(207, 34, 46)"
    # each item leads to its row in the findings table
    hrefs = json.loads(page.evaluate("JSON.stringify([...document.querySelectorAll('#wrong li a.t')].map("
                                     "a => document.querySelector(a.getAttribute('href')).tagName))"))
    assert hrefs == ["TR", "TR", "TR"]


def test_nothing_wrong_is_said_as_such(tmp_path, browser):
    _export(HTTP_FIXTURE, tmp_path / "s.html")
    page = browser.open(tmp_path / "s.html")
    assert page.evaluate("document.querySelector('#wrong h2').textContent") == "Nothing wrong"


@pytest.mark.parametrize("source", ["faulty", "sdk-http"])
def test_each_chain_is_a_timeline_drawn_to_scale(tmp_path, browser, source):
    src = save(faulty().frames, tmp_path / "faulty.jsonl") if source == "faulty" else HTTP_FIXTURE
    chains, report = _export(src, tmp_path / "t.html")
    page = browser.open(tmp_path / "t.html")
    drawn = json.loads(page.evaluate(MEASURE))
    assert [d["chain"] for d in drawn] == [c["id"] for c in chains]
    times = _times(chains)
    for d, c in zip(drawn, chains):
        assert d["svg"]  # parsed as SVG, not as unknown HTML elements
        assert d["width"] > 900 and d["height"] == pytest.approx(d["width"] * 112 / SVG_W, abs=1.0)  # rendered size
        assert d["span"] == pytest.approx(max((c["end"] - c["start"]) * 1000.0, max(
            ((e.get("response_time") or e["time"]) - c["start"]) * 1000.0 for e in c["timeline"])), abs=0.01)
        _to_scale(d, c, times, report["findings"])
    colours = {d["ex"][0]["cls"]: d["fill"] for d in drawn}
    assert "rgb(" in "".join(colours.values()) and "rgb(0, 0, 0)" not in colours.values()  # styled under the CSP


def test_the_user_wait_dominates_where_it_did(tmp_path, browser):
    """faulty(): the user took 1.5 s of a 1.503 s chain; the drawing says so."""
    src = save(faulty().frames, tmp_path / "faulty.jsonl")
    _export(src, tmp_path / "w.html")
    c1 = json.loads(browser.open(tmp_path / "w.html").evaluate(MEASURE))[0]
    axis = (c1["x1"] - c1["x0"]) * c1["width"] / SVG_W
    assert c1["wait"][0]["width"] / axis == pytest.approx(1501 / c1["span"], abs=0.01)
    assert c1["wait"][0]["width"] > 0.95 * axis
