"""RULES.md §14: the five rules only a client probe (`mrtr-inspect probe-client`) can raise. They judge
how a client copes with a server that misbehaves on purpose (docs/probe-client.md); the other rules a
client probe reports are the passive ones of §4 (request-state-altered, retry-reused-id…)."""

from __future__ import annotations

from . import spec
from .registry import ERROR, WARNING, declare

declare(
    "client-ignored-state-only", ERROR, section="14", spec=spec.MRTR_CLIENT, observable=False,
    quote="If an InputRequiredResult contains the requestState field, the client MUST echo back the exact value of "
          "that field when retrying the original request.",
    summary="Probe state-only: the client did not retry an input_required result that carried only a requestState.",
    doc="The probe server answers the first request of a chain with `resultType: \"input_required\"` and a "
        "`requestState`, no `inputRequests` (\"retry when ready\", which `mrtr`:245 allows); the client neither "
        "retries with that state within the probe's time nor goes on (it gives up with an error, or waits).",
    why="A server may need the client to come back without asking anything (work in progress, a queue); a client "
        "that treats a result without questions as a failure never gets its answer.",
    example='{"resultType": "input_required", "requestState": "mrtr-probe-ready-1"} → no retry',
)

declare(
    "client-retry-storm", WARNING, section="14", spec=spec.MRTR_SERVER, observable=False,
    quote="Servers MUST NOT assume that clients will fulfill the inputRequests or retry the original request.",
    summary="Probe many-rounds: the client kept retrying past 50 rounds of a server that kept asking.",
    doc="The probe server asks one new question per round for 60 rounds; the client answered and retried more "
        "than 50 times instead of stopping (an error to its caller, a cancel, or no further retry).",
    why="A server that never completes (a bug, a gateway that drops the answers) otherwise keeps a client, and "
        "the user it asks, in a loop: clients should cap their rounds.",
    example="60 rounds asked, 60 retries sent",
)

declare(
    "client-answered-undeclared", WARNING, section="14", spec=spec.MRTR_SERVER, observable=False,
    quote="Servers MUST NOT send an inputRequests that the client has not declared support for in its capabilities.",
    summary="Probe undeclared-kind: the client answered an input request of a kind its request did not declare.",
    doc="The probe server asks for a kind of input request (`elicitation/create`, URL-mode elicitation, "
        "`sampling/createMessage`, `roots/list`) that the request's `clientCapabilities` did not declare (the "
        "server breaking `mrtr`:246 on purpose); the client's retry answers that key instead of leaving it out "
        "or giving up.",
    why="A client that answers what it said it cannot do invents an answer (a fake root, an empty sampling "
        "result) the server then trusts.",
    example='clientCapabilities without sampling; retry {"inputResponses": {"mrtr-probe-undeclared": {"role": …}}}',
)

declare(
    "client-retried-after-32021", WARNING, section="14", spec=spec.BASE_META, observable=False,
    quote="the server MUST return a MissingRequiredClientCapabilityError (-32021) whose data.requiredCapabilities "
          "lists the missing capabilities.",
    summary="Probe missing-capability: the client resent the same request unchanged more than once after -32021.",
    doc="The probe server answers the first request of a chain with -32021 and `requiredCapabilities`; the client "
        "sends the same request again, unchanged (apart from its id and progress token), more than once.",
    why="-32021 says what is missing; resending the request without it cannot succeed and only loads the server.",
    example="tools/call deploy → -32021; tools/call deploy (unchanged) → -32021; tools/call deploy (unchanged) …",
)

declare(
    "client-hung", ERROR, section="14", spec=spec.TIMEOUTS, observable=False,
    quote="Implementations SHOULD establish timeouts for all sent requests, to prevent hung connections and resource "
          "exhaustion. When the request has not received a success or error response within the timeout period, the "
          "sender SHOULD cancel the request and stop waiting for a response.",
    summary="Probe fault-*: the client neither finished nor cancelled a request whose answer was held back, cut or "
            "dropped, within the probe's time.",
    doc="The probe server holds the answer back (`fault-delay`), closes the connection or its stdout "
        "(`fault-disconnect`), or cuts the answer's JSON in the middle (`fault-malformed`); when the probe's time "
        "(`--timeout`) runs out the client is still running, and has neither cancelled the request "
        "(`notifications/cancelled`, or on HTTP closing its response stream) nor exited.",
    why="A client without timeouts hangs its user for ever on one server that stalls or dies mid-answer.",
    example="tools/call deploy held back 60 s: no cancel, no exit",
)
