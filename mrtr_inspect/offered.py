"""What each server offered, as it was offered: the tools, prompts, resources and resource
templates of its `*/list` results, each with the bytes of its definition on the wire, and the bytes
of the results its tools, prompts and resources gave. `baseline` (the lock file, `check --baseline`),
`contract` (the tools offered) and `stats` (what each costs a model's context) read it.

    offered = Offered()
    builder = analysed(paths, config, observe=offered.observe)
    for server in offered.servers(): ...

A server is named by the `serverInfo` it sent (a modern result's `_meta`, or a legacy `initialize`
result); a capture session whose server never said its name is `unnamed`. Sessions of one server
name are one server: of a definition listed in several, the last seen stands (as `diff` takes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .core.events import Direction
from .core.messages import RESULT, SERVER_INFO_KEY, target_of
from .core.observations import Answered
from .core.rawjson import element_spans, value_span

UNNAMED = "unnamed"

#: list method -> (the lock file's section, the result member holding the items, the member naming one, a noun)
LISTS = {
    "tools/list": ("tools", "tools", "name", "tool"),
    "prompts/list": ("prompts", "prompts", "name", "prompt"),
    "resources/list": ("resources", "resources", "uri", "resource"),
    "resources/templates/list": ("resourceTemplates", "resourceTemplates", "uriTemplate", "resource template"),
}
SECTIONS = tuple(v[0] for v in LISTS.values())
NOUN = {v[0]: v[3] for v in LISTS.values()}
#: what each call method's results belong to: the section of the definition it calls
CALLS = {"tools/call": "tools", "prompts/get": "prompts", "resources/read": "resources"}


@dataclass
class Definition:
    """One item of a list result: its parsed value, the bytes of its JSON as it was sent, and the
    message that carried it."""

    value: dict
    size: int  # bytes of its definition as offered (UTF-8, as on the wire)
    message: int
    time: float


@dataclass
class Listing:
    """One whole `tools/list` (its pages, when the server paginated): the bytes of their results."""

    size: int = 0  # bytes of the `result` members, pages summed
    items: int = 0
    pages: int = 0


@dataclass
class Server:
    name: str
    sessions: list[str] = field(default_factory=list)
    #: section (tools, prompts, resources, resourceTemplates) -> key -> definition
    definitions: dict[str, dict[str, Definition]] = field(default_factory=dict)
    #: list method -> its last whole listing
    listings: dict[str, Listing] = field(default_factory=dict)
    #: (section, name or uri) -> bytes of each complete result it gave
    results: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def listed(self, section: str) -> bool:
        return section in self.definitions


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def server_name(result: Any) -> str | None:
    """The name a result's serverInfo gives (modern `_meta`, or a legacy initialize result)."""
    if type(result) is not dict:
        return None
    meta = result.get("_meta")
    info = meta.get(SERVER_INFO_KEY) if type(meta) is dict else None
    info = info if type(info) is dict else result.get("serverInfo")
    name = info.get("name") if type(info) is dict else None
    return name if type(name) is str and name else None


class Offered:
    """An observer of the analysis (`Analysis(observe=…)`) that keeps what each server offered."""

    def __init__(self) -> None:
        self._sessions: dict[str, Server] = {}  # capture session -> what its server offered
        self._names: dict[str, str] = {}  # capture session -> server name
        self._open: dict[tuple[str, str], Listing] = {}  # (session, list method) -> a listing being paged

    def observe(self, obs: Any) -> None:
        if type(obs) is not Answered:
            return
        resp, req = obs.response, obs.request
        if resp.kind != RESULT or resp.direction != Direction.S2C or req is None or resp.batch is not None:
            return
        result = resp.result
        sid = resp.session
        if sid not in self._names:
            name = server_name(result)
            if name is not None:
                self._names[sid] = name
        method = req.method
        if method in LISTS:
            self._list(sid, method, req, resp)
        elif method in CALLS and type(result) is dict and result.get("resultType", "complete") == "complete":
            target = target_of(method, req.params)
            size = self._size(resp.raw, ("result",))
            if target is not None and size is not None:
                self._server(sid).results.setdefault((CALLS[method], target), []).append(size)

    def _server(self, sid: str) -> Server:
        s = self._sessions.get(sid)
        if s is None:
            s = self._sessions[sid] = Server(UNNAMED, [sid])
        return s

    @staticmethod
    def _size(raw: bytes, path: tuple) -> int | None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        span = value_span(text, path)
        return None if span is None else _utf8_size(text[span[0]:span[1]])

    def _list(self, sid: str, method: str, req, resp) -> None:
        section, member, key, _ = LISTS[method]
        result = resp.result
        items = result.get(member) if type(result) is dict else None
        if type(items) is not list:
            return
        try:
            text = resp.raw.decode("utf-8")
        except UnicodeDecodeError:
            return
        whole = value_span(text, ("result",))
        span = value_span(text, ("result", member))
        spans = element_spans(text, span) if span is not None else None
        if spans is None or len(spans) != len(items) or whole is None:
            return
        server = self._server(sid)
        defs = server.definitions.setdefault(section, {})
        for item, (a, b) in zip(items, spans):
            if type(item) is dict and type(item.get(key)) is str:
                defs[item[key]] = Definition(item, _utf8_size(text[a:b]), resp.index, resp.time)
        params = req.params if type(req.params) is dict else {}
        paging = (sid, method)
        listing = self._open.get(paging) if "cursor" in params else None
        if listing is None:
            listing = Listing()
        listing.size += _utf8_size(text[whole[0]:whole[1]])
        listing.items += len(items)
        listing.pages += 1
        if result.get("nextCursor") is not None:
            self._open[paging] = listing
        else:
            self._open.pop(paging, None)
        server.listings[method] = listing

    def servers(self) -> list[Server]:
        """What each server offered, by name (sessions of one name merged, in capture order)."""
        out: dict[str, Server] = {}
        for sid, s in self._sessions.items():
            name = self._names.get(sid, UNNAMED)
            merged = out.get(name)
            if merged is None:
                merged = out[name] = Server(name)
            merged.sessions.append(sid)
            for section, defs in s.definitions.items():
                merged.definitions.setdefault(section, {}).update(defs)
            merged.listings.update(s.listings)
            for k, sizes in s.results.items():
                merged.results.setdefault(k, []).extend(sizes)
        return [out[n] for n in sorted(out)]
