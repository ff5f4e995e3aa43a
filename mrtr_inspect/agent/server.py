"""`mrtr-inspect mcp [--recordings DIR]`: an MCP server (the official Python SDK, stdio; protocol
2026-07-28 and 2025-11-25) that lets a coding agent look into a folder of recordings (docs/agents.md).

Tools (each result carries `structuredContent`, described by the tool's `outputSchema`, and the same
JSON as text):

- `list_recordings`: the recordings in the folder, with their session header;
- `check_recording`: the JSON report of `mrtr-inspect check --format json` (with `--filter`);
- `read_chain`: one chain round by round: each question, answer, requestState digest, wait, the
  findings about it, and the messages it is made of as they crossed the wire;
- `list_findings`: the report's findings (with a filter);
- `explain_rule`: a rule of the catalog: what it detects, why it matters, the specification's words
  and link;
- `diff_recordings`: what changed from one recording to another (`mrtr-inspect diff --format json`);
- `recording_stats`: `mrtr-inspect stats --format json` (with a filter).

Each recording is a resource too (`mrtr-recording:///NAME`, its text). A recording name may match
several files (`deploy` for `a/deploy.jsonl` and `b/deploy.jsonl`): the server then asks the user
which, the way the specification intends: an `input_required` result with a form elicitation on
2026-07-28 (the SDK's resolvers), an `elicitation/create` request on 2025-11-25. A client that
cannot answer gets the candidates in a tool error instead. `read_chain` asks the same way when its
`chain` (a filter such as `tool:deploy`) matches several chains.
"""

from __future__ import annotations

import io
import json
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    MCPServer,
    Resolve,
)
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, Resource, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from ..config import Config
from ..errors import UserError
from ..version import __version__
from .recordings import Folder, Recording

NAME = "mrtr-inspect"
MAX_RESOURCE_BYTES = 16 * 1024 * 1024  # a recording read as a resource; past it, the tools read it
MAX_MESSAGE_TEXT = 16 * 1024  # characters of one message `read_chain` shows
MAX_CHOICES = 40  # candidates a question offers; more is a tool error asking for a closer name
CACHE = 4  # analysed recordings kept

INSTRUCTIONS = """\
mrtr-inspect's recordings of MCP traffic (stdio tee or HTTP proxy captures), and its analysis of \
them against the MCP specification (multi-round requests: input_required, requestState, retries). \
Start with list_recordings; check_recording gives the findings and the chains (logical requests); \
read_chain shows one chain round by round; explain_rule says what a finding's rule means. Filters \
(the `filter` arguments) take terms such as tool:NAME, rule:ID, severity:error, outcome:error, \
id:17 (the chain holding JSON-RPC id 17), rounds>1, ms>500, a bare word; combined with spaces \
(and), or, not, parentheses."""

Pick = Annotated[AcceptedElicitation | DeclinedElicitation | CancelledElicitation, "a resolved choice"]


# -- output schemas -------------------------------------------------------------------------------


class _Open(BaseModel):
    """An object of the report: these members at least (the report may add more)."""

    model_config = ConfigDict(extra="allow")


class SummaryOut(_Open):
    messages: int
    chains: int
    errors: int
    warnings: int
    infos: int


class ChainOut(_Open):
    id: str
    method: str | None
    target: str | None
    rounds: int
    requests: list[Any]
    outcome: str
    link: str | None
    duration_ms: float | None


class FindingOut(_Open):
    rule: str
    severity: Literal["error", "warning", "info"]
    message: str
    chain: str | None
    messages: list[int]
    spec: str | None
    conformance: str | None


class ReportOut(_Open):
    """The JSON report of `mrtr-inspect check --format json` (format mrtr-inspect.report/1)."""

    format: str
    tool: dict[str, Any]
    inputs: list[str]
    summary: SummaryOut
    chains: list[ChainOut]
    findings: list[FindingOut]
    filter: str | None = Field(None, description="the filter the report was narrowed by")
    hops: list[dict[str, Any]] | None = None
    notes: list[str] | None = None
    truncated: dict[str, int] | None = Field(None, description="the chains and findings left out past `limit`")


