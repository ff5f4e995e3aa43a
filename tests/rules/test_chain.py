"""RULES.md §4.4, the chain rules of rules/chain.py judged on answers: each fires on the traffic it
describes and stays quiet on the nearest traffic that is fine. (The rules of the stitcher's events
are tested with it, tests/core/test_chains.py; `server-rejected-own-state` in test_chain_errors.py.)"""

import pytest

from mrtr_inspect.adapters.offline import replay_outputs
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.rules import load_rules
from mrtr_inspect.rules.registry import REGISTRY
from tests.captures import ROOT, capture_frames, capture_names
from tests.core.pipeline import analyse
from tests.traffic import Traffic

RULE = "tool-result-missing-structured-content"

# --- tool-result-missing-structured-content (RULES.md §10.5) -----------------------------------------------

WEATHER = {"name": "weather", "inputSchema": {"type": "object"},
           "outputSchema": {"type": "object", "properties": {"t": {"type": "number"}}}}
PLAIN = {"name": "plain", "inputSchema": {"type": "object"}}


def tool_call(tool: str, result: dict, listed_first: bool = True):
    t = Traffic()
    if listed_first:
        lid = t.call("tools/list")
        t.result(lid, {"tools": [WEATHER, PLAIN], "ttlMs": 0, "cacheScope": "public"})
    rid = t.tool(tool)
    t.result(rid, result)
    return t.run()


def test_tool_result_missing_structured_content():
    [f] = tool_call("weather", {"content": [{"type": "text", "text": "{\"t\": 20}"}]}).of(
        RULE)
    assert "'weather'" in f.message and f.severity == "error"


def test_tool_result_missing_structured_content_near_miss():
    text = {"content": [{"type": "text", "text": "20"}]}
    assert RULE not in tool_call("weather", {**text, "structuredContent": {"t": 20}}).rules()
    assert RULE not in tool_call("weather", {**text, "isError": True}).rules()
    assert RULE not in tool_call("plain", text).rules()
    assert RULE not in tool_call("weather", text, listed_first=False).rules()



# --- real traffic ------------------------------------------------------------------------------------------


def _found(outs: list) -> list:
    return [o for o in outs if type(o) is Finding and (o.rule == RULE and o.severity != "info" or o.rule == "inspector-error")]


@pytest.mark.skipif(not capture_names(), reason="fixtures/captures not present")
@pytest.mark.parametrize("name", capture_names())
def test_sdk_captures_give_no_missing_structured_content(name):
    """The official SDKs talking to each other: their results carry what their tools declare."""
    assert not _found(analyse(capture_frames(name)))


SDK_RECORDINGS = sorted(str(p) for p in (ROOT / "fixtures").glob("test_sdk_*/*.jsonl"))


@pytest.mark.skipif(not SDK_RECORDINGS, reason="fixtures/test_sdk_* not present")
@pytest.mark.parametrize("path", SDK_RECORDINGS)
def test_sdk_recordings_give_no_missing_structured_content(path):
    assert not _found(list(replay_outputs([path])))


def test_the_rule_is_in_its_section_with_its_documentation():
    load_rules()
    r = REGISTRY[RULE]
    assert r.section == "4.4" and r.check is not None and r.doc and r.spec
    assert r.check.__module__ == "mrtr_inspect.rules.chain"
