"""How `replay verify` plays a recording: what it sends, when, and what it compares (a scripted peer
stands in for the live server)."""

from __future__ import annotations

import io
import json
import sys
import threading

from mrtr_inspect.core.messages import decode_message
from mrtr_inspect.replay.script import load_script
from mrtr_inspect.replay.verify import Peer, VerifyOptions, render, verify_script
from tests.traffic import ACCEPT, ELICIT, Traffic

from .conftest import cli, save


class ScriptedPeer(Peer):
    """Answers each request with `answer(request) -> result dict | None` (None: no answer yet)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.sent: list[dict] = []
        self.waiting: dict = {}
        self.lock = threading.Lock()

    def send(self, p, data, side) -> None:
        msg = json.loads(data)
        with self.lock:
            self.sent.append(msg)
            self.waiting[json.dumps(msg["id"])] = p
        result = self.answer(msg, self)
        if result is not None:
            self.reply(msg["id"], result)

    def reply(self, rid, result: dict) -> None:
        with self.lock:
            p = self.waiting.pop(json.dumps(rid))
        p.answered(decode_message(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()))

    def notify(self, data, side) -> None:
        with self.lock:
            self.sent.append(json.loads(data))
        self.answer(json.loads(data), self)

    def close(self) -> None:
        pass


def play(tmp_path, t: Traffic, answer, **options):
    script = load_script(save(t.frames, tmp_path / "r.jsonl"))
    peer = ScriptedPeer(answer)
    result = verify_script(script, lambda sid, log: peer, VerifyOptions(timeout=10, **options))
    out = io.StringIO()
    render(result, out, "scripted")
    return result, peer, out.getvalue()


def deploy_recording() -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="recorded-state")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="recorded-state")
    t.result(b, {"content": [{"type": "text", "text": "deployed"}]})
    return t


def test_the_retry_carries_the_live_state_and_the_recorded_answers(tmp_path):
    def server(msg, peer):
        if "requestState" not in msg["params"]:
            return {"resultType": "input_required", "inputRequests": {"confirm": ELICIT}, "requestState": "live-state",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}
        assert msg["params"]["requestState"] == "live-state"
        return {"resultType": "complete", "content": [{"type": "text", "text": "deployed"}],
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}

    result, peer, out = play(tmp_path, deploy_recording(), server)
    assert [p.verdict for p in result.played] == ["same", "same"]
    assert peer.sent[1]["params"]["inputResponses"] == {"confirm": ACCEPT}
    assert [m["id"] for m in peer.sent] == [1, 2]
    assert "[sent with the live requestState]" in out


def test_a_round_the_live_server_does_not_open_is_not_sent(tmp_path):
    def server(msg, peer):
        return {"resultType": "complete", "content": [{"type": "text", "text": "deployed at once"}]}

    result, peer, out = play(tmp_path, deploy_recording(), server)
    assert [p.verdict for p in result.played] == ["differs", "skipped"]
    assert len(peer.sent) == 1
    assert "the live server did not ask for round 1 (it answered resultType 'complete')" in out
    assert 'result.resultType: recorded "input_required", live "complete"' in out
    assert out.splitlines()[-1] == "0 same, 1 differ, 1 skipped, 0 failed"


def test_overlapping_requests_overlap_again_and_a_cancellation_names_the_live_id(tmp_path):
    """B was sent before A was answered in the recording: B goes without waiting for A (the peer
    answers A only once B has come). The client then cancelled A: the live id is named."""
    t = Traffic()
    a = t.tool("slow", {})
    b = t.tool("fast", {})
    t.result(b, {"content": []})
    t.notify("notifications/cancelled", {"requestId": a})
    seen = []

    def server(msg, peer):
        seen.append(msg.get("method"))
        if msg.get("method") == "tools/call" and msg["params"]["name"] == "fast":
            return {"resultType": "complete", "content": [], "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}
        return None

    result, peer, out = play(tmp_path, t, server)
    assert seen == ["tools/call", "tools/call", "notifications/cancelled"]
    assert peer.sent[2]["params"]["requestId"] == peer.sent[0]["id"]
    assert [p.verdict for p in result.played] == ["same", "same"]  # A was answered in neither


def test_ignored_paths_and_times_do_not_count(tmp_path):
    t = Traffic()
    a = t.tool("status", {})
    t.result(a, {"content": [], "createdAt": "2026-01-01T00:00:00Z", "build": "abc"})

    def server(msg, peer):
        return {"resultType": "complete", "content": [], "createdAt": "2026-12-31T23:59:59Z", "build": "def",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}

    assert play(tmp_path, t, server)[0].counts["differs"] == 1
    assert play(tmp_path, t, server, ignore=("result.build",))[0].ok


def test_each_recorded_session_gets_a_server_of_its_own(tmp_path):
    first, second = Traffic(session="s1"), Traffic(session="s2", start=2000.0)
    for t in (first, second):
        a = t.tool("deploy", {})
        t.result(a, {"content": []})
    script = load_script(save(first.frames + second.frames, tmp_path / "r.jsonl"))
    peers: list[ScriptedPeer] = []

    def make_peer(sid, log):
        peers.append(ScriptedPeer(lambda msg, peer: {"resultType": "complete", "content": [], "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}))
        return peers[-1]

    result = verify_script(script, make_peer, VerifyOptions(timeout=10))
    assert result.ok and [len(p.sent) for p in peers] == [1, 1]
    assert [p.sent[0]["id"] for p in peers] == [1, 2]  # new ids, never reused across sessions


LEGACY_SERVER = """
import json, sys
call = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": "srv-9", "method": "elicitation/create",
                  "params": {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {}}}}), flush=True)