class RecordingOut(_Open):
    name: str = Field(description="the name tools take: its path under the folder")
    uri: str = Field(description="the resource that reads it")
    bytes: int
    modified: str
    recording: bool = Field(description="whether its first line is a recording's session header")


class RecordingsOut(BaseModel):
    folder: str
    recordings: list[RecordingOut]
    note: str | None = None


class RoundOut(_Open):
    round: int
    asked: dict[str, Any] = Field(description="what the server asked, per inputRequests key")
    request_state: str | None = Field(description="the first 16 hex digits of the SHA-256 of its requestState")
    answered: dict[str, Any] | None = Field(description="the client's inputResponses, per key (None: unanswered)")
    wait_ms: float | None = Field(description="the user's answering time")


class MessageOut(_Open):
    index: int
    direction: Literal["c2s", "s2c"]
    time: float
    role: str
    text: str = Field(description="the message as it crossed the wire (cut past 16 KiB)")


class ChainView(BaseModel):
    recording: str
    chain: ChainOut
    rounds: list[RoundOut]
    findings: list[FindingOut]
    messages: list[MessageOut]
    text: str = Field(description="the chain as `mrtr-inspect show` draws it")


class FindingsOut(BaseModel):
    recording: str
    filter: str | None = None
    count: int = Field(description="findings that matched (before `limit`)")
    findings: list[FindingOut]


class RuleOut(_Open):
    id: str
    severity: str = Field(description="the default severity")
    section: str
    summary: str
    detects: str
    why: str
    quote: str | None = Field(description="the specification's sentence behind it")
    example: str
    spec: str | None = Field(description="the specification page and anchor")
    spec_url: str | None
    conformance: str | None = Field(description="the official conformance-suite check id")
    observable: bool


class ChangeOut(_Open):
    kind: str
    target: str | None = None
    detail: str | None = None


class DiffOut(_Open):
    format: str
    inputs: list[str]
    changes: list[ChangeOut]
    notes: list[str]


class StatsGroupOut(_Open):
    method: str
    target: str | None
    chains: int
    outcomes: dict[str, int]
    rounds: dict[str, int]


class StatsOut(_Open):
    format: str
    filter: str | None = None
    groups: list[StatsGroupOut]


def _result(data: dict) -> CallToolResult:
    """A tool's result: the structured content, and the same JSON as text (tools.mdx: for clients
    that read only content)."""
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                          structured_content=data)


# -- the analysis, off the event loop, kept for a few recordings -------------------------------------


