"""An input_required result taken apart once for the rules of RULES.md §4.1 that read it
(`mrtr_server.py`, the checks of its pass `ASKED`, whose update is `asked`): its input requests
(`Ask`), what their values alone decide (`AskFacts`, shared by input requests of the same bytes),
and the credential heuristic of `elicit-form-sensitive`."""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..core.era import LEGACY
from ..core.messages import INPUT_REQUEST_METHODS, REQUEST
from ..core.observations import Answered
from . import shapes
from .common import answered, at, chain_of, kept, modern_result
from .registry import INPUT_REQUIRED
from .shapes import ELICIT, elicit_mode

_UNSET = object()


class AskFacts:
    """What the value of an input request alone decides, by the models of its version: its shape
    problems, its form's properties that are not primitive schemas, those that look like credentials.
    Each is computed when a rule first asks, and shared by every input request of the same bytes
    (`_facts_of`): servers ask the same questions again (a tool's confirmation, its form)."""

    __slots__ = ("problems", "not_flat", "sensitive")

    def __init__(self) -> None:
        self.problems: Any = _UNSET  # list[str]
        self.not_flat: Any = _UNSET  # property name -> why it is not a primitive schema
        self.sensitive: Any = _UNSET  # [(property name, the words that look like a credential)]


# input requests by (version, their value as orjson writes it): equal bytes are an equal value (orjson
# writes each value one way; the parser refuses NaN and infinities, which orjson would write as null;
# a value orjson cannot write, an integer past 64 bits or a lone surrogate, gets facts of its own).
# What it keeps are strings and lists of them, none of the pipeline's objects.
_FACTS: dict[tuple, AskFacts] = {}
_FACTS_KEPT = 512  # input requests remembered (the oldest forgotten first)
_FACTS_BYTES = 1024  # a larger value (a sampling request with its messages) gets facts of its own (not kept)


def _facts_of(value: dict, version: str) -> AskFacts:
    try:
        text = orjson.dumps(value)
    except TypeError:
        return AskFacts()
    if len(text) > _FACTS_BYTES:
        return AskFacts()
    facts = _FACTS.get((version, text))
    if facts is None:
        facts = AskFacts()
        # (a copy of the bytes: orjson's hold a 4 KiB allocation each, 2 MB for the 512 kept)
        kept(_FACTS, (version, bytes(memoryview(text))), facts, _FACTS_KEPT)
    return facts


def asked_text(obs: Answered, ir: dict) -> str | None:
    """orjson's text of an input_required result's inputRequests (an object; None when orjson does not
    write it): its round's, which the core wrote to key the round's summary (`Round.asked_text`), else
    written here (a result of no round: not stitched, or its chain closed)."""
    creq = obs.creq
    if creq is not None:
        rounds = creq.chain.rounds
        if rounds:
            rd = rounds[-1]
            if rd.input_requests is ir and rd.irr_index == obs.response.index:
                text = rd.asked_text
                return text if text is not None or ir else "{}"  # (none for an empty map)
    try:
        return orjson.dumps(ir).decode("utf-8")
    except TypeError:  # (orjson's error for what it does not write)
        return None


class Ask:
    """One input request: a value of an IRR's `inputRequests` (modern; `key` is its key), or a
    server-initiated request (legacy; `key` None). Its shape problems, and what its form asks, are
    computed once, when a rule first asks (`AskFacts`); the text naming it, only when a rule
    reports it."""

    __slots__ = ("key", "value", "method", "params", "mode", "form_properties", "version", "origin", "messages",
                 "chain", "valid_method", "_facts")

    def __init__(self, key, value: dict, version: str, origin, messages: list, chain) -> None:
        self.key = key
        self.value = value
        method = self.method = value.get("method")
        params = self.params = value.get("params")
        mode = self.mode = elicit_mode(params) if method == ELICIT else None
        self.form_properties = _form_properties(params) if mode == "form" else {}
        #: one of the three kinds of input request
        self.valid_method = type(method) is str and method in INPUT_REQUEST_METHODS
        self.version = version
        self.origin = origin  # the observation it came with
        self.messages = messages
        self.chain = chain
        self._facts: AskFacts | None = None

    @property
    def where(self) -> str:
        if self.key is None:
            msg = self.origin.msg
            return f"the server request {at(msg)}"
        return f"input request {self.key!r} of the input_required {answered(self.origin)}"

    @property
    def facts(self) -> AskFacts:
        f = self._facts
        if f is None:
            f = self._facts = _facts_of(self.value, self.version)
        return f

    @property
    def problems(self) -> list[str]:
        f = self.facts
        if f.problems is _UNSET:
            f.problems = shapes.input_request_problems(self.method, self.params, self.version)
        return f.problems

    @property
    def not_flat(self) -> dict[str, str]:
        """The form's properties that are not primitive schemas, and why not."""
        f = self.facts
        if f.not_flat is _UNSET:
            f.not_flat = {name: shapes.why_not_primitive(s) for name, s in self.form_properties.items()
                          if not shapes.primitive_schema_ok(s, self.version)}
        return f.not_flat

    @property
    def sensitive(self) -> list[tuple[str, str]]:
        """The form's properties that look like credentials, and the words that make them look so."""
        f = self.facts
        if f.sensitive is _UNSET:
            found = []
            for name, s in self.form_properties.items():
                s = s if type(s) is dict else {}
                hit = _sensitive(name, s.get("title"), s.get("description"), s.get("format"))
                if hit:
                    found.append((name, hit))
            f.sensitive = found
        return f.sensitive


