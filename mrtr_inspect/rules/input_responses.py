"""RULES.md §4.3: the shape of each answer, by the kind of request it answers.

A retry's `inputResponses[k]` answers `inputRequests[k]` of the round it is linked to (or of an
earlier round of the chain, for answers resent cumulatively): an ElicitResult for
elicitation/create, a CreateMessageResult for sampling/createMessage, a ListRootsResult for
roots/list. Each answer is judged by the official model of its kind (`shapes.py`), then by what the
question asked (the form's schema, the URL mode, the tools offered).

In legacy (2025-11-25) traffic the same answers travel as the client's results to the server's
own requests; they are judged the same way, by the 2025-11-25 models.

A retry is taken apart once (`answers_of`, the update of this module's pass `ANSWERS`, which hands
the answers to each of its checks); the server-side rule that judges what the server did with
malformed answers reads the same parts.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import orjson

from ..core.chains import Round
from ..core.messages import INPUT_REQUEST_METHODS
from ..core.observations import Answered, Linked
from ..core.era import LEGACY, MODERN
from . import shapes, spec
from .common import at, kept
from .registry import ERROR, INFO, WARNING, Pass
from .shapes import ELICIT, ROOTS, SAMPLE, elicit_mode, short

# retries, and the client's results to legacy server requests
_ON = {"on": (Linked, Answered), "kinds": ["result"], "directions": ["c2s"], "methods": sorted(INPUT_REQUEST_METHODS)}


class Answer:
    """One answer and the input request it answers. `key` is its inputResponses key (None for a
    legacy client result). Its validation errors are computed once, when a rule first asks; the
    text naming it, only when a rule reports it."""

    __slots__ = ("key", "method", "params", "mode", "value", "version", "origin", "messages", "chain",
                 "error_shaped", "_errors")

    def __init__(self, key, method: str, params: Any, value: Any, version: str, origin, messages: list,
                 chain) -> None:
        self.key = key
        self.method = method
        params = self.params = params if type(params) is dict else {}
        self.mode = params.get("mode", "form") if method == ELICIT else None  # elicit_mode(params)
        self.value = value
        self.version = version
        self.origin = origin  # the observation it came with
        self.messages = messages
        self.chain = chain
        self.error_shaped = _error_shaped(value)
        self._errors: list[dict] | None = None

    @property
    def where(self) -> str:
        o = self.origin
        if self.key is None:
            resp, req = o.response, o.request
            return f"the client's result {at(resp)} to {at(req)}"
        return f"the answer to {self.key!r} in {at(o.request)}, the retry of chain {self.chain}"

    @property
    def errors(self) -> list[dict]:
        """The validation errors of the answer against its kind's model (computed once)."""
        if self._errors is None:
            self._errors = shapes.input_response_errors(self.method, self.value, self.version)
        return self._errors

    def describe(self, errors: list[dict]) -> list[str]:
        if not errors:
            return []
        if type(self.value) is not dict:
            return [f"it is {short(self.value)}, not an object"]
        return shapes.describe(errors, self.value, self.version)

    def emit(self, ctx, text: str, **details) -> None:
        ctx.emit(f"{self.where}: {text}", messages=self.messages, chain=self.chain,
                 details={"key": self.key, **details} if self.key is not None or details else None)


def _error_shaped(value: Any) -> bool:
    """Does an answer look like a JSON-RPC error ({code, message} or {error: {…}})?"""
    return type(value) is dict and (("code" in value and "message" in value) or type(value.get("error")) is dict)


class Answers:
    """The answers one message carries, and those of each kind that are not error-shaped."""

    __slots__ = ("all", "by_kind")

    def __init__(self, answers: list[Answer]) -> None:
        self.all = answers
        self.by_kind: dict[str, list[Answer]] = {}
        for a in answers:
            if not a.error_shaped:
                self.by_kind.setdefault(a.method, []).append(a)


_NONE = Answers([])
# the answers of a message that carries answers, all of them quiet (`_quiet`): none any check judges
_QUIET = Answers([])
# the message last taken apart, and its answers: the rules of one message run in a row (one tuple,
# replaced whole, so inspectors in other threads never mix two messages up)
_last: tuple = (object(), _NONE)


