"""Hypothesis settings and strategies shared by the core and recording tests.

Every property test here runs derandomized (the same examples on every run, no example database),
so the suite stays deterministic. To fuzz harder, set MRTR_FUZZ_EXAMPLES (e.g. 20000): the tests
then run that many random examples, different on every run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

_HARD = int(os.environ.get("MRTR_FUZZ_EXAMPLES") or 0)

FUZZ = settings(derandomize=not _HARD, database=None, deadline=None, max_examples=_HARD or 300,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def chunked(draw, data: bytes, max_chunks: int = 12) -> list[bytes]:
    """`data` cut at random places (possibly into empty pieces): b"".join(result) == data."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=max_chunks)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]

