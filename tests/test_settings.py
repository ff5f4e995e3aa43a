"""Configuration files (settings.py) and their wiring into the commands: where they are found, what
they may say, how a bad one is reported, and command-line options over files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrtr_inspect.cli import main
from mrtr_inspect.config import Config
from mrtr_inspect.recording.format import encode
from mrtr_inspect.rules import load_rules
from mrtr_inspect.rules.registry import REGISTRY
from mrtr_inspect.settings import Settings, SettingsError, apply, discover, load, read
from tests.traffic import ACCEPT, ELICIT, Traffic

load_rules()
IDS = set(REGISTRY)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def table(text: str, tmp_path: Path, name: str = ".mrtr-inspect.toml") -> Settings:
    return read(write(tmp_path / name, text))


# --- finding the file ------------------------------------------------------------------------------------


def test_discover_walks_up_to_the_nearest_directory_with_settings(tmp_path):
    write(tmp_path / ".mrtr-inspect.toml", "disable = ['chain-linked']\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    found = discover(deep)
    assert found is not None and found.path == tmp_path / ".mrtr-inspect.toml"
    assert found.table == {"disable": ["chain-linked"]}


def test_nearer_pyproject_table_beats_a_dedicated_file_further_up(tmp_path):
    write(tmp_path / ".mrtr-inspect.toml", "disable = ['chain-linked']\n")
    write(tmp_path / "proj" / "pyproject.toml", "[tool.mrtr-inspect]\nchain_long_rounds = 3\n")
    found = discover(tmp_path / "proj")
    assert found is not None and found.path == tmp_path / "proj" / "pyproject.toml"
    assert found.table == {"chain_long_rounds": 3}


def test_pyproject_without_the_table_does_not_stop_the_walk(tmp_path):
    write(tmp_path / ".mrtr-inspect.toml", "chain_long_rounds = 4\n")
    write(tmp_path / "proj" / "pyproject.toml", "[project]\nname = 'x'\n[tool.other]\na = 1\n")
    found = discover(tmp_path / "proj")
    assert found is not None and found.path == tmp_path / ".mrtr-inspect.toml"


def test_dedicated_file_wins_in_the_same_directory_with_a_note(tmp_path):
    write(tmp_path / ".mrtr-inspect.toml", "chain_long_rounds = 4\n")
    write(tmp_path / "pyproject.toml", "[tool.mrtr-inspect]\nchain_long_rounds = 7\n")
    found = discover(tmp_path)
    assert found is not None and found.path == tmp_path / ".mrtr-inspect.toml"
    assert found.table == {"chain_long_rounds": 4}
    assert len(found.notes) == 1 and "ignored" in found.notes[0] and "pyproject.toml" in found.notes[0]


def test_no_note_when_the_pyproject_beside_has_no_table(tmp_path):
    write(tmp_path / ".mrtr-inspect.toml", "chain_long_rounds = 4\n")
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert discover(tmp_path).notes == []


def test_no_file_gives_the_defaults(tmp_path):
    config, found = load(IDS, start=tmp_path)
    assert found is None
    assert config == Config()


def test_broken_pyproject_on_the_way_up_is_an_error_naming_it(tmp_path):
    bad = write(tmp_path / "pyproject.toml", "[tool.mrtr-inspect\n")
    with pytest.raises(SettingsError, match=f"^{bad}: not valid TOML"):
        discover(tmp_path)


def test_explicit_pyproject_without_the_table_is_an_error(tmp_path):
    p = write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    with pytest.raises(SettingsError, match=r"no \[tool.mrtr-inspect\] table"):
        read(p)


def test_explicit_file_that_does_not_exist(tmp_path):
    with pytest.raises(SettingsError, match="cannot read it"):
        read(tmp_path / "nope.toml")


# --- what a file may say -----------------------------------------------------------------------------------


def test_every_key_reaches_the_config(tmp_path):
    s = table(
        """
