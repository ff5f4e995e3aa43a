"""RULES.md §10.8 through the real proxy: it sees every client from its start and says so in the
recording's header (`"live": true`), so a first request carrying `inputResponses` is
`input-responses-unsolicited`, as on stdio, and `check` of the recording says what the live session
said. Near miss: the same recording without the declaration (what an import, or an older version,
writes) leaves the first request unconfirmed (`capture-incomplete`)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mrtr_inspect.cli import main
from mrtr_inspect.core.events import SessionStart
from tests.e2e.test_http_proxy import DONE, MCP_HEADERS, frames, json_response, post, proxies, report, upstreams

__all__ = ["proxies", "upstreams"]  # the fixtures

ANSWERED = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy","arguments":{},'
            b'"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}},'
            b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}')


def _verdicts(findings: list[dict]) -> list[tuple[str, str]]:
    wanted = {"input-responses-unsolicited", "capture-incomplete"}
    return sorted((f["rule"], f["severity"]) for f in findings if f["rule"] in wanted)


def _check(path) -> dict:
    r = CliRunner().invoke(main, ["check", str(path), "--format", "json", "--fail-on", "never"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_the_proxy_judges_a_first_request_with_answers_as_stdio_does(proxies, upstreams, tmp_path):
    up = upstreams(lambda req, write: write(json_response(DONE)))
    rec, rep = tmp_path / "s.jsonl", tmp_path / "r.json"
    p = proxies(up.url, "--record", str(rec), "--report", str(rep), "--quiet").ready()
    assert post(p.url, ANSWERED, MCP_HEADERS)[2] == DONE
    assert p.stop() == 0
    [start] = [f for f in frames(rec) if type(f) is SessionStart]
    assert start.info["live"] is True
    live = report(rep)["findings"]
    assert _verdicts(live) == [("input-responses-unsolicited", "warning")]
    assert _check(rec)["findings"] == live  # the recording, checked later, says what the live session said

    # near miss: the same recording, its header not declaring a live capture
    lines = rec.read_bytes().split(b"\n")
    head = json.loads(lines[0])
    del head["live"]
    undeclared = tmp_path / "undeclared.jsonl"
    undeclared.write_bytes(b"\n".join([json.dumps(head).encode()] + lines[1:]))
    assert _verdicts(_check(undeclared)["findings"]) == [("capture-incomplete", "info")]
