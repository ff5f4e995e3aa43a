"""How member-name redaction grows with the message (issue 25, item 6): one message of N secret
members (and N plain ones), redacted, at N and 8N; the ratio of the times is about 8 when the work is
linear (64 if it were quadratic). And what a message without a secret's name costs: one bytes search.

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
    times = {}
    for n in (5_000, 40_000):
        raw = json.dumps({"params": {"arguments": [{"password": f"s{i}", "name": f"n{i}"} for i in range(n)]}}).encode()
        times[n] = _best(lambda: r.redact_json(raw))
        print(f"{n} secret members ({len(raw) / 1e6:.1f} MB): {times[n] * 1000:.1f} ms")
    print(f"ratio 8x the members: {times[40_000] / times[5_000]:.1f}x the time (linear: ~8)")
    plain = json.dumps({"params": {"arguments": [{"max_tokens": i, "name": f"n{i}", "progressToken": i} for i in range(40_000)]}}).encode()
    print(f"no secret's name, {len(plain) / 1e6:.1f} MB: {_best(lambda: r.redact_json(plain)) * 1000:.2f} ms (the bytes search)")


if __name__ == "__main__":
    main()