severity = {"chain-linked" = "Warning", "retry-reused-id" = "info"}
disable = ["request-state-reencoded"]
abandon_after = 600
peer_header = "X-User"
chain_long_rounds = 3
redact_paths = ["params.arguments.password"]
redact_headers = ["X-Api-Token"]
[[hop_map]]
target = "mcpx_call"
[[hop_map]]
target = "gw_call"
tool = "call.tool"
arguments = "call.arguments"
""", tmp_path)
    c = apply(s, Config(), IDS)
    assert c.severity == {"chain-linked": "warning", "retry-reused-id": "info"}
    assert c.disabled == {"request-state-reencoded"}
    assert (c.abandon_after, c.peer_header, c.chain_long_rounds) == (600, "X-User", 3)
    assert c.redact_paths == ["params.arguments.password"] and c.redact_headers == ["X-Api-Token"]
    assert c.hop_map == [{"target": "mcpx_call"}, {"target": "gw_call", "tool": "call.tool", "arguments": "call.arguments"}]


def test_pyproject_table_is_read(tmp_path):
    s = table('[tool.mrtr-inspect]\nabandon_after = 2.5\n[tool.mrtr-inspect.severity]\n"chain-linked" = "error"\n',
              tmp_path, "pyproject.toml")
    c = apply(s, Config(), IDS)
    assert c.abandon_after == 2.5 and c.severity == {"chain-linked": "error"}


@pytest.mark.parametrize(
    "text, message",
    [
        ('severity = {"chain-linkd" = "info"}\n', "severity: unknown rule id 'chain-linkd' (did you mean 'chain-linked'?)"),
        ('disable = ["no-such-rule-at-all"]\n', "disable: unknown rule id 'no-such-rule-at-all'"),
        ('severity = {"chain-linked" = "fatal"}\n', "severity: chain-linked = 'fatal': the level must be error, warning or info"),
        ('severity = {"chain-linked" = 3}\n', "the level must be error, warning or info"),
        ('severity = ["chain-linked"]\n', "severity: must be a table"),
        ('disable = "chain-linked"\n', "disable: must be a list of rule ids"),
        ("abandon-after = 3\n", "abandon-after: unknown key (did you mean 'abandon_after'?)"),
        ("colour = true\n", "colour: unknown key; known: severity, disable"),
        ("abandon_after = 0\n", "abandon_after: must be a number of seconds above 0"),
        ("chain_long_rounds = true\n", "chain_long_rounds: must be a whole number above 0, not True"),
        ("chain_long_rounds = 2.5\n", "chain_long_rounds: must be a whole number above 0"),
        ('peer_header = ""\n', "peer_header: must be a header name"),
        ("redact_headers = [1]\n", "redact_headers: must be a list of strings"),
        ('[[hop_map]]\ntool = "tool"\n', "hop_map: must be tables [[hop_map]] of target"),
        ('[[hop_map]]\ntarget = "gw"\nargs = "a"\n', "hop_map: must be tables [[hop_map]] of target"),
        ('hop_map = ["gw"]\n', "hop_map: must be tables [[hop_map]] of target"),
    ],
)
def test_bad_settings_name_the_file_and_the_key(tmp_path, text, message):
    s = table(text, tmp_path)
    config = Config()
    with pytest.raises(SettingsError) as e:
        apply(s, config, IDS)
    assert str(e.value).startswith(f"{tmp_path / '.mrtr-inspect.toml'}: ")
    assert message in str(e.value)
    assert config == Config()  # nothing half-applied


def test_pyproject_errors_name_the_table(tmp_path):
    s = table('[tool.mrtr-inspect]\ndisable = ["nope-nope"]\n', tmp_path, "pyproject.toml")
    with pytest.raises(SettingsError, match=r"pyproject.toml: \[tool.mrtr-inspect\] disable: unknown rule id"):
        apply(s, Config(), IDS)


# --- the commands ------------------------------------------------------------------------------------------


@pytest.fixture
def recording(tmp_path, monkeypatch):
    """A two-round chain whose first retry reuses the first request's id (retry-reused-id, error);
    the current directory is an empty project."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, id=a, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.irr(b, {"again": ELICIT}, state="s2")
    c = t.tool("deploy", {"env": "prod"}, inputResponses={"again": ACCEPT}, requestState="s2")
    t.result(c, {"content": []})
    t.end()
    project = tmp_path / "project"
    project.mkdir()
    path = project / "rec.jsonl"
    path.write_bytes(b"".join(encode(f) for f in t.frames))
    monkeypatch.chdir(project)
    return path


