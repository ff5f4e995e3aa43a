"""One pass of recordings through the core for the export formats and for `check --format sarif|junit`:
the core's outputs, and where each message sits in its file (input, line).

    cap = load(["session.jsonl"])           # everything: frames, messages, chains, findings
    where = locate(paths, {3, 4})           # only the places of these messages (rules off: cheap)

`load` keeps the whole recording in memory (an export writes one file of it all anyway); `locate`
keeps only the messages asked for and the sessions' headers.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from ...analysis import Analysis
from ...config import Config
from ...core.events import Frame, SessionStart
from ...core.findings import Finding
from ...core.hops import HopsCorrelated
from ...core.inspector import ChainEvent
from ...core.messages import Message
from ...recording.reader import ReadNotes, read_frames
from ...rules import load_rules
from ...rules.registry import REGISTRY

__all__ = ["Capture", "Place", "chain_label", "load", "locate"]


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message was recorded: the input (index into the inputs), the line of that file
    (1-based) that holds its frame, its capture session, and the SHA-256 of its bytes."""

    input: int
    line: int
    session: str
    digest: str


@dataclass(frozen=True, slots=True)
class Role:
    chain: dict  # the chain's summary
    step: str  # "first request", "retry of round 1", "input_required, round 2", "final response (result)"
    round: int | None  # requests: the round answered (0: the first request); input_required: its round

    @property
    def label(self) -> str:
        return chain_label(self.chain)


def chain_label(c: dict) -> str:
    """`c1 tools/call deploy` (`c1 tools/call deploy (hop front)` when its session named its hop)"""
    label = " ".join(str(x) for x in (c["id"], c.get("method"), c.get("target")) if x is not None)
    return label + f" (hop {c['hop']})" if c.get("hop") else label


@dataclass
class Located:
    places: dict[int, Place] = field(default_factory=dict)
    #: the session headers in file order: (time, input, line, session)
    sessions: list[tuple[float, int, int, str]] = field(default_factory=list)
    _order: list = field(default_factory=list, repr=False)
    _starts: list[float] | None = field(default=None, repr=False)

    def session_at(self, t: float) -> tuple[float, int, int, str] | None:
        """The session that started last at or before `t` (else the first one)."""
        if not self.sessions:
            return None
        if self._starts is None or len(self._starts) != len(self.sessions):
            self._order = sorted(self.sessions)
            self._starts = [s[0] for s in self._order]
        return self._order[max(bisect_right(self._starts, t) - 1, 0)]


@dataclass
class Capture(Located):
    inputs: list[str] = field(default_factory=list)
    frames: list[tuple[int, int, Frame]] = field(default_factory=list)  # (input, line, frame)
    messages: dict[int, Message] = field(default_factory=dict)
    chains: list[dict] = field(default_factory=list)  # closed-chain summaries, by chain number
    hops: list[dict] | None = None  # the linked pairs of two hops (RULES.md §11), when a session named its hop
    findings: list[dict] = field(default_factory=list)
    starts: dict[str, SessionStart] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def roles(self) -> dict[int, "Role"]:
        """What each message of a chain is to it: its first request, a retry, an input_required
        round, the final response; a legacy chain's server requests and the client's answers."""
        out: dict[int, Role] = {}
        for c in self.chains:
            rounds = {r["message"]: r["round"] for r in c.get("round_details") or ()}
            for e in c.get("timeline") or ():
                n = e.get("retries_round")
                out[e["message"]] = Role(c, f"retry of round {n}" if n else "first request", n or 0)
                rm = e.get("response_message")
                if rm in rounds:
                    out[rm] = Role(c, f"input_required, round {rounds[rm]}", rounds[rm])
                elif rm is not None:
                    out[rm] = Role(c, f"final response ({e.get('response')})", None)
            for r in c.get("round_details") or ():
                if "server_request" in r:  # a legacy round: the server's question and the client's answer
                    out[r["message"]] = Role(c, f"server request, round {r['round']}", r["round"])
                    if r.get("response_message") is not None:
                        out[r["response_message"]] = Role(c, f"the client's answer, round {r['round']}", r["round"])
        return out

    def session_of_chain(self, chain: dict) -> str:
        tl = chain.get("timeline") or []
        m = self.messages.get(tl[0]["message"]) if tl else None
        return m.session if m is not None else ""


def _walk(paths: Iterable[str], config: Config | None, notes: list[str],
          redact: Callable[[Frame], Frame] | None = None) -> Iterator[tuple[int, int, Frame | None, list]]:
    """(input, line, frame, the core's outputs for it) for every frame, then the outputs of the end."""
    insp = Analysis(config)
    n = -1
    for n, path in enumerate(paths):
        rn = ReadNotes()
        for frame in read_frames(path, rn, limit=insp.config.max_message_bytes):
            if redact is not None:
                frame = redact(frame)
            # every line so far is a frame or a skipped record: this frame's line is their count
            yield n, rn.frames + len(rn.skipped), frame, insp.feed(frame)
        notes.extend(rn.lines(str(path)))
    yield max(n, 0), 0, None, insp.close()


def _place(msg: Message, i: int, line: int) -> Place:
    return Place(i, line, msg.session, hashlib.sha256(msg.raw).hexdigest())


def load(paths: Iterable[str], config: Config | None = None, redact: Callable[[Frame], Frame] | None = None) -> Capture:
    """Everything the core says about the recordings, with the frames and each message's place;
    `redact`: each frame redacted first (an export: recording.redaction)."""
    cap = Capture(inputs=[str(p) for p in paths])
    for i, line, frame, outs in _walk(cap.inputs, config, cap.notes, redact):
        if frame is not None:
            cap.frames.append((i, line, frame))
            if type(frame) is SessionStart:
                cap.starts[frame.session] = frame
                cap.sessions.append((frame.time, i, line, frame.session))
        for o in outs:
            t = type(o)
            if t is Message:
                cap.messages[o.index] = o
                cap.places[o.index] = _place(o, i, line)
            elif t is Finding:
                cap.findings.append(o.to_json())
            elif t is ChainEvent and o.kind == "closed":
                cap.chains.append(o.chain.summary())
            elif t is HopsCorrelated:
                cap.hops = o.entries()
    cap.chains.sort(key=lambda c: int(c["id"][1:]))
    return cap


def locate(paths: Iterable[str], wanted: set[int]) -> Located:
    """The places of the `wanted` messages, numbered as `check` numbers them (one capture over all
    the inputs). The rules are off: only decoding and stitching run."""
    load_rules()
    found = Located()
    for i, line, frame, outs in _walk(paths, Config(disabled=set(REGISTRY)), []):
        if type(frame) is SessionStart:
            found.sessions.append((frame.time, i, line, frame.session))
        for o in outs:
            if type(o) is Message and o.index in wanted:
                found.places[o.index] = _place(o, i, line)
    return found
