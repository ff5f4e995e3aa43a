"""`wrap CONFIG` / `unwrap CONFIG` on the configuration shapes of real clients (Claude Desktop,
Cursor, VS Code with comments, Claude Code's .mcp.json), and one end to end: the official SDK client
starts the server the way the wrapped entry says, and the tee records the session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

from mrtr_inspect import wrap as w
from tests.outputs.conftest import run_cli

PY = sys.executable
CLAUDE_DESKTOP = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    },
    "sample": {"command": "python3", "args": ["-m", "mrtr_inspect.samples.server"], "env": {"LOG_LEVEL": "debug"}}
  },
  "globalShortcut": "Alt+Space"
}
"""
CURSOR = """{
  "mcpServers": {
    "server-name": {"command": "npx", "args": ["-y", "mcp-server"], "env": {"API_KEY": "value"}},
    "remote": {"url": "http://localhost:3000/mcp?tenant=a", "headers": {"Authorization": "Bearer abc"}}
  }
}"""
VSCODE = """{
  // inputs are prompted on first server start
  "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
  "servers": {
    "memory": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "envFile": "${workspaceFolder}/.env", /* kept */
    },
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
  }
}
"""
CLAUDE_CODE = """{
\t"mcpServers": {
\t\t"shared": {"type": "stdio", "command": "/opt/server", "cwd": "/srv", "env": {"KEY": "${KEY:-default}"}}
\t}
}
"""
SHAPES = {"claude_desktop_config.json": (CLAUDE_DESKTOP, "mcpServers", {"filesystem", "sample"}, set()),
          "mcp.json": (CURSOR, "mcpServers", {"server-name"}, {"remote"}),
          "vscode-mcp.json": (VSCODE, "servers", {"memory"}, {"github"}),
          ".mcp.json": (CLAUDE_CODE, "mcpServers", {"shared"}, set())}


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", list(SHAPES))
def test_wrap_rewrites_stdio_entries_keeping_everything_else_and_unwrap_restores_the_bytes(tmp_path, name):
    text, section, stdio, urls = SHAPES[name]
    config = tmp_path / name
    config.write_text(text)
    before = w._parse(config, text.encode())
    lines = w.wrap(config, record_dir=str(tmp_path / "rec"))
    after = _read(config)  # plain JSON now, even from JSON with comments
    tee = w.tee_command()
    assert Path(tee[0]).name.startswith("mrtr-inspect") or tee[1:3] == ["-m", "mrtr_inspect"]
    for key, entry in before[section].items():
        new = after[section][key]
        if key in stdio:
            original = [entry["command"], *entry.get("args", [])]
            assert new["command"] == tee[0]
            assert new["args"] == [*tee[1:], "stdio", "--record", str(tmp_path / "rec" / f"{key}.jsonl"), "--", *original]
            assert {k: v for k, v in new.items() if k not in ("command", "args")} == \
                   {k: v for k, v in entry.items() if k not in ("command", "args")}  # env, cwd, type, envFile
            assert [k for k in new if k != "args"] == [k for k in entry if k != "args"]  # in their order
            assert any(line == f"wrapped {key}: records to {tmp_path / 'rec' / (key + '.jsonl')}" for line in lines)
        else:
            assert new == entry  # URL servers as they were
    assert {k: v for k, v in after.items() if k != section} == {k: v for k, v in before.items() if k != section}
    for key in urls:
        hint = next(line for line in lines if line.startswith(f"left {key} as it is: a URL server"))
        assert "mrtr-inspect --upstream " in hint and str(tmp_path / "rec" / f"{key}.jsonl") in hint
    assert config.with_name(name + w.BACKUP_SUFFIX).read_text() == text
    w.unwrap(config)
    assert config.read_text() == text  # the original bytes, comments and all
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "rec"])