def check(*args: str):
    r = CliRunner().invoke(main, ["check", "rec.jsonl", "--format", "json", *args])
    report = json.loads(r.stdout) if r.exit_code in (0, 1) else None
    return r, report


def severities(report) -> dict[str, str]:
    return {f["rule"]: f["severity"] for f in report["findings"]}


def test_without_settings_the_defaults_apply(recording):
    r, report = check()
    assert r.exit_code == 1
    assert severities(report)["retry-reused-id"] == "error"
    assert "chain-long" not in severities(report)


def test_settings_file_changes_severity_disables_and_sets_limits(recording):
    write(Path(".mrtr-inspect.toml"), 'severity = {"retry-reused-id" = "warning"}\ndisable = ["chain-linked"]\n'
                                      "chain_long_rounds = 1\n")
    r, report = check()
    assert r.exit_code == 0, r.output
    sev = severities(report)
    assert sev["retry-reused-id"] == "warning"
    assert "chain-linked" not in sev
    assert sev["chain-long"] == "info"  # 2 rounds > chain_long_rounds = 1


def test_settings_found_from_a_subdirectory_pyproject(recording, monkeypatch):
    write(recording.parent / "pyproject.toml", '[tool.mrtr-inspect]\ndisable = ["retry-reused-id"]\n')
    sub = recording.parent / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    r = CliRunner().invoke(main, ["check", str(recording), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert "retry-reused-id" not in severities(json.loads(r.stdout))


def test_command_line_beats_the_file(recording):
    write(Path(".mrtr-inspect.toml"), 'severity = {"retry-reused-id" = "warning"}\n')
    r, report = check("--severity", "retry-reused-id=error")
    assert r.exit_code == 1
    assert severities(report)["retry-reused-id"] == "error"
    r, report = check("--disable", "retry-reused-id")
    assert r.exit_code == 0 and "retry-reused-id" not in severities(report)


def test_explicit_config_option_replaces_discovery(recording, tmp_path):
    write(Path(".mrtr-inspect.toml"), 'disable = ["retry-reused-id"]\n')
    other = write(tmp_path / "elsewhere" / "ci.toml", 'severity = {"retry-reused-id" = "info"}\n')
    r, report = check("--config", str(other))
    assert severities(report)["retry-reused-id"] == "info"
    # on the group, before the command, too
    r = CliRunner().invoke(main, ["--config", str(other), "check", "rec.jsonl", "--format", "json"])
    assert severities(json.loads(r.stdout))["retry-reused-id"] == "info"


def test_both_files_in_one_directory_prints_a_note(recording):
    write(Path(".mrtr-inspect.toml"), 'disable = ["chain-linked"]\n')
    write(Path("pyproject.toml"), '[tool.mrtr-inspect]\ndisable = ["retry-reused-id"]\n')
    r, report = check()
    assert r.exit_code == 1  # the pyproject table is not used
    assert "chain-linked" not in severities(report) and "retry-reused-id" in severities(report)
    assert "mrtr-inspect: note: " in r.stderr and "is ignored" in r.stderr


@pytest.mark.parametrize(
    "text",
    ['severity = {"retry-reused-idd" = "warning"}\n', 'severity = {"retry-reused-id" = "loud"}\n', "disable = [\n"],
)
def test_bad_file_is_one_line_and_exit_2(recording, text):
    write(Path(".mrtr-inspect.toml"), text)
    r = CliRunner().invoke(main, ["check", "rec.jsonl"])
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mrtr-inspect: ") and ".mrtr-inspect.toml" in lines[0]
    assert "Traceback" not in r.output


def test_missing_explicit_config_is_exit_2(recording):
    r = CliRunner().invoke(main, ["check", "rec.jsonl", "--config", "missing.toml"])
    assert r.exit_code == 2
    assert r.stderr.startswith("mrtr-inspect: missing.toml: cannot read it")


def test_the_repositorys_own_settings_end_the_search_at_the_checkout(tmp_path):
    """The tests run the CLI, the tee and the proxy inside the checkout: the settings that apply there
    are the repository's own (none), whatever a folder above it holds. Near miss: a folder with no
    settings of its own takes them from above."""
    from tests.e2e import ROOT

    found = discover(ROOT / "tests" / "e2e")
    assert found is not None and found.path == ROOT / "pyproject.toml" and found.table == {}
    (tmp_path / ".mrtr-inspect.toml").write_text('disable = ["request-state-unsolicited"]\n', encoding="utf-8")
    (tmp_path / "below").mkdir()
    assert discover(tmp_path / "below").path == tmp_path / ".mrtr-inspect.toml"


@pytest.mark.parametrize("paths, noted", [
    (["params.requestState"], True),
    (["result.requestState", "params.arguments.token"], True),
    (["params.requestState", "result.requestState"], False),
    (["*.requestState"], False),  # both sides at once
    (["params.arguments.token"], False),
])
def test_redacting_one_side_of_the_state_pair_is_noted(tmp_path, paths, noted):
    """The audit's foot-gun: a state redacted where the client echoes it but not where the server
    issued it (or the reverse) makes every retry of every recording read as altered."""
    f = tmp_path / ".mrtr-inspect.toml"
    f.write_text(f"redact_paths = {json.dumps(paths)}\n", encoding="utf-8")
    load_rules()
    _, found = load(REGISTRY, f)
    said = [n for n in found.notes if "requestState" in n]
    assert bool(said) == noted and all("redact both or neither" in n for n in said)


# --- encodings (issue 25 item 11) --------------------------------------------------------------------------


def test_a_utf8_byte_order_mark_is_read_as_utf8(recording):
    Path(".mrtr-inspect.toml").write_bytes(b"\xef\xbb\xbf" + 'disable = ["retry-reused-id"]\n'.encode())
    r, report = check()
    assert r.exit_code == 0, r.output
    assert "retry-reused-id" not in severities(report)


@pytest.mark.parametrize("data, said", [
    ('disable = ["retry-reused-id"]\n'.encode("utf-16"), "not UTF-8 but UTF-16 (it starts with a UTF-16 byte order mark)"),
    ('disable = ["retry-reused-id"]\n'.encode("utf-32"), "not UTF-8 but UTF-32 (it starts with a UTF-32 byte order mark)"),
    ('disable = ["retry-reused-id"]\n'.encode("utf-16-le"), "holds NUL bytes (UTF-16 without a byte order mark?)"),
    ('# déploiement\ndisable = []\n'.encode("latin-1"), "not UTF-8 (byte 0xe9 at offset 3)"),
], ids=["utf-16", "utf-32", "utf-16-without-bom", "latin-1"])
def test_another_encoding_is_one_line_naming_the_file_and_the_encoding_exit_2(recording, data, said):
    Path(".mrtr-inspect.toml").write_bytes(data)
    r = CliRunner().invoke(main, ["check", "rec.jsonl"])
    assert r.exit_code == 2, (r.output, r.exception)
    assert r.stdout == ""
    assert r.stderr == f"mrtr-inspect: {Path.cwd() / '.mrtr-inspect.toml'}: {said}: save it as UTF-8, as TOML files are\n"
