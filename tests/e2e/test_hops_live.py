"""Two hops recorded through the real tools into ONE file, and what `check` makes of them (RULES.md §11).

    client ─HTTP─> mrtr-inspect --hop front ─HTTP─> hopgw gateway
                   (--record F)                      │ stdio
                                                     └─> mrtr-inspect stdio --hop back (--record F) ─> upstream

The gateway (tests/e2e/hopgw/gateway.py) turns the legacy upstream's elicitation/create into
2026-07-28 input_required rounds; each --bug switch makes it misbehave as the first seed says mcpx
does. Both hops append to the same recording F; `mrtr-inspect check F --format json` must tie each
back-hop chain to the front chain that caused it (`hops`: front, back, link "target+args", the time
spent on each side) and give, per bug switch, its `gateway-*` finding; the correct gateway gives none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.replay.conftest import Running

from . import ROOT
from .hopgw.client import CONFIRM, HopClient
from .test_http_proxy import WAIT, child_env, proxies  # noqa: F401 (proxies: the fixture)

UPSTREAM = [sys.executable, "-m", "tests.e2e.hopgw.upstream"]
HOP_MAP = '[[hop_map]]\ntarget = "gw_call"\ntool = "tool"\narguments = "arguments"\n'


def gateway(record: Path, *options: str) -> Running:
    """The hopgw gateway with the real tee between it and its upstream, the tee recording into `record`.
    Stopped (SIGTERM), the gateway closes the tee's stdin and waits for it, so the back hop's recording
    is complete once `stop()` returns."""
    tee = [sys.executable, "-m", "mrtr_inspect", "stdio", "--hop", "back", "--record", str(record), "--quiet",
           "--", *UPSTREAM]
    return Running([sys.executable, "-m", "tests.e2e.hopgw.gateway", *options, "--", *tee], env=child_env())


class Hops:
    """The proxy (front hop) in front of the gateway (back hop behind it), one recording."""

    def __init__(self, proxies, tmp_path: Path, *options: str) -> None:
        self.record = tmp_path / "hops.jsonl"
        self.gateway = gateway(self.record, *options)
        self.proxy = proxies(self.gateway.url, "--record", str(self.record), "--hop", "front", "--quiet").ready()
        self.url = self.proxy.url

    def stop(self) -> None:
        assert self.proxy.stop() == 0, self.proxy.err.rest()
        self.gateway.stop()


@pytest.fixture
def hops(proxies, tmp_path):
    started: list[Hops] = []

    def start(*options: str) -> Hops:
        h = Hops(proxies, tmp_path, *options)
        started.append(h)
        return h

    yield start
    for h in started:
        h.proxy.kill()
        h.gateway.stop()


def check(path: Path, cwd: Path = ROOT) -> dict:
    """`mrtr-inspect check PATH --format json` (in `cwd`: where it looks for .mrtr-inspect.toml)."""
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "check", str(path), "--format", "json",
                           "--fail-on", "never"], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def gateway_rules(report: dict) -> set[str]:
    return {f["rule"] for f in report["findings"] if f["rule"].startswith("gateway-")}


def tool_calls(report: dict) -> list[dict]:
    return [c for c in report["chains"] if c["method"] == "tools/call"]


def assert_paired(report: dict, calls: int, abandoned: bool = False) -> list[tuple[dict, dict]]:
    """`calls` front tools/calls, each tied to its own back chain by target and arguments; the pairs
    as (front chain, back chain). `abandoned`: the back calls never finished (the gateway cancelled
    them), so they need not lie inside their front chains."""
    chains = {c["id"]: c for c in report["chains"]}
    pairs = report.get("hops")
    assert pairs is not None, "no hops in the report"
    assert len(pairs) == calls, pairs
    assert len(tool_calls(report)) == 2 * calls, [(c["id"], c["target"], c["peer"]) for c in tool_calls(report)]
    out = []
    for h in pairs:
        assert h["link"] == "target+args", h
        assert h["front"] != h["back"] and h["front"] in chains and h["back"] in chains, h
        for side in ("front_ms", "back_ms", "gateway_ms"):
            assert isinstance(h[side], (int, float)), h
        if not abandoned:  # the back chain lies inside the front one
            assert 0 <= h["back_ms"] <= h["front_ms"], h
        assert 0 <= h["gateway_ms"] <= h["front_ms"], h  # only the back call's part of the front span counts
        out.append((chains[h["front"]], chains[h["back"]]))
    assert len({f["id"] for f, _ in out}) == len({b["id"] for _, b in out}) == calls  # one to one
    for front, back in out:
        assert back["peer"].startswith("stdio:") and not front["peer"].startswith("stdio:"), (front, back)
    return out


def asked(chain: dict) -> list[str]:
    """The messages of the questions a chain asked, round by round."""
    return [q.get("summary") for r in chain.get("round_details") or [] for q in (r.get("asked") or {}).values()]


# -- the correct gateway ----------------------------------------------------------------------------------------


def test_the_correct_gateway_gives_linked_pairs_and_no_gateway_finding(hops):
    h = hops()
    c = HopClient(h.url)
    assert c.call("create_issue", {"title": "Crash on start"}).result["structuredContent"]["number"] == 7
    assert c.call("create_issue", {"title": "Not this one"}, answer={"action": "decline"}).result["isError"]
    assert c.call("connect", {}, answer={"action": "accept"}).result["content"][0]["text"] == "connected"
    assert c.call("echo", {"text": "hi"}).result["content"][0]["text"] == "hi"
    assert c.call("fail", {}).error["code"] == -32000
    h.stop()
    report = check(h.record)
    pairs = assert_paired(report, 5)
    assert sorted(f["target"] for f, _ in pairs) == ["connect", "create_issue", "create_issue", "echo", "fail"]
    for front, back in pairs:
        assert front["target"] == back["target"] and asked(front) == asked(back)
    assert gateway_rules(report) == set(), [f for f in report["findings"] if f["rule"].startswith("gateway-")]


# -- each bug, its finding ------------------------------------------------------------------------------------


def answer_not_delivered(c: HopClient) -> int:
    assert c.call("create_issue", {"title": "Crash on start"}).error["code"] == -32603
    return 1


def result_collapsed(c: HopClient) -> int:
    assert "structuredContent" not in c.call("create_issue", {"title": "Crash on start"}).result
    return 1


def legacy_field_passthrough(c: HopClient) -> int:
    t = c.call("connect", {}, answer={"action": "accept"})
    assert "elicitationId" in t.questions[0]["q1"]["params"]
    return 1


def question_altered(c: HopClient) -> int:
    t = c.call("create_issue", {"title": "Crash on start"})
    assert t.questions[0]["q1"]["params"]["message"] != "Create issue 'Crash on start'?"
    return 1


def error_masked(c: HopClient) -> int:
    assert c.call("fail", {}).result["content"] == [{"type": "text", "text": "ok"}]
    return 1


def state_binding(c: HopClient) -> int:
    c.discover()
    t = c.call("create_issue", {"title": "Crash on start"}, retry_session=False)
    assert t.error["message"] == "this requestState belongs to another session"
    return 1


# switch → (the traffic, the client keeps Mcp-Session-Id, the gateway-* rules the report must hold)
BUGS = {
    "answer-not-delivered": (answer_not_delivered, False,
                             {"gateway-answer-not-delivered", "gateway-rounds-inflated"}),
    "result-collapsed": (result_collapsed, False, {"gateway-result-collapsed"}),
    "legacy-field-passthrough": (legacy_field_passthrough, False, {"gateway-legacy-field-passthrough"}),
    "question-altered": (question_altered, False, {"gateway-question-altered"}),
    "error-masked": (error_masked, False, {"gateway-error-masked"}),
    "state-binding": (state_binding, True, {"gateway-state-binding"}),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_gives_its_gateway_finding(hops, bug):
    traffic, keep_session, rules = BUGS[bug]
    h = hops("--bug", bug)
    calls = traffic(HopClient(h.url, keep_session=keep_session))
    h.stop()
    report = check(h.record)
    pairs = assert_paired(report, calls, abandoned=bug in ("answer-not-delivered", "state-binding"))
    assert gateway_rules(report) == rules, [(f["rule"], f["message"]) for f in report["findings"]]
    ids = {c["id"] for pair in pairs for c in pair}
    for f in report["findings"]:
        if f["rule"] in rules and f.get("chain") is not None:
            assert f["chain"] in ids, f  # the finding names a chain of the pair
    if os.environ.get("MRTR_UPDATE_HOP_FIXTURES"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        cli("export", str(h.record), "--to", "fixture", "--output", str(FIXTURES / f"{bug}.jsonl"))


# -- the committed recordings, offline ------------------------------------------------------------------

FIXTURES = ROOT / "fixtures" / "hops"


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_committed_two_hop_recording_still_shows_it(bug):
    """fixtures/hops/BUG.jsonl, exported by the test above (MRTR_UPDATE_HOP_FIXTURES=1): the same pairs and
    the same gateway-* findings, without the gateway."""
    report = check(FIXTURES / f"{bug}.jsonl")
    assert_paired(report, 1, abandoned=bug in ("answer-not-delivered", "state-binding"))
    assert gateway_rules(report) == BUGS[bug][2]


def test_the_committed_two_hop_recordings_hold_no_machine_paths():
    assert sorted(p.stem for p in FIXTURES.glob("*.jsonl")) == sorted(BUGS)
    for path in FIXTURES.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        for leak in ("/work", "/tmp", "/root", "/home"):
            assert leak not in text, f"{path.name} holds {leak!r}"


# -- a wrapping gateway, and two clients at once ---------------------------------------------------------


def test_a_wrapping_gateway_links_through_the_hop_map(hops, tmp_path):
    (tmp_path / ".mrtr-inspect.toml").write_text(HOP_MAP, encoding="utf-8")
    h = hops("--wrap")
    c = HopClient(h.url)
    t = c.call("gw_call", {"tool": "create_issue", "arguments": {"title": "Crash on start"}})
    assert t.result["structuredContent"]["number"] == 7
    assert c.call("gw_call", {"tool": "echo", "arguments": {"text": "hi"}}).result["content"][0]["text"] == "hi"
    h.stop()
    report = check(h.record, cwd=tmp_path)
    pairs = assert_paired(report, 2)
    assert sorted((f["target"], b["target"]) for f, b in pairs) == [("gw_call", "create_issue"),
                                                                     ("gw_call", "echo")]
    assert gateway_rules(report) == set()


def test_two_clients_at_once_each_front_chain_links_to_its_own_back_chain(hops):
    """Both calls are open on both hops at once (both questions out before either is answered); then
    "First" is answered and finishes, then "Second". A legacy back hop's questions name no call, so
    which back chain asked which question is not the test's business; the pairs are: each front chain
    with the back chain that ended in its order (the back calls overlap both front chains, so only
    the arguments tell the first one's)."""
    h = hops()
    together = threading.Barrier(2, timeout=WAIT)
    first_done = threading.Event()
    out: dict[str, object] = {}

    def run(title: str) -> None:
        def answered(key, request):
            together.wait()  # both questions are out
            if title == "Second":
                assert first_done.wait(WAIT)
            return CONFIRM
        try:
            together.wait()
            client = HopClient(h.url, name=f"client {title}")
            out[title] = client.call("create_issue", {"title": title}, answer=answered)
        except BaseException as e:  # reported by the main thread
            out[title] = e
            together.abort()
        finally:
            if title == "First":
                first_done.set()

    threads = [threading.Thread(target=run, args=(title,)) for title in ("First", "Second")]
    for th in threads:
        th.start()
    for th in threads:
        th.join(2 * WAIT)
    assert all(not isinstance(t, BaseException) and t.result["structuredContent"]["number"] == 7
               for t in out.values()), out
    h.stop()
    report = check(h.record)
    pairs = sorted(assert_paired(report, 2), key=lambda pair: pair[0]["end"])
    assert [asked(front) for front, _ in pairs] == [["Create issue 'First'?"], ["Create issue 'Second'?"]]
    assert pairs[0][1]["end"] < pairs[1][1]["end"], pairs  # First's back chain is the one that ended first
    for front, back in pairs:
        assert front["start"] <= back["start"] and back["end"] <= front["end"] + 0.05, (front, back)
    assert gateway_rules(report) == set()


# -- the views of the one recording, and the same from two ------------------------------------------------


def cli(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", *args], cwd=cwd, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def split_by_session(path: Path, out: Path) -> list[Path]:
    """The one recording as two, one per session (what two machines would have recorded)."""
    files: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        record = json.loads(line.split("\t", 1)[0])  # the record, before the payload (docs/recording-format.md)
        files.setdefault(record.get("s") or record["session"], []).append(line)
    paths = []
    for n, lines in enumerate(files.values()):
        p = out / f"hop{n}.jsonl"
        p.write_text("".join(lines), encoding="utf-8")
        paths.append(p)
    return paths


def test_one_recording_of_both_hops_shows_as_one_story_and_checks_as_two_files(hops, tmp_path):
    h = hops("--bug", "answer-not-delivered")
    answer_not_delivered(HopClient(h.url))
    h.stop()
    report = check(h.record)
    (pair,) = report["hops"]
    front, back = pair["front"], pair["back"]

    text = cli("check", str(h.record), "--fail-on", "never")
    assert "hops: 1 linked pair" in text and f"{front} (front) → {back} (back)  link target+args" in text

    tree = cli("show", str(h.record))
    assert f"[front] {front} tools/call create_issue" in tree and f"[back] {back} tools/call create_issue" in tree
    assert tree.index(f"[front] {front}") < tree.index("through the gateway") < tree.index(f"[back] {back}")

    mermaid = cli("show", str(h.record), "--format", "mermaid")
    diagram = mermaid[mermaid.index(f"%% {front} "):]
    lines = diagram.splitlines()
    assert lines[1:5] == ["sequenceDiagram", "    participant H as Host", "    participant G as Gateway",
                          "    participant U as Upstream"]
    arrows = [ln.strip() for ln in lines if "->>" in ln]
    assert arrows[0].startswith("H->>G: tools/call create_issue") and arrows[1].startswith("G->>U: tools/call create_issue")
    assert any(a.startswith("U->>G: round 1") for a in arrows)  # the upstream's elicitation/create
    assert sum(a.startswith("G-->>H: input_required") for a in arrows) == 8
    assert "Note over G,U: never answered" in diagram and arrows[-1] == "G-->>H: error -32603"
    out = tmp_path / "hops.md"
    cli("export", str(h.record), "--to", "mermaid", "--output", str(out))
    assert "participant U as Upstream" in out.read_text(encoding="utf-8")
    html = tmp_path / "hops.html"
    cli("export", str(h.record), "--to", "html", "--output", str(html))
    assert '<h2 id="hops">Two hops</h2>' in html.read_text(encoding="utf-8")

    # the two files, read one after the other, number the chains in their order, not the same
    two = check_many(split_by_session(h.record, tmp_path))

    def story(r: dict) -> tuple:
        chains = {c["id"]: (c["hop"], c["target"], c["start"], c["rounds"], c["outcome"]) for c in r["chains"]}
        pairs = [{**p, "front": chains[p["front"]], "back": chains[p["back"]]} for p in r["hops"]]
        return pairs, sorted((f["rule"], f["severity"], chains.get(f.get("chain"))) for f in r["findings"])

    assert story(two) == story(report)


def check_many(paths: list[Path]) -> dict:
    return json.loads(cli("check", *map(str, paths), "--format", "json", "--fail-on", "never"))
