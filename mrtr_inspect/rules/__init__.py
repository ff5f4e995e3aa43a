"""The rule catalog (RULES.md), one module per section.

`load_rules()` imports every module once, which registers its rules in `registry.REGISTRY`.
"""

from __future__ import annotations

import importlib

_MODULES = (
    "mrtr_server",  # §4.1
    "mrtr_client",  # §4.2
    "input_responses",  # §4.3
    "chain",  # §4.4
    "base",  # §4.5
    "http",  # §4.6
    "stdio",  # §4.7
    "legacy",  # §4.8
    "tasks",  # §4.9
    "raw",  # §7.23: duplicate member names elsewhere
    "tool",  # the tool itself: upstream-error
)

_loaded = False


def load_rules() -> None:
    global _loaded
    if _loaded:
        return
    for name in _MODULES:
        importlib.import_module(f"{__name__}.{name}")
    _loaded = True
