"""`stats`: what each definition costs (bytes as offered, a token estimate, result bytes) and each
whole list, read from the recorded bytes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mrtr_inspect.cli import main
from tests.outputs.conftest import save
from tests.traffic import Traffic

# a tools/list result as a server may write it: spaces, non-ASCII, escapes, members in its own order
TOOLS_LINE = ('{"jsonrpc":"2.0","id":1,"result":{ "tools" : [ {"name":"add","description":"Adds \\u00e9 + é",'
              '"inputSchema":{"type":"object"}} ,\n{"name": "echo",  "inputSchema": {"type": "object"},'
              ' "description": "日本"}], "nextCursor": "p2", "ttlMs": 0, "cacheScope": "private"}}')
PAGE_2 = '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"z","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"private"}}'


def recording(tmp_path):
    t = Traffic()
    t.client(t.request("tools/list", {}, id=1))
    t.line("s2c", TOOLS_LINE.encode("utf-8"))
    t.client(t.request("tools/list", {"cursor": "p2"}, id=2))
    t.line("s2c", PAGE_2.encode("utf-8"))
    t.result(t.call("prompts/list", {}, id=3), {"prompts": [{"name": "p", "description": "é"}], "ttlMs": 0,
                                                "cacheScope": "private"})
    for text in ("a", "abcdef", "abc"):
        t.result(t.tool("add", {"a": text}), {"content": [{"type": "text", "text": text}]})
    return save(t.frames, tmp_path / "r.jsonl")


def test_definition_bytes_are_the_bytes_of_each_definition_as_recorded(tmp_path):
    rec = recording(tmp_path)
    r = CliRunner().invoke(main, ["stats", str(rec), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    by = {(o["kind"], o["name"]): o for o in doc["offered"]}
    raw = TOOLS_LINE.encode("utf-8")
    add = raw[raw.index(b'{"name":"add"'):raw.index(b"} ,\n") + 1]
    echo = raw[raw.index(b'{"name": "echo"'):raw.index(b'"}]') + 2]
    assert by["tool", "add"]["definition_bytes"] == len(add) == 79
    assert by["tool", "echo"]["definition_bytes"] == len(echo)
    assert by["tool", "z"]["definition_bytes"] == len(b'{"name":"z","inputSchema":{"type":"object"}}')
    assert by["prompt", "p"]["definition_bytes"] == len(b'{"name":"p","description":"\\u00e9"}')  # as tests.traffic wrote it
    assert by["tool", "add"]["tokens_estimate"] == 20  # ceil(79 / 4)
    assert "estimate" in doc["token_estimate"]
    # the results of add: the bytes of each result member, p50 and max
    sizes = sorted(len(json.dumps({"content": [{"type": "text", "text": t}], "resultType": "complete",
                                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server",
                                                                                  "version": "1.0"}}},
                                  separators=(",", ":"))) for t in ("a", "abcdef", "abc"))
    assert by["tool", "add"]["results"] == 3
    assert by["tool", "add"]["result_bytes"] == {"p50": sizes[1], "max": sizes[2]}
    assert by["tool", "echo"]["results"] == 0 and by["tool", "echo"]["result_bytes"] == {"p50": None, "max": None}
    # the whole tools/list: its two pages' result members
    page1 = raw[raw.index(b'{ "tools"'):-1]
    page2 = PAGE_2.encode()[PAGE_2.index('{"tools"'):-1]
    lists = {ls["method"]: ls for ls in doc["lists"]}
    assert lists["tools/list"] == {"server": "test-server", "method": "tools/list", "bytes": len(page1) + len(page2),
                                   "tokens_estimate": -(-(len(page1) + len(page2)) // 4), "items": 3, "pages": 2}


def test_stats_text_shows_the_costs(tmp_path):
    r = CliRunner().invoke(main, ["stats", str(recording(tmp_path))])
    assert r.exit_code == 0
    assert "what each definition costs" in r.stdout and "UTF-8 bytes / 4" in r.stdout
    assert "tools/list is" in r.stdout and "in 2 pages" in r.stdout
