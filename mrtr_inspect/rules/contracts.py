"""Contract breaches (docs/contracts.md): what a run was expected to do and did not. These rules have
no check here: `contract.evaluate` makes their findings from the whole report, once the capture is
read, against the contract (`check --contract FILE`, or the settings' `[contract]` table)."""

from __future__ import annotations

from .registry import ERROR, declare

SECTION = "contracts"


def _contract(id: str, summary: str, doc: str, why: str, example: str) -> None:
    declare(id, ERROR, section=SECTION, summary=summary, doc=doc + " The finding's `details` hold the figure and "
            "the budget (docs/contracts.md).", why=why, example=example)


_contract(
    "contract-tool-not-offered", "A tool the contract expects (`offered`) is not in the servers' tools/list.",
    "A name of the contract's `offered` list that no tools/list result of the recordings holds (any server).",
    "A tool the client relies on went missing, or the server started without it (a feature flag, a failed "
    "plugin).",
    "tool 'search' is not offered (contract: pyproject.toml: [tool.mrtr-inspect] contract)",
)
_contract(
    "contract-tool-not-called", "A tool the contract expects to be called (`called`) never was.",
    "A name of the contract's `called` list that no tools/call chain of the recordings targets.",
    "The scenario under test did not do what it is for: the agent took another path, or gave up earlier.",
    "tool 'deploy' was never called (contract: contract.toml)",
)
_contract(
    "contract-tool-forbidden", "A tool the contract forbids (`forbidden`, * wildcards) was called.",
    "A tools/call chain whose tool matches a pattern of the contract's `forbidden` list; one finding per tool, "
    "naming its chains.",
    "Some tools must never run in a given scenario (deleting, paying, sending): a call is a failure even when it "
    "succeeds.",
    "tool 'delete_repo' was called 1 time (c4), forbidden by 'delete_*' (contract: contract.toml)",
)
_contract(
    "contract-rounds-exceeded", "A chain took more rounds than the contract allows (`max_rounds`, or its tool's).",
    "A chain whose `rounds` exceed its tool's `max_rounds` (the `tools` table), else the contract's `max_rounds`.",
    "Each round is a question to the user; a chain that asks more than designed is a loop or a regression in "
    "the server's flow.",
    "tools/call release: chain c2 took 5 rounds, more than the 3 allowed (contract: contract.toml)",
)
_contract(
    "contract-latency-exceeded", "A tool's latency percentile is over its budget (p50/p95/max, of the whole chain "
    "or of the server's time).",
    "Per tool of the `tools` table (or a pattern of it): the nearest-rank p50, p95 or max of its chains' "
    "durations (`p50_ms`, `p95_ms`, `max_ms`) or of the server's time in them (`server_p50_ms`, …) is above "
    "the budget. The finding's chain is the tool's slowest.",
    "A budget in CI catches a slowdown before users do; the server's time apart from the whole chain's tells "
    "a slow server from a slow user or client.",
    "tools/call deploy: p95 of the whole chain is 2,310 ms, over its budget of 2,000 ms (20 chains)",
)
_contract(
    "contract-outcome-not-allowed", "Chains ended with an outcome the contract does not allow (`outcomes`).",
    "Chains whose outcome (complete, error, abandoned, cancelled, open, task) is not in the contract's "
    "`outcomes`; one finding per method, target and outcome, naming its chains.",
    "An abandoned or failed chain in a scripted run is a broken flow even when every message is well formed.",
    "tools/call deploy: 2 chains ended error (c3, c7); allowed: complete (contract: contract.toml)",
)
_contract(
    "contract-findings-exceeded", "More findings of a severity than the contract allows (`max_findings`).",
    "The report's findings of a severity (before the contract's own) number more than `max_findings` allows.",
    "A budget of warnings lets a project adopt the rules gradually: the count may only go down.",
    "3 warnings, more than the 2 allowed (contract: contract.toml)",
)