def _form_properties(params: dict) -> dict:
    """`requestedSchema.properties` of a form-mode elicitation ({} when there is none)."""
    schema = params.get("requestedSchema")
    props = schema.get("properties") if type(schema) is dict else None
    return props if type(props) is dict else {}


class IrrView:
    """A modern input_required result, taken apart once for all the rules that read it."""

    __slots__ = ("obs", "result", "asks", "valid")

    def __init__(self, obs: Answered, result: dict) -> None:
        self.obs = obs
        self.result = result
        ir = result.get("inputRequests")
        creq = obs.creq
        messages, chain = [obs.response.index], creq.chain.id if creq is not None else None  # chain_of(obs)
        asks = self.asks = [Ask(k, v, shapes.MODERN, obs, messages, chain)
                            for k, v in ir.items() if type(v) is dict] if type(ir) is dict else []
        self.valid = [a for a in asks if a.valid_method]

    def emit(self, ctx, text: str, **kw) -> None:
        ctx.emit(text, messages=[self.obs.response.index], chain=chain_of(self.obs), **kw)


class ServerRequest:
    """A legacy server-initiated input request, as the checks of `asked` read it: `valid` holds it as
    an `Ask` (the one field the checks reaching legacy requests read; an IRR's view has it too)."""

    __slots__ = ("valid",)

    def __init__(self, ask: Ask) -> None:
        self.valid = [ask]


def asked(obs, _state) -> "IrrView | ServerRequest | None":
    """The update of the pass of RULES.md §4.1's input request checks (`mrtr_server.ASKED`): the
    message taken apart once for all of them. A modern input_required result gives its view
    (`IrrView`), a legacy server request of one of the three kinds its `ServerRequest`; anything
    else None, and then no check of the pass runs (each would find nothing)."""
    if type(obs) is Answered:
        r = modern_result(obs)
        return IrrView(obs, r) if r is not None and r.get("resultType") == INPUT_REQUIRED else None
    msg = obs.msg
    if msg.kind == REQUEST and msg.era is LEGACY and msg.method in INPUT_REQUEST_METHODS:
        return ServerRequest(Ask(None, msg.value, shapes.LEGACY, obs, [msg.index], None))
    return None


_WORDS = re.compile(r"[a-z0-9]+")
_SECRET_WORDS = frozenset({"password", "passwords", "passwd", "passphrase", "secret", "secrets", "token", "apikey",
                           "cvv", "cvc", "cvv2"})
_SECRET_PAIRS = frozenset({("api", "key"), ("card", "number"), ("credit", "card"), ("private", "key"),
                           ("security", "code")})


_HINT = re.compile("pass|secret|token|key|cv[cv]|card|security")  # a cheap first look, on lower case


def _sensitive(*texts: object) -> str | None:
    """The words that make a form field look like a credential, if any."""
    # the cheap first look at all the texts at once: a hint lies within one text (it is letters, the
    # texts are joined by NUL), and lower() maps each text as it does alone
    if not _HINT.search("\0".join([t for t in texts if type(t) is str]).lower()):
        return None
    for text in texts:
        if type(text) is not str or not _HINT.search(text.lower()):
            continue
        words = _WORDS.findall(re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text).lower())
        for w in words:
            if w in _SECRET_WORDS:
                return w
        for pair in zip(words, words[1:]):
            if pair in _SECRET_PAIRS:
                return " ".join(pair)
    return None
