"""Twenty official-SDK clients started together through one proxy, each running every scenario of
the sample server (mrtr_inspect/samples), as a parallel test run makes them: one address, one
clientInfo, each client counting its ids from 1 (docs/reliability.md). Every chain is stitched
right (its rounds, its outcome, linked by state, a new id for every retry), no error; their equal
ids in flight are one look-alike warning for the session (RULES.md §10.4, §10.10: without a
peer_header nothing tells them apart), counting the overlaps, each overlap in its messages."""

from __future__ import annotations

import json

import anyio

from tests.e2e.test_http_sdk import EXPECTED, TOOLS, proxied_server, run_client

CLIENTS = 20
SAID = {
    "deploy": "deploy: deployed to production", "release": "release: released 1.0.0 as v1.0.0: first release",
    "summarize": "summarize: summary: one request, several rounds", "workspace": "workspace: roots: file:///workspace/project",
    "slow_deploy": "slow_deploy: deployed to staging", "flaky_deploy": "flaky_deploy: error: the deployment of staging failed",
}


async def _all_at_once(url: str) -> list[list[str]]:
    said: list[list[str]] = [[] for _ in range(CLIENTS)]

    async def one(n: int) -> None:
        said[n] = (await run_client(url, TOOLS))[0]

    async with anyio.create_task_group() as tg:
        for n in range(CLIENTS):
            tg.start_soon(one, n)
    return said


def test_twenty_sdk_clients_at_once_every_scenario_every_chain_stitched_no_error(tmp_path):
    rep = tmp_path / "report.json"
    with proxied_server(tmp_path / "server.jsonl", "--report", str(rep), "--quiet") as (proxy, _):
        said = anyio.run(_all_at_once, proxy.url)
    for s in said:
        assert [line.split(" (progress")[0][:len(SAID[t])] for line, t in zip(s, TOOLS)] == [SAID[t] for t in TOOLS], s
    report = json.loads(rep.read_text())
    chains = report["chains"]
    assert sorted(c["target"] for c in chains) == sorted(TOOLS * CLIENTS)
    for c in chains:
        assert (c["method"], c["rounds"], c["outcome"]) == ("tools/call", *EXPECTED[c["target"]]), c
        assert c["link"] == "state" and len(c["requests"]) == c["rounds"] + 1, c
        assert len(set(map(str, c["requests"]))) == len(c["requests"]), c  # a new JSON-RPC id for every retry
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert not [f for f in report["findings"] if f["rule"] in ("inspector-error", "chain-forked", "chain-ambiguous-link")]
    reuse = [f for f in report["findings"] if f["rule"] == "request-id-in-flight-reuse"]
    assert len(reuse) == 1, reuse  # they did overlap: one warning for the look-alike group
    [f] = reuse
    assert f["severity"] == "warning" and "look alike" in f["message"] and "peer_header" in f["message"]
    assert f["details"]["overlaps"] > 0 and len(f["messages"]) >= f["details"]["overlaps"] + 1
    print(f"\n{CLIENTS} clients, {len(chains)} chains, {f['details']['overlaps']} overlaps, "
          f"{sum(c['rounds'] for c in chains)} rounds")
