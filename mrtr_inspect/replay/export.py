"""`export --to fixture`: a recording trimmed to chosen chains, redacted, ready to commit.

    export_fixture("session.jsonl", "fixtures/deploy.jsonl", chains=["c1"], redact_paths=["params.arguments.token"])

Kept: the frames of the chosen chains (every round of each, with the notifications sent for them),
and unless `only_chains`, the requests that belong to no chain (discovery, lists: a real client
needs them to get as far as the chains). Dropped: the other chains, and sessions left with nothing
to replay. The kept frames are written exactly as recorded (same times, same sessions) after
redaction: the default headers and the paths and headers asked, with the same stable placeholders
as a live recording. Session headers lose what names the machine: the process id is dropped and
absolute paths in the recorded command are cut to their last part (`/usr/bin/python3` → `python3`);
the header says so (`exported`).

Machine paths that remain in payloads are not rewritten (that would falsify what crossed the wire):
`machine_paths` finds them, so the caller can say where, and redact them by path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from ..config import Config
from ..core.events import Direction, HttpRequest, SessionStart, StdioLine
from ..core.messages import decode_message, split_batch
from ..recording import format as fmt
from ..recording.files import named, write_private
from ..recording.secrets import SecretScan
from ..recording.writer import redactor_for
from .script import ReplayError, load_script

_MACHINE = re.compile(r"(?<![\w.-])/(?:home|root|tmp|Users|work|var/folders|private/var)/[^\s\"'\\]*")


@dataclass
class Exported:
    output: str
    chains: list[str]
    exchanges: int
    sessions: int
    machine_paths: list[tuple[int, str]] = field(default_factory=list)  # (line, path)
    #: a redaction path that matched nothing, a value that looks like a secret (recording.secrets)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"wrote {named(self.output)}: {self.exchanges} request{'s' if self.exchanges != 1 else ''} in "
               f"{self.sessions} session{'s' if self.sessions != 1 else ''}, chains {', '.join(self.chains) or 'none'}"]
        out += self.notes
        for n, p in self.machine_paths[:5]:
            out.append(f"warning: {self.output}:{n} mentions the machine path {p!r}; redact it (--redact-path) "
                       "before committing")
        return out


def _portable(cmd: object) -> object:
    if not isinstance(cmd, list):
        return cmd
    return [os.path.basename(a) if isinstance(a, str) and os.path.isabs(a) else a for a in cmd]


def _header(f: SessionStart, chains: list[str]) -> SessionStart:
    info = {k: v for k, v in f.info.items() if k != "pid"}
    if "command" in info:
        info["command"] = _portable(info["command"])
    info["exported"] = {"to": "fixture", "chains": chains,
                        "rewritten": "pid dropped; absolute paths in command cut to their last part"}
    return replace(f, info=info)


def export_fixture(path: str, output: str, chains: Iterable[str] = (), only_chains: bool = False,
                   redact_paths: Iterable[str] = (), redact_headers: Iterable[str] = (),
                   before_write: Callable | None = None, config: Config | None = None,
                   how: str = "--redact-path") -> Exported:
    """Write the fixture; `before_write(frame)` may change a frame or drop it (None). The redaction:
    the defaults, `config`'s settings (the project's), `redact_paths` and `redact_headers`; `how`
    names the way to add a path in the notes. Raises ReplayError (the recording cannot be played, a
    chain asked for is not in it) or CannotWrite."""
    script = load_script(path, keep_frames=True)
    assert script.frames is not None
    known = list(dict.fromkeys(ex.chain for ex in script.exchanges if ex.chain))
    wanted = list(dict.fromkeys(chains)) or known
    missing = [c for c in wanted if c not in known]
    if missing:
        raise ReplayError(f"{path}: no chain {', '.join(missing)} (its chains: {', '.join(known) or 'none'})")
    keep = [ex for ex in script.exchanges if ex.chain in wanted or (ex.chain is None and not only_chains)]
    drop = {i for ex in script.exchanges if ex not in keep for i in ex.frames}
    sessions = {ex.session for ex in keep}
    c = replace(config) if config is not None else Config()
    c.redact_headers, c.redact_paths = [*c.redact_headers, *redact_headers], [*c.redact_paths, *redact_paths]
    redactor = redactor_for(c)
    scan = SecretScan()
    lines: list[bytes] = []
    for i, frame in enumerate(script.frames):
        if i in drop or getattr(frame, "session", None) not in sessions:
            continue
        if type(frame) is SessionStart:
            frame = _header(frame, wanted)
        frame = redactor.frame(frame)
        for m in _messages(frame):
            scan.message(m)
        if before_write is not None:
            frame = before_write(frame)
            if frame is None:
                continue
        lines.append(fmt.encode(frame))
    write_private(output, b"".join(lines))
    return Exported(output, wanted, len(keep), len(sessions), machine_paths(lines), scan.lines(redactor, how))


def _messages(frame) -> list:
    """The client's messages in a frame (a stdio line, a request body), decoded for the scan."""
    t = type(frame)
    if t is StdioLine and frame.direction == Direction.C2S:
        raw = frame.data
    elif t is HttpRequest:
        raw = frame.body
    else:
        return []
    if not raw:
        return []
    m = decode_message(raw)
    return split_batch(m) if m.kind == "batch" else [m]


def machine_paths(lines: list[bytes]) -> list[tuple[int, str]]:
    out = []
    for n, line in enumerate(lines, 1):
        for m in _MACHINE.finditer(line.decode("utf-8", "replace")):
            out.append((n, m.group()))
    return out
