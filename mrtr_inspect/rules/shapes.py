"""Wire shapes of input requests and input responses, judged by the official `mcp-types` models.

Every shape question the MRTR rules ask goes through here: is this `inputRequests` value a valid
ElicitRequest, CreateMessageRequest or ListRootsRequest; is this `inputResponses` value a valid
ElicitResult, CreateMessageResult or ListRootsResult; is this form property a
PrimitiveSchemaDefinition. The models are the generated per-version wire models of `mcp-types`
(2026-07-28 for modern traffic, 2025-11-25 for the server-initiated requests of legacy traffic);
their validators are built once and cached. Validation is strict: JSON has no `"50"` that means 50.

The models are reached through the public rows of `mcp_types.methods` (`_Models`): for 2025-11-25
the rows of the server requests and of the client results that answer them; 2026-07-28 has no
server requests, so its input requests are read from the `input_required` arm of the tools/call
result row, and its input responses from the params of the tools/call request row. The maps reach
no form property schema (`requestedSchema.properties` is typed as any object) and no error
(-32021's data): those few names are taken from the version's package.

The models load on first need (`_models`): importing them costs about a second, several times a
short `check`, and the common valid shapes are judged without them (`_QUICK`). Whether those quick
checks hold is a question about the models' fields (`_verdict_of_models`); for the version of
mcp-types they were verified against (`_VERIFIED`, held to the models by tests/rules/test_shapes.py)
the answer is known without loading them, for any other version the models are asked.

A problem is a short text, `path: what is wrong`, for a person to read.
"""

from __future__ import annotations

import os
import re
from functools import cache
from importlib.util import find_spec
from typing import Any, get_args

from ..core.jsontext import dumps_with

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"



def _models_under(roots: list) -> dict[str, type]:
    """The model classes the annotations of `roots` reach, by name (a name two classes share is left out)."""
    from pydantic import BaseModel

    found: dict[str, set] = {}
    seen: set = set()
    todo = list(roots)
    while todo:
        t = todo.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t not in seen:
                seen.add(t)
                found.setdefault(t.__name__, set()).add(t)
                todo.extend(f.annotation for f in t.model_fields.values())
        else:
            todo.extend(get_args(t))
    return {name: next(iter(classes)) for name, classes in found.items() if len(classes) == 1}


def _field_type(model: type, name: str) -> Any:
    """The type of a model's optional field, without its None."""
    arms = [a for a in get_args(model.model_fields[name].annotation) if a is not type(None)]
    return arms[0] if len(arms) == 1 else model.model_fields[name].annotation


class _Models:
    """The wire models of one version by name: those the public rows of `mcp_types.methods` reach
    (`public`), else the version's own package (the few they do not reach, and any other name)."""

    def __init__(self, package: Any, public: dict[str, Any]) -> None:
        self.package = package
        self.public = public

    def __getattr__(self, name: str) -> Any:
        try:
            return self.public[name]
        except KeyError:
            return getattr(self.package, name)


def _legacy() -> _Models:
    import mcp_types._v2025_11_25 as v2025  # only what mcp_types.methods has no row for (see _Models)
    from mcp_types import methods

    rows = [methods.SERVER_REQUESTS[(m, LEGACY)] for m in (ELICIT, SAMPLE, ROOTS)]
    rows += [methods.CLIENT_RESULTS[(m, LEGACY)] for m in (ELICIT, SAMPLE, ROOTS)]
    return _Models(v2025, _models_under(rows))


def _modern() -> _Models:
    import mcp_types._v2026_07_28 as v2026
    from mcp_types import methods

    call, result = methods.CLIENT_REQUESTS[("tools/call", MODERN)], methods.SERVER_RESULTS[("tools/call", MODERN)]
    public: dict[str, Any] = _models_under([call, result])
    public["InputResponses"] = _field_type(public["CallToolRequestParams"], "input_responses")
    return _Models(v2026, public)


@cache
def _models(version: str) -> _Models:
    """The wire models of `version`, imported on first need."""
    return _modern() if version == MODERN else _legacy()


@cache
def _adapter(version: str, name: str) -> Any:
    """A validator (pydantic's TypeAdapter) for a type of the version's wire models: a class, an
    alias, or `Class.field`."""
    from pydantic import TypeAdapter

    cls_name, _, field_name = name.partition(".")
    target: Any = getattr(_models(version), cls_name)
    if field_name:
        target = target.model_fields[field_name].annotation
    return TypeAdapter(target)