answer = json.loads(sys.stdin.readline())
assert answer["id"] == "srv-9", answer
print(json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": {"content": [{"type": "text", "text": answer["result"]["action"]}]}}), flush=True)
"""


def test_a_server_request_of_the_legacy_era_gets_the_recorded_answer(tmp_path):
    """Over stdio a 2025-11-25 server asks the client (elicitation/create as a request of its own):
    verify answers with what the recorded client answered, under the live request's id."""
    t = Traffic()
    a = t.call("tools/call", {"name": "deploy", "arguments": {}}, with_meta=False)
    t.line("s2c", {"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
                   "params": {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {}}}})
    t.line("c2s", {"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept"}})
    t.answer({"jsonrpc": "2.0", "id": a, "result": {"content": [{"type": "text", "text": "accept"}]}})
    server = tmp_path / "legacy_server.py"
    server.write_text(LEGACY_SERVER)
    r = cli("replay", "verify", str(save(t.frames, tmp_path / "r.jsonl")), "--", sys.executable, str(server))
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert r.stdout.decode().splitlines()[-1] == "1 same, 0 differ, 0 skipped, 0 failed"


def _progress_recording() -> Traffic:
    t = Traffic()
    a = t.tool("build", {}, _meta={"progressToken": "p"})
    for i in range(3):
        t.notify("notifications/progress", {"progressToken": "p", "progress": i + 1, "message": f"step {i}"}, "s2c")
    t.result(a, {"content": []})
    return t


def _progress_server(n: int, word: str):
    def server(msg, peer):
        p = peer.waiting[json.dumps(msg["id"])]
        for i in range(n):
            note = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "p", "progress": i + 1, "message": f"{word} {i}"}}
            p.messages.append(decode_message(json.dumps(note).encode()))
        return {"resultType": "complete", "content": [],
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0"}}}
    return server


def test_notifications_ignored_by_method_or_by_the_shown_path(tmp_path):
    """A server whose progress is time-based sends as many notifications as it took steps: `--ignore
    notifications/progress` leaves them out; `notifications.*.params.message` (the path a difference
    is shown with, any index) leaves that member out of each. Near misses: with neither, both
    differences count; the count still counts when only the message is ignored."""
    t = _progress_recording()
    assert play(tmp_path, t, _progress_server(3, "step"))[0].ok  # the recorded server again: same
    fewer, reworded = _progress_server(1, "step"), _progress_server(3, "phase")
    result, _, out = play(tmp_path, t, fewer)
    assert result.counts["differs"] == 1 and "notifications (methods)" in out
    assert play(tmp_path, t, fewer, ignore=("notifications/progress",))[0].ok
    assert not play(tmp_path, t, fewer, ignore=("notifications.*.params.message",))[0].ok  # the count differs
    result, _, out = play(tmp_path, t, reworded)
    assert result.counts["differs"] == 1 and "notifications[0].params.message" in out
    assert play(tmp_path, t, reworded, ignore=("notifications.*.params.message",))[0].ok
    assert play(tmp_path, t, reworded, ignore=("params.message",))[0].ok  # each message's own path, as before
    assert not play(tmp_path, t, reworded, ignore=("notifications/message",))[0].ok  # another method