class Analyses:
    """`check` of a recording (its report as a dict, and each chain's session id), cached while the
    file is unchanged (size and modification time)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._cache: OrderedDict[tuple, tuple[dict, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def report(self, rec: Recording) -> tuple[dict, dict]:
        from ..api import analysed

        try:
            st = rec.path.stat()
        except OSError as e:
            raise ToolError(f"cannot read {rec.name}: {e.strerror or e}") from None
        key = (str(rec.path), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        try:
            builder = analysed([str(rec.path)], replace(self.config), sessions=True)
        except UserError as e:  # not a recording: the reason, as `check` says it
            raise ToolError(str(e)) from None
        try:
            got = (builder.to_dict(), dict(builder.sessions or {}))
        finally:
            builder.close()
        with self._lock:
            self._cache[key] = got
            while len(self._cache) > CACHE:
                self._cache.popitem(last=False)
        return got


def _filter(text: str | None):
    from ..filter import FilterError, parse

    if not text or not text.strip():
        return None
    try:
        return parse(text)
    except FilterError as e:
        raise ToolError(str(e)) from None


def _narrowed(report: dict, sessions: dict, flt) -> dict:
    """The report as `check --filter` gives it (outputs/narrow.py)."""
    if flt is None:
        return report
    from ..outputs.narrow import narrow_report
    from ..outputs.report import ReportBuilder

    b = ReportBuilder(report["inputs"])
    try:
        b.messages = report["summary"]["messages"]
        b.notes = list(report.get("notes") or ())
        b.hops = report.get("hops")
        for c in report["chains"]:
            b.add_chain(c)
        for f in report["findings"]:
            b.add_finding_json(f)
        n = narrow_report(b, flt, sessions)
        try:
            return n.to_dict()
        finally:
            n.close()
    finally:
        b.close()


# -- choosing: a name that matches several recordings, a filter that matches several chains ----------


def _server(ctx: Context) -> "AgentServer":
    return ctx.mcp_server  # type: ignore[return-value]


def _can_ask(ctx: Context) -> bool:
    """Whether the client declared form elicitation (a bare `elicitation: {}` is form)."""
    caps = ctx.client_capabilities
    e = caps.elicitation if caps is not None else None
    return e is not None and (e.form is not None or e.url is None)


def _choice(ctx: Context, what: str, given: str, options: list[str], describe: str) -> Elicit | str:
    """One option: it. Several: a question (a form with one enum field), or when the client cannot
    be asked (or there are too many), a tool error listing them."""
    if len(options) == 1:
        return options[0]
    shown = ", ".join(options[:MAX_CHOICES]) + (f" and {len(options) - MAX_CHOICES} more" if len(options) > MAX_CHOICES else "")
    if len(options) > MAX_CHOICES or not _can_ask(ctx):
        raise ToolError(f"{len(options)} {what}s match {given!r}: {shown}; name one of them exactly")
    model = create_model(f"{what.title().replace(' ', '')}Choice",
                         **{what.replace(" ", "_"): (Literal[tuple(options)], Field(description=describe))})
    return Elicit(f"{len(options)} {what}s match {given!r}: which one?", model)


def _recording_options(ctx: Context, name: str) -> list[str]:
    folder = _server(ctx).folder
    found = folder.match(name)
    if not found:
        every = folder.scan()
        listed = ", ".join(r.name for r in every[:10]) + (" …" if len(every) > 10 else "")
        raise ToolError(f"no recording matches {name!r} in {folder.root}"
                        + (f" (it has {len(every)}: {listed})" if every else " (it has none)"))
    return [r.name for r in found]


def choose_recording(recording: str, ctx: Context) -> str | Elicit:
    """The recording `recording` names; several: ask which."""
    return _choice(ctx, "recording", recording, _recording_options(ctx, recording),
                   "the recording to read (its path under the recordings folder)")


def choose_before(before: str, ctx: Context) -> str | Elicit:
    """`diff_recordings`' first recording; several: ask which."""
    return _choice(ctx, "recording", before, _recording_options(ctx, before), "the recording before the change")


def choose_after(after: str, ctx: Context) -> str | Elicit:
    """`diff_recordings`' second recording; several: ask which."""
    return _choice(ctx, "recording", after, _recording_options(ctx, after), "the recording after the change")


_ENDED = {"decline": "declined", "cancel": "cancelled"}


def _picked(ctx: Context, pick: Any) -> Recording:
    """The recording a resolver settled on."""
    if isinstance(pick, (DeclinedElicitation, CancelledElicitation)):
        raise ToolError(f"no recording was chosen (the question was {_ENDED[pick.action]})")
    data = pick.data if isinstance(pick, AcceptedElicitation) else pick
    name = data if isinstance(data, str) else getattr(data, "recording")
    rec = next((r for r in _server(ctx).folder.scan() if r.name == name), None)
    if rec is None:
        raise ToolError(f"the recording {name!r} is gone from the folder")
    return rec


def _chain_label(c: dict) -> str:
    from ..outputs.exporters.capture import chain_label
    from ..core.findings import plural

    return f"{chain_label(c)}: {c.get('outcome')}, {plural(c.get('rounds'), 'round')}"


