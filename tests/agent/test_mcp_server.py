"""`mrtr-inspect mcp` (mrtr_inspect/agent/server.py) through the official Python SDK client over stdio,
in both protocol revisions, directly and through the project's own tee:

    SDK client (mode auto: 2026-07-28 | legacy: 2025-11-25) → [mrtr-inspect stdio --record] → mrtr-inspect mcp

Every answer equals what the command line says (`check --format json`, `--filter`, `stats`, `diff`);
every result's structuredContent conforms to its tool's outputSchema; a name that matches two
recordings is asked about (an input_required round on 2026-07-28, elicitation/create on 2025-11-25)
and the answer is used; the tee's recording of the whole session has no error and no warning.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp.client", reason="the official MCP Python SDK (the test extra's mcp==2.3.0)")

import mcp.types as types  # noqa: E402
from mcp import StdioServerParameters  # noqa: E402
from mcp.client import Client  # noqa: E402

from mrtr_inspect.cli import main  # noqa: E402
from tests.e2e import env, tee_cmd  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SDK = FIXTURES / "test_sdk_stdio" / "test_the_client_completes_every_chain.jsonl"
ERROR = FIXTURES / "seed" / "result_collapsed_to_text.jsonl"
GAVE_UP = FIXTURES / "seed" / "gave_up_after_rounds.jsonl"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("recordings")
    (d / "a").mkdir()
    (d / "b").mkdir()
    shutil.copy(SDK, d / "a" / "sdk.jsonl")
    shutil.copy(ERROR, d / "b" / "sdk.jsonl")  # `sdk` names two recordings
    shutil.copy(GAVE_UP, d / "gave_up.jsonl")
    (d / "notes.txt").write_text("not a recording")
    return d


def cli_json(*args: str) -> dict:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.output)


class Asker:
    """The client's answers to the server's questions, in order; each question kept."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, ctx, params):
        self.asked.append(params)
        answer = self.answers.pop(0)
        if answer is None:
            return types.ElicitResult(action="decline")
        field = next(iter(params.requested_schema["properties"]))
        return types.ElicitResult(action="accept", content={field: answer})


def server_cmd(folder: Path) -> list[str]:
    return [sys.executable, "-m", "mrtr_inspect", "mcp", "--recordings", str(folder)]


async def _session(cmd: list[str], mode: str, asker: Asker | None) -> dict:
    """The scenario: every tool, the resources, a choice asked and one declined, two tool errors."""
    target = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env(), cwd=str(FIXTURES.parent))
    out: dict = {}
    kw = {"elicitation_callback": asker} if asker is not None else {}
    async with Client(target, mode=mode, **kw) as c:
        out["protocol"] = c.session.protocol_version
        out["tools"] = {t.name: t for t in (await c.list_tools()).tools}

        async def call(key: str, name: str, args: dict) -> None:
            out[key] = await c.call_tool(name, args)
            out.setdefault("tool_of", {})[key] = name

        await call("list", "list_recordings", {})
        await call("check", "check_recording", {"recording": "a/sdk.jsonl"})
        await call("check_filtered", "check_recording", {"recording": "a/sdk", "filter": "rounds>1 or severity:warning"})
        if asker is None:
            await call("ambiguous", "check_recording", {"recording": "sdk"})
            return out
        await call("chosen", "check_recording", {"recording": "sdk"})  # asked: b/sdk.jsonl
        await call("declined", "check_recording", {"recording": "sdk"})  # asked: declined
        await call("findings", "list_findings", {"recording": "b/sdk", "filter": "severity:error"})
        await call("chain_by_id", "read_chain", {"recording": "a/sdk", "chain": "id:7"})
        await call("chain_chosen", "read_chain", {"recording": "a/sdk", "chain": "tool:*deploy"})  # asked: which chain
        await call("rule", "explain_rule", {"rule": "retry-reused-id"})
        await call("rule_typo", "explain_rule", {"rule": "retry-reused"})
        await call("diff", "diff_recordings", {"before": "a/sdk", "after": "gave_up"})
        await call("stats", "recording_stats", {"recording": "gave_up.jsonl", "filter": "tool:github.*"})
        await call("missing", "check_recording", {"recording": "nothing-like-this"})
        await call("bad_filter", "check_recording", {"recording": "gave_up", "filter": "tol:x"})
        out["resources"] = (await c.list_resources()).resources
        out["resource"] = await c.read_resource("mrtr-recording:///a/sdk.jsonl")
    return out


