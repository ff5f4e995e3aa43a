"""`mrtr-inspect ui` under textual's pilot: the list, opening a chain, raw bytes, the findings, the
pickers, exports, escaping, quitting; the screens compared with snapshots (conftest.py)."""

from __future__ import annotations

import json

from mrtr_inspect.recording.reader import read_frames

from .conftest import detail, drive, snapshot
from .recordings import Writer, sample


def test_every_chain_is_listed(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        screen = s.screen
        for cid in ("c1", "c2", "c3", "c4", "c5", "c6"):
            assert f"\n{cid} " in screen
        assert "6 chains, 22 messages, 1 error" in screen
        assert "error mrtr-fields-parallel" in screen  # c5's worst finding
        snapshot("list", screen)

    drive([rec], steps)


def test_opening_a_chain_shows_its_rounds_questions_and_state_digests(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        await s.pilot.press("enter")  # c1
        await s.settle()
        screen = s.screen
        assert "c1 tools/call wizard  complete  2 rounds" in screen
        assert "← input_required round 1 (#3" in screen
        assert "asks name: elicitation/create (form) 'Which name?'" in screen
        assert "requestState sha256:3f6ea5f4cc6944fa" in screen
        assert "→ retry id 3 (#6" in screen and "answers color: accept" in screen
        assert "#7  ← result" in screen  # the chain's messages, to show their bytes
        snapshot("opened", screen)

    drive([rec], steps)


def test_a_message_shows_its_raw_bytes(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")
    wire = [f.data for f in read_frames(rec) if hasattr(f, "data")]

    async def steps(s):
        await s.pilot.press("down", "down", "enter", "r")  # c3, its first message
        await s.until(lambda: "message #10:" in s.screen)
        screen = s.screen
        assert "message #10: stdio line, c2s, session s1" in screen
        assert f"{len(wire[10])} bytes" in screen
        assert '{"jsonrpc": "2.0", "id": 5, "method": "tools/call"' in screen
        await s.pilot.press("down", "down")  # #12: the retry, with its answer
        await s.until(lambda: "message #12:" in s.screen)
        assert "message #12: stdio line, c2s" in s.screen and '"inputResponses":' in s.screen
        snapshot("raw", s.screen)

    drive([rec], steps)


def test_wire_text_is_shown_literally_never_as_markup_or_escapes(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        await s.pilot.press("down", "down", "down", "enter")  # c4: the hostile tool name
        await s.settle()
        screen = s.screen
        assert "c4 tools/call [bold red]evil[/] \\x1b[31mred\\x1b]0;title\\x07" in screen
        assert "\x1b" not in screen and "\x07" not in screen
        await s.pilot.press("r", "down")  # its result quotes the name back
        await s.until(lambda: "message #17:" in s.screen)
        assert "[bold red]evil[/]" in s.screen and "\x1b" not in s.screen

    drive([rec], steps)


def test_the_findings_list_and_a_finding_opens_its_chain(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        await s.pilot.press("f")
        await s.settle()
        screen = s.screen
        assert "showing 9 findings" in screen
        assert "error    mrtr-fields-parallel-misuse" + " " * 13 + "c5" in screen
        snapshot("findings", screen)
        for _ in range(10):
            if "mrtr-fields-parallel-misuse" in s.app._finding_line(s.app.query_one("#findings").cursor, 100).plain:
                break
            await s.pilot.press("down")
        await s.pilot.press("enter")
        await s.settle()
        assert "c5 tools/call connect  abandoned  1 round" in s.screen
        text = detail(s.app)
        assert "error   mrtr-fields-parallel-misuse [#19,#20] tools/call id=10 carries the requestState" in text
        assert "https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr#client-requirements" in text

    drive([rec], steps)


def test_the_session_picker_keeps_one_sessions_chains(tmp_path):
    rec = tmp_path / "two.jsonl"
    w = Writer("first")
    w.discover()
    w.wizard(1)
    w.write(rec)
    w = Writer("second", t=1_800_000_100.0)
    w.discover()
    w.call(1, "deploy")
    w.done(1)
    w.write(rec, "ab")

    async def steps(s):
        assert "showing 2 chains" in s.screen
        await s.pilot.press("s")
        await s.settle()
        assert "second  (1 chain)" in s.screen
        await s.pilot.press("down", "down", "enter")
        await s.settle()
        screen = s.screen
        assert "showing 1 chains" in screen and "session second" in screen
        assert "deploy" in screen and "wizard" not in screen
        await s.pilot.press("s", "enter")  # all sessions again
        await s.settle()
        assert "showing 2 chains" in s.screen

    drive([rec], steps)


def test_export_the_opened_chain_as_mermaid_and_as_a_fixture(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")
    md, fixture = tmp_path / "c1.md", tmp_path / "c1.jsonl"

    async def steps(s):
        await s.pilot.press("enter", "m")
        await s.settle()
        s.app.screen.query_one("#ask").value = str(md)
        await s.pilot.press("enter")
        await s.until(md.exists)
        await s.pilot.press("x")
        await s.settle()
        s.app.screen.query_one("#ask").value = str(fixture)
        await s.pilot.press("enter")
        await s.until(lambda: fixture.exists() and fixture.stat().st_size > 0)

    drive([rec], steps)
    text = md.read_text()
    assert text.startswith("## c1 tools/call wizard\n\n```mermaid\n")
    assert "S-->>C: input_required" in text and "c3" not in text
    assert oct(md.stat().st_mode & 0o777) == "0o600"
    lines = fixture.read_bytes().splitlines()
    assert json.loads(lines[0])["mrtr-inspect"] == "recording"
    ids = [json.loads(line.split(b"\t", 1)[1]).get("id") for line in lines[1:] if b"\t" in line]
    assert 1 in ids and 3 in ids and 5 not in ids  # c1's requests, not c3's


def test_q_quits_with_status_0(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        await s.pilot.press("q")

    app = drive([rec], steps)
    assert app.return_value == 0


def test_the_filter_bar(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    def listed(s) -> list[str]:
        return [s.store.rows[q].id for q in s.store.visible()]

    async def steps(s):
        await s.pilot.press("slash")
        await s.type("tool:wizard")
        await s.pilot.press("enter")
        await s.settle()
        assert listed(s) == ["c1", "c3"] and "showing 2 chains" in s.screen
        assert s.app.focused is s.app.query_one("#chains")
        await s.pilot.press("slash")
        await s.type("rounds>1 or severity:error")  # typed over the expression: `/` selects it
        await s.pilot.press("enter")
        await s.settle()
        assert listed(s) == ["c1", "c3", "c5"]
        snapshot("filtered", s.screen)
        await s.pilot.press("f")
        await s.settle()
        # the findings of those chains (rounds>1: a finding's chain terms are its chain's), and the error
        assert "showing 5 findings" in s.screen
        assert {s.store.f_chain[i] for i in s.store.visible_findings()} == {1, 3, 5}
        await s.pilot.press("f", "slash")
        await s.type("rounds>")
        await s.pilot.press("enter")
        await s.settle()
        assert listed(s) == ["c1", "c3", "c5"]  # a bad expression changes nothing, and says why in one line
        top = s.screen.splitlines()[0]
        assert "rounds>" in top.split("infos", 1)[1]

    drive([rec], steps)


def test_filter_given_on_the_command_line(tmp_path):
    rec = sample(tmp_path / "sample.jsonl")

    async def steps(s):
        assert [s.store.rows[q].id for q in s.store.visible()] == ["c3"]

    drive([rec], steps, filter_text="id:6")


def test_the_hop_picker_and_a_front_chain_exported_with_its_back_chain(tmp_path):
    from pathlib import Path

    rec = Path(__file__).resolve().parents[2] / "fixtures" / "hops" / "state-binding.jsonl"
    md = tmp_path / "front.md"

    async def steps(s):
        assert "showing 2 chains" in s.screen
        await s.pilot.press("h")
        await s.until(lambda: "back  (1 chain)" in s.screen and "front  (1 chain)" in s.screen)
        names = list(s.store.hop_names)
        await s.pilot.press(*["down"] * (names.index("front") + 1), "enter")
        await s.until(lambda: "showing 1 chains" in s.screen)
        assert [s.store.rows[q].id for q in s.store.visible()] == ["c1"]
        assert "hop front" in s.screen.splitlines()[0]
        await s.pilot.press("enter", "m")
        await s.settle()
        s.app.screen.query_one("#ask").value = str(md)
        await s.pilot.press("enter")
        await s.until(md.exists)

    drive([rec], steps)
    text = md.read_text()
    assert "participant G as Gateway" in text and "participant U as Upstream" in text  # c1 with the c2 it caused


def test_the_list_heading_follows_the_list_width(tmp_path):
    """The heading's columns are those of the rows in every frame after the list changes width with
    nothing new in the store (a resize, the detail pane opening). Drawn at the view's tick, the heading
    kept the width of before until the next tick (a clean run's snapshot caught it one column off)."""
    rec = sample(tmp_path / "sample.jsonl")

    def columns(screen: str) -> tuple[int, int]:
        lines = screen.splitlines()
        heading = next(line for line in lines if line.startswith("chain "))
        row = next(line for line in lines if line.startswith("c1 "))
        return heading.index("outcome"), row.index("complete")

    async def steps(s):
        seen = set()
        for width in (200, 181, 220, 193):
            await s.pilot.resize_terminal(width, 40)
            await s.pilot.pause()  # the resize laid out and drawn, no tick waited for
            heading_at, row_at = columns(s.screen)
            assert heading_at == row_at, f"at width {width}:\n{s.screen}"
            seen.add(row_at)
        assert len(seen) == 4  # the rows did move with the width
        await s.pilot.press("enter")  # the detail pane opens: the list narrows
        await s.pilot.pause()
        heading_at, row_at = columns(s.screen)
        assert heading_at == row_at, s.screen

    drive([rec], steps)