@cache
def _validator(version: str, name: str) -> Any:
    """The compiled validator behind `_adapter` (called directly: the valid case is the common one)."""
    return _adapter(version, name).validator


def _errors(version: str, name: str, value: Any) -> list[dict] | None:
    quick = (_QUICK or _register()).get(name) if version == MODERN else None
    if quick is not None and quick(value):
        return None  # valid by the model, seen without it
    from pydantic_core import ValidationError

    try:
        _validator(version, name).validate_python(value, strict=True)
    except ValidationError as e:
        return e.errors(include_url=False, include_context=False, include_input=False)
    return None


# -- the common valid shapes, seen without the models ---------------------------------------------
#
# Each check below says True only for values its model (2026-07-28, strict) accepts: the plain shapes
# that SDKs send. Anything else (a member it does not know how to judge, a field spelled by its Python
# name, a _meta) says False, and the model decides. tests/rules/test_shapes.py holds each check to its
# model on generated values; a check whose model no longer has the fields it was written for is
# not used (`_register`).

_INT = (-(1 << 63), 1 << 63)  # an int the models take without question (JSON may carry larger ones)


def _small_int(x: Any) -> bool:
    return type(x) is int and _INT[0] <= x < _INT[1]


def _opt_str(v: dict, key: str) -> bool:
    x = v.get(key)
    return x is None or type(x) is str


def _text_block(c: Any) -> bool:
    """A TextContent with type and text only (no _meta, no annotations)."""
    return (type(c) is dict and c.get("type") == "text" and type(c.get("text")) is str and "_meta" not in c
            and "meta" not in c and "annotations" not in c)


def _q_elicit_result(v: Any) -> bool:
    if type(v) is not dict:
        return False
    a = v.get("action")
    if type(a) is not str or (a != "accept" and a != "decline" and a != "cancel"):
        return False
    c = v.get("content")
    if c is None:
        return True
    if type(c) is not dict:
        return False
    for x in c.values():
        t = type(x)
        if t is str or t is bool or t is float or x is None or (t is int and _INT[0] <= x < _INT[1]):
            continue
        if t is not list:
            return False
        for i in x:
            if type(i) is not str:
                return False
    return True


def _q_list_roots_result(v: Any) -> bool:
    roots = v.get("roots") if type(v) is dict else None
    if type(roots) is not list:
        return False
    for r in roots:
        if type(r) is not dict or type(r.get("uri")) is not str or not _opt_str(r, "name") or "_meta" in r \
                or "meta" in r:
            return False
    return True


def _q_create_message_result(v: Any) -> bool:
    if type(v) is not dict or type(v.get("model")) is not str or "stop_reason" in v or "_meta" in v or "meta" in v:
        return False
    role = v.get("role")
    return (role == "assistant" or role == "user") and type(role) is str and _opt_str(v, "stopReason") \
        and _text_block(v.get("content"))


def _q_elicit_form_params(p: Any) -> bool:
    if type(p) is not dict or type(p.get("message")) is not str or "requested_schema" in p:
        return False
    if "mode" in p and (type(p["mode"]) is not str or p["mode"] != "form"):
        return False
    s = p.get("requestedSchema")
    if type(s) is not dict or type(s.get("type")) is not str or s["type"] != "object" or "schema_" in s:
        return False
    if type(s.get("properties")) is not dict or not _opt_str(s, "$schema"):
        return False
    required = s.get("required")
    return required is None or (type(required) is list and all(type(k) is str for k in required))


_SAMPLING_KEYS = frozenset({"maxTokens", "messages"})
_sampling_other: frozenset = frozenset()  # the other field names and aliases of CreateMessageRequestParams


def _q_sampling_params(p: Any) -> bool:
    if type(p) is not dict or not _small_int(p.get("maxTokens")) or not _sampling_other.isdisjoint(p):
        return False
    messages = p.get("messages")
    if type(messages) is not list:
        return False
    for m in messages:
        if type(m) is not dict or "_meta" in m or "meta" in m:
            return False
        role = m.get("role")
        if type(role) is not str or (role != "user" and role != "assistant") or not _text_block(m.get("content")):
            return False
    return True


