"""RULES.md §4.5, errors: the error codes of basic/index.mdx (integers, the reserved sub-ranges,
codes removed), UnsupportedProtocolVersionError's data; then the methods 2026-07-28 removed, the
DiscoverResult and the caching hints of cacheable results."""

from __future__ import annotations

import json

from ...core.era import MALFORMED, MODERN
from ...core.messages import Message
from ...core.observations import Answered, Decoded
from .. import spec
from ..common import (
    JSONRPC_CODES,
    MODERN_CODES,
    RESOURCE_NOT_FOUND_2025,
    UNSUPPORTED_VERSION,
    URL_ELICITATION_REQUIRED,
    at,
    chain_of,
    error_code,
    side,
)
from ..registry import ERROR, WARNING, declare, rule
from .messages import MESSAGES, _State


CACHEABLE = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
REMOVED_METHODS = ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
                   "tasks/list", "tasks/result", "notifications/initialized", "notifications/roots/list_changed")

DRAFT_CODES = {-32001: "HeaderMismatch (now -32020)", -32003: "MissingRequiredClientCapability (now -32021)",
               -32004: "UnsupportedProtocolVersion (now -32022)"}


# --- error codes -----------------------------------------------------------------------------------------------


def _modern_code(msg: Message) -> int | None:
    """The integer code of an error on a modern exchange, for the allocation policy of basic/index.mdx
    "Error Codes" (None: no integer code, another era, or -32042, which is url-elicitation-required-error
    only, RULES.md §10.2)."""
    err = msg.error
    code = err.get("code") if type(err) is dict else None
    if type(code) is not int or (msg.era is not MODERN and msg.era is not MALFORMED) or code == URL_ELICITATION_REQUIRED:
        return None
    return code


@MESSAGES.check(
    "error-code-not-integer", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERRORS,
    conformance="wire-schema-valid",
    quote="Error codes MUST be integers.",
    summary="An error whose code is not an integer.",
    why="Peers switch on the code; -32602.0 or \"-32602\" matches nothing.",
    example='{"error":{"code":"-32602","message":"Invalid params"}}',
)
def error_code_not_integer(obs: Decoded, ctx, st: _State) -> None:
    """An error response whose `error.code` is not an integer as written (a string, `-32602.0`, a
    boolean), in any era."""
    msg = obs.msg
    err = msg.error
    if type(err) is dict and "code" in err and type(err["code"]) is not int:
        ctx.emit(f"{at(msg)} from the {side(msg)} has error code {json.dumps(err['code'])[:30]}; error codes MUST be "
                 "integers", messages=[msg.index])


