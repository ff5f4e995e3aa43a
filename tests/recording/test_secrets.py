"""What redaction missed (issue 14, item 3): a redaction path that matched nothing is said, and a
value that looks like a secret is noted with the path to redact; ordinary values are not."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_inspect.core.messages import decode_message
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.secrets import SecretScan, entropy, looks_secret

ROOT = Path(__file__).resolve().parents[2]

SECRETS = {
    "sk-proj-4fJ9xQ2mZ7pL1sV8cN3bT6yW0rK5hD": "sk-",
    "sk-ant-api03-Zx81LmQpRt5YvWn2Kc7HsJd4": "sk-",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a": "GitHub",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv": "GitHub",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp": "Slack",
    "AKIAIOSFODNN7EXAMPLE": "AWS",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY": "Google",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U": "JWT",
    "glpat-xK3mP9qR2sT5vW8yZ1aB": "GitLab",
    "q8Zr4LmX2vB9nK7tP1wD5sF3hJ6gC0yE": "high-entropy",  # 32 random base62 characters
}
ORDINARY = [
    "deploy", "production", "hello world, this is a sentence", "0f8fad5b-d9cb-469f-a165-70867728950e",  # a UUID
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a SHA-1 digest (hex)
    "v1.0.0", "2026-12-02T05:37:29Z", "/home/user/project/src/main.py", "file:///srv/project",
    "sk-learn", "getUserAccountSettings2", "AAAAAAAAAAAAAAAAAAAAAAAA1", "ghp_short", "[redacted:0123456789ab]",
]


@pytest.mark.parametrize("value", list(SECRETS))
def test_values_that_look_like_secrets_are_flagged(value):
    what = looks_secret(value)
    assert what is not None and SECRETS[value].lower() in what.lower()


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_words_uuids_and_digests_are_not_flagged(value):
    assert looks_secret(value) is None, (value, entropy(value))


def msg(arguments: dict, method: str = "tools/call", **params) -> object:
    return decode_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                      "params": {"name": "deploy", "arguments": arguments, **params}}).encode())


def test_the_scan_names_the_path_to_redact_and_the_typo_with_its_likely_meaning():
    r = Redactor(b"k", paths=["params.arguments.deploykey"])
    scan = SecretScan()
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "deploy", "arguments": {
        "env": "prod", "deploy_key": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "items": [{"k": "q8Zr4LmX2vB9nK7tP1wD5sF3hJ6gC0yE"}]}}})
    scan.message(decode_message(r.redact_json(raw.encode())))
    assert scan.lines(r, "--redact-path") == [
        "warning: redaction path params.arguments.deploykey matched no string value: nothing was redacted there "
        "(did you mean params.arguments.deploy_key?)",
        "note: params.arguments.deploy_key of tools/call deploy looks like a GitHub token and is not redacted: "
        "redact it (--redact-path params.arguments.deploy_key)",
        "note: params.arguments.items.*.k of tools/call deploy looks like a high-entropy token and is not redacted: "
        "redact it (--redact-path params.arguments.items.*.k)"]


def test_nothing_is_said_when_the_paths_matched_and_nothing_looks_secret():
    r = Redactor(b"k", paths=["params.arguments.deploy_key"])
    scan = SecretScan()
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "deploy", "arguments": {
        "env": "prod", "deploy_key": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "id": "0f8fad5b-d9cb-469f-a165-70867728950e"}}})
    scan.message(decode_message(r.redact_json(raw.encode())))
    assert scan.lines(r) == []  # redacted: a placeholder does not look secret; a UUID neither
    scan.message(msg({"token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a"}, method="notifications/x"))
    assert scan.lines(r) == []  # only what a client sends as arguments or answers is scanned


def test_answers_in_input_responses_are_scanned_too():
    scan = SecretScan()
    scan.message(msg({}, inputResponses={"login": {"action": "accept", "content": {"pat": "glpat-xK3mP9qR2sT5vW8yZ1aB"}}}))
    assert scan.lines(Redactor(b"k")) == [
        "note: params.inputResponses.*.content.pat of tools/call deploy looks like a GitLab token and is not "
        "redacted: redact it (redact_paths params.inputResponses.*.content.pat)"]


def _recording(tmp_path: Path) -> Path:
    from mrtr_inspect.recording.writer import RecordingWriter
    from mrtr_inspect.core.events import StdioLine

    path = tmp_path / "r.jsonl"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "deploy", "arguments": {"env": "prod", "deploy_key": "sk-proj-4fJ9xQ2mZ7pL1sV8cN3bT6yW0rK5hD"}}}
    with RecordingWriter(path, "stdio", {"command": ["srv"]}, Redactor(b"k"), start_time=1.0) as w:
        w.write(StdioLine(1.0, w.session, "c2s", json.dumps(body).encode()))
        w.write(StdioLine(1.1, w.session, "s2c", b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'))
    return path


@pytest.mark.parametrize("to", ["fixture", "html"])
def test_export_says_a_path_that_matched_nothing_and_the_secret_left(tmp_path, to):
    rec = _recording(tmp_path)
    out = tmp_path / f"out.{to}"
    run = lambda *a: subprocess.run([sys.executable, "-m", "mrtr_inspect", "export", str(rec), "--to", to, "--output",
                                     str(out), *a], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                    env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MRTR_INSPECT_REDACTION_KEY": "k",
                                         "HOME": str(tmp_path)})
    typo = run("--redact-path", "params.arguments.deploykey")
    assert typo.returncode == 0, typo.stderr
    assert ("mrtr-inspect: warning: redaction path params.arguments.deploykey matched no string value: nothing was "
            "redacted there (did you mean params.arguments.deploy_key?)") in typo.stderr
    assert ("note: params.arguments.deploy_key of tools/call deploy looks like an OpenAI/Anthropic-style key (sk-…) "
            "and is not redacted: redact it (--redact-path params.arguments.deploy_key)") in typo.stderr
    assert b"sk-proj-4fJ9" in out.read_bytes()  # what the warning is about
    right = run("--redact-path", "params.arguments.deploy_key")
    assert right.returncode == 0 and "warning" not in right.stderr and "note:" not in right.stderr, right.stderr
    assert b"sk-proj-4fJ9" not in out.read_bytes() and stat.S_IMODE(out.stat().st_mode) == 0o600
