"""Several client processes' worth of SDK clients through the proxy at once, as a parallel test run
makes them: one address, one clientInfo, each client counting its ids from 1. Their chains are kept
apart, and their equal ids in flight are no error (RULES.md §10.4 cannot tell them apart without a
peer_header: a warning that says so, docs/http-proxy.md)."""

from __future__ import annotations

import json

import anyio

from tests.e2e.test_http_sdk import proxied_server, run_client

CLIENTS = 3


async def _all_at_once(url: str) -> list[list[str]]:
    said: list[list[str]] = [[] for _ in range(CLIENTS)]

    async def one(n: int) -> None:
        said[n] = (await run_client(url, ("slow_deploy", "deploy")))[0]

    async with anyio.create_task_group() as tg:
        for n in range(CLIENTS):
            tg.start_soon(one, n)
    return said


def test_parallel_clients_of_one_machine_are_kept_apart_and_get_no_error(tmp_path):
    rep = tmp_path / "report.json"
    with proxied_server(tmp_path / "server.jsonl", "--report", str(rep)) as (proxy, _):
        said = anyio.run(_all_at_once, proxy.url)
    assert all(s[0].startswith("slow_deploy: deployed to staging") and s[1] == "deploy: deployed to production"
               for s in said), said
    report = json.loads(rep.read_text())
    chains = report["chains"]
    assert sorted(c["target"] for c in chains) == ["deploy"] * CLIENTS + ["slow_deploy"] * CLIENTS
    assert all(c["outcome"] == "complete" and c["rounds"] == 1 and c["link"] == "state" for c in chains), chains
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    reuse = [f for f in report["findings"] if f["rule"] == "request-id-in-flight-reuse"]
    assert reuse and all(f["severity"] == "warning" and "look alike" in f["message"] for f in reuse)  # they did overlap