def answers_of(obs: Linked | Answered) -> Answers:
    """The answers a retry (Linked) or a legacy client result (Answered) carries, each with the
    input request it answers. Keys that answer nothing known are left out (the §4.2 rules report
    them). A retry whose answers are all quiet (`_quiet`: valid, nothing for any check to find) gets
    `_QUIET`, none of them: most retries answer plainly, and the objects would be made for nothing.
    A retry giving the same answers to the same questions as one found quiet before is not validated
    again (`_QUIET_RETRIES`)."""
    global _last
    msg = obs.request if type(obs) is Linked else obs.response
    last = _last
    if last[0] is msg:
        return last[1]
    if msg is None:  # a link whose chain has closed: its messages are gone
        return _NONE
    found = _linked_answers(obs) if type(obs) is Linked else _legacy_answer(obs)
    out = found if type(found) is Answers else Answers(found) if found else _NONE
    _last = (msg, out)
    return out


# The retries found `_QUIET`, by the bytes orjson writes of their inputResponses and the text it wrote of
# the questions they answer, those of each round up to theirs (`Round.asked_text`: the core writes it to
# key a round's summary): equal bytes, equal values (orjson writes each value one way; the parser
# refuses NaN, and values whose text holds null, which an infinity is written as, are not kept; values
# orjson cannot write are judged apart). Clients answer the same questions alike again and again: a
# retry answering what an earlier one answered, as it did, costs the bytes of its answers and a lookup,
# not a validation of each answer by its kind's model. It keeps bytes (copies: a bytes object orjson
# writes holds a 4 KiB allocation) and the rounds' texts, none of the pipeline's objects.
_QUIET_RETRIES: dict[tuple, bool] = {}
_QUIET_KEPT = 2048  # (the bench's 200,000 messages ask about 1,200 distinct inputRequests)
_QUIET_BYTES = 1024  # larger answers or questions (sampling, with its messages) are judged apart


def _asked_text(rd) -> str | None:
    """orjson's text of what a round asked ("" when it asked nothing; None: orjson does not write it, or
    the round is a closed chain's, `RetiredRound`, which keeps no text: its retry is judged apart)."""
    if type(rd) is not Round:
        return None
    text = rd.asked_text
    return text if text is not None or not rd.input_requests else ""


def _keepable(answers: bytes, questions: str | tuple) -> bool:
    """Whether a quiet retry of these answers to these questions is kept (neither holds null, none is
    larger than `_QUIET_BYTES`)."""
    for text in (questions,) if type(questions) is str else questions:
        if len(text) > _QUIET_BYTES or "null" in text:
            return False
    return len(answers) <= _QUIET_BYTES and b"null" not in answers


def _linked_answers(obs: Linked) -> list[Answer] | Answers:
    req = obs.request
    params = req.params if type(req.params) is dict else {}
    responses = params.get("inputResponses")
    if req.era is not MODERN or type(responses) is not dict:
        return []
    rounds = obs.round.chain.rounds
    if rounds and rounds[0] is obs.round:  # the first round: what it asked (read, not changed)
        asked = obs.round.input_requests or {}
        questions = _asked_text(obs.round)
    else:
        asked = {}
        texts = []
        for rd in rounds:  # later rounds win: a key asked again means the latest question
            asked.update(rd.input_requests or {})
            texts.append(_asked_text(rd))
            if rd is obs.round:
                break
        questions = None if None in texts else tuple(texts)
    written = None
    if questions is not None:
        try:
            written = (orjson.dumps(responses), questions)
        except TypeError:  # (orjson's error for what it does not write)
            pass
        else:
            if written in _QUIET_RETRIES:
                return _QUIET
    parts = []  # (key, method, params, value, its errors), the answers to known questions
    quiet = True
    for key, value in responses.items():
        q = asked.get(key)
        method = q.get("method") if type(q) is dict else None
        if type(method) is str and method in INPUT_REQUEST_METHODS:
            p = q.get("params")
            p = p if type(p) is dict else {}
            errors = None
            if quiet:
                if type(value) is not dict or _error_shaped(value):
                    quiet = False
                else:
                    try:
                        errors = shapes.input_response_errors(method, value, shapes.MODERN)
                        quiet = _quiet(method, p, p.get("mode", "form") if method == ELICIT else None, value, False,
                                       errors)
                    except Exception:  # the checks then judge it, and fail, as they would without this test
                        errors, quiet = None, False
            parts.append((key, method, p, value, errors))
    if quiet and parts:
        if written is not None and _keepable(written[0], questions):
            # (a copy of the bytes: orjson's hold a 4 KiB allocation each)
            kept(_QUIET_RETRIES, (bytes(memoryview(written[0])), questions), True, _QUIET_KEPT)
        return _QUIET
    cid = obs.chain.id
    messages = [obs.round.irr_index, req.index]
    out = []
    for key, method, p, value, errors in parts:
        a = Answer(key, method, p, value, shapes.MODERN, obs, messages, cid)
        a._errors = errors  # (None: computed when a check first asks)
        out.append(a)
    return out