def _q_schema_common(s: dict) -> bool:
    return _opt_str(s, "title") and _opt_str(s, "description")


def _q_boolean_schema(s: Any) -> bool:
    if type(s) is not dict or s.get("type") != "boolean" or type(s["type"]) is not str:
        return False
    d = s.get("default")
    return (d is None or type(d) is bool) and _q_schema_common(s)


_FORMATS = ("date", "date-time", "email", "uri")


def _q_string_schema(s: Any) -> bool:
    if type(s) is not dict or s.get("type") != "string" or type(s["type"]) is not str:
        return False
    if "max_length" in s or "min_length" in s or not _opt_str(s, "default") or not _q_schema_common(s):
        return False
    f = s.get("format")
    if f is not None and (type(f) is not str or f not in _FORMATS):
        return False
    for k in ("maxLength", "minLength"):
        x = s.get(k)
        if x is not None and not _small_int(x):
            return False
    return True


def _q_number(x: Any) -> bool:
    return x is None or type(x) is float or _small_int(x)


def _q_number_schema(s: Any) -> bool:
    if type(s) is not dict or type(s.get("type")) is not str or s["type"] not in ("number", "integer"):
        return False
    return _q_number(s.get("default")) and _q_number(s.get("minimum")) and _q_number(s.get("maximum")) \
        and _q_schema_common(s)


_QUICK: dict[str, Any] = {}  # filled on first use (_register)

# What `_verdict_of_models` finds in the models of this mcp-types version: the quick checks that hold
# and the other parameter names of a sampling request. With this version installed the models need
# not be loaded to know it (tests/rules/test_shapes.py holds it to them); with another, they are asked.
_VERIFIED = ("2.3.0", frozenset({
    "BooleanSchema", "CreateMessageRequest.params", "CreateMessageResult", "ElicitRequestFormParams", "ElicitResult",
    "ListRootsResult", "NumberSchema", "StringSchema"}), frozenset({
    "includeContext", "include_context", "max_tokens", "metadata", "modelPreferences", "model_preferences",
    "stopSequences", "stop_sequences", "systemPrompt", "system_prompt", "temperature", "toolChoice", "tool_choice",
    "tools"}))

_CHECKS = {"ElicitResult": _q_elicit_result, "ListRootsResult": _q_list_roots_result,
           "CreateMessageResult": _q_create_message_result, "ElicitRequestFormParams": _q_elicit_form_params,
           "CreateMessageRequest.params": _q_sampling_params, "BooleanSchema": _q_boolean_schema,
           "StringSchema": _q_string_schema, "NumberSchema": _q_number_schema}


def installed_mcp_types() -> str | None:
    """The version of the mcp-types installed, from its one `.dist-info` folder beside the package
    (without importing it, nor importlib.metadata, which costs a tenth of a second); None when that
    cannot be told."""
    spec = find_spec("mcp_types")
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(where) != 1:
        return None
    try:
        infos = [n for n in os.listdir(os.path.dirname(where[0])) if n.startswith("mcp_types-") and n.endswith(".dist-info")]
    except OSError:
        return None
    return infos[0][len("mcp_types-"):-len(".dist-info")] if len(infos) == 1 else None


def _verdict_of_models() -> tuple[frozenset, frozenset]:
    """The checks above whose models still have the fields they were written for, and the other field
    names and aliases of CreateMessageRequestParams (`_sampling_other`), asked of the models."""
    m = _models(MODERN)

    def fields(cls) -> set:
        return {k for name, f in cls.model_fields.items() for k in (name, f.alias) if k}

    root_fields, text_fields = {"meta", "_meta", "name", "uri"}, {"meta", "_meta", "annotations", "text", "type"}
    schema_fields = {"default", "description", "title", "type"}
    expected = {
        "ElicitResult": {m.ElicitResult: {"action", "content"}},
        "ListRootsResult": {m.ListRootsResult: {"roots"}, m.Root: root_fields},
        "CreateMessageResult": {
            m.CreateMessageResult: {"meta", "_meta", "content", "model", "role", "stop_reason", "stopReason"},
            m.TextContent: text_fields},
        "ElicitRequestFormParams": {
            m.ElicitRequestFormParams: {"message", "mode", "requested_schema", "requestedSchema"},
            m.RequestedSchema: {"schema_", "$schema", "properties", "required", "type"}},
        "CreateMessageRequest.params": {m.SamplingMessage: {"meta", "_meta", "content", "role"}, m.TextContent: text_fields},
        "BooleanSchema": {m.BooleanSchema: schema_fields},
        "StringSchema": {m.StringSchema: schema_fields | {"format", "max_length", "maxLength", "min_length", "minLength"}},
        "NumberSchema": {m.NumberSchema: schema_fields | {"maximum", "minimum"}},
    }
    holds = {name for name, models in expected.items()
             if all(fields(cls) == want and cls.model_config.get("extra") != "forbid" for cls, want in models.items())}
    params = m.CreateMessageRequest.model_fields["params"].annotation
    other: frozenset = frozenset()
    if {n for n, f in params.model_fields.items() if f.is_required()} != {"max_tokens", "messages"}:
        holds.discard("CreateMessageRequest.params")
    if "CreateMessageRequest.params" in holds:
        other = frozenset(fields(params) - {"max_tokens"} - _SAMPLING_KEYS)
        other |= {"max_tokens"}  # the Python name of maxTokens: the model decides which one counts
    return frozenset(holds), other


