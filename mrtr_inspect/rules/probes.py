"""RULES.md §12: the two warnings only an active probe (`mrtr-inspect probe`) can raise. The other
rules a probe reports are the passive ones of §4 (server-accepted-altered-state…); these have no
passive check: they judge a server's answer to a request the probe made up (docs/probes.md)."""

from __future__ import annotations

from . import spec
from .registry import WARNING, declare

declare(
    "server-rejected-unknown-key", WARNING, section="12", spec=spec.MRTR_SERVER, observable=False,
    conformance="sep-2322-ignore-unexpected-params",
    quote="the server SHOULD ignore any information it does not recognize or need.",
    summary="Probe unknown-answer-key: a retry with an extra inputResponses key got another outcome than the "
            "recorded retry.",
    doc="The probe sends a chain's retry with one more `inputResponses` key than its round asked for; the "
        "server answers with an error, or with another kind of result, where the recorded retry had its "
        "recorded outcome.",
    why="A client may answer more than it was asked (an answer kept from an earlier round, a newer client); a "
        "server that fails on what it does not need breaks those clients.",
    example='retry {"inputResponses": {"confirm": …, "mrtr-inspect-probe-unknown": {"action": "decline"}}} '
            "→ -32602, where the recorded retry got resultType complete",
)

declare(
    "server-error-on-decline", WARNING, section="12", spec=spec.ELICIT_RESPONSE_ACTIONS, observable=False,
    quote="Protocol errors (malformed JSON, invalid schema, internal server errors) SHOULD return a JSON-RPC error "
          "response",
    summary="Probe declined: a retry whose elicitation answers are all decline got a JSON-RPC error.",
    doc="The probe sends a chain's retry with every elicitation answered `{\"action\": \"decline\"}`; the "
        "server answers with a JSON-RPC error instead of a result (an `isError` result is fine) or another "
        "input_required.",
    why="Declining is an ordinary answer the user may give; a protocol error for it tells the client its request "
        "was malformed, which it was not.",
    example='retry {"inputResponses": {"confirm": {"action": "decline"}}} → {"error": {"code": -32603, …}}',
)
