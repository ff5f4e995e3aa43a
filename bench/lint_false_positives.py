"""The tool-poisoning lint's false positives: every tool definition the tests have, linted by the
analysis as it runs in `check` (the lint is always on, so a warning on a real server's definitions
is a false positive).

Sources: the recordings under fixtures/ and the captures of fixtures/captures (each tools/list
result in them), and the real servers the tests have, fetched live (tests/e2e/peer_tools.py:
server-everything, server-filesystem, the TypeScript SDK's example servers; skipped without node
or tests/peers). Prints, per source, the tools linted and the warnings, and the total.

    python bench/lint_false_positives.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from mrtr_inspect.adapters.offline import replay_outputs
    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.core.observations import Answered
    from tests.captures import capture_frames, capture_names
    from tests.e2e.peer_tools import LINT, lint, peer_lists

    rows: list[tuple[str, int, list]] = []

    def run(name: str, outputs_of) -> None:
        tools = 0

        def seen(obs) -> None:
            nonlocal tools
            if type(obs) is Answered and obs.request is not None and obs.request.method == "tools/list" \
                    and type(obs.response.result) is dict:
                tools += len(obs.response.result.get("tools") or ())

        found = [o for o in outputs_of(seen) if getattr(o, "rule", "").startswith(LINT)]
        rows.append((name, tools, found))

    for path in sorted((ROOT / "fixtures").glob("*/*.jsonl")):
        if path.parent.name != "captures":
            run(f"fixtures/{path.parent.name}/{path.name}", lambda seen, p=path: list(replay_outputs([str(p)], observe=seen)))

    def capture(name: str):
        def outputs(seen):
            a = Analysis(observe=seen)
            out = [o for f in capture_frames(name) for o in a.feed(f)]
            return out + a.close()
        return outputs

    for name in capture_names():
        run(f"captures/{name}", capture(name))
    peers = peer_lists()
    if not peers:
        print("peers: skipped (node or tests/peers missing)")
    for name, responses in peers.items():
        tools, found = lint(responses)
        rows.append((f"peer {name}", tools, found))
    total_tools = sum(r[1] for r in rows)
    total_found = sum(len(r[2]) for r in rows)
    for name, tools, found in rows:
        if tools or found:
            print(f"{name:70} {tools:4} tools {len(found):3} warnings")
            for f in found:
                print(f"    {f.rule}: {f.message}")
    print(f"total: {total_tools} tool definitions linted, {total_found} warnings "
          f"(false-positive rate {total_found / max(total_tools, 1):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