def _legacy_answer(obs: Answered) -> list[Answer]:
    resp, req = obs.response, obs.request
    if req is None or resp.era is not LEGACY or req.method not in INPUT_REQUEST_METHODS:
        return []
    chain = obs.asked.chain.id if obs.asked is not None else None  # the legacy chain whose round it answers
    return [Answer(None, req.method, req.params, resp.result, shapes.LEGACY, obs, [req.index, resp.index], chain)]


def _answers(obs, _state) -> Answers | None:
    """The update of the pass `ANSWERS`: the answers the message carries, taken apart once for all
    its checks (`answers_of`); None when it carries none, or when every answer is `_quiet` (no check
    of the pass then runs: each looks at the answers only, and none could find anything). Most
    retries answer plainly: one test here spares them the eleven calls."""
    answers = answers_of(obs)
    try:
        for a in answers.all:
            if type(a.value) is not dict or a.error_shaped or not _quiet(a.method, a.params, a.mode, a.value, False,
                                                                          a.errors):
                return answers  # (errors computed only for an answer they can judge, as the checks do)
    except Exception:  # the checks then run, and fail, as they would without this test
        return answers
    return None


def _quiet(m: str, params: dict, mode: str | None, v: Any, error_shaped: bool, errors: list | None) -> bool:
    """True only when no check of `ANSWERS` can find anything in an answer (its method, its question's
    params and mode, its value, whether it is error-shaped, its `errors`, which the kind's first check
    computes anyway): a valid result of its kind with nothing the checks beyond the model look for.
    It mirrors each check's condition (a check still tests its own: an answer this says False for is
    judged by all of them, as before); tests/rules/test_input_responses.py holds it to the checks on
    generated answers."""
    if type(v) is not dict or error_shaped or errors:  # input-response-error-shaped; the models' checks
        return False
    if m == ELICIT:
        action = v.get("action")
        if "content" not in v:  # accept-missing-content: an accepted form carries content
            return not (action == "accept" and mode == "form")
        content = v["content"]
        # url-content, content-on-decline; content-type's nulls
        if mode != "form" or action != "accept" or type(content) is not dict or None in content.values():
            return False
        schema = params.get("requestedSchema")  # _form_schema
        schema = schema if type(schema) is dict else {}
        required = schema.get("required")
        if type(required) is list:  # accept-missing-content
            for k in required:
                if type(k) is str and k not in content:
                    return False
        props = schema.get("properties")
        if type(props) is dict:  # schema-mismatch
            for k, x in content.items():
                s = props.get(k)
                if type(s) is dict and schema_mismatch(x, s) is not None:
                    return False
        return True
    if m == SAMPLE:  # create-message-result-invalid's mixed tool results, tool-use-unoffered: plain blocks only
        if v.get("stopReason") == "toolUse":
            return False
        for b in _blocks(v.get("content")):
            if b.get("type") in ("tool_use", "tool_result"):
                return False
        return True
    if m == ROOTS:  # root-uri-not-file
        roots = v.get("roots")
        if type(roots) is list:
            for r in roots:
                if type(r) is dict and type(r.get("uri")) is str and not r["uri"].startswith("file://"):
                    return False
        return True
    return False


