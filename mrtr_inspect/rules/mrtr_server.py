"""RULES.md §4.1: MRTR, the server side. What a server answers, and what it asks in `inputRequests`.

Most results are judged by `resultType` alone, a dictionary lookup. Only an `input_required`
result is examined further: the pass `ASKED` takes it apart once (`asks.asked`) and hands the parts
to each of its checks, which reads those it needs, so an ordinary result costs a few comparisons. The shape of each input request is judged by
the official `mcp-types` models (`shapes.py`).

Server-initiated requests of legacy (2025-11-25) traffic are the same input requests sent the old
way; the shape rules judge them too, by the 2025-11-25 models. Everything else here is modern only.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..core.messages import INPUT_REQUEST_METHODS, MRTR_METHODS, REQUEST
from ..core.observations import Answered, Decoded, NotLinked
from ..core.era import MODERN
from . import shapes, spec
from .common import (METHOD_NOT_FOUND, MISSING_CAPABILITY, TASKS_EXTENSION, answered, at, chain_of, client_caps,
                     kept, loopback_host, modern_result)
from .asks import Ask, IrrView, ServerRequest, asked, asked_text
from .input_responses import invalid_answers
from .registry import ERROR, INFO, INPUT_REQUIRED, OTHER_RESULT, TASK, WARNING, Pass, rule
from .shapes import ELICIT, ROOTS, SAMPLE, short

# Subscriptions: most messages reach none of these rules, an input_required result reaches those that read it.
_RESULTS = {"on": Answered, "kinds": ["result"], "directions": ["s2c"]}  # input_required ones included
_OTHER = {**_RESULTS, "kinds": [OTHER_RESULT]}  # results whose resultType is neither input_required nor task
_OTHER_OR_TASK = {**_RESULTS, "kinds": [OTHER_RESULT, TASK]}
_ERRORS = {"on": Answered, "kinds": ["error"], "directions": ["s2c"]}
_IRR = {"on": Answered, "kinds": [INPUT_REQUIRED], "directions": ["s2c"], "methods": sorted(MRTR_METHODS)}
_ASKED = {"on": (Answered, Decoded), "kinds": [INPUT_REQUIRED, REQUEST], "directions": ["s2c"],
          "methods": sorted(MRTR_METHODS | INPUT_REQUEST_METHODS)}  # IRRs, and legacy server requests

# The checks of an input_required result (and of a legacy server request, for those judging input
# requests) are one pass: its update takes the message apart once (`asks.asked`) and each check gets
# the parts as its third argument (an IrrView, or a ServerRequest). It runs where its first check,
# irr-empty, is registered: no rule registered among its checks reports on these messages
# (server-error-instead-of-reask, between them, reports on errors), so their findings keep their order.
def _asked(obs, state) -> IrrView | ServerRequest | None:
    """The update of `ASKED`: the message taken apart (`asks.asked`), or None when no check of the
    pass can find anything in it: then none runs. Most input_required results ask plainly: one test
    here spares them fifteen calls. The test: none of the result's own members' checks can find
    anything (`_unusual_irr`), nor the others in any input request (what its value alone decides,
    `_quiet_asks`), nor does an input request need a capability its request did not declare. It
    mirrors each check's condition (each still tests its own: a result it holds unusual is judged by
    all of them, as before); tests/rules/test_mrtr_server.py holds it to the checks on generated
    results. What it finds in the input requests is kept by their bytes (`_asks_quiet`): a result
    asking what an earlier one asked is not taken apart at all (no `IrrView`, no `Ask`)."""
    if type(obs) is not Answered:
        return asked(obs, state)  # a legacy server request (or nothing the pass judges)
    r = modern_result(obs)
    if r is None or r.get("resultType") != INPUT_REQUIRED:
        return None
    try:
        if not _unusual_members(obs.response, r):
            needs = _asks_quiet(obs, r)
            if needs is not None:
                caps = client_caps(obs.request)
                for method, mode, tools in needs:
                    if _undeclared(method, mode, tools, caps) is not None:
                        break
                else:
                    return None
    except Exception:  # the checks then run, and fail, as they would without this test
        pass
    return IrrView(obs, r)


ASKED = Pass("input-requests", on=Answered, update=_asked, update_on=(Answered, Decoded), kinds=_ASKED["kinds"],
             directions=_ASKED["directions"], methods=_ASKED["methods"])


def _unusual_irr(obs: Answered) -> bool:
    """What the checks of an input_required result's own members can find something in (irr-empty,
    irr-empty-map, irr-field-types, input-requests-duplicate-key, input-request-method-invalid,
    irr-caching-hints, irr-hybrid-fields, input-request-jsonrpc-envelope): a result whose
    requestState is not a string or whose inputRequests is not an object, an input request that is
    not an object, has a method other than the three or carries jsonrpc or id, a member repeated in
    the raw bytes, caching hints or final-result members. An ordinary input_required result is none
    of these: the gate spares it the calls (each check still tests its own condition)."""
    r = obs.response.result
    return _unusual_members(obs.response, r) or _unusual_asks(r["inputRequests"])


def _unusual_members(response, r: dict) -> bool:
    """`_unusual_irr` but for the input requests themselves (`_unusual_asks`): what it reads of the
    result's own members and its raw bytes (False: inputRequests is an object). A result of no other
    members than resultType, inputRequests, requestState and _meta has no caching hint or final-result
    member: its size says so, without a look for each."""
    if type(r.get("requestState")) is not str or type(r.get("inputRequests")) is not dict or response.duplicates:
        return True
    n = len(r)  # (resultType is "input_required": an input_required result; the other two were just read)
    if n == 3 or (n == 4 and "_meta" in r):
        return False
    return "ttlMs" in r or "cacheScope" in r or not r.keys().isdisjoint(_FINAL_FIELDS)


def _unusual_asks(ir: dict) -> bool:
    """`_unusual_irr` of the input requests (an object): one that is not an object, has a method other
    than the three, or carries jsonrpc or id."""
    for v in ir.values():
        if type(v) is not dict or "jsonrpc" in v or "id" in v:
            return True
        m = v.get("method")
        if type(m) is not str or m not in INPUT_REQUEST_METHODS:
            return True
    return False


_IRR_OWN = {**_IRR, "gate": _unusual_irr}  # the checks of the result's own members


def _quiet_asks(v: IrrView) -> tuple | None:
    """What the input requests of a view need of the client's capabilities, `(method, mode, whether
    it offers tools)` each, when no check of `ASKED` finds anything in their values alone (what
    `AskFacts` holds, which those checks compute anyway; a URL-mode url, which this leaves to them;
    a sampling includeContext); else None. Its input requests are usual (`_unusual_asks` False: each
    an object with one of the three methods)."""
    needs = []
    for a in v.asks:
        if a.problems or a.not_flat or a.sensitive or (a.mode == "url" and _url(a) is not None):
            return None
        if a.method == SAMPLE and a.params.get("includeContext") in ("thisServer", "allServers"):
            return None
        p = a.params if type(a.params) is dict else {}
        needs.append((a.method, a.mode, "tools" in p or "toolChoice" in p))
    return tuple(needs)


# `_quiet_asks` of the input requests of an input_required result whose own members are usual, by the
# text orjson writes of them (equal text, equal value: orjson writes each value one way; the parser
# refuses NaN, and a value whose text holds null, which an infinity is written as, is not kept; a value
# orjson cannot write is judged apart). The text is the round's (`Round.asked_text`: the core wrote it
# to key the round's summary), else written here. Servers ask the same forms again and again: a result
# asking what an earlier one asked costs a lookup, not a view and an `Ask` per input request. It keeps
# tuples of strings and bools, none of the pipeline's objects.
_QUIET: dict[str, tuple | None] = {}
_QUIET_KEPT = 2048  # (the bench asks about 1,200 distinct inputRequests in 200,000 messages)
_QUIET_CHARS = 1024  # larger input requests (a sampling request with its messages) are judged apart
_UNKNOWN = object()


def _asks_quiet(obs: Answered, r: dict) -> tuple | None:
    """`_quiet_asks` of the result's input requests (`r`'s inputRequests, an object), kept by their
    text (above)."""
    ir = r["inputRequests"]
    text = asked_text(obs, ir)
    if text is not None:
        needs = _QUIET.get(text, _UNKNOWN)
        if needs is not _UNKNOWN:
            return needs
    needs = None if _unusual_asks(ir) else _quiet_asks(IrrView(obs, r))
    if text is not None and len(text) <= _QUIET_CHARS and "null" not in text:
        kept(_QUIET, text, needs, _QUIET_KEPT)
    return needs


# --- resultType: every modern result ------------------------------------------------------------


def _unusual_result_type(obs: Answered) -> bool:
    """What the four checks below can find something in: a result object whose resultType is other
    than the string "complete" (absent, not a string, another value), or that carries inputRequests
    or requestState. A plain complete result is none of these: the gate spares it the calls (each
    check still tests its own condition)."""
    r = obs.response.result
    return type(r) is dict and (r.get("resultType") != "complete" or "inputRequests" in r or "requestState" in r)


_RESULT_TYPE = {"gate": _unusual_result_type}


@rule(
    "result-type-missing", ERROR, **_OTHER, **_RESULT_TYPE, section="4.1", spec=spec.BASE_RESULTS,
    conformance="sep-2322-result-type-included",
    quote="The result MUST include a resultType field to indicate the type of the result.",
    summary="A result to a 2026-07-28 request has no resultType.",
    why="Clients read the result by its resultType; without it an input_required result is taken as complete "
        "and its questions are never asked.",
    example='{"jsonrpc":"2.0","id":2,"result":{"inputRequests":{…},"requestState":"s"}}',
)
def result_type_missing(obs: Answered, ctx) -> None:
    """A server's result to a modern request whose `result` has no `resultType` member. Legacy
    results are exempt: 2025-11-25 has no resultType."""
    r = modern_result(obs)
    if r is not None and "resultType" not in r:
        ctx.emit(f"{answered(obs)} has no resultType; a 2026-07-28 result MUST include one",
                 messages=[obs.request.index, obs.response.index], chain=chain_of(obs))


@rule(
    "result-type-not-string", ERROR, **_OTHER, **_RESULT_TYPE, section="4.1", spec=spec.BASE_RESULT_TYPE,
    quote="The resultType field is a string that clients can use to determine how to parse and handle the result object.",
    summary="resultType is present but is not a JSON string.",
    why="A client compares resultType with \"complete\" and \"input_required\"; a number or object matches neither.",
    example='"result": {"resultType": 1, "content": []}',
)
def result_type_not_string(obs: Answered, ctx) -> None:
    """A modern result whose `resultType` is a number, boolean, null, array or object."""
    r = modern_result(obs)
    if r is not None and "resultType" in r and type(r["resultType"]) is not str:
        ctx.emit(f"{answered(obs)} has resultType {short(r['resultType'])}, which is not a string; "
                 "resultType is a string (ResultType)",
                 messages=[obs.response.index], chain=chain_of(obs))


@rule(
    "result-type-unrecognized", ERROR, **_OTHER_OR_TASK, **_RESULT_TYPE, section="4.1", spec=spec.BASE_RESULT_TYPE,
    quote="The set of supported ResultType values MUST be created from the set defined in the core protocol and "
          "include any additional values of supported extensions that are advertised via capabilities.",
    summary="resultType is a value the core protocol does not define and no declared extension adds.",
    why="A client MUST treat an unrecognized resultType as invalid, so the request fails on the client side. "
        "\"task\" counts only when the request declared the io.modelcontextprotocol/tasks extension.",
    example='"result": {"resultType": "partial"}',
)
def result_type_unrecognized(obs: Answered, ctx) -> None:
    """A modern result whose `resultType` is a string other than "complete" and "input_required",
    and other than "task" on a request whose clientCapabilities.extensions declares
    io.modelcontextprotocol/tasks."""
    r = modern_result(obs)
    rt = r.get("resultType") if r is not None else None
    if type(rt) is not str or rt in ("complete", "input_required"):
        return
    ext = client_caps(obs.request).get("extensions")
    if rt == "task" and type(ext) is dict and TASKS_EXTENSION in ext:
        return
    extra = " and the request did not declare the tasks extension" if rt == "task" else ""
    ctx.emit(f"{answered(obs)} has resultType {rt!r}, which the core protocol does not define{extra}; "
             "a client MUST treat it as invalid",
             messages=[obs.response.index], chain=chain_of(obs))


@rule(
    "input-requests-without-input-required", WARNING, **_OTHER, **_RESULT_TYPE, section="4.1",
    spec=spec.BASE_RESULT_TYPE,
    quote='clients MUST treat an absent resultType as "complete".',
    summary="A result carries inputRequests or requestState but its resultType is absent or \"complete\".",
    why="The client must take the result as complete, so the request silently finishes and the questions are "
        "never asked: the conformance suite's broken server does exactly this.",
    example='"result": {"inputRequests": {"confirm": {…}}, "requestState": "s"} (no resultType)',
)
def input_requests_without_input_required(obs: Answered, ctx) -> None:
    """A modern result with `inputRequests` or `requestState` whose `resultType` is absent or
    "complete"."""
    r = modern_result(obs)
    if r is None or r.get("resultType", "complete") != "complete":
        return
    fields = [f for f in ("inputRequests", "requestState") if f in r]
    if fields:
        how = "has no resultType" if "resultType" not in r else 'has resultType "complete"'
        ctx.emit(f"{answered(obs)} carries {' and '.join(fields)} but {how}: clients MUST take it as complete, "
                 "so nobody answers", messages=[obs.response.index], chain=chain_of(obs))


@rule(
    "irr-unsupported-method", ERROR, on=Answered, kinds=[INPUT_REQUIRED], directions=["s2c"], section="4.1",
    spec=spec.MRTR_SUPPORTED,
    conformance="sep-2322-not-on-unsupported-requests",
    quote="Servers MUST NOT send InputRequiredResult responses on any other client requests.",
    summary="An input_required result answers a request other than tools/call, prompts/get or resources/read.",
    why="Only those three requests can be retried with inputResponses; a client cannot continue any other.",
    example='tools/list → {"resultType":"input_required","inputRequests":{…}}',
)
def irr_unsupported_method(obs: Answered, ctx) -> None:
    """`resultType: "input_required"` on a modern request whose method is not tools/call,
    prompts/get or resources/read (server/discover, the list methods, completion/complete,
    subscriptions/listen, tasks/*)."""
    req = obs.request
    if req is None or req.method in MRTR_METHODS:  # (most input_required results answer those)
        return
    r = modern_result(obs)
    if r is not None and r.get("resultType") == "input_required":
        ctx.emit(f"{answered(obs)} is an input_required result, but only tools/call, prompts/get and "
                 f"resources/read may be answered so", messages=[obs.request.index, obs.response.index])


# --- the input_required result (taken apart in asks.py) ----------------------------------------


@ASKED.check(
    "irr-empty", ERROR, **_IRR_OWN, section="4.1", spec=spec.MRTR_SERVER,
    conformance="sep-2322-request-state-incomplete",
    quote="Servers MUST include at least one of inputRequests or requestState in every InputRequiredResult response.",
    summary="An input_required result has neither inputRequests nor requestState.",
    why="The client has nothing to answer and nothing to echo: its retry is the same request again, which "
        "can only loop.",
    example='{"resultType":"input_required"}',
)
def irr_empty(obs: Answered, ctx, v: IrrView) -> None:
    """An input_required result in which neither `inputRequests` nor `requestState` carries a
    value (absent or null)."""
    if v.result.get("inputRequests") is None and v.result.get("requestState") is None:
        v.emit(ctx, f"the input_required {answered(obs)} has neither inputRequests nor requestState; servers "
                    "MUST include at least one")


@ASKED.check(
    "irr-empty-map", WARNING, **_IRR_OWN, section="4.1", spec=spec.MRTR_SERVER,
    quote="Servers MUST include at least one of inputRequests or requestState in every InputRequiredResult response.",
    summary="An input_required result's only content is an empty inputRequests map.",
    why="The specification does not say whether {} counts; it asks nothing, and the conformance suite fails it.",
    example='{"resultType":"input_required","inputRequests":{}}',
)
def irr_empty_map(obs: Answered, ctx, v: IrrView) -> None:
    """`inputRequests` is `{}` and there is no `requestState`."""
    if v.result.get("inputRequests") == {} and v.result.get("requestState") is None:
        v.emit(ctx, f"the input_required {answered(obs)} asks nothing: its inputRequests is empty and it has "
                    "no requestState (one of the two MUST be included; whether {} counts is unsettled)")


@ASKED.check(
    "irr-field-types", ERROR, **_IRR_OWN, section="4.1", spec=spec.MRTR_IRR,
    quote="inputRequests (optional): An InputRequests map of server-initiated requests that the client must "
          "fulfill. requestState (optional): An opaque string meaningful only to the server.",
    summary="requestState is not a string, inputRequests is not an object, or one of its values is not an object.",
    why="A client cannot echo a state that is not a string, nor answer requests that are not request objects.",
    example='{"resultType":"input_required","requestState":{"step":2}}',
)
def irr_field_types(obs: Answered, ctx, v: IrrView) -> None:
    """In an input_required result: `requestState` present and not a string, `inputRequests`
    present and not an object, or an `inputRequests` value that is not an object."""
    r = v.result
    wrong = []
    if "requestState" in r and type(r["requestState"]) is not str:
        wrong.append(f"requestState is {short(r['requestState'])}, not a string")
    ir = r.get("inputRequests", {})
    if type(ir) is not dict:
        wrong.append(f"inputRequests is {short(ir)}, not an object")
    elif len(v.asks) != len(ir):  # (the view's asks are the values that are objects)
        wrong += [f"inputRequests[{k!r}] is {short(x)}, not a request object" for k, x in ir.items() if type(x) is not dict]
    if wrong:
        v.emit(ctx, f"the input_required {answered(obs)}: {'; '.join(wrong)}")


@ASKED.check(
    "input-requests-duplicate-key", ERROR, **_IRR_OWN, section="4.1",
    spec=spec.MRTR_SERVER,
    quote="inputRequests keys are server assigned identifiers and MUST be unique within the scope of the request.",
    summary="The raw JSON of inputRequests repeats a key.",
    why="Parsers disagree on which duplicate wins (Python keeps the last, others the first): the client may "
        "answer a question the server never meant to ask. Only the raw bytes show it.",
    example='"inputRequests": {"q": {…elicitation…}, "q": {…sampling…}}',
)
def input_requests_duplicate_key(obs: Answered, ctx, v: IrrView) -> None:
    """The raw bytes of an input_required result's `inputRequests` object repeat a member name
    (seen before parsing, RULES.md §9)."""
    for d in obs.response.duplicates:
        if d.path == ("result", "inputRequests"):
            v.emit(ctx, f"the input_required {answered(obs)} repeats the inputRequests key {d.name!r} {d.count} "
                        "times (keys MUST be unique); parsers disagree on which one counts", details={"key": d.name})


@ASKED.check(
    "input-request-method-invalid", ERROR, **_IRR_OWN, section="4.1",
    spec=spec.MRTR_SERVER, conformance="sep-2322-elicitation-incomplete",
    quote="inputRequests values are request objects that MUST be one of ElicitRequest, CreateMessageRequest, or "
          "ListRootsRequest",
    summary="An inputRequests value has no method, or a method other than the three input requests.",
    why="The client can only answer elicitation/create, sampling/createMessage and roots/list. (The conformance "
        "suite checks the same sentence per kind: -elicitation-, -sampling- and -list-roots-incomplete.)",
    example='"inputRequests": {"p": {"method": "ping"}}',
)
def input_request_method_invalid(obs: Answered, ctx, v: IrrView) -> None:
    """An `inputRequests` value (an object) without `method`, or whose method is not
    elicitation/create, sampling/createMessage or roots/list (for example ping, tasks/get or a
    client method such as tools/call)."""
    for a in v.asks:
        if not a.valid_method:
            what = "has no method" if a.method is None else f"has method {short(a.method)}"
            ctx.emit(f"{a.where} {what}; it must be elicitation/create, sampling/createMessage or roots/list",
                     messages=a.messages, chain=a.chain, details={"key": a.key})


@ASKED.check(
    "input-request-params-invalid", ERROR, **_ASKED, section="4.1", spec=spec.ELICIT_REQUESTS,
    quote="All elicitation requests MUST include the following parameters:",
    summary="An input request fails the schema of its kind (elicitation, sampling or roots).",
    why="A client validating against the schema rejects the request, so the question never reaches the user.",
    example='"confirm": {"method": "elicitation/create", "params": {"message": "Proceed?"}} (no requestedSchema)',
)
def input_request_params_invalid(obs, ctx, v: IrrView | ServerRequest) -> None:
    """An input request whose params fail the official model of its kind: elicitation without
    message, a mode other than form and url, form without a `requestedSchema` of type object with
    properties, url without `url`; sampling without messages or an integer maxTokens, a message
    role other than user and assistant; roots/list with params that are not an object. Modern
    `inputRequests` values are judged by the 2026-07-28 models, legacy server requests by the
    2025-11-25 ones."""
    for a in v.valid:
        if a.problems:
            ctx.emit(f"{a.where} ({a.method}) does not match its schema: {'; '.join(a.problems[:4])}",
                     messages=a.messages, chain=a.chain, details={"key": a.key, "problems": list(a.problems)})


@ASKED.check(
    "elicit-form-schema-not-flat", ERROR, **_ASKED, section="4.1", spec=spec.ELICIT_SCHEMA,
    quote="Only top-level properties are allowed, without nesting.",
    summary="A form's requestedSchema has a property that is not a primitive schema.",
    why="Form schemas are flat objects of strings, numbers, booleans and enums; clients cannot render the rest.",
    example='"properties": {"address": {"type": "object", "properties": {…}}}',
)
def elicit_form_schema_not_flat(obs, ctx, v: IrrView | ServerRequest) -> None:
    """A `requestedSchema.properties` value of a form-mode elicitation that is not a
    PrimitiveSchemaDefinition: a nested object, an array of objects, a `$ref`, or a composition
    outside the enum forms."""
    for a in v.valid:
        bad = a.not_flat
        if bad:
            listed = ", ".join(f"{n!r} is {why}" for n, why in bad.items())
            ctx.emit(f"{a.where} asks for a form that is not flat: {listed}; form schemas allow only top-level "
                     "primitive properties", messages=a.messages, chain=a.chain,
                     details={"key": a.key, "properties": sorted(bad)})


@ASKED.check(
    "elicit-form-sensitive", ERROR, **_ASKED, section="4.1", spec=spec.ELICIT_USER_INTERACTION,
    quote="Servers MUST NOT use form mode elicitation to request sensitive information such as passwords, API "
          "keys, access tokens, or payment credentials",
    summary="A form asks for what looks like a secret (password, API key, token, card number, CVV). Heuristic.",
    why="Form answers pass through the client and its model; secrets belong in URL mode, which the client never "
        "sees. Judged from names and descriptions, so it can be wrong: low confidence.",
    example='"properties": {"api_key": {"type": "string", "title": "Your API key"}}',
)
def elicit_form_sensitive(obs, ctx, v: IrrView | ServerRequest) -> None:
    """A form-mode property whose name, title, description or format suggests a credential:
    password, passphrase, secret, token, API key, private key, card number, CVV/CVC."""
    for a in v.valid:
        for name, hit in a.sensitive:
            ctx.emit(f"{a.where} asks in form mode for {name!r}, which looks like a credential ({hit!r}); "
                     "sensitive information MUST go through URL mode", messages=a.messages, chain=a.chain,
                     details={"key": a.key, "property": name, "confidence": "low"})


def _url(a: Ask) -> str | None:
    url = a.params.get("url") if a.mode == "url" else None
    return url if type(url) is str else None


@ASKED.check(
    "elicit-url-invalid", ERROR, **_ASKED, section="4.1", spec=spec.ELICIT_URL_MODE,
    quote="The url parameter MUST contain a valid URL.",
    summary="A URL-mode elicitation's url is not an absolute URI.",
    why="The client has nowhere to send the user; the interaction cannot happen.",
    example='"params": {"mode": "url", "message": "Sign in", "url": "/auth?x=1"}',
)
def elicit_url_invalid(obs, ctx, v: IrrView | ServerRequest) -> None:
    """The `url` of a URL-mode elicitation is a string but not an absolute URI (no scheme, or
    spaces and control characters)."""
    for a in v.valid:
        url = _url(a) if a.mode == "url" else None
        if url is not None and not shapes.absolute_uri(url):
            ctx.emit(f"{a.where} sends the user to {short(url)}, which is not an absolute URL; the url MUST be a "
                     "valid URL",
                     messages=a.messages, chain=a.chain, details={"key": a.key})


@ASKED.check(
    "elicit-url-not-https", WARNING, **_ASKED, section="4.1", spec=spec.ELICIT_SAFE_URL,
    quote="SHOULD use HTTPS URLs for non-development environments.",
    summary="A URL-mode elicitation sends the user to a URL that is not https (loopback hosts excepted).",
    why="URL mode exists for credentials and payments; over plain HTTP they travel in the clear.",
    example='"url": "http://example.com/auth"',
)
def elicit_url_not_https(obs, ctx, v: IrrView | ServerRequest) -> None:
    """A URL-mode elicitation whose (valid) URL has a scheme other than https; localhost,
    *.localhost and loopback addresses count as development and are not reported."""
    for a in v.valid:
        url = _url(a) if a.mode == "url" else None
        if url is None or not shapes.absolute_uri(url):
            continue
        parts = urlsplit(url)
        try:
            host = parts.hostname
        except ValueError:
            host = None
        if parts.scheme.lower() != "https" and not loopback_host(host):
            ctx.emit(f"{a.where} sends the user to {short(url)}, which is not https; servers SHOULD use https "
                     "outside development",
                     messages=a.messages, chain=a.chain, details={"key": a.key})


# --- capabilities ---------------------------------------------------------------------------------


def undeclared_capability(a: Ask, caps: dict) -> str | None:
    """The capability an input request needs that `caps` does not declare (None: declared)."""
    p = a.params if type(a.params) is dict else {}
    return _undeclared(a.method, a.mode, "tools" in p or "toolChoice" in p, caps)


def _undeclared(method, mode, tools: bool, caps: dict) -> str | None:
    """`undeclared_capability` of an input request of this method and elicitation mode that offers
    tools (sampling) or not."""
    if method == ELICIT:
        el = caps.get("elicitation")
        if type(el) is not dict:
            return "elicitation"
        if mode == "url" and "url" not in el:
            return "elicitation.url"
        if mode == "form" and "url" in el and "form" not in el:  # {} alone means form (elicitation.mdx)
            return "elicitation.form"
    elif method == SAMPLE:
        sampling = caps.get("sampling")
        if type(sampling) is not dict:
            return "sampling"
        if tools and "tools" not in sampling:
            return "sampling.tools"
    elif method == ROOTS and type(caps.get("roots")) is not dict:
        return "roots"
    return None


def _declared(caps: dict, name: str) -> str:
    top = name.split(".")[0]
    return f"declared {top}: {short(caps[top])}" if top in caps else f"declared no {top} capability"


@ASKED.check(
    "input-request-undeclared-capability", ERROR, **_IRR, section="4.1",
    spec=spec.MRTR_SERVER, conformance="sep-2322-respect-client-capabilities",
    quote="Servers MUST NOT send an inputRequests that the client has not declared support for in its capabilities.",
    summary="An input request needs a capability the request it answers did not declare.",
    why="The client cannot answer it. Capabilities are per request (servers MUST NOT infer them from earlier "
        "rounds); if the server cannot go on without one, the answer is -32021, not an unanswerable question.",
    example='request caps {"elicitation": {"form": {}}}; inputRequests asks an elicitation in url mode',
)
def input_request_undeclared_capability(obs: Answered, ctx, v: IrrView) -> None:
    """Judged against the clientCapabilities of the very request the IRR answers (never earlier
    rounds'): elicitation/create without `elicitation`; form mode when only `url` was declared
    (`elicitation: {}` means form); url mode without `elicitation.url`; sampling/createMessage
    without `sampling`, or with tools/toolChoice without `sampling.tools`; roots/list without
    `roots`."""
    asks = v.valid
    if not asks:
        return
    caps = client_caps(obs.request)
    for a in asks:
        need = undeclared_capability(a, caps)
        if need:
            ctx.emit(f"{a.where} needs the {need} capability, but {obs.request.label()} {_declared(caps, need)}; "
                     "servers MUST NOT ask for what the request did not declare",
                     messages=[obs.request.index, obs.response.index], chain=a.chain,
                     details={"key": a.key, "capability": need})


@ASKED.check(
    "sampling-include-context-undeclared", WARNING, **_IRR, section="4.1",
    spec=spec.SAMPLING_CAPABILITIES,
    quote="SHOULD NOT use them unless the client declares sampling.context capability",
    summary="A sampling input request uses includeContext thisServer/allServers without sampling.context declared.",
    why="The values are deprecated; a client that did not declare sampling.context will ignore them.",
    example='"params": {"includeContext": "allServers", …} with caps {"sampling": {}}',
)
def sampling_include_context_undeclared(obs: Answered, ctx, v: IrrView) -> None:
    """A sampling/createMessage input request whose `includeContext` is "thisServer" or
    "allServers" while the request it answers did not declare `sampling.context`."""
    asks = [a for a in v.valid if a.method == SAMPLE and type(a.params) is dict
            and a.params.get("includeContext") in ("thisServer", "allServers")]
    if not asks:
        return
    sampling = client_caps(obs.request).get("sampling")
    if type(sampling) is dict and "context" in sampling:
        return
    for a in asks:
        ctx.emit(f"{a.where} uses includeContext {a.params['includeContext']!r}, but {obs.request.label()} did not "
                 "declare sampling.context; the value SHOULD NOT be used without it",
                 messages=[obs.request.index, obs.response.index], chain=a.chain,
                 details={"key": a.key})


def _missing_capability(obs: Answered) -> dict | None:
    """The error object of a modern -32021 response from the server, else None."""
    r = obs.response
    err = r.error
    if r.era is not MODERN or obs.request is None or type(err) is not dict or err.get("code") != MISSING_CAPABILITY:
        return None
    return err


@rule(
    "missing-capability-error-shape", ERROR, **_ERRORS, section="4.1", spec=spec.BASE_META,
    conformance="sep-2575-server-rejects-undeclared-capability",
    quote="the server MUST return a MissingRequiredClientCapabilityError (-32021) whose data.requiredCapabilities "
          "lists the missing capabilities.",
    summary="A -32021 error lacks data.requiredCapabilities, or it is not a ClientCapabilities object.",
    why="The client reads requiredCapabilities to tell the user what to enable; an array or a string cannot be read.",
    example='{"code": -32021, "message": "…", "data": {"requiredCapabilities": ["elicitation"]}}',
)
def missing_capability_error_shape(obs: Answered, ctx) -> None:
    """A -32021 error whose `error.data` is missing, or whose `data.requiredCapabilities` is
    missing or fails the ClientCapabilities model (an array, a string, a capability that is not an
    object)."""
    if _missing_capability(obs) is None:
        return
    problems = shapes.missing_capability_data_problems(obs.response.value)
    if problems:
        ctx.emit(f"the -32021 error (message #{obs.response.index}) to {obs.request.label()} does not list the missing "
                 f"capabilities as a ClientCapabilities object: {'; '.join(problems)}",
                 messages=[obs.response.index], chain=chain_of(obs))


@rule(
    "missing-capability-http-status", ERROR, **_ERRORS, transports=["http"], section="4.1", spec=spec.BASE_META,
    conformance="sep-2575-missing-capability-http-400",
    quote="On HTTP, the response status MUST be 400 Bad Request.",
    summary="On HTTP, a -32021 error comes with a status other than 400.",
    why="Clients probing a server's era look at the 400 body; a -32021 under 200 is read as a normal answer.",
    example="HTTP 200 with {\"error\": {\"code\": -32021, …}}",
)
def missing_capability_http_status(obs: Answered, ctx) -> None:
    """A -32021 error on an HTTP exchange whose status is not 400 (an error delivered on a 200
    event stream included)."""
    x = obs.exchange
    if x is not None and x.status != 400 and _missing_capability(obs) is not None:
        ctx.emit(f"the -32021 error (message #{obs.response.index}) to {obs.request.label()} came with HTTP status "
                 f"{x.status}; on HTTP it MUST be 400", messages=[obs.response.index], chain=chain_of(obs),
                 details={"status": x.status})


def _leaves(caps: dict, prefix: tuple = ()) -> list[tuple]:
    """The capability paths a ClientCapabilities object names (`{"elicitation": {"url": {}}}` →
    [("elicitation", "url")])."""
    out: list[tuple] = []
    for k, v in caps.items():
        sub = _leaves(v, prefix + (k,)) if type(v) is dict and v else []
        out += sub or [prefix + (k,)]
    return out


def _has(caps: dict, path: tuple) -> bool:
    node: object = caps
    for i, k in enumerate(path):
        if type(node) is not dict:
            return False
        if path[:i] == ("elicitation",) and k == "form" and not ({"form", "url"} & set(node)):
            return True  # `elicitation: {}` declares form
        if k not in node:
            return False
        node = node[k]
    return True


@rule(
    "missing-capability-contradicts-declared", WARNING, **_ERRORS, section="4.1",
    spec=spec.BASE_ERROR_CODES,
    quote="MUST use defined codes only with their specified meanings.",
    summary="A -32021 error names only capabilities the request did declare.",
    why="-32021 means a capability is missing; used for anything else it sends the client after the wrong fix. "
        "A warning: capability sub-settings may carry meaning the inspector cannot evaluate.",
    example='request caps {"elicitation": {}}; error data {"requiredCapabilities": {"elicitation": {}}}',
)
def missing_capability_contradicts_declared(obs: Answered, ctx) -> None:
    """Every capability path in a -32021 error's `data.requiredCapabilities` is present in the
    clientCapabilities that very request declared."""
    err = _missing_capability(obs)
    data = err.get("data") if err is not None else None
    required = data.get("requiredCapabilities") if type(data) is dict else None
    if type(required) is not dict or not required or obs.request is None:
        return
    caps = client_caps(obs.request)
    paths = _leaves(required)
    if all(_has(caps, p) for p in paths):
        missing = ", ".join(".".join(p) for p in paths)
        ctx.emit(f"the -32021 error (message #{obs.response.index}) says {missing} is missing, but "
                 f"{at(obs.request)} declared it; a defined code MUST only be used "
                 "with its meaning",
                 messages=[obs.request.index, obs.response.index], chain=chain_of(obs))


# --- the server's answer to inputResponses ---------------------------------------------------------


def _malformed(ir, link) -> list[str]:
    """What is wrong with a request's `inputResponses` ([]: well formed): not an object, or values
    that are not valid answers (judged against the kind each key was asked as on a linked retry,
    against any InputResponse otherwise). Protocol errors like these SHOULD get a JSON-RPC error."""
    if type(ir) is not dict:
        return [f"inputResponses is {short(ir)}, not an object"]
    if link is not None:
        return [f"{k!r}: {p}" for k, p in invalid_answers(link).items()]
    return shapes.input_responses_problems(ir)


# Errors that are no refusal to ask: the method is not served at all, or the client lacks the capability to be asked.
_NOT_A_REFUSAL = frozenset({METHOD_NOT_FOUND, MISSING_CAPABILITY})


@rule(
    "server-error-instead-of-reask", WARNING, on=(NotLinked, Answered), kinds=["error", "result"], directions=["s2c"],
    methods=sorted(MRTR_METHODS), section="4.1",
    spec=spec.MRTR_ERRORS, conformance="sep-2322-missing-response-rerequests",
    quote="the server SHOULD respond with a new InputRequiredResult requesting the missing information again, "
          "rather than returning an error.",
    summary="Answers the server needed were missing, and it failed instead of asking again.",
    why="InputResponses have no error slot: leaving a key out is the only way a client can say it could not "
        "answer, and answers to a round the server does not have open answer nothing it asked. Either way the "
        "server still lacks what it needs and SHOULD ask for it. Whether the answer was really needed is "
        "invisible on the wire.",
    example='round asks {"a", "b"}; retry answers "a" only → {"error": {"code": -32602, …}}; or a fresh tools/call '
            'with "inputResponses": {"wrong_key": {…}} → the same error',
)
def server_error_instead_of_reask(obs, ctx) -> None:
    """The server answers with a JSON-RPC error rather than a new input_required result (1) a retry
    linked to its round that is missing one or more keys of the round's `inputRequests` (its state
    echoed, its other answers well formed), or (2) a modern request without `requestState` whose
    well-formed `inputResponses` answer no round the server has open for it (not linked: unsolicited,
    or after its chain completed; not when the capture of the peer began with this request, whose
    round it may have missed); errors -32601 and -32021 do not count for (2)."""
    mem = ctx.mem
    if type(obs) is NotLinked:
        req = obs.request
        p = req.params if type(req.params) is dict else {}
        if (obs.reason in ("responses-unsolicited", "after-complete") and not obs.capture_incomplete
                and req.era is MODERN and "requestState" not in p and "inputResponses" in p
                and not _malformed(p["inputResponses"], None)):
            if len(mem) >= 256:  # requests never answered: keep the memory bounded
                del mem[next(iter(mem))]
            mem[req.index] = obs
        return
    req = obs.request
    unlinked = mem.pop(req.index, None) if mem and req is not None else None
    if obs.response.kind != "error":
        return
    err = obs.response.error if type(obs.response.error) is dict else {}
    if unlinked is not None:
        if err.get("code") not in _NOT_A_REFUSAL:
            keys = sorted(req.params["inputResponses"])
            listed = ", ".join(map(repr, keys)) or "empty"
            after = f" (its chain {unlinked.completed.id} had completed)" if unlinked.completed is not None else ""
            ctx.emit(f"{at(req)} carries inputResponses ({listed}) "
                     f"that answer no input_required round the server had open for it{after}, so what the server "
                     f"needs is still missing; it answered with error {short(err.get('code'))} instead of asking for "
                     "it with a new input_required result, as it SHOULD", messages=[req.index, obs.response.index],
                     chain=chain_of(obs), details={"unlinked": unlinked.reason, "answered": keys})
        return
    link = obs.creq.link if obs.creq is not None else None
    if link is None or link.request is None or link.replay is not None:
        return
    if link.state not in ("echoed", "reencoded", "none"):  # an error about the state is no refusal to ask again
        return
    asked = link.round.input_requests or {}
    params = link.request.params if type(link.request.params) is dict else {}
    ir = params.get("inputResponses", {})
    if _malformed(ir, link):
        return
    missing = sorted(set(asked) - set(ir))
    if missing:
        ctx.emit(f"{link.request.label()} of chain {link.chain.id} did not answer {', '.join(map(repr, missing))} of round "
                 f"{link.round.n}, and the server answered with error {short(err.get('code'))} instead "
                 "of asking again, as it SHOULD", messages=[link.round.irr_index, link.request.index, obs.response.index],
                 chain=link.chain.id, details={"missing": missing})


@rule(
    "server-accepted-invalid-input-responses", WARNING, **_OTHER, methods=sorted(MRTR_METHODS), section="4.1",
    spec=spec.MRTR_ERRORS, conformance="sep-2322-validate-input-responses",
    quote="Servers SHOULD validate that the data provided by the client is a valid InputResponses object and that "
          "the information inside can be correctly parsed.",
    summary="The server completed a request whose inputResponses were malformed.",
    why="A server that does not validate answers acts on garbage: a confirmation that is a number, a form that "
        "is not an object. Protocol errors SHOULD get a JSON-RPC error.",
    example='retry with "inputResponses": {"confirm": 12345} → {"resultType": "complete", …}',
)
def server_accepted_invalid_input_responses(obs: Answered, ctx) -> None:
    """A request carrying `inputResponses` that are not an object, or whose values are not valid
    answers (judged against the kind each key was asked as when the request is a linked retry;
    against any InputResponse otherwise), is answered with a complete result."""
    r = modern_result(obs)
    if r is None or r.get("resultType", "complete") != "complete":
        return
    params = obs.request.params if type(obs.request.params) is dict else {}
    if "inputResponses" not in params:
        return
    link = obs.creq.link if obs.creq is not None else None
    what = _malformed(params["inputResponses"], link if link is not None and link.request is not None else None)
    if what:
        ctx.emit(f"the server completed {at(obs.request)} although its inputResponses "
                 f"are malformed ({'; '.join(what[:4])}); servers SHOULD validate them",
                 messages=[obs.request.index, obs.response.index],
                 chain=chain_of(obs))


# --- informational ------------------------------------------------------------------------------------


@ASKED.check(
    "irr-caching-hints", INFO, **_IRR_OWN, section="4.1", spec=spec.CACHING,
    quote='Interim results with resultType: "input_required" (see multi round-trip requests) are not cacheable and '
          "carry no caching hints.",
    summary="An input_required result carries ttlMs or cacheScope.",
    why="Interim results are not cacheable; the hints are meaningless and may mislead a cache in between.",
    example='{"resultType":"input_required","requestState":"s","ttlMs":60000}',
)
def irr_caching_hints(obs: Answered, ctx, v: IrrView) -> None:
    """An input_required result with `ttlMs` or `cacheScope`."""
    hints = [h for h in ("ttlMs", "cacheScope") if h in v.result]
    if hints:
        v.emit(ctx, f"the input_required {answered(obs)} carries caching hints ({', '.join(hints)}); interim "
                    "results are not cacheable")


_FINAL_FIELDS = ("content", "isError", "structuredContent", "messages", "contents")


@ASKED.check(
    "irr-hybrid-fields", INFO, **_IRR_OWN, section="4.1", spec=spec.BASE_RESULT_TYPE,
    quote="The resultType field is a string that clients can use to determine how to parse and handle the result object.",
    summary="An input_required result also carries final-result members (content, isError, messages, contents…).",
    why="Clients parse by resultType and ignore them; a client that does not may show them as the answer.",
    example='{"resultType":"input_required","inputRequests":{…},"content":[{"type":"text","text":"waiting"}]}',
)
def irr_hybrid_fields(obs: Answered, ctx, v: IrrView) -> None:
    """An input_required result that also has `content`, `isError`, `structuredContent`,
    `messages` or `contents`."""
    if v.result.keys().isdisjoint(_FINAL_FIELDS):
        return
    extra = [f for f in _FINAL_FIELDS if f in v.result]
    if extra:
        v.emit(ctx, f"the input_required {answered(obs)} also carries {', '.join(extra)}, which clients ignore")


@ASKED.check(
    "input-request-jsonrpc-envelope", INFO, **_IRR_OWN, section="4.1",
    spec=spec.MRTR_INPUT_REQUESTS,
    quote="values are request objects (e.g., ElicitRequest, CreateMessageRequest, or ListRootsRequest).",
    summary="An inputRequests value carries jsonrpc or id, like a whole JSON-RPC request.",
    why="A legacy server request embedded as is; the schema defines neither member, and a client may mistake the "
        "id for one of its own.",
    example='"q": {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {…}}',
)
def input_request_jsonrpc_envelope(obs: Answered, ctx, v: IrrView) -> None:
    """An `inputRequests` value that has a `jsonrpc` or `id` member."""
    for a in v.asks:
        extra = [f for f in ("jsonrpc", "id") if f in a.value]
        if extra:
            ctx.emit(f"{a.where} carries {' and '.join(extra)}, as a whole JSON-RPC request would; an input request "
                     "is only its method and params",
                     messages=a.messages, chain=a.chain, details={"key": a.key})
