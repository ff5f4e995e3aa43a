"""Faults a replay injects on purpose, so a client's timeouts and retries can be tested: `replay
serve --fault`, the pytest plugin's `faults=`, and the fault mutations of `probe-client`.

    faults = FaultPicker([parse_fault("delay@tools/call:deploy")])
    fault = faults.pick(live_request, matched_exchange)     # a Fault, or None
    answer = apply(fault, answer, live_request)             # the Answer, changed

A fault is written `KIND[:ARG][@WHICH]`:

* `delay[:SECONDS]`: the answer is held back SECONDS (default: until the client gives up or the
  replay stops);
* `disconnect`: no answer; the connection is closed (HTTP), or the server's stdout (stdio);
* `malformed`: the answer's JSON cut in the middle;
* `error[:CODE]`: a JSON-RPC error (default -32603) instead of the answer.

`WHICH` picks the request: `N` (the client's Nth request, counting from 1), `METHOD` or
`METHOD:TARGET` (`tools/call:deploy`: the first such request), `chain` (the first request that
opens a recorded chain). Without it a fault takes the first request after the handshake
(`server/discover`, `initialize`, `ping` are not faulted), or, with a seed (`--fault-seed`), each
request after the handshake at random with the probability `rate`. A fault fires once, except at
random. Sans-IO: the transports (serve.py) carry out what `Answer.fault` says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..core.messages import Message, target_of
from .wire import dumps

KINDS = ("delay", "disconnect", "malformed", "error")
HANDSHAKE = frozenset({"server/discover", "initialize", "ping"})
DEFAULT_ERROR = -32603
FAULT_REPLY = "mrtr-inspect replay: "  # live.OWN_REPLY: the replay's own replies, not the recording's


@dataclass(frozen=True)
class Fault:
    kind: str
    seconds: float | None = None  # delay: how long (None: until the client gives up or the replay stops)
    code: int = DEFAULT_ERROR  # error
    which: str | None = None  # see the module docstring

    def text(self) -> str:
        arg = f":{self.seconds:g}" if self.seconds is not None else f":{self.code}" if self.kind == "error" else ""
        return f"{self.kind}{arg}" + (f"@{self.which}" if self.which else "")


def parse_fault(text: str) -> Fault:
    """`delay:5@tools/call` → Fault. Raises ValueError with a one-line reason."""
    spec, _, which = str(text).strip().partition("@")
    kind, sep, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise ValueError(f"fault {text!r}: the kind is one of {', '.join(KINDS)} (KIND[:ARG][@WHICH])")
    which = which.strip() or None
    if which is not None and not (which.isdigit() and int(which) > 0) and "/" not in which and which != "chain":
        raise ValueError(f"fault {text!r}: @WHICH is a request number (1, 2…), a METHOD[:TARGET] or 'chain'")
    if kind == "delay" and sep:
        try:
            seconds = float(arg)
        except ValueError:
            raise ValueError(f"fault {text!r}: delay:SECONDS takes a number of seconds") from None
        if not seconds >= 0:
            raise ValueError(f"fault {text!r}: delay:SECONDS takes a number of seconds, 0 or more")
        return Fault(kind, seconds=seconds, which=which)
    if kind == "error" and sep:
        try:
            return Fault(kind, code=int(arg), which=which)
        except ValueError:
            raise ValueError(f"fault {text!r}: error:CODE takes a JSON-RPC error code (an integer)") from None
    if sep:
        raise ValueError(f"fault {text!r}: {kind} takes no argument")
    return Fault(kind, which=which)


@dataclass
class FaultPicker:
    """Which fault, if any, each live request gets."""

    faults: list[Fault]
    seed: int | None = None
    rate: float = 0.25
    requests: int = 0
    fired: list[tuple[str, Fault]] = field(default_factory=list)  # (the request, the fault) in order
    _done: set = field(default_factory=set)
    _random: Any = None

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed) if self.seed is not None else None

    def pick(self, live: Message, chain_first: bool = False) -> Fault | None:
        """The fault for this request (counted); `chain_first`: it opens a recorded chain."""
        self.requests += 1
        method = live.method or ""
        target = target_of(live.method, live.params)
        for i, f in enumerate(self.faults):
            if i in self._done or (f.which is None and self._random is not None):
                continue
            if self._chosen(f, method, target, chain_first):
                self._done.add(i)
                return self._fire(live, f)
        if self._random is not None and method not in HANDSHAKE:
            pool = [f for f in self.faults if f.which is None]
            if pool and self._random.random() < self.rate:
                return self._fire(live, self._random.choice(pool))
        return None

    def _chosen(self, f: Fault, method: str, target: str | None, chain_first: bool) -> bool:
        w = f.which
        if w is None:
            return method not in HANDSHAKE
        if w.isdigit():
            return self.requests == int(w)
        if w == "chain":
            return chain_first
        m, _, t = w.partition(":")
        return method == m and (not t or target == t)

    def _fire(self, live: Message, f: Fault) -> Fault:
        what = f"{live.method} {target_of(live.method, live.params) or ''}".strip()
        self.fired.append((what, f))
        return f


def error_reply(rid: Any, code: int) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": code, "message": f"{FAULT_REPLY}fault injected (error {code})"}}).encode()


def cut(data: bytes) -> bytes:
    """A message's JSON cut in the middle (never valid JSON: the closing brace is gone)."""
    return data[: max(1, len(data) // 2)]
