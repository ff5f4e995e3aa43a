"""Text from the traffic (tool names, answers, error messages: anything a peer controls) reaches the
user literally: never read as rich markup, its control characters and line breaks escaped visibly
(`printable`) in every human-facing text output, and escaped for Markdown and mermaid in those."""

from __future__ import annotations

import html
import io
import json
import re
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.outputs.live import LiveView
from mrtr_inspect.outputs.show import render_text
from mrtr_inspect.outputs.text import FindingPrinter, printable
from tests.e2e import ROOT, helper, tee_cmd
from tests.outputs.conftest import run_cli, save
from tests.traffic import ELICIT, Traffic, dumps, meta

TERMINAL = "\x1b]0;pwned\x07\x1b[2J"  # sets the terminal's title, clears the screen
FORGED = "\nmrtr-inspect: error forged"  # a line of ours, forged by a newline
MARKUP = "[bold]b[/bold] [/x]"  # rich markup, and a closing tag that opens nothing
NAME = f"deploy {MARKUP} {TERMINAL}{FORGED}\u2028é 日本"
SHOWN = "deploy [bold]b[/bold] [/x] \\x1b]0;pwned\\x07\\x1b[2J\\nmrtr-inspect: error forged\\u2028é 日本"
REDACTED = "[redacted:fc32f2f1fb8a]"
# what no text output may carry raw (the newline that ends a line aside)
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def hostile(name: str = NAME, notes: str = f"{REDACTED} {MARKUP}") -> Traffic:
    """c1: a tool `name` asks for confirmation, the retry answers `notes` (a redaction placeholder
    and markup); c2: another tool replays c1's state (a finding that names c1's tool)."""
    t = Traffic("stdio")
    a = t.tool(name, {"env": "prod"}, id=2)
    t.irr(a, {"confirm": ELICIT}, state="st")
    t.tick(1.5)
    answer = {"action": "accept", "content": {"notes": notes}}
    b = t.tool(name, {"env": "prod"}, id=3, inputResponses={"confirm": answer}, requestState="st")
    t.result(b, {"content": []})
    c = t.tool("other", {}, id=4, inputResponses={"confirm": answer}, requestState="st")
    t.error(c, -32603, f"boom {TERMINAL}{FORGED}")
    return t


@pytest.fixture
def rec(tmp_path):
    return save(hostile().frames, tmp_path / "hostile.jsonl")


def assert_literal_lines(text: str) -> list[str]:
    """No raw control character, and no line a peer forged."""
    assert RAW.search(text) is None, repr(text)
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith("mrtr-inspect: error forged")]
    return lines


# -- the one function ---------------------------------------------------------------------------


@pytest.mark.parametrize("char", ["\x00", "\x07", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u2028",
                                  "\u2029", "\ud800", "\u202e", "\u2066", "\u2069", "\u200f", "\u061c"])
def test_printable_escapes_what_a_terminal_acts_on(char):
    assert printable(f"a{char}b") == "a" + repr(char)[1:-1] + "b"
    assert printable(printable(f"a{char}b")) == printable(f"a{char}b")


def test_printable_leaves_ordinary_text_alone():
    text = "é 日本 \u00a0 \\x1b [bold] <b> 🙂 👨\u200d👩\u200d👧 עברית"  # a no-break space is not a control; a backslash
    # stays one; the zero-width joiner of an emoji sequence and right-to-left text are left as they are
    assert printable(text) == text
    assert printable(42) == "42"


# -- show -----------------------------------------------------------------------------------------


def test_show_prints_names_and_answers_literally(rec):
    r = run_cli("show", rec)
    assert r.exit_code == 0, r.stderr
    lines = assert_literal_lines(r.stdout)
    assert lines[0].startswith(f"c1 tools/call {SHOWN}  complete")
    answers = next(line for line in lines if "answers" in line)
    assert answers.endswith(f'answers confirm: accept {{"notes": "{REDACTED} {MARKUP}"}}')


