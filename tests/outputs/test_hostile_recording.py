"""Every command that prints, over a hostile recording: tool names, ids, labels, error messages,
answers, SSE ids and header values carrying terminal escapes (ESC, OSC 0 titles, OSC 8 links,
OSC 52 clipboard writes, CSI 2J, BEL), C1 controls, bidirectional overrides and Mermaid
directives. No raw control character reaches a text output (stdout, stderr, and the files of the
text formats); no Mermaid directive reaches a diagram. The recording and the fixture export keep
the wire bytes as they crossed (docs/recording-format.md): they are not text outputs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.outputs.conftest import ROOT, run_cli, save
from tests.traffic import ACCEPT, ELICIT, Traffic

# what a terminal acts on: a title (OSC 0), a link (OSC 8), a clipboard write (OSC 52), a cleared
# screen (CSI 2J), a bell, C1 controls (CSI as one character, DCS, NEL), bidirectional overrides
# (CVE-2021-42574), a line separator, and a Mermaid directive
EVIL = ("\x1b]0;retitled\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b]52;c;cHduZWQ=\x07"
        "\x1b[2J\x07\x9b2J\x90q\x9c\x85\u202eevil\u202c\u2066x\u2069\u2028"
        "%%{init: {\"theme\": \"dark\", \"themeCSS\": \"@import url(https://evil.example/x.css)\"}}%%")
# the same in a header value or an SSE id (latin-1, no line break)
EVIL_HEADER = "\x1b]0;retitled\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b2J\x85"
# no raw C0 (but the line feed and tab of our own layout), DEL, C1, bidi control, line or
# paragraph separator, lone surrogate
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def hostile(variant: str = "") -> Traffic:
    """A stdio session and an HTTP one, every peer-controlled string hostile; `variant` makes the
    server's answers differ (for diff and verify)."""
    t = Traffic("stdio", info={"command": ["server", EVIL]})
    name = f"deploy {EVIL}"
    a = t.tool(name, {"env": EVIL}, id=f"id-{EVIL}")
    t.irr(a, {f"confirm{EVIL}": {**ELICIT, "params": {**ELICIT["params"], "message": EVIL}}}, state=f"st{EVIL}")
    t.tick(1.5)
    b = t.tool(name, {"env": EVIL}, id=f"id2-{EVIL}", inputResponses={f"confirm{EVIL}": ACCEPT},
               requestState=f"st{EVIL}")
    t.notify("notifications/message", {"level": "info", "data": EVIL + variant}, direction="s2c")
    t.result(b, {"content": [{"type": "text", "text": EVIL + variant}]})
    c = t.tool(EVIL, {}, id=7)
    t.error(c, -32603, f"boom {EVIL}{variant}", data={"why": EVIL})
    t.line("s2c", f"not json {EVIL}".encode())
    t.line("s2c", b"raw \x1b]0;bytes\x07 \xff\xfe")
    t.close()
    t.next_session("s2")
    t.transport = "http"
    headers = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
               ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", EVIL_HEADER),
               ("user-agent", EVIL_HEADER))
    d = t.call("tools/call", {"name": name, "arguments": {"env": EVIL}}, id=f"h-{EVIL}", headers=headers)
    t.respond_sse(t._x_of_id.pop(next(iter(t._x_of_id))), [],
                  headers=(("content-type", "text/event-stream"), ("mcp-session-id", EVIL_HEADER),
                           ("x-evil", EVIL_HEADER)),
                  raw_events=[b"id: " + EVIL_HEADER.encode("latin-1") + b"\r\nevent: message\r\ndata: "
                              + _result(d, variant) + b"\r\n\r\n"])
    e = t.call("tools/call", {"name": EVIL, "arguments": {}}, id=9, headers=headers)
    t.answer({"jsonrpc": "2.0", "id": e, "error": {"code": -32000, "message": EVIL + variant}}, status=500,
             headers=(("content-type", "application/json"), ("www-authenticate", EVIL_HEADER)))
    t.end()
    return t


def _result(rid, variant: str) -> bytes:
    import json

    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
        "resultType": "complete", "content": [{"type": "text", "text": EVIL + variant}],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": EVIL, "version": "1"}}}},
        ensure_ascii=False).encode()