def run_session(cmd: list[str], mode: str, asker: Asker | None) -> dict:
    return anyio.run(_session, cmd, mode, asker)


def answers() -> Asker:
    # check_recording sdk -> b; the next -> declined; read_chain tool:de* -> the deploy chain
    return Asker("b/sdk.jsonl", None, "c1 tools/call deploy: complete, 1 round")


@pytest.fixture(scope="module")
def teed_runs(folder, tmp_path_factory) -> dict:
    """The scenario through the tee, which records it, in each revision."""
    runs = {}
    for mode in ("auto", "legacy"):
        record = tmp_path_factory.mktemp("tee") / "agent.jsonl"
        asker = answers()
        out = run_session(tee_cmd("--record", str(record), "--quiet", cmd=server_cmd(folder)), mode, asker)
        runs[mode] = {"out": out, "asker": asker, "record": record, "mode": mode}
    return runs


@pytest.fixture(params=["auto", "legacy"])
def teed(request, teed_runs):
    return teed_runs[request.param]


@pytest.fixture(scope="module")
def direct(folder):
    asker = answers()
    return {"out": run_session(server_cmd(folder), "auto", asker), "asker": asker}


def test_the_revision_is_the_one_asked_for(teed, direct):
    assert teed["out"]["protocol"] == ("2025-11-25" if teed["mode"] == "legacy" else "2026-07-28")
    assert direct["out"]["protocol"] == "2026-07-28"


def test_every_tool_has_an_output_schema_and_its_results_conform(teed):
    out = teed["out"]
    assert set(out["tools"]) == {"list_recordings", "check_recording", "read_chain", "list_findings", "explain_rule",
                                 "diff_recordings", "recording_stats"}
    checked = 0
    for key, name in out["tool_of"].items():
        r = out[key]
        if not r.is_error:
            schema = out["tools"][name].output_schema
            assert schema is not None and r.structured_content is not None, key
            jsonschema.validate(r.structured_content, schema)
            assert json.loads(r.content[0].text) == r.structured_content
            checked += 1
    assert checked >= 9


def test_list_recordings(teed, folder):
    rec = teed["out"]["list"].structured_content
    assert rec["folder"] == str(folder)
    assert [r["name"] for r in rec["recordings"]] == ["a/sdk.jsonl", "b/sdk.jsonl", "gave_up.jsonl"]
    assert all(r["recording"] for r in rec["recordings"])
    assert rec["recordings"][0]["transport"] == "stdio"


def test_check_equals_the_command_line(teed, folder):
    out = teed["out"]
    assert out["check"].structured_content == cli_json("check", str(folder / "a" / "sdk.jsonl"), "--format", "json")
    assert out["check_filtered"].structured_content == cli_json(
        "check", str(folder / "a" / "sdk.jsonl"), "--format", "json", "--filter", "rounds>1 or severity:warning")


def test_a_name_that_matches_two_recordings_is_asked_about(teed, folder):
    asked = teed["asker"].asked[0]
    assert "2 recordings match 'sdk'" in asked.message
    assert asked.requested_schema["properties"]["recording"]["enum"] == ["a/sdk.jsonl", "b/sdk.jsonl"]
    chosen = teed["out"]["chosen"]
    assert not chosen.is_error
    assert chosen.structured_content == cli_json("check", str(folder / "b" / "sdk.jsonl"), "--format", "json")
    declined = teed["out"]["declined"]
    assert declined.is_error and "no recording was chosen" in declined.content[0].text


def test_a_client_that_cannot_be_asked_gets_the_candidates(folder):
    out = run_session(server_cmd(folder), "auto", None)
    r = out["ambiguous"]
    assert r.is_error
    assert "2 recordings match 'sdk': a/sdk.jsonl, b/sdk.jsonl" in r.content[0].text
    assert not out["check"].is_error  # a name that matches one needs no question


def test_findings_are_the_reports(teed, folder):
    r = teed["out"]["findings"].structured_content
    want = cli_json("check", str(folder / "b" / "sdk.jsonl"), "--format", "json", "--filter", "severity:error")
    assert r["findings"] == want["findings"] and r["count"] == 1 and r["filter"] == "severity:error"


