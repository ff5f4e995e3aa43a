"""Configuration files: `.mrtr-inspect.toml`, or the `[tool.mrtr-inspect]` table of a `pyproject.toml`.

The file is found by walking up from the current directory; the first directory that holds a
`.mrtr-inspect.toml`, or a `pyproject.toml` with a `[tool.mrtr-inspect]` table, decides (a
`pyproject.toml` without the table does not stop the walk), as ruff does. When one directory holds
both, `.mrtr-inspect.toml` is used and the table is ignored, with a note. `--config PATH` names the
file instead. Command-line options apply on top (docs/configuration.md).

    severity = {"chain-linked" = "warning"}
    disable = ["request-state-reencoded"]
    abandon_after = 600
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection

from .config import Config
from .core.findings import SEVERITIES, Severity
from .errors import UserError
from .tomlfile import read_toml

DEDICATED = ".mrtr-inspect.toml"
PYPROJECT = "pyproject.toml"
TABLE = "mrtr-inspect"


class SettingsError(UserError):
    """A configuration file that cannot be used; the message names the file and says why."""


@dataclass
class Settings:
    path: Path
    table: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, SettingsError)


def _tool_table(path: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    tool = doc.get("tool")
    table = tool.get(TABLE) if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise SettingsError(f"{path}: [tool.{TABLE}] must be a table")
    return table


def read(path: Path) -> Settings:
    """The settings in `path`: its `[tool.mrtr-inspect]` table for a pyproject.toml, the whole
    file otherwise."""
    doc = _read_toml(path)
    if path.name != PYPROJECT:
        return Settings(path, doc)
    table = _tool_table(path, doc)
    if table is None:
        raise SettingsError(f"{path}: no [tool.{TABLE}] table")
    return Settings(path, table)


def _pyproject_table(d: Path) -> dict[str, Any] | None:
    pyproject = d / PYPROJECT
    return _tool_table(pyproject, _read_toml(pyproject)) if pyproject.is_file() else None


def discover(start: Path) -> Settings | None:
    """The settings that apply in `start`: the nearest directory at or above it that holds either
    file decides."""
    for d in (start, *start.parents):
        dedicated = d / DEDICATED
        if dedicated.is_file():
            found = read(dedicated)
            try:
                shadowed = _pyproject_table(d) is not None
            except SettingsError:  # a broken pyproject.toml that is not used anyway
                shadowed = False
            if shadowed:
                found.notes.append(f"{dedicated} is used; [tool.{TABLE}] in {d / PYPROJECT} is ignored")
            return found
        table = _pyproject_table(d)
        if table is not None:
            return Settings(d / PYPROJECT, table)
    return None


# --- validation ----------------------------------------------------------------------------------------


def _positive_number(v: Any) -> bool:
    return type(v) in (int, float) and v > 0


def _seconds(v: Any) -> bool:
    return type(v) in (int, float) and 0 <= v < float("inf")


def _positive_int(v: Any) -> bool:
    return type(v) is int and v > 0


def _nonempty_string(v: Any) -> bool:
    return type(v) is str and v.strip() != ""


def _strings(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _hop_map(v: Any) -> bool:
    """`[[hop_map]]` tables: a `target` (the front tool that wraps calls), and the dotted paths in its
    arguments of the back `tool` and its `arguments` (defaults: `tool`, `arguments`)."""
    return type(v) is list and all(
        type(m) is dict and _nonempty_string(m.get("target")) and set(m) <= {"target", "tool", "arguments"}
        and all(type(m.get(k, "x")) is str for k in ("tool", "arguments")) for m in v)


#: Config fields a file may set: key -> (accepts, what it must be)
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "abandon_after": (_positive_number, "a number of seconds above 0"),
    "peer_header": (_nonempty_string, "a header name"),
    "chain_long_rounds": (_positive_int, "a whole number above 0"),
    "max_message_bytes": (_positive_int, "a whole number of bytes above 0"),
    "max_backlog_bytes": (_positive_int, "a whole number of bytes above 0"),
    "live_yield_seconds": (_seconds, "a number of seconds, 0 or more"),
    "redact_paths": (_strings, "a list of strings"),
    "redact_headers": (_strings, "a list of strings"),
    "redact_query": (_strings, "a list of strings"),
    "redact_args": (_strings, "a list of strings"),
    "redact_members": (_strings, "a list of strings"),
    "redact_keep": (_strings, "a list of strings"),
    "hop_map": (_hop_map, 'tables [[hop_map]] of target = "TOOL", tool = "PATH", arguments = "PATH"'),
}
KEYS = ("severity", "disable", "per_tool_ignores", "contract", *FIELDS)
LINT = "tool-poisoning-"  # the rules `per_tool_ignores` silences per tool


def apply(settings: Settings, config: Config, rule_ids: Collection[str]) -> Config:
    """Check `settings` and set them on `config`; SettingsError names the file and the key."""
    where = f"{settings.path}: " + (f"[tool.{TABLE}] " if settings.path.name == PYPROJECT else "")

    def bad(key: str, problem: str) -> SettingsError:
        return SettingsError(f"{where}{key}: {problem}")

    def known(key: str, rid: Any) -> str:
        if type(rid) is str and rid in rule_ids:
            return rid
        close = difflib.get_close_matches(str(rid), rule_ids, n=1)
        raise bad(key, f"unknown rule id {rid!r}" + (f" (did you mean {close[0]!r}?)" if close else
                                                        " (see `mrtr-inspect rules`)"))

    t = settings.table
    for key in t:
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("-", "_"), KEYS, n=1)
            raise bad(key, "unknown key" + (f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(KEYS)}"))
    severity = t.get("severity", {})
    if type(severity) is not dict:
        raise bad("severity", 'must be a table of rule id = "error" | "warning" | "info"')
    levels = {}
    for rid, level in severity.items():
        known("severity", rid)
        if type(level) is not str or level.strip().lower() not in SEVERITIES:
            raise bad("severity", f"{rid} = {level!r}: the level must be error, warning or info")
        levels[rid] = Severity(level.strip().lower())
    disable = t.get("disable", [])
    if type(disable) is not list:
        raise bad("disable", "must be a list of rule ids")
    disabled = {known("disable", rid) for rid in disable}
    for key, (accepts, what) in FIELDS.items():
        if key in t and not accepts(t[key]):
            raise bad(key, f"must be {what}, not {t[key]!r}")
    ignores = t.get("per_tool_ignores", {})
    if type(ignores) is not dict or not all(type(v) is list for v in ignores.values()):
        raise bad("per_tool_ignores", 'must be a table of tool name (* wildcards) = ["tool-poisoning-…", …]')
    for pattern, ids in ignores.items():
        for rid in ids:
            if known("per_tool_ignores", rid) and not rid.startswith(LINT):
                raise bad("per_tool_ignores", f"{pattern} = {rid!r}: only the {LINT}* rules are silenced per tool "
                                              "(`disable` turns any rule off)")
    if "contract" in t:
        from .contract import parse_contract

        config.contract = parse_contract(t["contract"], f"{where}contract")
    config.per_tool_ignores.update({p: list(ids) for p, ids in ignores.items()})
    config.severity.update(levels)
    config.disabled.update(disabled)
    for key in FIELDS:
        if key in t:
            setattr(config, key, [dict(x) if type(x) is dict else x for x in t[key]] if type(t[key]) is list else t[key])
    half = _half_of_a_pair(config.redact_paths)
    if half:
        settings.notes.append(f"{where}redact_paths: {half}")
    narrowed = _narrowed(t.get("redact_keep", ()))
    if narrowed:
        settings.notes.append(f"{where}redact_keep: {', '.join(narrowed)} "
                              f"{'is' if len(narrowed) == 1 else 'are'} redacted by default and will be kept in clear "
                              "in recordings and exports")
    return config


def _narrowed(keep: list[str]) -> list[str]:
    """The names of `redact_keep` that the default redaction covers (a header, a query parameter or
    option, a JSON member): keeping them narrows the defaults, which the user is told."""
    from .recording.redaction import DEFAULT_HEADERS, default_member, secret_header_name, secret_name

    out = []
    for name in keep:
        n = name.strip().lower().lstrip("-")
        if n in DEFAULT_HEADERS or secret_header_name(n) or secret_name(n) or default_member(n):
            out.append(name)
    return out


def _half_of_a_pair(paths: list[str]) -> str | None:
    """A state redacted on one side only: the server's issued `result.requestState` and the client's
    echoed `params.requestState` then differ in every recording, so every retry reads as altered."""
    from .recording.redaction import redacts

    issued, echoed = redacts(paths, ("result", "requestState")), redacts(paths, ("params", "requestState"))
    if issued == echoed:
        return None
    have, lack = ("result", "params") if issued else ("params", "result")
    return (f"{have}.requestState is redacted but {lack}.requestState is not: the state the server issues and the "
            "one the client echoes would differ in every recording (each retry read as request-state-altered); "
            "redact both or neither")


def load(rule_ids: Collection[str], explicit: str | Path | None = None, start: Path | None = None) -> tuple[Config, Settings | None]:
    """A Config from `explicit`, else from the file found above `start` (the current directory),
    else the defaults; with the settings used (None when no file applies)."""
    settings = read(Path(explicit)) if explicit is not None else discover((start or Path.cwd()).resolve())
    config = Config()
    if settings is not None:
        apply(settings, config, rule_ids)
    return config, settings


def load_project(explicit: str | Path | None = None, start: Path | None = None) -> tuple[Config, Settings | None]:
    """`load` checked against the registered rules (the command line's `--config`, and mitmproxy's
    `mrtr_config`)."""
    from .rules import load_rules
    from .rules.registry import REGISTRY

    load_rules()
    return load(REGISTRY, explicit, start)
