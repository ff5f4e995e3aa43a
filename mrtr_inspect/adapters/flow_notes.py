"""What the analysis learnt about each flow, written into the flow for mitmweb and flow files.

`FlowNotes` (a sink of the live analysis, on the addon's analysis thread) posts each note to
mitmproxy's event loop (mitm_thread.LoopOutbox), where `apply_note` writes it into
`flow.metadata["mrtr-inspect"]` and sets the flow's comment and mark. `HeldSaves` makes mitmproxy's
flow file (`-w`) wait for a flow's notes.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from mitmproxy import http

from ..core.events import Direction
from ..core.findings import Finding, Severity
from ..core.messages import Message
from ..core.observations import Answered, Decoded, LegacyAsked

if TYPE_CHECKING:
    from .mitm_thread import LoopOutbox

NOTES_KEY = "mrtr-inspect"
MARKS = {Severity.ERROR: ":red_circle:", Severity.WARNING: ":warning:"}  # flow.marked by the worst finding of a flow


class FlowNotes:
    """Writes what the analysis learnt about each flow into `flow.metadata["mrtr-inspect"]`: its
    messages with their chain and round, and the findings that name them; and says it in mitmweb's
    flow list: `flow.comment` (what the flow is: `c2 tools/call release · retry of round 1 → round
    2: input_required`) and `flow.marked` (:red_circle: for an error finding, :warning: for a
    warning), unless the user set them. The "MCP JSON-RPC" contentview heads each message with its
    note. The notes are applied on mitmproxy's event loop (`outbox`); flows are held weakly."""

    MAX_INDEXES = 10_000

    def __init__(self, outbox: LoopOutbox) -> None:
        self.outbox = outbox
        # the chain place of each message of the frame being analysed (`observe`), until its note is written
        self._places: dict[Message, Any] = {}
        self.flows: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._where: OrderedDict[int, int] = OrderedDict()  # message index → exchange, the latest ones

    def track(self, x: int, flow: http.HTTPFlow) -> None:
        self.flows[x] = flow

    def observe(self, obs: Any) -> None:
        """An observation of the analysis (`Analysis(observe=)`), seen before the frame's outputs: where
        each message belongs in a chain (a request, the request a response answers, the request a
        legacy question or its answer serves)."""
        t = type(obs)
        place = None
        if t is Decoded:
            msg, place = obs.msg, obs.creq
        elif t is Answered and obs.asked is not None:
            msg, place = obs.response, obs.asked.request
        elif t is LegacyAsked and obs.round is not None:
            msg, place = obs.msg, obs.round.request
        if place is not None:
            if len(self._places) >= self.MAX_INDEXES:
                self._places.clear()
            self._places[msg] = place

    def add(self, out: Any) -> None:
        t = type(out)
        if t is Message and out.exchange is not None:
            self._where[out.index] = out.exchange
            if len(self._where) > self.MAX_INDEXES:
                self._where.popitem(last=False)
            self._note(out.exchange, "messages", message_note(out, self._places.pop(out, None)))
        elif t is Finding:
            for x in {self._where.get(i) for i in out.messages} - {None}:
                self._note(x, "findings", {"rule": out.rule, "severity": out.severity, "message": out.message})

    def _note(self, x: int, kind: str, note: dict) -> None:
        flow = self.flows.get(x)
        if flow is not None:
            self.outbox.post(apply_note, flow, kind, note)


def apply_note(flow: http.HTTPFlow, kind: str, note: dict) -> http.HTTPFlow:
    notes = flow.metadata.setdefault(NOTES_KEY, {"messages": [], "findings": []})
    ours = notes.get("comment"), notes.get("marked")
    notes[kind].append(note)
    comment = flow_comment(notes)
    if flow.comment in ("", ours[0]):  # a comment or a mark of the user's own stays
        flow.comment = notes["comment"] = comment
    mark = next((MARKS[s] for s in MARKS if any(f["severity"] == s for f in notes["findings"])), "")
    if mark and flow.marked in ("", ours[1]):
        flow.marked = notes["marked"] = mark
    return flow