def test_read_chain_by_a_retry_id(teed, folder):
    r = teed["out"]["chain_by_id"].structured_content
    report = cli_json("check", str(folder / "a" / "sdk.jsonl"), "--format", "json")
    holder = next(c for c in report["chains"] if 7 in c["requests"])
    assert holder["requests"][0] != 7  # a retry's id, not the first request's
    assert r["chain"] == holder
    assert [rd["round"] for rd in r["rounds"]] == [1, 2, 3]
    assert r["rounds"][1]["retry_id"] == 7 and r["rounds"][1]["answered"] and r["rounds"][0]["request_state"]
    assert r["findings"] == [f for f in report["findings"] if f["chain"] == holder["id"]]
    roles = [m["role"] for m in r["messages"]]
    assert roles[0] == "first request" and "input_required, round 3" in roles and roles[-1].startswith("final response")
    assert all(json.loads(m["text"])["jsonrpc"] == "2.0" for m in r["messages"])
    assert r["text"].startswith(f"{holder['id']} tools/call release")


def test_read_chain_asks_which_chain_when_the_filter_finds_several(teed):
    asked = teed["asker"].asked[-1]
    options = asked.requested_schema["properties"]["chain"]["enum"]
    assert options == ["c1 tools/call deploy: complete, 1 round", "c5 tools/call slow_deploy: complete, 1 round"]
    r = teed["out"]["chain_chosen"].structured_content
    assert r["chain"]["id"] == "c1" and r["chain"]["target"] == "deploy"


def test_explain_rule(teed):
    from mrtr_inspect.rules import load_rules
    from mrtr_inspect.rules.registry import REGISTRY

    load_rules()
    r = teed["out"]["rule"].structured_content
    rule = REGISTRY["retry-reused-id"]
    assert (r["id"], r["severity"], r["summary"], r["quote"], r["conformance"]) == (
        rule.id, rule.severity, rule.summary, rule.quote, rule.conformance)
    assert r["spec_url"].startswith("https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr")
    typo = teed["out"]["rule_typo"]
    assert typo.is_error and "retry-reused-id" in typo.content[0].text


def test_diff_and_stats_equal_the_command_line(teed, folder):
    a, b = str(folder / "a" / "sdk.jsonl"), str(folder / "gave_up.jsonl")
    assert teed["out"]["diff"].structured_content == cli_json("diff", a, b, "--format", "json")
    assert teed["out"]["stats"].structured_content == cli_json("stats", b, "--format", "json", "--filter", "tool:github.*")


def test_errors_are_tool_errors_that_say_why(teed):
    missing = teed["out"]["missing"]
    assert missing.is_error and "no recording matches 'nothing-like-this'" in missing.content[0].text
    bad = teed["out"]["bad_filter"]
    assert bad.is_error and "'tol:x'" in bad.content[0].text


def test_the_recordings_are_resources(teed, folder):
    uris = [str(r.uri) for r in teed["out"]["resources"]]
    assert uris == ["mrtr-recording:///a/sdk.jsonl", "mrtr-recording:///b/sdk.jsonl", "mrtr-recording:///gave_up.jsonl"]
    assert teed["out"]["resource"].contents[0].text == (folder / "a" / "sdk.jsonl").read_text()


def test_the_same_answers_without_the_tee(teed_runs, direct):
    teed = teed_runs["auto"]
    for key in ("check", "check_filtered", "chosen", "findings", "chain_by_id", "rule", "diff", "stats"):
        assert direct["out"][key].structured_content == teed["out"][key].structured_content, key
    assert [a.requested_schema for a in direct["asker"].asked] == [a.requested_schema for a in teed["asker"].asked]


def test_its_own_traffic_through_the_tee_has_no_error_and_no_warning(teed):
    r = CliRunner().invoke(main, ["check", str(teed["record"]), "--format", "json", "--fail-on", "warning"])
    report = json.loads(r.output)
    bad = [f for f in report["findings"] if f["severity"] != "info"]
    assert bad == [] and r.exit_code == 0
    chains = report["chains"]
    assert len(chains) >= 14 and all(c["outcome"] == "complete" for c in chains)
    asked = [c for c in chains if c["rounds"]]
    assert len(asked) == 3  # the three questions: two recordings, the same (declined), two chains
    if teed["mode"] == "auto":
        assert all(c["link"] == "state" and c["era"] == "modern" for c in asked)
    else:
        assert all(c["era"] == "legacy" for c in asked)


def test_a_folder_that_is_not_one_is_one_line_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["mcp", "--recordings", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "not a folder" in r.output