async def choose_chain(chain: str, ctx: Context,
                       recording_pick: Annotated[Pick, Resolve(choose_recording)]) -> str | Elicit:
    """The chain `chain` names (a chain id such as c3, or a filter such as `id:17` or `tool:deploy`);
    several: ask which."""
    rec = _picked(ctx, recording_pick)
    report, sessions = await anyio.to_thread.run_sync(_server(ctx).analyses.report, rec)
    chains = report["chains"]
    given = chain.strip()
    ids = [c["id"] for c in chains if c["id"] == given]
    if not ids:
        flt = _filter(given)
        if flt is None:
            raise ToolError("name a chain: its id (c3) or a filter (id:17, tool:deploy)")
        by_chain: dict[str, list[dict]] = {}
        for f in report["findings"]:
            by_chain.setdefault(f.get("chain"), []).append(f)
        ids = [c["id"] for c in chains if flt.matches(c, by_chain.get(c["id"], ()), sessions.get(c["id"]))]
    if not ids:
        raise ToolError(f"no chain of {rec.name} matches {given!r} ({len(chains)} chains)")
    labels = {c["id"]: _chain_label(c) for c in chains}
    got = _choice(ctx, "chain", given, [labels[i] for i in ids], "the chain to read")
    return got.split(" ", 1)[0] if isinstance(got, str) else got


# -- the server -------------------------------------------------------------------------------------


