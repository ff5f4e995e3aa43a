"""`check --format markdown`: errors first, a table of chains, findings linked to their spec, and
whatever the traffic named shown inert (no HTML, no table cell broken, no one mentioned)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from mrtr_inspect.cli import main
from mrtr_inspect.outputs.markdown import md
from tests.outputs.conftest import HOSTILE, faulty, save


def test_md_makes_traffic_text_inert():
    assert md(HOSTILE) == "&lt;/script&gt;&lt;img src=x onerror=alert\\(1\\)&gt;"
    assert md("a|b @octocat *x* [l](u) `c`\n# h") == "a\\|b &#64;octocat \\*x\\* \\[l\\]\\(u\\) \\`c\\`\\\\n\\# h"


def test_errors_first_chains_table_and_spec_links(tmp_path):
    rec = save(faulty().frames, tmp_path / "r.jsonl")
    r = CliRunner().invoke(main, ["check", str(rec), "--format", "markdown"])
    assert r.exit_code == 1
    out = r.stdout
    assert out.startswith("## ❌ mrtr-inspect: ")
    assert out.index("### Errors") < out.index("### Chains")
    assert "| `retry-reused-id` |" in out
    assert re.search(r"\| \[spec\]\(https://modelcontextprotocol\.io/specification/2026-07-28/[^)]+\) \|", out)
    assert "| chain | method | target | rounds | outcome | duration |" in out
    # the hostile tool name of c2: no tag, no raw control character, one line per row
    assert "<img" not in out and "<script" not in out and "\x1b" not in out
    for line in out.splitlines():
        if line.startswith("| c2 "):
            assert line.count(" | ") == 5
    assert "2 infos not listed (`--verbose` lists them)." in out and "### Infos" not in out
    verbose = CliRunner().invoke(main, ["check", str(rec), "--format", "markdown", "-v"]).stdout
    assert "### Infos (2)" in verbose and verbose.index("### Errors") < verbose.index("### Infos")


def test_a_clean_run_is_a_green_mark_and_fail_on_is_said(tmp_path):
    from tests.outputs.conftest import HTTP_FIXTURE

    r = CliRunner().invoke(main, ["check", str(HTTP_FIXTURE), "--format", "markdown", "--fail-on", "warning"])
    assert r.exit_code == 0
    assert r.stdout.startswith("## ✅ mrtr-inspect: 0 errors, 0 warnings, 8 infos")
    assert "Fails on warning: 0 findings at or above it." in r.stdout
