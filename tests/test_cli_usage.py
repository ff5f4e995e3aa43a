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


@pytest.mark.parametrize("args, named", [
    (("stdio", "--recrod", "s.jsonl", "--", "python", "server.py"), "--recrod"),
    (("stdio", "--quiet", "--bogus", "--", "true"), "--bogus"),
    (("stdio", "--record=s.jsonl", "--reprot", "r.json", "python"), "--reprot"),
])
def test_a_mistyped_tee_option_is_a_usage_error_not_the_server_command(args, named, tmp_path, monkeypatch):
    """It was taken as CMD: `cannot start '--recrod'`, exit 127, which a client's config shows as a
    server crash."""
    monkeypatch.chdir(tmp_path)  # where a tee that ran after all would leave its files
    r = _run(*args)
    assert r.exit_code == 2 and f"no such option: {named}" in r.output and "cannot start" not in r.output


def test_near_miss_the_server_commands_own_options_pass(monkeypatch):
    """After `--`, or after CMD's first word, options are CMD's; the tee's own, with values, come first."""
    import mrtr_inspect.adapters.stdio_tee as tee

    seen = []
    monkeypatch.setattr(tee, "run_tee", lambda cmd, **kw: seen.append((cmd, kw["record"], kw["quiet"])) or 0)
    for args in (("stdio", "--record", "s.jsonl", "--quiet", "--", "--weird-server", "-x"),
                 ("stdio", "--record=s.jsonl", "--quiet", "python", "server.py", "--port", "3")):
        assert _run(*args).exit_code == 0
    assert seen == [(["--weird-server", "-x"], "s.jsonl", True), (["python", "server.py", "--port", "3"], "s.jsonl", True)]


@pytest.mark.parametrize("args, reason", [
    (("check",), "Missing argument 'PATHS...'"),
    (("check", "x.jsonl", "--fail-on", "bogus"), "Invalid value for '--fail-on'"),
    (("bogus",), "No such command 'bogus'"),
    (("show", "--nope", "x.jsonl"), "No such option '--nope'"),
])
def test_every_usage_error_is_one_line_with_exit_2(args, reason):
    """CONTRACTS.md: exit 2 with a one-line reason (click printed a four-line usage block); the line
    says where the help is. Near miss: --help and --version still print and exit 0."""
    r = _run(*args)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and reason in r.output and "--help'" in r.output
    assert r.output.startswith("mrtr-inspect: ")
    for ok in (("check", "--help"), ("--version",)):
        assert _run(*ok).exit_code == 0


@pytest.mark.parametrize("error", [
    "mrtr_inspect.recording.writer.RecordingError",
    "mrtr_inspect.replay.script.ScriptError",
    "mrtr_inspect.settings.SettingsError",
])
def test_a_user_error_is_its_reason_on_one_line_with_exit_2(error, monkeypatch):
    """Every command's user errors (errors.UserError) are caught in one place: the reason, as one
    inert line, exit 2, whichever command raised it and wherever it came from."""
    import importlib

    import mrtr_inspect.adapters.stdio_tee as tee

    module, name = error.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)

    def run_tee(cmd, **kw):
        raise cls("cannot write recording /x/s.jsonl: No such file or directory\x1b[2J")

    monkeypatch.setattr(tee, "run_tee", run_tee)
    r = _run("stdio", "--", "true")
    assert r.exit_code == 2
    assert r.output == "mrtr-inspect: cannot write recording /x/s.jsonl: No such file or directory\\x1b[2J\n"


def test_near_miss_another_error_is_not_taken_for_a_user_error(monkeypatch):
    import mrtr_inspect.adapters.stdio_tee as tee

    def run_tee(cmd, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(tee, "run_tee", run_tee)
    r = _run("stdio", "--", "true")
    assert r.exit_code == 1 and isinstance(r.exception, RuntimeError)


def _commands(group, prefix=()):
    import click

    for name, cmd in group.commands.items():
        yield (*prefix, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))


def test_the_help_and_the_readme_cite_the_catalog_users_have():
    """Issue 25 item 16: `probe --help` and the README cited RULES.md, which the repository does not
    hold; docs/rules.md is the catalog a user has. Near miss: the probe's help still points there."""
    from pathlib import Path

    for cmd in [(), *_commands(main)]:
        r = _run(*cmd, "--help")
        assert r.exit_code == 0 and "RULES.md" not in r.output, cmd
    assert "docs/rules.md §12" in _run("probe", "--help").output
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert "RULES.md" not in readme and "docs/rules.md §12" in readme