# The checks of this module are one pass: its update takes the answers apart once and each check gets
# them as its third argument (an `Answers`); the checks of one kind read `by_kind` of theirs, which
# leaves out error-shaped answers (input-response-error-shaped reports them). No other rule is
# registered among them, so the pass keeps their findings' order.
ANSWERS = Pass("input-responses", on=_ON["on"], update=_answers, kinds=_ON["kinds"], directions=_ON["directions"],
               methods=_ON["methods"])


def invalid_answers(obs: Linked) -> dict:
    """Answers that are not valid results of their kind: key → what is wrong (for the server-side
    rule `server-accepted-invalid-input-responses`)."""
    out = {}
    for a in answers_of(obs).all:
        if a.error_shaped:
            out[a.key] = "an error, not an answer"
        elif a.errors:
            out[a.key] = a.describe(a.errors)[0]
    return out


# --- elicitation/create → ElicitResult ---------------------------------------------------------------


def _content(a: Answer) -> Any:
    return a.value.get("content") if type(a.value) is dict else None


@ANSWERS.check(
    "elicit-result-action-invalid", ERROR, **_ON, section="4.3", spec=spec.ELICIT_RESPONSE_ACTIONS,
    conformance="sep-2322-validate-input-responses",
    quote='action: "accept" | "decline" | "cancel"',
    summary="An elicitation answer has no action, or one other than accept, decline and cancel.",
    why="The server cannot tell whether the user agreed; a server that guesses may act without consent.",
    example='"inputResponses": {"confirm": {"action": "ok"}}',
)
def elicit_result_action_invalid(obs, ctx, answers: Answers) -> None:
    """An answer to elicitation/create that is not an object, or whose `action` is missing or not
    one of "accept", "decline", "cancel" (ElicitResult model)."""
    for a in answers.by_kind.get(ELICIT, ()):
        errors = [e for e in a.errors if tuple(e["loc"][:1]) != ("content",)]
        if errors:
            a.emit(ctx, f"not a valid ElicitResult: {'; '.join(a.describe(errors))}")


@ANSWERS.check(
    "elicit-result-content-type", ERROR, **_ON, section="4.3", spec=spec.ELICIT_RESPONSE_ACTIONS,
    quote="content?: { [key: string]: string | number | boolean | string[] }",
    summary="An elicitation answer's content is not an object of strings, numbers, booleans and string arrays.",
    why="Form answers are flat primitive values; anything else cannot match the form the server asked for.",
    example='"content": {"address": {"street": "…"}}',
)
def elicit_result_content_type(obs, ctx, answers: Answers) -> None:
    """The `content` of an answer to elicitation/create is not an object, or one of its values is
    not a string, number, boolean or array of strings (null included: the generated model admits
    it, schema.ts does not)."""
    for a in answers.by_kind.get(ELICIT, ()):
        errors = [e for e in a.errors if tuple(e["loc"][:1]) == ("content",)]
        problems = a.describe(errors) if errors else []
        content = _content(a)
        if type(content) is dict:
            problems += [f"content.{k}: null is not a string, number, boolean or string array"
                         for k, v in content.items() if v is None]
        if problems:
            a.emit(ctx, f"content has values an ElicitResult cannot carry: {'; '.join(problems)}")


@ANSWERS.check(
    "elicit-result-url-content", WARNING, **_ON, section="4.3", spec=spec.ELICIT_RESPONSE_ACTIONS,
    quote="For URL mode: The content field is omitted",
    summary="An answer to a URL-mode elicitation carries content.",
    why="URL mode keeps the data out of the client; content here means the client collected what it should "
        "never have seen, or invented it.",
    example='asked {"mode": "url", …}; answered {"action": "accept", "content": {"token": "…"}}',
)
def elicit_result_url_content(obs, ctx, answers: Answers) -> None:
    """An answer to a URL-mode elicitation/create that has a `content` member."""
    for a in answers.by_kind.get(ELICIT, ()):
        if a.mode == "url" and type(a.value) is dict and "content" in a.value:
            a.emit(ctx, "carries content, but the question was asked in URL mode, where content is omitted")