def show_comment_column(options) -> None:
    """mitmweb's flow list shows the comment column, where each flow says what it is, added to the
    default columns: only while `web_columns` is mitmweb's default, never over columns the user set
    (`--set web_columns=…`, config.yaml). mitmdump has no such option."""
    if "web_columns" in options and not options.has_changed("web_columns") and "comment" not in options.web_columns:
        options.update(web_columns=[*options.web_columns, "comment"])


def flow_comment(notes: dict) -> str:
    """A flow in one line, for mitmweb's list: the request (its chain and step, else its label),
    what answered it, and the rules of its error and warning findings."""
    asked: list[str] = []
    answered: list[str] = []
    for n in notes["messages"]:
        kind = n["label"].split(" ", 1)[0]
        if n["direction"] == Direction.C2S:
            text = f"{n['chain']} · {n['step']}" if n.get("chain") else n["label"]
            into = asked
        elif kind in ("result", "error"):
            text = n.get("step") or kind
            if n.get("step") and kind == "error":
                text += " (error)"
            into = answered
        else:  # a notification or a request of the server's, on an event stream
            continue
        if text not in into:
            into.append(text)
    line = ", ".join(asked) or "(no request)"
    if answered:
        line += " → " + ", ".join(answered)
    bad = [f"{f['severity']} {f['rule']}" for f in notes["findings"] if f["severity"] in MARKS]
    if bad:
        line += " · " + ", ".join(dict.fromkeys(bad))
    return line


def message_note(msg: Message, creq: Any = None) -> dict:
    """A message's place: its label, and for MRTR traffic its chain and round (`creq`: its place in
    the chain, or that of the request it answers, as the analysis saw it)."""
    note: dict[str, Any] = {"index": msg.index, "label": msg.label(), "direction": msg.direction}
    if creq is not None:
        chain = creq.chain
        note["chain"] = f"{chain.id} {chain.method} {chain.target}"
        if msg.direction == Direction.C2S:
            note["step"] = f"retry of round {creq.round.n}" if creq.round is not None else "first request"
        else:
            rd = next((r for r in chain.rounds if r.irr_index == msg.index), None)
            note["step"] = f"round {rd.n}: input_required" if rd is not None else "final response"
    return note


class HeldSaves:
    """mitmproxy's flow file (`-w`) waits for the analysis' notes of each flow.

    mitmproxy's Save addon writes a flow in its `response` and `error` hooks, which run right after
    ours (scripts come before Save in mitmproxy's addon chain), while the analysis trails on its
    thread: the flow's response notes and findings would be missing from the file. mitmproxy offers
    no public way to defer that write: Save has no option or hook for it, an async hook of ours
    would hold the response's end from the client until the analysis caught up (mitmproxy sends it
    after the `response` hooks), and writing the flow again later would write it twice. So `hold`
    wraps `save_flow` on Save's instance (its class is left alone; `release` puts it back): a flow of
    ours that ended (`ended`) is written once `wait(write, flow)` says the analysis has noted it (in
    the order flows end, on the loop); any other flow, or with no file open, at once, as mitmproxy does."""

    def __init__(self, save: Any, wait: Callable[[Callable, Any], bool]) -> None:
        self.save = save
        write = save.save_flow
        held = getattr(write, "__self__", None)
        self.write = held.write if isinstance(held, HeldSaves) else write  # a reloaded script holds once
        self.wait = wait
        self.ended: set[str] = set()
        save.save_flow = self._save

    @classmethod
    def hold(cls, master: Any, wait: Callable[[Callable, Any], bool]) -> HeldSaves | None:
        save = master.addons.get("save")
        return cls(save, wait) if callable(getattr(save, "save_flow", None)) else None

    def ended_flow(self, flow: http.HTTPFlow) -> None:
        """A flow of ours ended: Save's write of it waits for the analysis."""
        self.ended.add(flow.id)

    def _save(self, flow: Any) -> None:
        ours = getattr(flow, "id", None) in self.ended
        self.ended.discard(getattr(flow, "id", None))
        if ours and getattr(self.save, "stream", None) is not None and self.wait(self.write, flow):
            return
        self.write(flow)

    def release(self) -> None:
        self.ended.clear()
        if getattr(self.save.save_flow, "__self__", None) is self:
            self.save.save_flow = self.write
