"""The kinds of `diff` the SDK runs of test_diff.py do not show (the server's declaration, prompts,
resources, a request's arguments), on HTTP recordings written from tests.traffic; ids, times and
session ids differ between the two and are not changes."""

from __future__ import annotations

from mrtr_inspect.diff import compare, load_side
from tests.outputs.conftest import save
from tests.traffic import Traffic


def _recording(path, *, start: float, first_id: int, session: str, changed: bool):
    t = Traffic("http", session=session, start=start)
    ids = iter(range(first_id, first_id + 100))
    caps = {"tools": {}, "prompts": {}, **({"logging": {}} if changed else {})}
    t.result(t.call("server/discover", {}, id=next(ids)), {"capabilities": caps, "supportedVersions": ["2026-07-28"]})
    prompts = [{"name": "greet", "description": "Say hello" + (" politely" if changed else "")}]
    if changed:
        prompts.append({"name": "farewell"})
    t.result(t.call("prompts/list", {}, id=next(ids)), {"prompts": prompts})
    resources = [] if changed else [{"uri": "file:///a.txt", "name": "a"}]
    t.result(t.call("resources/list", {}, id=next(ids)), {"resources": resources})
    t.result(t.call("tools/list", {}, id=next(ids)), {"tools": [{"name": "deploy", "inputSchema": {"type": "object"}}]})
    t.tick(0.5 if changed else 0.01)
    t.result(t.tool("deploy", {"env": "staging" if changed else "prod"}, id=next(ids)), {"content": []})
    t.result(t.call("prompts/get", {"name": "greet"}, id=next(ids)),
             {"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}]})
    return save(t.frames, path)


def test_server_prompts_resources_and_arguments(tmp_path):
    a = _recording(tmp_path / "a.jsonl", start=1000.0, first_id=1, session="s-a", changed=False)
    b = _recording(tmp_path / "b.jsonl", start=5000.0, first_id=40, session="s-b", changed=True)
    changes, notes = compare(load_side(str(a)), load_side(str(b)))
    assert notes == []
    found = {(c.kind, c.target) for c in changes}
    assert found == {("server-changed", None), ("prompt-changed", "greet"), ("prompt-added", "farewell"),
                     ("resource-removed", "file:///a.txt"), ("request-changed", "deploy")}
    by = {c.kind: c for c in changes}
    assert [d.field for d in by["server-changed"].differences] == ["capabilities.logging"]
    assert [(d.field, d.a, d.b) for d in by["request-changed"].differences] == [("arguments.env", "prod", "staging")]


def test_the_same_traffic_at_other_times_with_other_ids_is_the_same(tmp_path):
    a = _recording(tmp_path / "a.jsonl", start=1000.0, first_id=1, session="s-a", changed=False)
    b = _recording(tmp_path / "b.jsonl", start=9000.0, first_id=70, session="s-z", changed=False)
    assert compare(load_side(str(a)), load_side(str(b))) == ([], [])


def test_a_kind_listed_on_one_side_only_is_a_note_not_a_change(tmp_path):
    a = _recording(tmp_path / "a.jsonl", start=1000.0, first_id=1, session="s-a", changed=False)
    t = Traffic("http", session="s-b", start=2000.0)
    t.result(t.tool("deploy", {"env": "prod"}, id=1), {"content": []})
    b = save(t.frames, tmp_path / "b.jsonl")
    changes, notes = compare(load_side(str(a)), load_side(str(b)))
    assert "tools: only A listed them; not compared" in notes
    assert "the server's declaration (server/discover, initialize): only A recorded it; not compared" in notes
    assert {c.kind for c in changes} == {"chain-removed"}  # prompts/get greet is not in B