@ANSWERS.check(
    "elicit-result-content-on-decline", INFO, **_ON, section="4.3", spec=spec.ELICIT_RESPONSE_ACTIONS,
    quote="The content field is typically omitted",
    summary="An elicitation answer with action decline or cancel carries content.",
    why="Allowed, but the server should not use data the user declined to submit.",
    example='{"action": "decline", "content": {"name": "x"}}',
)
def elicit_result_content_on_decline(obs, ctx, answers: Answers) -> None:
    """An answer to elicitation/create whose action is "decline" or "cancel" and that has `content`."""
    for a in answers.by_kind.get(ELICIT, ()):
        v = a.value
        if type(v) is dict and v.get("action") in ("decline", "cancel") and "content" in v:
            a.emit(ctx, f"the user chose {v['action']!r} yet the answer carries content, which is typically omitted")


def _form_schema(a: Answer) -> dict:
    s = a.params.get("requestedSchema") if a.mode == "form" else None
    return s if type(s) is dict else {}


@ANSWERS.check(
    "elicit-result-accept-missing-content", WARNING, **_ON, section="4.3", spec=spec.ELICIT_RESPONSE_ACTIONS,
    quote="For form mode: The content field contains the submitted data matching the requested schema",
    summary="An accepted form answer has no content, or lacks a property the form requires.",
    why="The user accepted but the server does not get what it asked for; it must fail or ask again.",
    example='form requires ["confirm"]; answered {"action": "accept"}',
)
def elicit_result_accept_missing_content(obs, ctx, answers: Answers) -> None:
    """A form-mode elicitation answered with action "accept" whose `content` is missing or lacks
    a property listed in `requestedSchema.required`."""
    for a in answers.by_kind.get(ELICIT, ()):
        v = a.value
        if type(v) is not dict or v.get("action") != "accept" or a.mode != "form":
            continue
        content = v.get("content")
        if content is None:
            a.emit(ctx, "accepts a form but carries no content")
            continue
        required = _form_schema(a).get("required")
        if type(content) is dict and type(required) is list:
            missing = [k for k in required if type(k) is str and k not in content]
            if missing:
                a.emit(ctx, f"accepts a form but leaves out required {', '.join(map(repr, missing))}", missing=missing)


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _format_ok(fmt: Any, s: str) -> bool:
    try:
        if fmt == "email":
            return _EMAIL.fullmatch(s) is not None
        if fmt == "uri":
            return shapes.absolute_uri(s)
        if fmt == "date":
            return _DATE.fullmatch(s) is not None and bool(date.fromisoformat(s))
        if fmt == "date-time":
            return _DATE_TIME.fullmatch(s) is not None and bool(datetime.fromisoformat(s.upper().replace("Z", "+00:00")))
    except ValueError:
        return False
    return True


def _number(v: Any) -> bool:
    return type(v) in (int, float)


def _bounds(v: Any, lo: Any, hi: Any, what: str) -> str | None:
    if lo is None and hi is None:  # most schemas set no bounds (None is no number)
        return None
    if _number(lo) and v < lo:
        return f"{what} {v} is below the minimum {lo}"
    if _number(hi) and v > hi:
        return f"{what} {v} is above the maximum {hi}"
    return None


def _consts(schema: dict, list_key: str) -> list | None:
    """The allowed values of an enum form: `enum`, or the `const`s of `oneOf`/`anyOf`."""
    if type(schema.get("enum")) is list:
        return schema["enum"]
    opts = schema.get(list_key)
    return [o.get("const") for o in opts if type(o) is dict] if type(opts) is list else None


