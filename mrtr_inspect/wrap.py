"""`mrtr-inspect wrap CONFIG` / `unwrap CONFIG`: the tee put in front of the stdio servers of an MCP
client's configuration file, and taken out again.

    wrap("claude_desktop_config.json", record_dir="~/mcp-recordings")   # -> lines to print

A stdio server reaches the tee only through its client's configuration: each chosen entry of
`mcpServers` (Claude Desktop, Cursor, Claude Code's `.mcp.json`, Windsurf) or `servers` (VS Code)
that starts a command is rewritten to start `mrtr-inspect stdio --record DIR/NAME.jsonl -- COMMAND
ARGS...`; every other member of the entry (`env`, `cwd`, `type`, `envFile`…) and of the file stays.
An entry with a `url` is left as it is (the tee is for stdio; the proxy is for HTTP): the lines
returned give the `--upstream` command to run for it.

Beside the file, wrap leaves the original bytes (`CONFIG.mrtr-inspect-backup`) and a sidecar
(`CONFIG.mrtr-inspect-wrap.json`: the SHA-256 of the original and of the wrapped file, the servers
wrapped). `unwrap` puts the original bytes back and removes both. Either refuses a file it did not
leave that way: wrap refuses a file that is wrapped already (a sidecar or a backup beside it), unwrap
one without a sidecar or whose bytes changed since wrap wrote them (the client or a person edited
it: the backup is still there to restore by hand).

A configuration that is a symlink (a dotfiles setup) stays one: its target is rewritten (mode kept),
and the backup and sidecar go beside the link, the path named, not into the folder the link points
to; unwrap restores the original bytes into the target.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .errors import UserError
from .recording.files import TEMP_FLAGS, Output, why

BACKUP_SUFFIX = ".mrtr-inspect-backup"
SIDECAR_SUFFIX = ".mrtr-inspect-wrap.json"
FORMAT = "mrtr-inspect.wrap/1"
SECTIONS = ("mcpServers", "servers")
DEFAULT_RECORD_DIR = "~/.mrtr-inspect/recordings"
DEFAULT_UPSTREAM_LISTEN = "127.0.0.1:8788"

# client -> (what it is, {os: [paths]}); `~` is the home folder, %APPDATA% Windows' roaming folder,
# a relative path is the project's (the current directory)
CLIENTS: dict[str, tuple[str, dict[str, list[str]]]] = {
    "claude-desktop": ("Claude Desktop", {
        "darwin": ["~/Library/Application Support/Claude/claude_desktop_config.json"],
        "win32": ["%APPDATA%/Claude/claude_desktop_config.json"],
        "linux": ["~/.config/Claude/claude_desktop_config.json"]}),
    "claude-code": ("Claude Code (project scope; the user scope is ~/.claude.json, which Claude Code rewrites)", {
        "*": [".mcp.json"]}),
    "cursor": ("Cursor (global, then project)", {"*": ["~/.cursor/mcp.json", ".cursor/mcp.json"]}),
    "vscode": ("VS Code (workspace, then user profile)", {
        "darwin": [".vscode/mcp.json", "~/Library/Application Support/Code/User/mcp.json"],
        "win32": [".vscode/mcp.json", "%APPDATA%/Code/User/mcp.json"],
        "linux": [".vscode/mcp.json", "~/.config/Code/User/mcp.json"]}),
    "windsurf": ("Windsurf", {"*": ["~/.codeium/windsurf/mcp_config.json"]}),
}


class WrapError(UserError):
    """wrap or unwrap cannot go on (the one-line reason; nothing was changed)."""


def _platform() -> str:
    return "win32" if sys.platform.startswith("win") else "darwin" if sys.platform == "darwin" else "linux"


def client_paths(client: str, platform: str | None = None) -> list[Path]:
    """The usual configuration files of `client` on `platform` (default: this one), most usual first."""
    if client not in CLIENTS:
        raise WrapError(f"unknown client {client!r} (known: {', '.join(CLIENTS)})")
    table = CLIENTS[client][1]
    paths = table.get(platform or _platform(), table.get("*", []))
    out = []
    for p in paths:
        if p.startswith("%APPDATA%"):
            p = os.environ.get("APPDATA", "~/AppData/Roaming") + p[len("%APPDATA%"):]
        out.append(Path(os.path.expanduser(p)))
    return out


def find_client_config(client: str) -> Path:
    paths = client_paths(client)
    for p in paths:
        if p.is_file():
            return p
    raise WrapError(f"no {CLIENTS[client][0]} configuration found (looked at {', '.join(map(str, paths))})")


def listing() -> list[str]:
    """Each known client and its usual configuration files on this system (`wrap --list`)."""
    out = []
    for name, (what, _) in CLIENTS.items():
        out.append(f"{name}: {what}")
        for p in client_paths(name):
            out.append(f"    {p}{'  (exists)' if p.is_file() else ''}")
    return out


# -------------------------------------------------------------------------------------------------
# reading a configuration (JSON, or VS Code's JSON with comments and trailing commas)

_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])')


def _keep_strings(m: re.Match) -> str:
    return m.group() if m.group().startswith('"') else ""


def _jsonc(text: str) -> str:
    """JSON with comments and trailing commas (VS Code's) as JSON."""
    return _TRAILING_COMMA.sub(_keep_strings, _COMMENT.sub(_keep_strings, text))


def _parse(path: Path, data: bytes) -> dict:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WrapError(f"{path}: not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except ValueError:
        try:
            doc = json.loads(_jsonc(text))
        except ValueError as e:
            raise WrapError(f"{path}: not JSON ({e})") from None
    if type(doc) is not dict:
        raise WrapError(f"{path}: not a JSON object")
    return doc


def _indent(text: str) -> int | str:
    m = re.search(r"\n([ \t]+)\S", text)
    if not m:
        return 2
    ws = m.group(1)
    return "\t" if ws.startswith("\t") else len(ws)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rewrite(path: Path, data: bytes) -> None:
    """`data` as the whole of the configuration `path`, as every output file is written
    (recording/files.py): a symlinked configuration (a dotfiles setup) stays a link and its target
    is rewritten, keeping its mode; the bytes reach the disk before wrap says it is done."""
    try:
        with Output(path, binary=True) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise WrapError(f"cannot write {path}: {why(e)}") from None


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, TEMP_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _beside(path: Path) -> list[Path]:
    """Where wrap's backup and sidecar of `path` are looked for: beside the path named (where wrap
    leaves them), and, for a symlinked configuration, beside its target too."""
    target = Path(os.path.realpath(path))
    return [path] if target == path.absolute() else [path, target]


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _backup(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


# -------------------------------------------------------------------------------------------------
# wrap


def tee_command() -> list[str]:
    """How a client starts the tee: the `mrtr-inspect` beside this interpreter (clients start
    servers with a short PATH), else this interpreter with `-m mrtr_inspect`."""
    exe = Path(sys.executable)
    for name in ("mrtr-inspect", "mrtr-inspect.exe"):
        if (exe.parent / name).is_file():
            return [str(exe.parent / name)]
    found = shutil.which("mrtr-inspect")
    return [os.path.abspath(found)] if found else [str(exe), "-m", "mrtr_inspect"]


def _is_tee(entry: dict) -> bool:
    cmd = [str(entry.get("command", ""))] + [str(a) for a in entry.get("args") or [] if isinstance(a, str)]
    return any(Path(c).name.startswith("mrtr-inspect") or c == "mrtr_inspect" for c in cmd[:3]) and "stdio" in cmd


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "server"


def _upstream_hint(name: str, entry: dict, record: Path) -> str:
    url = str(entry.get("url") or entry.get("serverUrl") or "")
    u = urlsplit(url)
    upstream = urlunsplit((u.scheme, u.netloc, u.path, "", ""))
    local = urlunsplit(("http", DEFAULT_UPSTREAM_LISTEN, u.path or "/", u.query, ""))
    return (f"left {name} as it is: a URL server ({url}); to watch it, run `mrtr-inspect --upstream "
            f"{shlex.quote(upstream)} --record {shlex.quote(str(record))}` and point {name}'s url at {local}")


def wrap(config: str | os.PathLike, servers: tuple[str, ...] = (), record_dir: str | None = None) -> list[str]:
    """Wrap the stdio servers of `config` (all, or those named); returns the lines to tell the user."""
    path = Path(config)
    if not path.is_file():
        raise WrapError(f"{path}: no such file")
    for p in _beside(path):
        if _sidecar(p).exists() or _backup(p).exists():
            raise WrapError(f"{path} is wrapped already (see {_sidecar(p)}); `mrtr-inspect unwrap {path}` first")
    original = path.read_bytes()
    doc = _parse(path, original)
    sections = [s for s in SECTIONS if type(doc.get(s)) is dict]
    if not sections:
        raise WrapError(f"{path}: no mcpServers or servers object: not an MCP client configuration")
    entries = {name: (s, e) for s in sections for name, e in doc[s].items()}
    unknown = [n for n in servers if n not in entries]
    if unknown:
        raise WrapError(f"{path}: no server named {', '.join(map(repr, unknown))} (it has {', '.join(entries) or 'none'})")
    rdir = Path(os.path.expanduser(record_dir or DEFAULT_RECORD_DIR)).absolute()
    tee = tee_command()
    lines, wrapped = [], []
    for name, (section, entry) in entries.items():
        if servers and name not in servers:
            continue
        record = rdir / f"{_file_name(name)}.jsonl"
        if type(entry) is not dict:
            lines.append(f"left {name} as it is: not an object")
        elif "command" not in entry:
            lines.append(_upstream_hint(name, entry, record) if (entry.get("url") or entry.get("serverUrl"))
                         else f"left {name} as it is: it has no command")
        elif _is_tee(entry):
            lines.append(f"left {name} as it is: it starts mrtr-inspect already")
        elif not isinstance(entry["command"], str) or not all(isinstance(a, str) for a in entry.get("args") or []):
            lines.append(f"left {name} as it is: its command or args are not strings")
        else:
            original_cmd = [entry["command"], *(entry.get("args") or [])]
            new_args = [*tee[1:], "stdio", "--record", str(record), "--", *original_cmd]
            rebuilt: dict[str, Any] = {}
            for k, v in entry.items():
                if k == "command":
                    rebuilt["command"] = tee[0]
                    rebuilt["args"] = new_args
                elif k != "args":
                    rebuilt[k] = v
            doc[section][name] = rebuilt
            wrapped.append(name)
            lines.append(f"wrapped {name}: records to {record}")
    if not wrapped:
        return lines + [f"{path}: no stdio server to wrap; the file is unchanged"]
    text = original.decode("utf-8-sig")
    out = json.dumps(doc, indent=_indent(text), ensure_ascii=False) + ("\n" if text.endswith("\n") else "")
    data = (b"\xef\xbb\xbf" if original.startswith(b"\xef\xbb\xbf") else b"") + out.encode("utf-8")
    rdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_new(_backup(path), original)
    side = {"format": FORMAT, "config": path.name, "original_sha256": _digest(original),
            "wrapped_sha256": _digest(data), "servers": wrapped, "record_dir": str(rdir)}
    try:
        _write_new(_sidecar(path), (json.dumps(side, indent=2) + "\n").encode())
        _rewrite(path, data)
    except BaseException:
        _sidecar(path).unlink(missing_ok=True)
        _backup(path).unlink(missing_ok=True)
        raise
    if _jsonc(text) != text:
        lines.append(f"note: {path} had comments or trailing commas; the wrapped file has none (unwrap restores them)")
    lines.append(f"backup: {_backup(path)}; restart the client to start the tee, "
                 f"`mrtr-inspect unwrap {path}` to restore the original")
    return lines


# -------------------------------------------------------------------------------------------------
# unwrap


def unwrap(config: str | os.PathLike) -> list[str]:
    """Put the bytes wrap kept back; refuse a file wrap did not leave as it is."""
    path = Path(config)
    side_path, backup = _sidecar(path), _backup(path)
    for p in _beside(path)[1:]:  # wrapped through its target's name, unwrapped through the link's
        if not side_path.is_file() and _sidecar(p).is_file():
            side_path, backup = _sidecar(p), _backup(p)
    if not side_path.is_file():
        raise WrapError(f"{path} was not wrapped by mrtr-inspect (no {side_path.name} beside it)")
    try:
        side = json.loads(side_path.read_text())
        if side.get("format") != FORMAT:
            raise ValueError(side.get("format"))
    except (ValueError, AttributeError, OSError) as e:
        raise WrapError(f"{side_path}: not a sidecar of mrtr-inspect wrap ({e})") from None
    if not backup.is_file():
        raise WrapError(f"{path}: its backup {backup.name} is gone; nothing to restore")
    original = backup.read_bytes()
    if _digest(original) != side.get("original_sha256"):
        raise WrapError(f"{backup}: not the bytes wrap kept (its SHA-256 differs); nothing was changed")
    current = path.read_bytes() if path.is_file() else None
    if current is None or _digest(current) != side.get("wrapped_sha256"):
        raise WrapError(f"{path} changed since wrap wrote it (edited by the client or by hand); nothing was changed: "
                        f"the original is in {backup}")
    _rewrite(path, original)
    side_path.unlink()
    backup.unlink()
    return [f"restored {path} ({', '.join(side.get('servers') or [])} no longer wrapped)"]
