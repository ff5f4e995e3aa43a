"""The folder the MCP server serves (mrtr_inspect/agent/recordings.py): which files are recordings,
how a name given by an agent is matched, and that nothing outside the folder can be named."""

from __future__ import annotations

import os

from mrtr_inspect.agent.recordings import Folder

HEADER = b'{"mrtr-inspect":"recording","version":1,"session":"abc","transport":"stdio","t":1.0,"command":["srv"]}\n'


def make(root, *names):
    for n in names:
        p = root / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(HEADER)


def test_scan_lists_jsonl_files_under_the_folder(tmp_path):
    make(tmp_path, "a/deploy.jsonl", "b/deploy.jsonl", "top.jsonl", ".hidden/x.jsonl", "a/.y.jsonl", "a/notes.txt")
    assert [r.name for r in Folder(tmp_path).scan()] == ["a/deploy.jsonl", "b/deploy.jsonl", "top.jsonl"]
    assert Folder(tmp_path / "missing").scan() == []


def test_a_symlinked_folder_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    make(outside, "secret.jsonl")
    (tmp_path / "recs").mkdir()
    os.symlink(outside, tmp_path / "recs" / "link")
    assert Folder(tmp_path / "recs").scan() == []


def test_names_match_exactly_then_by_file_name_then_by_part(tmp_path):
    make(tmp_path, "a/deploy.jsonl", "b/deploy.jsonl", "a/deploy-old.jsonl", "Top.jsonl")
    f = Folder(tmp_path)
    names = lambda n: [r.name for r in f.match(n)]  # noqa: E731
    assert names("a/deploy") == names("a/deploy.jsonl") == names("./a/deploy.jsonl") == ["a/deploy.jsonl"]
    assert names("deploy") == ["a/deploy.jsonl", "b/deploy.jsonl"]  # two: the server asks
    assert names("old") == ["a/deploy-old.jsonl"]
    assert names("top") == ["Top.jsonl"]  # a part, regardless of case
    assert names(str(tmp_path / "b" / "deploy.jsonl")) == ["b/deploy.jsonl"]
    assert names("nothing") == [] and names("") == []


def test_near_miss_nothing_outside_the_folder_can_be_named(tmp_path):
    make(tmp_path, "recs/a.jsonl", "elsewhere/a.jsonl")
    f = Folder(tmp_path / "recs")
    assert f.match(str(tmp_path / "elsewhere" / "a.jsonl")) == []
    assert [r.name for r in f.match("../elsewhere/a.jsonl")] == []
    assert f.by_uri("file://" + str(tmp_path / "elsewhere" / "a.jsonl")) is None
    assert f.by_uri("mrtr-recording:///../elsewhere/a.jsonl") is None


def test_the_resource_uri_names_the_recording_back(tmp_path):
    make(tmp_path, "with space/and#hash.jsonl")
    f = Folder(tmp_path)
    (rec,) = f.scan()
    assert rec.uri == "mrtr-recording:///with%20space/and%23hash.jsonl"
    assert f.by_uri(rec.uri) == rec
    d = rec.describe()
    assert d["recording"] and d["transport"] == "stdio" and d["command"] == ["srv"] and d["bytes"] == len(HEADER)