@pytest.fixture(scope="module")
def recs(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("hostile")
    return save(hostile().frames, d / "hostile.jsonl"), save(hostile(" live").frames, d / "other.jsonl")


def assert_clean(text: str, where: str) -> None:
    m = RAW.search(text)
    assert m is None, f"{where}: raw {m.group()!r} at {m.start()}: {text[max(0, m.start() - 60):m.start() + 20]!r}"


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "replace")


CHECK = [("check", "-v", "--format", f) for f in ("text", "json", "sarif", "junit")]
SHOW = [("show", "--format", f) for f in ("text", "mermaid", "json")]
OTHERS = [("stats", "--format", "text"), ("stats", "--format", "json")]


@pytest.mark.parametrize("args", CHECK + SHOW + OTHERS, ids=lambda a: " ".join(a))
def test_commands_print_no_raw_control(recs, args):
    r = run_cli(args[0], recs[0], *args[1:])
    assert r.exit_code in (0, 1), r.stderr
    assert_clean(r.stdout, "stdout")
    assert_clean(r.stderr, "stderr")
    assert EVIL not in r.stdout  # the hostile text was there, escaped


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_diff_prints_no_raw_control(recs, fmt):
    r = run_cli("diff", recs[0], recs[1], "--format", fmt)
    assert r.exit_code in (0, 1), r.stderr
    assert "→" in r.stdout  # the answers differ, and the difference is shown
    assert_clean(r.stdout, "stdout")
    assert_clean(r.stderr, "stderr")


@pytest.mark.parametrize("to, name", [("har", "x.har"), ("html", "x.html"), ("mermaid", "x.mmd"),
                                      ("mermaid", "x.md"), ("otlp", "x.json"), ("fixture", "x.jsonl")])
def test_exports_write_no_raw_control(recs, tmp_path, to, name):
    out = tmp_path / name
    r = run_cli("export", recs[0], "--to", to, "--output", out)
    assert r.exit_code == 0, r.stderr
    assert_clean(r.stdout, "stdout")
    assert_clean(r.stderr, "stderr")
    if to != "fixture":  # a fixture is a recording: the wire bytes, as they crossed
        assert_clean(_decoded(out.read_bytes()), name)


def _mermaid_safe(text: str) -> None:
    """No directive anywhere; each `%%` line is one of ours, its text encoded as the messages are."""
    assert "%%{" not in text and "}%%" not in text
    for line in text.splitlines():
        if "%%" in line:
            assert line.startswith("%% ") and "%" not in line[3:], line


def test_diagrams_obey_no_directive(recs, tmp_path):
    _mermaid_safe(run_cli("show", recs[0], "--format", "mermaid").stdout)
    for name in ("x.mmd", "x.md"):
        assert run_cli("export", recs[0], "--to", "mermaid", "--output", tmp_path / name).exit_code == 0
        _mermaid_safe((tmp_path / name).read_text(encoding="utf-8"))


def test_diagram_of_a_plain_name_is_unchanged(tmp_path):
    """The near miss: an ordinary name keeps its `%%` line as it was."""
    t = Traffic()
    t.result(t.tool("deploy", {}), {"content": []})
    out = run_cli("show", save(t.frames, tmp_path / "p.jsonl"), "--format", "mermaid").stdout
    assert out.splitlines()[0] == "%% c1 tools/call deploy: complete, 0 rounds"


def _mrtr(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrtr_inspect", *map(str, args)], capture_output=True, cwd=ROOT,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_replay_verify_prints_no_raw_control(recs):
    """A hostile recording played against a server answering from another hostile recording: the
    labels, the difference paths and values, the unified diffs, the misses all quote the traffic."""
    serve = [sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", str(recs[1])]
    p = _mrtr("replay", "verify", recs[0], "--", *serve)
    out, err = _decoded(p.stdout), _decoded(p.stderr)
    assert p.returncode == 1, err
    assert "differs" in out and "+++ live" in out
    assert_clean(out, "stdout")
    assert_clean(err, "stderr")


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit"])
def test_probe_prints_no_raw_control(recs, fmt):
    serve = [sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", str(recs[0])]
    p = _mrtr("probe", recs[0], "--format", fmt, "--timeout", "20", "--", *serve)
    out, err = _decoded(p.stdout), _decoded(p.stderr)
    assert p.returncode in (0, 1), err
    assert out.strip()
    assert_clean(out, "stdout")
    assert_clean(err, "stderr")