def schema_mismatch(v: Any, s: dict) -> str | None:
    """Why a form value does not match its primitive property schema (None: it does)."""
    t = s.get("type")
    if t == "boolean":
        return None if type(v) is bool else "not a boolean"
    if t in ("number", "integer"):
        if not _number(v):
            return f"not a {t}"
        if t == "integer" and type(v) is float and not v.is_integer():
            return "not an integer"
        return _bounds(v, s.get("minimum"), s.get("maximum"), "value")
    if t == "string":
        if type(v) is not str:
            return "not a string"
        allowed = _consts(s, "oneOf")
        if allowed is not None and v not in allowed:
            return f"{short(v, 30)} is not one of the allowed values"
        fmt = s.get("format")
        if fmt is not None and not _format_ok(fmt, v):  # (no format: any string)
            return f"{short(v, 30)} is not a valid {fmt}"
        return _bounds(len(v), s.get("minLength"), s.get("maxLength"), "length")
    if t == "array":
        if type(v) is not list:
            return "not an array"
        items = s.get("items") if type(s.get("items")) is dict else {}
        allowed = _consts(items, "anyOf")
        wrong = [x for x in v if allowed is not None and x not in allowed]
        if wrong:
            return f"{short(wrong, 30)} not among the allowed values"
        return _bounds(len(v), s.get("minItems"), s.get("maxItems"), "item count")
    return None


@ANSWERS.check(
    "elicit-result-schema-mismatch", WARNING, **_ON, section="4.3", spec=spec.ELICIT_FORM_SECURITY,
    quote="Clients SHOULD validate all responses against the provided schema",
    summary="A form answer's content does not match the requestedSchema it answers.",
    why="Both sides SHOULD validate: a value of the wrong type, outside the enum or the bounds, or in the wrong "
        "format reaches the server as if the user had entered it.",
    example='"age": {"type": "integer", "minimum": 0} answered with "age": -3',
)
def elicit_result_schema_mismatch(obs, ctx, answers: Answers) -> None:
    """A value in the `content` of a form answer that violates its property schema: type, enum or
    oneOf/anyOf const, minimum/maximum, minLength/maxLength, format (email, uri, date, date-time),
    minItems/maxItems."""
    for a in answers.by_kind.get(ELICIT, ()):
        content, props = _content(a), _form_schema(a).get("properties")
        if type(content) is not dict or type(props) is not dict:
            continue
        bad = {k: why for k, v in content.items() if v is not None and type(props.get(k)) is dict
               for why in [schema_mismatch(v, props[k])] if why}
        if bad:
            a.emit(ctx, f"content does not match the form: {'; '.join(f'{k}: {w}' for k, w in bad.items())}",
                   properties=sorted(bad))


# --- sampling/createMessage → CreateMessageResult -------------------------------------------------------


def _blocks(content: Any) -> list:
    blocks = content if type(content) is list else [content]
    return [b for b in blocks if type(b) is dict]


@ANSWERS.check(
    "create-message-result-invalid", ERROR, **_ON, section="4.3", spec=spec.SAMPLING_TOOL_RESULTS,
    quote="When a user message contains tool results (type: \"tool_result\"), it MUST contain ONLY tool results.",
    summary="A sampling answer is not a valid CreateMessageResult (role, content, model; tool results mixed in).",
    why="The server cannot read the model's reply; a tool_result next to other content breaks provider APIs.",
    example='{"role": "bot", "content": {"type": "text", "text": "hi"}}  (no model, bad role)',
)
def create_message_result_invalid(obs, ctx, answers: Answers) -> None:
    """An answer to sampling/createMessage that fails the CreateMessageResult model (role, content
    or model missing; a role other than user and assistant; a content block of an unknown type), or
    that mixes tool_result blocks with other content."""
    for a in answers.by_kind.get(SAMPLE, ()):
        problems = a.describe(a.errors) if a.errors else []
        types = [b.get("type") for b in _blocks(_content(a))]  # (a list: a type may be no string, nor hashable)
        if "tool_result" in types and any(t != "tool_result" for t in types):
            problems.append("content mixes tool_result with other content")
        if problems:
            a.emit(ctx, f"not a valid CreateMessageResult: {'; '.join(problems[:4])}")


