"""How member-name redaction grows with the message (issue 25, item 6): one message of N secret
members (and N plain ones), redacted, N from 10,000 to 160,000; the time per member stays flat when
the work is linear (it would grow with N if quadratic). And what a message without a secret's name
costs: one bytes search.

    .venv/bin/python bench/redaction_members.py
"""

from __future__ import annotations

import json
import time

from mrtr_inspect.recording.redaction import Redactor


def _best(fn, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    r = Redactor(b"bench")
    for n in (10_000, 20_000, 40_000, 80_000, 160_000):
        raw = json.dumps({"params": {"arguments": [{"password": f"s{i}", "name": f"n{i}"} for i in range(n)]}}).encode()
        t = _best(lambda: r.redact_json(raw), 3)
        print(f"{n:>7} secret members ({len(raw) / 1e6:.1f} MB): {t * 1000:7.1f} ms, {t / n * 1e6:.2f} µs per member")
    plain = json.dumps({"params": {"arguments": [{"max_tokens": i, "name": f"n{i}", "progressToken": i} for i in range(40_000)]}}).encode()
    print(f"no secret's name, {len(plain) / 1e6:.1f} MB: {_best(lambda: r.redact_json(plain)) * 1000:.2f} ms (the bytes search)")


if __name__ == "__main__":
    main()