def _register() -> dict[str, Any]:
    """The quick checks that hold for the installed models: known for the version verified, else asked of them."""
    global _sampling_other
    if not _QUICK:
        version, holds, other = _VERIFIED
        if installed_mcp_types() != version:
            holds, other = _verdict_of_models()
        _sampling_other = other
        _QUICK.update((name, _CHECKS[name]) for name in holds)
    return _QUICK


# -- formatting pydantic errors for people -------------------------------------------------------


def _is_tag(part: Any, version: str) -> bool:
    """A union branch name in a pydantic location (`TextContent`, `list[...]`, `str`), not a member."""
    if type(part) is not str:
        return False
    return "[" in part or part in ("str", "int", "float", "bool") or (
        part[:1].isupper() and part.isidentifier() and hasattr(_models(version), part))


def _path(parts: tuple) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if type(p) is int else (f".{p}" if out else str(p))
    return out or "(the value)"


def _at(value: Any, parts: tuple) -> Any:
    for p in parts:
        if type(value) is dict and type(p) is str:
            value = value.get(p)
        elif type(value) is list and type(p) is int and p < len(value):
            value = value[p]
        else:
            return None
    return value


def describe(errors: list[dict], value: Any, version: str, prefix: tuple = ()) -> list[str]:
    """One line per place that failed. A union that no branch matched is one line, not one per branch."""
    seen: dict[tuple, list[str]] = {}
    for e in errors:
        loc = tuple(e["loc"])
        cut = next((i for i, p in enumerate(loc) if _is_tag(p, version)), None)
        if cut is None:
            seen.setdefault(loc, []).append(e["msg"])
        else:
            seen.setdefault(loc[:cut], []).append("")
    out = []
    for loc, msgs in seen.items():
        where = _path(prefix + loc)
        if "" in msgs:
            v = _at(value, loc)
            kind = f" (type {v['type']!r})" if type(v) is dict and "type" in v else ""
            out.append(f"{where}: matches none of the forms the schema allows{kind}")
        else:
            out.append(f"{where}: {_plain(msgs[0])}")
    return out


def _plain(msg: str) -> str:
    """pydantic's wording, without the Python class names."""
    msg = re.sub(r"Input should be a valid dictionary( or instance of \w+)?", "should be a JSON object", msg)
    return msg.replace("Input should be", "should be").replace("Field required", "missing")


# -- input requests ------------------------------------------------------------------------------


def elicit_mode(params: Any) -> Any:
    """The elicitation mode: "form" when `mode` is absent (elicitation.mdx: clients MUST treat a
    request without `mode` as form mode), else whatever `mode` holds."""
    return params.get("mode", "form") if type(params) is dict else None


