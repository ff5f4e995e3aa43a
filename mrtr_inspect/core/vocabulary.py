"""The closed sets of what the core says of chains, as `StrEnum`s: each member is equal to its value
as a string, so the report, the recordings and the rules' comparisons read as before.

The others live where they are made: `events.Direction`, `era.Era`, `findings.Severity`.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How a chain ended (the report's `outcome`). Equal to its value as a string."""

    OPEN = "open"  # a request still in flight when the capture (or its session) ended
    COMPLETE = "complete"
    ERROR = "error"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"  # a round no retry answered
    TASK = "task"


class Link(StrEnum):
    """The evidence that tied a retry to its round (`state`, `keys`, `params`, RULES.md §3) or a legacy
    server's question to a chain's request (`stream`, `related`, `time`, §13). Equal to its value."""

    STATE = "state"
    KEYS = "keys"
    PARAMS = "params"
    STREAM = "stream"
    RELATED = "related"
    TIME = "time"


#: the outcomes in the order the command line and the contract name them
OUTCOMES = (Outcome.COMPLETE, Outcome.ERROR, Outcome.ABANDONED, Outcome.CANCELLED, Outcome.OPEN, Outcome.TASK)