def test_show_on_a_terminal_styles_only_its_own_words(rec):
    chains = json.loads(run_cli("show", rec, "--format", "json").stdout)["chains"]
    out = io.StringIO()
    render_text(chains, out, color=True)
    text = out.getvalue()
    assert "\x1b[" in text  # styled
    plain = re.sub("\x1b\\[[0-9;]*m", "", text)  # without the styles rich wrote
    assert_literal_lines(plain)
    assert SHOWN in plain and f"{REDACTED} {MARKUP}" in plain


def test_show_keeps_a_redaction_placeholder(tmp_path):
    r = run_cli("show", save(hostile("deploy", REDACTED).frames, tmp_path / "r.jsonl"))
    assert f'answers confirm: accept {{"notes": "{REDACTED}"}}' in r.stdout


def test_show_without_traffic_markup_is_unchanged(tmp_path):
    """The near miss: an ordinary recording shows as it always did."""
    r = run_cli("show", save(hostile("deploy", "ok é").frames, tmp_path / "plain.jsonl"))
    assert r.stdout.splitlines()[:3] == [
        "c1 tools/call deploy  complete  1 round  1503 ms (waited 1501 ms for input)  link: state",
        "├── → request id 2 (#0, +0 ms)",
        "├── ← input_required round 1 (#1, +1 ms)",
    ]
    assert '│   └── answers confirm: accept {"notes": "ok é"}' in r.stdout.splitlines()


# -- check, the tee, the live view ----------------------------------------------------------------


def test_check_text_keeps_each_finding_on_its_line(rec):
    r = run_cli("check", rec, "-v")
    lines = assert_literal_lines(r.stdout)
    named = [line for line in lines if SHOWN in line]
    assert named and any(line.startswith("error ") for line in named)
    assert f"  c1 tools/call {SHOWN}  complete" in "\n".join(lines)


def test_findings_on_a_terminal_are_literal(rec):
    findings = json.loads(run_cli("check", rec, "--format", "json").stdout)["findings"]
    out = io.StringIO()
    printer = FindingPrinter(out, min_severity="info", color=True)
    for f in findings:
        printer.finding(f)
    printer.line(f"internal output error: {TERMINAL}{FORGED}")
    plain = re.sub("\x1b\\[[0-9;]*m", "", out.getvalue())
    assert_literal_lines(plain)
    assert SHOWN in plain and "\\x1b[2J\\nmrtr-inspect: error forged" in plain