@MESSAGES.check(
    "error-code-reserved-undefined", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="Implementations MUST NOT emit any code from this sub-range that is not defined by this specification",
    summary="An error code in -32099…-32020 other than -32020, -32021, -32022.",
    why="The sub-range is the specification's; a private code there collides with a future definition.",
    example='{"error":{"code":-32050,"message":"quota"}}',
)
def error_code_reserved_undefined(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in the MCP-reserved sub-range that this revision does not
    define (-32042 excepted: `url-elicitation-required-error`)."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32099 <= code <= -32020 and code not in MODERN_CODES:
        ctx.emit(f"{at(msg)} uses {code}, in the sub-range -32020…-32099 reserved for codes the specification defines "
                 "(only -32020, -32021, -32022 are); implementations MUST NOT emit others", messages=[msg.index])


@MESSAGES.check(
    "error-code-removed", ERROR, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="Implementations of this protocol version MUST NOT emit these codes:",
    summary="-32002 (resource not found of 2025-11-25) on a modern exchange.",
    why="Modern clients look for -32602; -32002 is kept reserved only so old servers are understood.",
    example='resources/read → {"error":{"code":-32002,"message":"Resource not found"}}',
)
def error_code_removed(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, error code -32002; resource not found is -32602 now. (-32042 is
    `url-elicitation-required-error`, RULES.md §10.2.)"""
    msg = obs.msg
    if _modern_code(msg) == RESOURCE_NOT_FOUND_2025:
        ctx.emit(f"{at(msg)} uses -32002 (resource not found of 2025-11-25); this revision MUST NOT emit it: "
                 "resource not found is -32602", messages=[msg.index])


@MESSAGES.check(
    "error-code-legacy-range", WARNING, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="new implementations SHOULD NOT use codes from this sub-range at all.",
    summary="An error code in -32019…-32000 on a modern exchange (-32001, -32003, -32004: stale draft codes).",
    why="Receivers MUST NOT assume any meaning for these codes; a stale SDK sending -32004 is not understood as "
        "UnsupportedProtocolVersion.",
    example='{"error":{"code":-32004,"message":"Unsupported protocol version"}}',
)
def error_code_legacy_range(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in the legacy sub-range other than -32002. -32001, -32003
    and -32004 are called out: they are the pre-renumbering draft values of -32020, -32021 and
    -32022."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32019 <= code <= -32000 and code != RESOURCE_NOT_FOUND_2025:
        draft = f": {DRAFT_CODES[code]} in a pre-renumbering draft" if code in DRAFT_CODES else ""
        ctx.emit(f"{at(msg)} uses {code}, in the legacy sub-range -32000…-32019{draft}; new implementations SHOULD NOT "
                 "use codes from this sub-range", messages=[msg.index])


@MESSAGES.check(
    "error-code-jsonrpc-reserved", WARNING, kinds=["error"], section="4.5", spec=spec.BASE_ERROR_CODES,
    quote="New error codes for purposes not defined by this specification SHOULD be allocated outside the JSON-RPC "
          "reserved range (-32768 to -32000)",
    summary="An error code in -32768…-32100 that is not a standard JSON-RPC code.",
    why="JSON-RPC may define these codes one day; an application code there becomes ambiguous.",
    example='{"error":{"code":-32500,"message":"backend down"}}',
)
def error_code_jsonrpc_reserved(obs: Decoded, ctx, st: _State) -> None:
    """On a modern exchange, an error code in -32768…-32100 other than the standard -32700 and
    -32600…-32603."""
    msg = obs.msg
    code = _modern_code(msg)
    if code is not None and -32768 <= code <= -32100 and code not in JSONRPC_CODES:
        ctx.emit(f"{at(msg)} uses {code}, inside the JSON-RPC reserved range -32768…-32000 but no standard JSON-RPC "
                 "code; new error codes SHOULD be allocated outside it", messages=[msg.index])


@MESSAGES.check(
    "unsupported-version-error-shape", ERROR, kinds=["error"], directions=["s2c"], section="4.5",
    spec=spec.VERSIONING, conformance="sep-2575-server-unsupported-version-error",
    quote="it MUST respond with an UnsupportedProtocolVersionError listing the versions it does support",
    summary="A -32022 error without data.supported (string[]) and data.requested (the request's version).",
    why="The client picks its retry version from data.supported; without it the client can only give up.",
    example='{"error":{"code":-32022,"message":"Unsupported protocol version"}}',
)
def unsupported_version_error_shape(obs: Decoded, ctx, st: _State) -> None:
    """A -32022 error from the server whose `data` lacks `supported` (an array of strings) or
    `requested` (a string), or whose `requested` differs from the version the request declared."""
    msg = obs.msg
    if error_code(msg) != UNSUPPORTED_VERSION:
        return
    data = msg.error.get("data")
    data = data if type(data) is dict else {}
    supported, requested = data.get("supported"), data.get("requested")
    problems = []
    if type(supported) is not list or not all(type(v) is str for v in supported):
        problems.append("data.supported is not an array of version strings")
    req = obs.request
    if type(requested) is not str:
        problems.append("data.requested is not a string")
    elif req is not None and req.version is not None and requested != req.version:
        problems.append(f"data.requested is {requested!r}, but the request declared {req.version!r}")
    if problems:
        ctx.emit(f"{at(msg)}: {'; '.join(problems)}", messages=[msg.index])


# --- methods, discovery, caching -------------------------------------------------------------------------------


@MESSAGES.check(
    "removed-method-modern", WARNING, kinds=["request", "notification"], directions=["c2s"],
    methods=REMOVED_METHODS, section="4.5", spec=spec.CHANGELOG,
    quote="Make MCP stateless: remove the initialize/notifications/initialized handshake.",
    summary="A modern request or notification uses a method 2026-07-28 removed (initialize, ping, logging/setLevel…).",
    why="Modern servers answer them with -32601 (404 on HTTP); the client expects a feature that is gone.",
    example='{"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",…}}}',
)
def removed_method_modern(obs: Decoded, ctx, st: _State) -> None:
    """A modern client message (a request with modern `_meta`, or a notification in a modern context)
    whose method is initialize, ping, logging/setLevel, resources/subscribe, resources/unsubscribe,
    tasks/list, tasks/result, notifications/initialized or notifications/roots/list_changed."""
    msg = obs.msg
    if msg.era is MODERN:
        ctx.emit(f"{at(msg)} is a modern message, but 2026-07-28 removed {msg.method}", messages=[msg.index])


@rule(
    "discover-result-invalid", ERROR, on=Answered, kinds=["result"], methods=["server/discover"], section="4.5",
    spec=spec.DISCOVER_RESULT, conformance="sep-2575-server-implements-discover",
    quote="Servers MUST include caching hints on results with resultType: \"complete\" returned by the following "
          "operations: server/discover",
    summary="A DiscoverResult without supportedVersions, capabilities, resultType, ttlMs ≥ 0 or cacheScope.",
    why="The client chooses its version and features from it; a partial answer makes the probe fail.",
    example='{"result":{"capabilities":{},"resultType":"complete"}}',
)
def discover_result_invalid(obs: Answered, ctx) -> None:
    """The result of a modern `server/discover` lacks `supportedVersions` (an array of strings),
    `capabilities` (an object) or `resultType`, or has no valid caching hints (`ttlMs` an integer
    ≥ 0, `cacheScope` "public" or "private"; for server/discover these are reported here, not as
    cacheable-result-missing-hints)."""
    res, req = obs.response.result, obs.request
    if req.era is not MODERN or type(res) is not dict:
        return
    problems = []
    sv = res.get("supportedVersions")
    if type(sv) is not list or not all(type(v) is str for v in sv):
        problems.append("supportedVersions is not an array of version strings")
    if type(res.get("capabilities")) is not dict:
        problems.append("capabilities is not an object")
    if "resultType" not in res:
        problems.append("resultType is missing")
    problems += _hint_problems(res)
    if problems:
        ctx.emit(f"the DiscoverResult {at(obs.response)} for {at(req)}: {'; '.join(problems)}",
                 messages=[req.index, obs.response.index])


def _hint_problems(res: dict) -> list[str]:
    out = []
    ttl = res.get("ttlMs")
    if ttl is None:
        out.append("ttlMs is missing")
    elif type(ttl) is not int or ttl < 0:
        out.append(f"ttlMs is {json.dumps(ttl)[:20]}, not an integer ≥ 0")
    scope = res.get("cacheScope")
    if scope is None:
        out.append("cacheScope is missing")
    elif scope not in ("public", "private"):
        out.append(f"cacheScope is {json.dumps(scope)[:20]}, not \"public\" or \"private\"")
    return out


@rule(
    "cacheable-result-missing-hints", ERROR, on=Answered, kinds=["result"], methods=CACHEABLE, section="4.5",
    spec=spec.CACHING, conformance="sep-2549-resources-read-caching-hints",
    quote="Servers MUST include caching hints on results with resultType: \"complete\" returned by the following "
          "operations:",
    summary="A complete result of a list method or resources/read without valid ttlMs and cacheScope.",
    why="Without hints clients either re-fetch constantly or cache what they should not share.",
    example='tools/list → {"tools":[…],"resultType":"complete"}',
)
def cacheable_result_missing_hints(obs: Answered, ctx) -> None:
    """A complete result (resultType "complete" or absent) to a modern tools/list, prompts/list,
    resources/list, resources/templates/list or resources/read (the final round of a chain too)
    without `ttlMs` (an integer ≥ 0) or `cacheScope` ("public" or "private"). input_required
    results are exempt."""
    res, req = obs.response.result, obs.request
    if req.era is not MODERN or type(res) is not dict or res.get("resultType", "complete") != "complete":
        return
    problems = _hint_problems(res)
    if problems:
        ctx.emit(f"{at(obs.response)} completes {at(req)}: {'; '.join(problems)}",
                 messages=[req.index, obs.response.index], chain=chain_of(obs))


declare(
    "retry-result-cached", ERROR, section="4.5", spec=spec.CACHING, observable=False,
    quote="Results produced by retrying a request through the multi round-trip requests mechanism … MUST NOT be cached",
    summary="A client served an MRTR retry's result from its cache.",
    doc="Not observable: a cache hit never reaches the wire.",
    why="Retry results depend on inputs that are not part of the cache key.",
)
