"""The top-level command: bare, it shows its help; proxy options without `--upstream` are a usage error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_bare_command_shows_the_help():
    r = _run()
    assert r.exit_code == 0 and "Usage:" in r.output and "--upstream" in r.output


@pytest.mark.parametrize("args, named", [
    (("--record", "x.jsonl"), "--record"),
    (("--report", "r.json"), "--report"),
    (("--quiet",), "--quiet"),
    (("--listen", "127.0.0.1:0"), "--listen"),
    (("--disable", "chain-linked"), "--disable"),
])
def test_proxy_options_without_upstream_are_refused(args, named, tmp_path):
    r = _run(*args)
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and named in r.output and "--upstream" in r.output
    assert not (tmp_path / "x.jsonl").exists()


def test_near_miss_a_subcommand_runs():
    r = _run("rules", "--format", "json")
    assert r.exit_code == 0 and r.output.lstrip().startswith(("[", "{"))


def test_a_one_line_reason_quotes_a_name_literally(tmp_path):
    """A path (or a note quoting a file) with control characters stays one inert line."""
    name = str(tmp_path / "a\x1b[2J\nmrtr-inspect: forged.jsonl")
    r = _run("check", name)
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "\x1b" not in r.output
    assert "a\\x1b[2J\\nmrtr-inspect: forged.jsonl" in r.output


def test_near_miss_an_ordinary_name_is_quoted_as_it_is(tmp_path):
    name = str(tmp_path / "séance 日本.jsonl")
    r = _run("check", name)
    assert r.exit_code == 2 and name in r.output