class AgentServer(MCPServer):
    """The MCP server over one folder of recordings."""

    def __init__(self, folder: Folder, config: Config | None = None) -> None:
        super().__init__(NAME, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
        self.folder = folder
        self.analyses = Analyses(config or Config())
        _tools(self)

    async def list_resources(self) -> list[Resource]:
        return [Resource(uri=r.uri, name=r.name, description=f"a recording of MCP traffic ({r.size} bytes)",
                         mime_type="application/jsonl", size=r.size)
                for r in await anyio.to_thread.run_sync(self.folder.scan)]

    async def read_resource(self, uri, context=None):
        rec = await anyio.to_thread.run_sync(self.folder.by_uri, str(uri))
        if rec is None:
            raise ResourceNotFoundError(f"no recording {uri} (resources/list lists them)")
        if rec.size > MAX_RESOURCE_BYTES:
            raise ResourceError(f"{rec.name} is {rec.size} bytes, more than {MAX_RESOURCE_BYTES} read as a resource: "
                                "read it with the tools (check_recording, read_chain)")
        try:
            data = await anyio.to_thread.run_sync(rec.path.read_bytes)
        except OSError as e:
            raise ResourceError(f"cannot read {rec.name}: {e.strerror or e}") from None
        return [ReadResourceContents(content=data.decode("utf-8", "replace"), mime_type="application/jsonl")]


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _tools(server: AgentServer) -> None:
    """The tools (module docstring)."""
    tool = server.tool

    @tool(annotations=READ_ONLY)
    async def list_recordings(ctx: Context) -> Annotated[CallToolResult, RecordingsOut]:
        """The recordings in the folder this server reads (*.jsonl, subfolders too): each one's name (what the
        other tools take), resource URI, size, modification time and its first session's header (transport,
        the server command or upstream URL, the hop)."""
        found = await anyio.to_thread.run_sync(lambda: [r.describe() for r in server.folder.scan()])
        out: dict[str, Any] = {"folder": str(server.folder.root), "recordings": found}
        if not found:
            out["note"] = ("the folder does not exist yet" if not server.folder.root.is_dir() else
                           "no *.jsonl file in the folder") + " (mrtr-inspect wrap records there: docs/wrap.md)"
        return _result(out)

    @tool(annotations=READ_ONLY)
    async def check_recording(ctx: Context, recording_pick: Annotated[Pick, Resolve(choose_recording)],
                              recording: str, filter: str = "", limit: int = 1000) -> Annotated[CallToolResult, ReportOut]:
        """Analyse a recording against the MCP specification: the JSON report of `mrtr-inspect check --format
        json` (summary, chains with their rounds, findings with rule ids and spec references). `recording`: a
        name from list_recordings (or part of one). `filter` narrows chains and findings (tool:NAME, rule:ID,
        severity:LEVEL, outcome:O, id:N, rounds>N, words; and/or/not). `limit`: at most this many chains and
        findings (the rest are counted under `truncated`)."""
        rec = _picked(ctx, recording_pick)
        flt = _filter(filter)
        report, sessions = await anyio.to_thread.run_sync(server.analyses.report, rec)
        out = await anyio.to_thread.run_sync(_narrowed, report, sessions, flt)
        return _result(_limited(out, limit))

    @tool(annotations=READ_ONLY)
    async def read_chain(ctx: Context, recording_pick: Annotated[Pick, Resolve(choose_recording)],
                         chain_pick: Annotated[Pick, Resolve(choose_chain)], recording: str,
                         chain: str) -> Annotated[CallToolResult, ChainView]:
        """One chain (a logical tools/call, prompts/get or resources/read and its retries) round by round: what
        each input_required round asked, what the client answered and how long the user took, the requestState
        digests, the findings about it, and each of its messages as it crossed the wire. `chain`: its id (c3)
        or a filter that finds it (id:17 finds the chain holding JSON-RPC id 17 in any round; tool:deploy)."""
        rec = _picked(ctx, recording_pick)
        if isinstance(chain_pick, (DeclinedElicitation, CancelledElicitation)):
            raise ToolError(f"no chain was chosen (the question was {_ENDED[chain_pick.action]})")
        data = chain_pick.data
        cid = data if isinstance(data, str) else getattr(data, "chain").split(" ", 1)[0]
        report, _ = await anyio.to_thread.run_sync(server.analyses.report, rec)
        return _result(await anyio.to_thread.run_sync(_chain_view, server, rec, report, cid))

    @tool(annotations=READ_ONLY)
    async def list_findings(ctx: Context, recording_pick: Annotated[Pick, Resolve(choose_recording)],
                            recording: str, filter: str = "", limit: int = 1000) -> Annotated[CallToolResult, FindingsOut]:
        """The findings of a recording (as check_recording reports them), narrowed by `filter` (rule:ID,
        severity:error, tool:NAME, a word of the message…); at most `limit`."""
        rec = _picked(ctx, recording_pick)
        flt = _filter(filter)
        report, sessions = await anyio.to_thread.run_sync(server.analyses.report, rec)
        findings = (await anyio.to_thread.run_sync(_narrowed, report, sessions, flt))["findings"]
        out: dict[str, Any] = {"recording": rec.name, "count": len(findings), "findings": findings[:max(limit, 0)]}
        if flt is not None:
            out["filter"] = flt.text
        return _result(out)

    @tool(annotations=READ_ONLY)
    async def explain_rule(rule: str) -> Annotated[CallToolResult, RuleOut]:
        """What a rule of mrtr-inspect's catalog means: what it detects, why it matters, the specification's
        sentence and the link to it, its default severity and the conformance-suite check. `rule`: its id, as
        a finding's `rule` names it (retry-reused-id)."""
        return _result(_rule(rule))

    @tool(annotations=READ_ONLY)
    async def diff_recordings(ctx: Context, before_pick: Annotated[Pick, Resolve(choose_before)],
                              after_pick: Annotated[Pick, Resolve(choose_after)], before: str, after: str,
                              ignore: list[str] | None = None) -> Annotated[CallToolResult, DiffOut]:
        """What changed from one recording to another, by meaning (`mrtr-inspect diff --format json`): tools,
        prompts and resources offered, each chain's rounds, questions and outcome, the results. Ids, times and
        fresh requestStates are not changes. `ignore`: JSON paths to leave out (result.structuredContent.at)."""
        a, b = _picked(ctx, before_pick), _picked(ctx, after_pick)
        return _result(await anyio.to_thread.run_sync(_diff, a, b, tuple(ignore or ())))

    @tool(annotations=READ_ONLY)
    async def recording_stats(ctx: Context, recording_pick: Annotated[Pick, Resolve(choose_recording)],
                              recording: str, filter: str = "") -> Annotated[CallToolResult, StatsOut]:
        """Per method and target: chains, outcomes, rounds, and the p50/p90/p99/max of the whole chain, the
        server's time and the user's answering time, in ms (`mrtr-inspect stats --format json`)."""
        from ..outputs import stats as st

        rec = _picked(ctx, recording_pick)
        flt = _filter(filter)
        report, sessions = await anyio.to_thread.run_sync(server.analyses.report, rec)
        chains = (await anyio.to_thread.run_sync(_narrowed, report, sessions, flt))["chains"]
        doc = st.stats(chains)
        if flt is not None:
            doc = {"format": doc["format"], "filter": flt.text, "groups": doc["groups"]}
        return _result(doc)


def _limited(report: dict, limit: int) -> dict:
    limit = max(limit, 0)
    over = {k: len(report[k]) for k in ("chains", "findings") if len(report[k]) > limit}
    if not over:
        return report
    return {**report, "chains": report["chains"][:limit], "findings": report["findings"][:limit], "truncated": over}


def _rule(rid: str) -> dict:
    import difflib

    from ..core.findings import spec_url
    from ..rules import load_rules
    from ..rules.registry import REGISTRY

    load_rules()
    r = REGISTRY.get(rid.strip())
    if r is None:
        close = difflib.get_close_matches(rid.strip(), list(REGISTRY), n=3)
        raise ToolError(f"no rule {rid!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                             " (check_recording's findings name rules by id)"))
    return {"id": r.id, "severity": r.severity, "section": r.section, "summary": r.summary, "detects": r.detects,
            "why": r.why, "quote": r.quote, "example": r.example, "spec": r.spec, "spec_url": spec_url(r.spec),
            "conformance": r.conformance, "observable": r.observable}


def _diff(a: Recording, b: Recording, ignore: tuple[str, ...]) -> dict:
    from .. import diff

    try:
        changes, notes = diff.diff(str(a.path), str(b.path), ignore)
    except UserError as e:
        raise ToolError(str(e)) from None
    return diff.to_json(str(a.path), str(b.path), changes, notes)


def _rounds(c: dict) -> list[dict]:
    retries = {e.get("retries_round"): e for e in c.get("timeline") or () if e.get("retries_round")}
    out = []
    for rd in c.get("round_details") or ():
        d: dict[str, Any] = {"round": rd["round"], "asked": rd.get("asked") or {},
                             "request_state": rd.get("request_state"), "input_required_message": rd.get("message")}
        if "server_request" in rd:  # a legacy round: the server asked with a request of its own (2025-11-25)
            d.update(server_request=rd["server_request"], answered=rd.get("answered"), wait_ms=rd.get("wait_ms"),
                     link=rd.get("link"), answer_message=rd.get("response_message"))
        else:
            retry = retries.get(rd["round"])
            d.update(answered=retry.get("answered") if retry else None, wait_ms=retry.get("wait_ms") if retry else None,
                     link=retry.get("link") if retry else None, retry_id=retry.get("id") if retry else None,
                     retry_message=retry.get("message") if retry else None)
        if rd.get("unanswered_ms") is not None:
            d["unanswered_ms"] = rd["unanswered_ms"]
        out.append(d)
    return out


def _chain_view(server: AgentServer, rec: Recording, report: dict, cid: str) -> dict:
    from ..outputs.exporters.capture import load
    from ..outputs.show import render_text

    c = next((c for c in report["chains"] if c["id"] == cid), None)
    if c is None:
        raise ToolError(f"no chain {cid} in {rec.name}")
    text = io.StringIO()
    render_text([c], text)
    try:
        cap = load([str(rec.path)], replace(server.analyses.config))
    except UserError as e:
        raise ToolError(str(e)) from None
    roles = cap.roles()
    messages = []
    for i in sorted(i for i, role in roles.items() if role.chain["id"] == cid):
        m = cap.messages.get(i)
        if m is None:
            continue
        raw = m.raw.decode("utf-8", "replace")
        if len(raw) > MAX_MESSAGE_TEXT:
            raw = raw[:MAX_MESSAGE_TEXT] + f"… ({len(raw) - MAX_MESSAGE_TEXT} more characters)"
        messages.append({"index": i, "direction": m.direction, "time": m.time, "role": roles[i].step, "text": raw})
    return {"recording": rec.name, "chain": c, "rounds": _rounds(c),
            "findings": [f for f in report["findings"] if f.get("chain") == cid], "messages": messages,
            "text": text.getvalue()}


def run(recordings: str, config: Config | None = None) -> int:
    """Serve on stdin and stdout until the client closes them."""
    AgentServer(Folder(recordings), config).run("stdio")
    return 0
