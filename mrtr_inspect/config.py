"""Settings that change what the analysis reports (not how traffic flows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .core.framing import MAX_MESSAGE_BYTES


@dataclass
class Config:
    #: rule id -> severity (error, warning, info) replacing the rule's default
    severity: dict[str, str] = field(default_factory=dict)
    #: rule ids that never report
    disabled: set[str] = field(default_factory=set)
    #: seconds an `input_required` round may wait for its retry before the chain counts as abandoned
    #: (None: only at the end of the capture). The specification sets no limit.
    abandon_after: float | None = None
    #: a request header whose value identifies the principal on HTTP (overrides Authorization, then
    #: client address plus clientInfo; RULES.md §10.4)
    peer_header: str | None = None
    #: rounds after which `chain-long` reports a chain
    chain_long_rounds: int = 10
    #: deepest JSON nesting accepted
    max_depth: int = 200
    #: bytes of one message (a stdio line, an HTTP body once decoded, an SSE event) past which it is
    #: forwarded and recorded unchanged but not analysed (`message-too-large`); a body's decoding
    #: stops there too
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: bytes of traffic the tee and the proxy hold for a live analysis that fell behind: past them the
    #: live analysis skips ahead (whole messages; the recording keeps every one) and says how many it skipped
    max_backlog_bytes: int = 64 << 20
    #: seconds the live analysis of the tee and the proxy with a recording waits for a pause in the
    #: traffic (10 ms without any) before it works while the traffic flows (0: it works at once)
    live_yield_seconds: float = 5.0
    #: JSON paths (core/jsonpath.py: dotted, `*` any one member, `**` any depth) whose string values recordings redact
    redact_paths: list[str] = field(default_factory=list)
    #: request headers, beyond the defaults, whose values recordings redact
    redact_headers: list[str] = field(default_factory=list)
    #: closed-chain states remembered to recognise a replay (each keeps a retired form of its round and
    #: chain: no messages, its inputRequests serialised, about 1.5 KB; docs/performance.md)
    remembered_states: int = 10_000
    #: URL query parameters, beyond the secret-looking ones, whose values recordings redact
    redact_query: list[str] = field(default_factory=list)
    #: command-line options and NAME=VALUE names, beyond the secret-looking ones, whose values recordings redact
    redact_args: list[str] = field(default_factory=list)
    #: JSON member names, beyond the secret ones (recording/redaction.py MEMBERS), whose string values recordings redact
    redact_members: list[str] = field(default_factory=list)
    #: header, query parameter, option, variable and JSON member names never redacted, though they look secret
    redact_keep: list[str] = field(default_factory=list)
    #: gateways that wrap calls (RULES.md §11): each `{"target": T, "tool": PATH, "arguments": PATH}` says a
    #: front `tools/call T` names the back tool and its arguments at those dotted paths of its arguments
    hop_map: list[dict] = field(default_factory=list)
    #: tool name (a pattern, `*` any run of characters) -> the tool-poisoning rules silenced for it
    per_tool_ignores: dict[str, list[str]] = field(default_factory=dict)
    #: `check`: the lock file whose definitions the servers' are compared with (definition-* findings)
    baseline: str | None = None
    #: `check`: the run's contract (`contract.Contract`, parsed from the settings or `--contract`)
    contract: Any = None