def input_request_problems(method: str, params: Any, version: str = MODERN) -> list[str]:
    """What is wrong with the params of an input request of a known kind (method), by the models of
    `version`. Form properties are not judged here (see `primitive_schema_ok`); neither is a legacy
    URL elicitation's missing `elicitationId` (RULES.md §4.8 has its own rule for it)."""
    if method == ELICIT:
        if type(params) is not dict:
            return ["params: an elicitation request needs params (mode, message…)"]
        mode = elicit_mode(params)
        if mode not in ("form", "url"):
            return [f"params.mode: {mode!r} is neither \"form\" nor \"url\""]
        name = "ElicitRequestFormParams" if mode == "form" else "ElicitRequestURLParams"
        errors = _errors(version, name, params)
        if errors and version == LEGACY:
            errors = [e for e in errors if tuple(e["loc"]) != ("elicitationId",)]
        return describe(errors, params, version, ("params",)) if errors else []
    cls = "CreateMessageRequest" if method == SAMPLE else "ListRootsRequest"
    if params is None and method == SAMPLE:
        return ["params: a sampling request needs params (messages, maxTokens)"]
    if params is None:
        return []
    errors = _errors(version, cls + ".params", params)
    return describe(errors, params, version, ("params",)) if errors else []


def _likely_primitive(schema: dict) -> str:
    """The branch of PrimitiveSchemaDefinition a property schema most likely means (tried first)."""
    t = schema.get("type")
    if t == "boolean":
        return "BooleanSchema"
    if t in ("number", "integer"):
        return "NumberSchema"
    if t == "array":
        items = schema.get("items")
        return "TitledMultiSelectEnumSchema" if type(items) is dict and "anyOf" in items else "UntitledMultiSelectEnumSchema"
    if "oneOf" in schema:
        return "TitledSingleSelectEnumSchema"
    if "enum" in schema:
        return "LegacyTitledEnumSchema" if "enumNames" in schema else "UntitledSingleSelectEnumSchema"
    return "StringSchema"


def primitive_schema_ok(schema: Any, version: str = MODERN) -> bool:
    """Is one `requestedSchema.properties` value a PrimitiveSchemaDefinition (string, number,
    integer, boolean or one of the enum forms)? The likely branch is tried first (a union tries all
    of them, which costs several times more); the whole union decides when it fails."""
    if type(schema) is dict and _errors(version, _likely_primitive(schema), schema) is None:
        return True
    return _errors(version, "PrimitiveSchemaDefinition", schema) is None


def why_not_primitive(schema: Any) -> str:
    """A few words on a property that is not a primitive schema."""
    if type(schema) is not dict:
        return "not a schema object"
    if "$ref" in schema:
        return "a $ref"
    t = schema.get("type")
    if t == "object" or "properties" in schema:
        return "a nested object"
    if t == "array":
        items = schema.get("items")
        return "an array of objects" if type(items) is dict and items.get("type") == "object" else \
            "an array that is not a multi-select enum"
    if any(k in schema for k in ("allOf", "anyOf", "oneOf", "not")):
        return "a composition outside the enum forms"
    return f"not a primitive schema (type {t!r})"


# -- input responses -----------------------------------------------------------------------------

_RESULTS = {ELICIT: "ElicitResult", SAMPLE: "CreateMessageResult", ROOTS: "ListRootsResult"}


def input_response_errors(method: str, value: Any, version: str = MODERN) -> list[dict]:
    """The raw validation errors of an answer to an input request of kind `method` (empty: valid)."""
    return _errors(version, _RESULTS[method], value) or []


def input_responses_problems(value: Any) -> list[str]:
    """Is `value` a valid InputResponses map (each value one of the three result types)? (2026-07-28:
    the map exists in no earlier version.)"""
    errors = _errors(MODERN, "InputResponses", value)
    return describe(errors, value, MODERN, ("inputResponses",)) if errors else []


# -- errors --------------------------------------------------------------------------------------


def missing_capability_data_problems(response: Any) -> list[str]:
    """What is wrong with `error.data` of a -32021 MissingRequiredClientCapabilityError response."""
    errors = _errors(MODERN, "MissingRequiredClientCapabilityError", response)
    data = [e for e in errors or () if tuple(e["loc"][:2]) == ("error", "data")]
    return describe(data, response, MODERN) if data else []


# -- values --------------------------------------------------------------------------------------


_DUMPS = dumps_with(ensure_ascii=False, default=str)


def short(value: object, n: int = 60) -> str:
    """A value as JSON, cut to `n` characters, for a finding's text."""
    s = _DUMPS(value)
    return s if len(s) <= n else s[: n - 1] + "…"


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]+")


def absolute_uri(value: Any) -> bool:
    """An absolute URI (RFC 3986: a scheme, a colon, and something after it, no spaces)."""
    return type(value) is str and _URI.fullmatch(value) is not None