def test_the_url_hint_names_the_upstream_and_where_to_point_the_client(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(CURSOR)
    hint = next(line for line in w.wrap(config, record_dir=str(tmp_path)) if "remote" in line)
    assert f"mrtr-inspect --upstream http://localhost:3000/mcp --record {tmp_path / 'remote.jsonl'}" in hint
    assert hint.endswith("point remote's url at http://127.0.0.1:8788/mcp?tenant=a")


def test_only_the_servers_named(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(CLAUDE_DESKTOP)
    w.wrap(config, servers=("sample",), record_dir=str(tmp_path))
    after = _read(config)["mcpServers"]
    assert after["filesystem"]["command"] == "npx" and after["sample"]["command"] == w.tee_command()[0]
    w.unwrap(config)
    with pytest.raises(w.WrapError, match="no server named 'nope'"):
        w.wrap(tmp_path / "c.json", servers=("nope",))


def test_wrapped_twice_edited_since_and_never_wrapped_are_refused(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(CLAUDE_DESKTOP)
    assert run_cli("unwrap", config).exit_code == 2  # not wrapped
    assert run_cli("wrap", config, "--record-dir", tmp_path).exit_code == 0
    wrapped = config.read_bytes()
    again = run_cli("wrap", config)
    assert again.exit_code == 2 and "wrapped already" in again.stderr and config.read_bytes() == wrapped
    config.write_bytes(wrapped.replace(b'"Alt+Space"', b'"Ctrl+Space"'))  # the client rewrote its file
    edited = run_cli("unwrap", config)
    assert edited.exit_code == 2 and "changed since wrap wrote it" in edited.stderr
    assert b"Ctrl+Space" in config.read_bytes()  # nothing was changed
    assert config.with_name("c.json" + w.BACKUP_SUFFIX).read_text() == CLAUDE_DESKTOP  # the original is still there


def test_an_entry_that_starts_the_tee_already_is_left_alone(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "mrtr-inspect", "args": [
        "stdio", "--record", "/tmp/s.jsonl", "--", "python", "server.py"]}}}))
    lines = w.wrap(config)
    assert "left s as it is: it starts mrtr-inspect already" in lines
    assert lines[-1].endswith("no stdio server to wrap; the file is unchanged")
    assert not config.with_name("c.json" + w.SIDECAR_SUFFIX).exists()


def test_not_a_client_configuration(tmp_path):
    config = tmp_path / "c.json"
    config.write_text('{"editor.fontSize": 14}')
    with pytest.raises(w.WrapError, match="no mcpServers or servers"):
        w.wrap(config)
    config.write_text("{nope")
    assert run_cli("wrap", config).exit_code == 2


def test_each_clients_usual_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("APPDATA", "C:/Users/me/AppData/Roaming")
    assert w.client_paths("claude-desktop", "darwin") == [
        tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"]
    assert w.client_paths("claude-desktop", "win32") == [Path("C:/Users/me/AppData/Roaming/Claude/claude_desktop_config.json")]
    assert w.client_paths("vscode", "linux") == [Path(".vscode/mcp.json"), tmp_path / ".config/Code/User/mcp.json"]
    assert w.client_paths("claude-code", "darwin") == [Path(".mcp.json")]
    cursor = tmp_path / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(CURSOR)
    done = run_cli("wrap", "--client", "cursor", "--record-dir", tmp_path / "rec")
    assert done.exit_code == 0, done.stderr
    assert _read(cursor)["mcpServers"]["server-name"]["command"] == w.tee_command()[0]
    assert run_cli("unwrap", "--client", "cursor").exit_code == 0 and cursor.read_text() == CURSOR
    listed = run_cli("wrap", "--list")
    assert f"    {cursor}  (exists)" in listed.stdout.splitlines()
    assert run_cli("wrap").exit_code == 2  # neither CONFIG nor --client


def test_a_wrapped_entry_started_by_the_sdk_client_records_the_session(tmp_path):
    """The official SDK client starts the server exactly as the wrapped entry says (command, args,
    env, cwd), as a client application would; the tee records what went through."""
    from mrtr_inspect.samples.client import run

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"sample": {
        "command": PY, "args": ["-m", "mrtr_inspect.samples.server"],
        "env": {"PYTHONPATH": str(root), "MRTR_INSPECT_REDACTION_KEY": "test-key"}, "cwd": str(root)}}}, indent=2))
    w.wrap(config, record_dir=str(tmp_path / "rec"))
    entry = _read(config)["mcpServers"]["sample"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd=entry["cwd"])
    said = anyio.run(run, params, ("deploy",))
    assert said == ["deploy: deployed to production"]
    record = tmp_path / "rec" / "sample.jsonl"
    head = json.loads(record.read_text().splitlines()[0])
    assert head["mrtr-inspect"] == "recording" and head["command"] == [PY, "-m", "mrtr_inspect.samples.server"]
    check = run_cli("check", record, "--format", "json")
    report = json.loads(check.stdout)
    assert [(c["target"], c["rounds"], c["outcome"]) for c in report["chains"]] == [("deploy", 1, "complete")]
    w.unwrap(config)
