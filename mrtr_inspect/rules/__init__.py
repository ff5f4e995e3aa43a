"""The rule catalog (RULES.md), one module per section of §4, beside the helpers they share.

`load_rules()` imports every module once, which registers its rules in `registry.REGISTRY`. The
modules load in `_MODULES` order, and the rules in each in the order they are written: that order
is the order in which the rules reached by one observation run, and so the order of their findings
in the report (docs/rules.md groups them by section instead). `common.py` (the error codes, how a
finding names a message, the helpers through which rules reach the pipeline's knowledge),
`registry.py` (rules, passes, the engine), `spec.py` (specification anchors) and `shapes.py` (the
mcp-types models) hold no rules.
"""

from __future__ import annotations

import importlib

_MODULES = (
    "input_responses",  # §4.3 InputResponse shape per request kind
    "mrtr_server",  # §4.1 MRTR: the server side
    "base",  # §4.5 the base protocol (its per-message checks run before the §4.2 and §4.4 rules)
    "mrtr_client",  # §4.2 MRTR: the client side (and §10.1, §0 capture-incomplete)
    "chain",  # §4.4 chain semantics (and §10.5)
    "http",  # §4.6 Streamable HTTP
    "stdio",  # §4.7 stdio
    "legacy",  # §4.8 the legacy era and era mixing
    "tasks",  # §4.9 the tasks extension
    "raw",  # §7.23: duplicate member names elsewhere
    "gateway",  # §11: two hops, a gateway in the middle
    "probes",  # §12: what only an active probe reports (no checks)
    "client_probes",  # §14: what only a client probe reports (no checks)
    "tool",  # the tool itself: upstream-error
    "definitions",  # definitions: changes since a baseline, tool poisoning (docs/ci.md)
    "contracts",  # contract breaches (docs/contracts.md; no checks)
)

_loaded = False


def load_rules() -> None:
    global _loaded
    if _loaded:
        return
    for name in _MODULES:
        importlib.import_module(f"{__name__}.{name}")
    _loaded = True
