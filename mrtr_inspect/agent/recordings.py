"""The folder of recordings the MCP server serves (`mrtr-inspect mcp --recordings DIR`).

A recording is a `*.jsonl` file under the folder (subfolders too, hidden ones and symlinked
folders skipped), named by its path relative to the folder with `/` between parts. A name given
by an agent is matched against those names only, so nothing outside the folder is ever opened:

1. the exact name, with or without `.jsonl`;
2. else each recording whose file name or stem is the name (`deploy` finds `a/deploy.jsonl` and
   `b/deploy.jsonl`: two, and the server asks which);
3. else each recording whose name contains it, regardless of case.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

SUFFIX = ".jsonl"
MAX_FILES = 10_000  # recordings a scan lists; past this the folder is too broad to serve
HEAD_BYTES = 64 * 1024  # of a file's first line, read for its session header
URI_SCHEME = "mrtr-recording"


@dataclass(frozen=True)
class Recording:
    name: str  #: the path relative to the folder, `/` between parts
    path: Path  #: absolute
    size: int
    mtime: float

    @property
    def uri(self) -> str:
        """The resource URI: `mrtr-recording:///NAME` (each part percent-encoded)."""
        return f"{URI_SCHEME}:///" + "/".join(quote(p, safe="") for p in self.name.split("/"))

    def header(self) -> dict:
        """The first session header (the recording format's first line), or {} when unreadable."""
        try:
            with open(self.path, "rb") as f:
                line = f.readline(HEAD_BYTES)
            d = json.loads(line)
        except (OSError, ValueError):
            return {}
        return d if type(d) is dict and d.get("mrtr-inspect") == "recording" else {}

    def describe(self) -> dict:
        """What `list_recordings` says of it."""
        h = self.header()
        d = {"name": self.name, "uri": self.uri, "bytes": self.size,
             "modified": datetime.fromtimestamp(self.mtime, timezone.utc).isoformat(timespec="seconds")}
        if h:
            d["recording"] = True
            for key in ("transport", "session", "hop", "upstream"):
                if isinstance(h.get(key), str):
                    d[key] = h[key]
            if isinstance(h.get("command"), list):
                d["command"] = [str(a) for a in h["command"]]
        else:
            d["recording"] = False
        return d


class Folder:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(os.path.expanduser(os.fspath(root))).absolute()

    def scan(self) -> list[Recording]:
        """Every recording, by name; at most MAX_FILES."""
        out: list[Recording] = []
        if not self.root.is_dir():
            return out
        for top, dirs, files in os.walk(self.root):  # symlinked folders are not followed
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for fn in sorted(files):
                if not fn.endswith(SUFFIX) or fn.startswith("."):
                    continue
                p = Path(top, fn)
                try:
                    st = p.stat()
                except OSError:
                    continue
                if not p.is_file():
                    continue
                out.append(Recording(p.relative_to(self.root).as_posix(), p, st.st_size, st.st_mtime))
                if len(out) >= MAX_FILES:
                    return sorted(out, key=lambda r: r.name)
        return sorted(out, key=lambda r: r.name)

    def match(self, name: str) -> list[Recording]:
        """The recordings a name given by an agent may mean (the module's rules)."""
        every = self.scan()
        want = name.strip().replace("\\", "/")
        p = Path(os.path.expanduser(want))
        if p.is_absolute():  # an absolute path inside the folder names what is under it
            try:
                want = p.relative_to(self.root).as_posix()
            except ValueError:
                return []
        want = want.removeprefix("./")
        exact = [r for r in every if r.name in (want, want + SUFFIX)]
        if exact:
            return exact
        base = [r for r in every if r.name.rsplit("/", 1)[-1] in (want, want + SUFFIX)]
        if base:
            return base
        low = want.casefold()
        return [r for r in every if low and low in r.name.casefold()]

    def by_uri(self, uri: str) -> Recording | None:
        parts = urlsplit(str(uri))
        if parts.scheme != URI_SCHEME:
            return None
        name = "/".join(unquote(p) for p in parts.path.lstrip("/").split("/"))
        return next((r for r in self.scan() if r.name == name), None)
