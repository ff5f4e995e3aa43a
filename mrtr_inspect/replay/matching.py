"""Matching a live request to a recorded one, and saying what differs when none matches.

A request is matched on what MCP makes it mean, not on its bytes:

* `method`, and the target (`params.name`, or `params.uri` for resources/read);
* the other parameters (the arguments) in canonical form, without `_meta`, `inputResponses` and
  `requestState` (core.canonical.params_digest, the digest chain stitching uses);
* the keys of `inputResponses` (which questions the retry answers, not what the user said);
* the `requestState`, where the recorded server issued the one the recorded request echoes: a
  live client must echo the state it was served;
* on HTTP, the path.

JSON-RPC ids never count. Paths given to `ignore` (core/jsonpath.py, into the whole message:
`params.arguments.nonce`; `*` is any one member or index, `**` any depth) are left out first.

Redacted values: the live request is redacted as the recording was (serve.py) before it is
matched. With the same redaction key (the recording's header names its key's id) a placeholder
matches the one secret it stands for and no other. A recording made with another key (another
machine, a fresh CI home) cannot tell secrets apart: there (`lenient`) a recorded placeholder
matches any live placeholder at the same place (a value the live side redacted too), and only
those; a clear live value still differs.

The same paths and `differences` serve `replay verify` to compare responses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..core import jsonpath
from ..core.canonical import canonical_json, params_digest
from ..core.messages import Message, target_of
from ..recording.redaction import PLACEHOLDERS, is_placeholder
from .script import Exchange

MRTR_FIELDS = ("_meta", "inputResponses", "requestState")

# -------------------------------------------------------------------------------------------------
# paths (one syntax with redaction's: core/jsonpath.py)

parse_paths = jsonpath.parse_all
format_path = jsonpath.format_path


def strip_paths(value: Any, patterns: list[tuple], path: tuple = ()) -> Any:
    """A copy of `value` without the members and items that a pattern names."""
    if not patterns:
        return value
    if type(value) is dict:
        return {k: strip_paths(v, patterns, path + (k,)) for k, v in value.items()
                if not jsonpath.any_match(patterns, path + (k,))}
    if type(value) is list:
        return [strip_paths(v, patterns, path + (i,)) for i, v in enumerate(value)
                if not jsonpath.any_match(patterns, path + (i,))]
    return value


# -------------------------------------------------------------------------------------------------
# differences

ABSENT = object()


@dataclass(frozen=True)
class Diff:
    path: str
    recorded: Any
    live: Any
    reason: str = ""  # a custom matcher's: why it said no (then recorded and live are ABSENT)

    def text(self) -> str:
        if self.reason:
            return f"{self.path}: {self.reason}"
        return f"{self.path}: recorded {show(self.recorded)}, live {show(self.live)}"

    def to_json(self) -> dict:
        return {"field": self.path, "recorded": None if self.recorded is ABSENT else self.recorded,
                "live": None if self.live is ABSENT else self.live,
                "absent": [s for s, v in (("recorded", self.recorded), ("live", self.live)) if v is ABSENT],
                **({"reason": self.reason} if self.reason else {})}


def show(value: Any, width: int = 70) -> str:
    if value is ABSENT:
        return "absent"
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def _same_value(a: Any, b: Any) -> bool:
    """Equal, where ABSENT equals only itself."""
    if a is ABSENT or b is ABSENT:
        return a is b
    return type(a) is type(b) and a == b


def differences(recorded: Any, live: Any, path: tuple = ()) -> list[Diff]:
    """Where two JSON values differ, leaf by leaf (members by name, items by position)."""
    if type(recorded) is dict and type(live) is dict:
        out: list[Diff] = []
        for k in list(recorded) + [k for k in live if k not in recorded]:
            out += differences(recorded.get(k, ABSENT), live.get(k, ABSENT), path + (k,))
        return out
    if type(recorded) is list and type(live) is list and len(recorded) == len(live):
        return [d for i, (a, b) in enumerate(zip(recorded, live)) for d in differences(a, b, path + (i,))]
    if recorded is ABSENT and live is ABSENT:
        return []
    if recorded is not ABSENT and live is not ABSENT and _same(recorded, live):
        return []
    return [Diff(format_path(path), recorded, live)]


# -------------------------------------------------------------------------------------------------
# request fields


@dataclass(frozen=True)
class Fields:
    method: str | None
    target: str | None
    rest: Any  # params without the MRTR fields (and ignored paths)
    digest: str  # params_digest of `rest`
    keys: Any  # sorted inputResponses keys (a tuple); ABSENT when absent (or ignored); the value if not an object
    state: Any  # the requestState; ABSENT when absent (or ignored)
    path: str | None
    answers: Any = ABSENT  # the inputResponses (as the ignore paths left them); ABSENT when absent


def request_fields(msg: Message, ignore: list[tuple], http_path: str | None = None) -> Fields:
    value = strip_paths(msg.value, ignore) if ignore else msg.value
    params = value.get("params") if type(value) is dict else None
    p = params if type(params) is dict else {}
    rest = {k: v for k, v in p.items() if k not in MRTR_FIELDS} if type(params) is dict else params
    ir = p.get("inputResponses", ABSENT)
    keys = tuple(sorted(ir)) if type(ir) is dict else ir
    return Fields(msg.method, target_of(msg.method, params), rest, params_digest(msg.method, rest), keys,
                  p.get("requestState", ABSENT), http_path, ir)


def _shown_keys(keys: Any) -> Any:
    return list(keys) if type(keys) is tuple else keys


def _both_redacted(d: Diff) -> bool:
    return is_placeholder(d.recorded) and is_placeholder(d.live)


def _unredacted(path: str) -> str:
    return PLACEHOLDERS.sub("[redacted]", path)


def field_differences(ex: Exchange, rec: Fields, live: Fields, lenient: bool = False) -> list[Diff]:
    """What keeps a live request from matching a recorded exchange, most telling first. `lenient`:
    placeholders made with another key, any placeholder matches another (the module's docstring)."""
    out: list[Diff] = []
    if rec.method != live.method:
        out.append(Diff("method", rec.method, live.method))
    if rec.target != live.target:
        out.append(Diff("params.uri" if rec.method == "resources/read" else "params.name", rec.target, live.target))
    if rec.digest != live.digest:
        rest = [d for d in differences(rec.rest, live.rest, ("params",))
                if d.path not in ("params.name", "params.uri")]
        if rest:
            out += [d for d in rest if not (lenient and _both_redacted(d))]
        elif rec.target == live.target:  # equal once canonical, yet not the same digest
            out.append(Diff("params", rec.rest, live.rest))
    if not _same_value(rec.keys, live.keys):
        out.append(Diff("params.inputResponses (keys)", _shown_keys(rec.keys), _shown_keys(live.keys)))
    # both sides as the ignore paths left them: an ignored requestState is not compared (nor said to be absent)
    if ex.echoed_state is not None and rec.state is not ABSENT and not _same_value(rec.state, live.state):
        d = Diff("params.requestState", rec.state, live.state)
        if not (lenient and _both_redacted(d)):
            out.append(d)
    if rec.path is not None and live.path is not None and rec.path != live.path:
        if not (lenient and _unredacted(rec.path) == _unredacted(live.path)):
            out.append(Diff("path", rec.path, live.path))
    return out


_WEIGHT = {"method": 100, "params.name": 40, "params.uri": 40, "params.inputResponses (keys)": 6,
           "params.requestState": 4, "path": 3}


def cost(diffs: list[Diff]) -> int:
    """How far apart: a first request is further from a retry than a retry from another retry."""
    return sum(_WEIGHT.get(d.path, 2) + (4 if ABSENT in (d.recorded, d.live) and d.path.endswith("(keys)") else 0)
               for d in diffs)


# -------------------------------------------------------------------------------------------------
# the matcher


@dataclass
class Match:
    exchange: Exchange | None  # None: a miss
    closest: Exchange | None = None
    diffs: list[Diff] | None = None
    reason: str = ""  # for a miss: why the closest one was not served

    def explain(self, live: Message) -> str:
        what = f"{live.method} {target_of(live.method, live.params) or ''}".strip()
        if self.closest is None:
            return f"no recorded request matches {what}: the recording has no request left to serve"
        text = f"no recorded request matches {what}; closest: {self.closest.label()}"
        if self.diffs:
            text += "; differs in " + "; ".join(d.text() for d in self.diffs)
            if any(is_placeholder(d.recorded) and not is_placeholder(d.live) for d in self.diffs):
                text += ("; the recording holds a redacted value there: replay with the paths it was "
                         "recorded with redacted (redact_paths), or --ignore that path")
            if any(is_placeholder(d.live) and not is_placeholder(d.recorded) for d in self.diffs):
                text += ("; the live value is redacted there (redact_paths) but the recording holds it in clear: "
                         "record again, or export the fixture with that path redacted")
            if any(_both_redacted(d) for d in self.diffs):
                text += ("; both sides are redacted placeholders there, made with the same redaction key: "
                         "the live value is another secret than the recorded one")
        if self.reason:
            text += f"; {self.reason}"
        return text

    def to_json(self) -> dict:
        return {"closest": self.closest.label() if self.closest else None,
                "closest_message": self.closest.request.index if self.closest else None,
                "differences": [d.to_json() for d in self.diffs or ()], "reason": self.reason or None}


def answer_differences(rec: Fields, live: Fields) -> list[Diff]:
    """What the retries answered, value by value (`match_on=["answers"]`): for a client test the
    answer is the behaviour under test. Only where both answer the same questions (the keys are
    compared anyway)."""
    if type(rec.answers) is not dict or type(live.answers) is not dict or rec.keys != live.keys:
        return []
    return differences(rec.answers, live.answers, ("params", "inputResponses"))


CustomMatcher = Callable[[Any, Any], Any]  # (recorded request, live request) → None/True: they match


def custom_verdict(name: str, fn: CustomMatcher, recorded: Any, live: Any) -> Diff | None:
    """A custom matcher's verdict on two requests (their JSON values), as vcrpy's are given: it
    returns None or True when they match; False, or a reason (str), or raises AssertionError when
    they do not. Any other exception is a no too, said with it."""
    try:
        got = fn(recorded, live)
    except AssertionError as e:
        return Diff(f"matcher {name}", ABSENT, ABSENT, str(e) or "said no")
    except Exception as e:
        return Diff(f"matcher {name}", ABSENT, ABSENT, f"raised {type(e).__name__}: {e}")
    if got is None or got is True:
        return None
    return Diff(f"matcher {name}", ABSENT, ABSENT, got if isinstance(got, str) and got else "said no")


class Matcher:
    """Picks the recorded exchange that answers a live request.

    `order="any"`: the first unused exchange that matches, in recorded order. `order="strict"`: only
    the next unused exchange may match. A served exchange is not served again unless `repeats`.
    `lenient`: the recording's placeholders were made with another key than the live side's.
    `answers`: the values of `inputResponses` count too (not only their keys). `custom`: (name,
    function) matchers asked about each recorded request that matches otherwise (`custom_verdict`).
    """

    def __init__(self, exchanges: list[Exchange], ignore: Iterable[str] = (), order: str = "any",
                 repeats: bool = False, lenient: bool = False, answers: bool = False,
                 custom: Sequence[tuple[str, CustomMatcher]] = ()) -> None:
        if order not in ("any", "strict"):
            raise ValueError(f"order is 'any' or 'strict', not {order!r}")
        self.lenient = lenient  # placeholders of another key (the module's docstring)
        self.ignore = parse_paths(ignore)
        self.order = order
        self.repeats = repeats
        self.exchanges = exchanges
        self.fields = [request_fields(ex.request, self.ignore, ex.http.path if ex.http else None) for ex in exchanges]
        self.used = [0] * len(exchanges)
        self.answers = answers
        self.custom = tuple(custom)

    @property
    def unused(self) -> list[Exchange]:
        return [ex for ex, n in zip(self.exchanges, self.used) if not n]

    def match(self, live: Message, http_path: str | None = None) -> Match:
        lf = request_fields(live, self.ignore, http_path)
        scored = []
        for i, (ex, rf) in enumerate(zip(self.exchanges, self.fields)):
            diffs = field_differences(ex, rf, lf, self.lenient)
            if self.answers:
                diffs += answer_differences(rf, lf)
            if self.custom and not diffs:
                diffs = [d for name, fn in self.custom
                         if (d := custom_verdict(name, fn, ex.request.value, live.value)) is not None][:1]
            scored.append((cost(diffs), bool(self.used[i]), i, diffs))
        if self.order == "strict":
            nxt = next((s for s in scored if not s[1]), None)
            if nxt is None:
                return Match(None)
            if not nxt[3]:
                return self._serve(nxt[2])
            return Match(None, self.exchanges[nxt[2]], nxt[3], "strict order: this is the next recorded request")
        fits = [s for s in scored if not s[3]]
        fresh = [s for s in fits if not s[1]]
        if fresh:
            return self._serve(fresh[0][2])
        if fits and self.repeats:
            return self._serve(fits[0][2])
        if fits:
            i = fits[0][2]
            reason = "it was served already (allow repeats to serve it again)"
            if live.method == "server/discover":
                reason += ("; a second client session? Each one begins with server/discover: --allow-repeats "
                           "(allow_repeats=True in the pytest plugin) serves it again, or record both sessions. "
                           "A client given this error may fall back to initialize, a second miss")
            return Match(None, self.exchanges[i], [], reason)
        best = min(scored, key=lambda s: (s[0], s[1], s[2]))
        reason = ""
        if live.method == "initialize" and self._discover_only():
            reason = ("the recorded client began with server/discover, not initialize: a client falls back to "
                      "initialize when server/discover fails (see the miss before this one)")
        return Match(None, self.exchanges[best[2]], best[3], reason)

    def _discover_only(self) -> bool:
        methods = {ex.method for ex in self.exchanges}
        return "server/discover" in methods and "initialize" not in methods

    def _serve(self, i: int) -> Match:
        self.used[i] += 1
        return Match(self.exchanges[i])