def test_the_tee_escapes_names_on_stderr():
    call = dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": NAME, "arguments": {}, "_meta": meta()}}) + b"\n"
    p = subprocess.run(tee_cmd(cmd=helper("respond")), input=call, capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    lines = assert_literal_lines(err)
    assert all(line.startswith("mrtr-inspect: ") for line in lines if line != "respond: started")
    assert f"mrtr-inspect: c1 tools/call {SHOWN}  complete" in err


def test_the_live_view_escapes_names_in_lines_and_rows():
    t = hostile()
    frames = t.frames
    lines: list[str] = []
    plain = LiveView(write=lambda text, severity: lines.append(text), color=False, min_severity="info")
    rich = LiveView(io.StringIO(), color=True)
    insp = Analysis()
    plain.start()
    for n, f in enumerate(frames):
        for o in insp.feed(f):
            plain.add(o)
            rich.add(o)
        if n == 2:  # c1 is waiting for the user: its row is on the screen
            screen = io.StringIO()
            Console(file=screen, force_terminal=True, width=400).print(rich)
            row = re.sub("\x1b\\[[0-9;]*m", "", screen.getvalue())
            assert_literal_lines(row)
            assert f"c1 tools/call {SHOWN}  round 1: waiting for input" in row
    plain.stop()
    assert all("\n" not in line and RAW.search(line) is None for line in lines)
    assert f"c1 tools/call {SHOWN}: request id=2" in lines


# -- mermaid and Markdown -------------------------------------------------------------------------

MERMAID_NAME = 'x"#;<b>&amp;%%{init}%%\n%% spill'


def _mermaid_text(message: str) -> str:
    """A message as mermaid reads it: `#name;` / `#123;` entity codes are taken out first (its
    encodeEntities), what is left must not hold what ends or comments a message; then decoded."""
    codes = re.findall(r"#(\w+);", message)
    rest = re.sub(r"#\w+;", "", message)
    assert not set(rest) & set('#;\n"<>&%'), rest
    return re.sub(r"#(\w+);", lambda m: html.unescape(f"&#{m[1]};" if m[1].isdigit() else f"&{m[1]};"), message) \
        if codes else message


def test_mermaid_messages_show_names_literally(tmp_path):
    rec = save(hostile(MERMAID_NAME).frames, tmp_path / "m.jsonl")
    text = run_cli("show", rec, "--format", "mermaid").stdout
    assert_literal_lines(text)
    blocks = text.split("\n\n")
    for block in filter(None, blocks):
        head, kind, *body = block.splitlines()
        assert head.startswith("%% c") and kind == "sequenceDiagram"
        for line in body:
            assert re.match(r"    (participant [CS] as (Client|Server)|C->>S: |S-->>C: |Note over C(,S)?: )", line), line
            if ": " in line:
                _mermaid_text(line.split(": ", 1)[1])
    first = next(line for line in text.splitlines() if line.startswith("    C->>S: tools/call x"))
    assert _mermaid_text(first.split(": ", 1)[1]) == f"tools/call {printable(MERMAID_NAME)} id 2"


def test_mermaid_of_plain_names_is_unchanged(tmp_path):
    text = run_cli("show", save(hostile("deploy").frames, tmp_path / "p.jsonl"), "--format", "mermaid").stdout
    assert text.splitlines()[:6] == [
        "%% c1 tools/call deploy: complete, 1 round", "sequenceDiagram", "    participant C as Client",
        "    participant S as Server", "    C->>S: tools/call deploy id 2",
        "    S-->>C: input_required (confirm: elicitation/create (form) 'Proceed?' fields confirm)"]


@pytest.mark.parametrize("name", ['<script>alert(1)</script>"x', "a *b* _c_ `d` [e](f) ## &amp; | \\ ~g~\nh",
                                  "deploy é 日本"])
def test_markdown_headings_show_names_literally(tmp_path, name):
    rec = save(hostile(name).frames, tmp_path / "m.jsonl")
    out = tmp_path / "chains.md"
    r = run_cli("export", rec, "--to", "mermaid", "--output", out)
    assert r.exit_code == 0, r.stderr
    md = out.read_text(encoding="utf-8")
    assert md.startswith("## c1 tools/call ") and "\n\n```mermaid\n%% c1 " in md
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(md)
    heading = tokens[tokens.index(next(t for t in tokens if t.type == "heading_open")) + 1]
    assert [c.type for c in heading.children] == ["text"]  # no tag, no emphasis, no link, no code
    assert heading.content and heading.children[0].content == f"c1 tools/call {printable(name)}"
    assert sum(1 for t in tokens if t.type == "fence" and t.info == "mermaid") == 2



@pytest.mark.parametrize("char", ["\x7f", "\x85", "\x9b", "\u2028", "\u202e", "\u2066", "\u061c", "\ud800"])
def test_json_printable_keeps_the_value_and_writes_no_control(char):
    from mrtr_inspect.outputs.text import json_printable

    value = {"name": f"a{char}b\x1b\n", "é": "日本"}
    text = json_printable(json.dumps(value, ensure_ascii=False, indent=2))
    assert RAW.search(text) is None and char not in text
    assert json.loads(text) == value
    assert "é" in text and "日本" in text  # the rest stays as it was