@ANSWERS.check(
    "create-message-result-tool-use-unoffered", WARNING, **_ON, section="4.3", spec=spec.SAMPLING_TOOLS,
    quote="Servers can request that the client's LLM use tools during sampling by providing a tools array",
    summary="A sampling answer asks to use a tool although the request offered none.",
    why="The server gave the model no tools; a tool_use it did not offer cannot be carried out.",
    example='asked without "tools"; answered {"stopReason": "toolUse", "content": {"type": "tool_use", …}}',
)
def create_message_result_tool_use_unoffered(obs, ctx, answers: Answers) -> None:
    """An answer to sampling/createMessage with `stopReason: "toolUse"` or a tool_use content
    block, when the sampling request offered no `tools`."""
    for a in answers.by_kind.get(SAMPLE, ()):
        if a.params.get("tools") or type(a.value) is not dict:
            continue
        uses = a.value.get("stopReason") == "toolUse" or any(b.get("type") == "tool_use" for b in _blocks(_content(a)))
        if uses:
            a.emit(ctx, "asks to use a tool, but the sampling request offered no tools")


# --- roots/list → ListRootsResult ---------------------------------------------------------------------


@ANSWERS.check(
    "list-roots-result-invalid", ERROR, **_ON, section="4.3", spec=spec.ROOTS_LISTING,
    quote="roots: Root[]",
    summary="A roots answer has no roots array, or a root without uri.",
    why="The server cannot learn where it may work.",
    example='{"roots": "file:///work"}',
)
def list_roots_result_invalid(obs, ctx, answers: Answers) -> None:
    """An answer to roots/list that fails the ListRootsResult model: `roots` missing or not an
    array, a root that is not an object or has no string `uri`."""
    for a in answers.by_kind.get(ROOTS, ()):
        if a.errors:
            a.emit(ctx, f"not a valid ListRootsResult: {'; '.join(a.describe(a.errors)[:4])}")


@ANSWERS.check(
    "root-uri-not-file", ERROR, **_ON, section="4.3", spec=spec.ROOTS_ROOT,
    quote="This MUST be a file:// URI in the current specification.",
    summary="A root's uri does not start with file://.",
    why="Roots are folders and files on the client's machine; other schemes are not defined.",
    example='{"roots": [{"uri": "https://github.com/o/r"}]}',
)
def root_uri_not_file(obs, ctx, answers: Answers) -> None:
    """A root in an answer to roots/list whose `uri` is a string that does not start with file://."""
    for a in answers.by_kind.get(ROOTS, ()):
        roots = a.value.get("roots") if type(a.value) is dict else None
        bad = [r["uri"] for r in roots if type(r) is dict and type(r.get("uri")) is str
               and not r["uri"].startswith("file://")] if type(roots) is list else []
        if bad:
            a.emit(ctx, f"names roots that are not file:// URIs ({', '.join(short(u, 40) for u in bad[:3])}); a root "
                        "MUST be a file:// URI")


# --- any kind -----------------------------------------------------------------------------------------


@ANSWERS.check(
    "input-response-error-shaped", WARNING, **_ON, section="4.3", spec=spec.SAMPLING_ERRORS,
    quote="If an error occurs or the user declines the sampling request, the client does not need to replay the "
          "initial call with an error message",
    summary="An answer looks like a JSON-RPC error; InputResponses have no error slot.",
    why="The server expects a result of the kind it asked for. A client that cannot answer should leave the key "
        "out (the server then asks again) or not retry.",
    example='"inputResponses": {"s": {"code": -32603, "message": "sampling failed"}}',
)
def input_response_error_shaped(obs, ctx, answers: Answers) -> None:
    """An answer that looks like a JSON-RPC error: an object with `code` and `message`, or with an
    `error` object. The kind's shape rules leave such answers to this rule."""
    for a in answers.all:
        if a.error_shaped:
            a.emit(ctx, f"is an error ({short(a.value)}), not a {a.method} result; answers have no error form")
