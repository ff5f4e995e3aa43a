"""What `replay serve` answers, request by request (no I/O: recordings built with tests.traffic)."""

from __future__ import annotations

import json

import pytest

from mrtr_inspect.replay.matching import parse_paths, strip_paths
from mrtr_inspect.replay.script import load_script
from mrtr_inspect.replay.serve import MISS_CODE, Replayer, ServeOptions
from tests.traffic import ACCEPT, ELICIT, Traffic, meta

from .conftest import save


def replayer(tmp_path, t: Traffic, **options) -> Replayer:
    return Replayer(load_script(save(t.frames, tmp_path / "r.jsonl")), ServeOptions(**options))


def request(method: str, params: dict, id=100, **meta_extra) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": method,
                       "params": {**params, "_meta": meta(**meta_extra)}}).encode()


def tool(name: str, arguments: dict, id=100, **params) -> bytes:
    return request("tools/call", {"name": name, "arguments": arguments, **params}, id)


def sent(answer) -> list[dict]:
    return [json.loads(m) for _, m, _ in answer.items if m is not None]


def deploy(t: Traffic, env: str, state: str, text: str) -> None:
    a = t.tool("deploy", {"env": env})
    t.irr(a, {"confirm": ELICIT}, state=state)
    b = t.tool("deploy", {"env": env}, inputResponses={"confirm": ACCEPT}, requestState=state)
    t.result(b, {"content": [{"type": "text", "text": text}]})


def test_the_live_id_replaces_the_recorded_one_and_nothing_else(tmp_path):
    t = Traffic()
    t.tool("deploy", {"env": "prod"})
    recorded = (b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s\\/1",'
                b'"inputRequests":{"confirm":' + json.dumps(ELICIT).encode() + b'}}}')
    t.answer(recorded)
    ans = replayer(tmp_path, t).answer(tool("deploy", {"env": "prod"}, id="live-7"))
    assert [m for _, m, _ in ans.items] == [recorded.replace(b'"id":1', b'"id":"live-7"')]


def test_a_retry_is_served_by_the_chain_whose_state_it_echoes(tmp_path):
    t = Traffic()
    deploy(t, "prod", "s1", "first")
    deploy(t, "prod", "s2", "second")
    r = replayer(tmp_path, t)
    retry = {"inputResponses": {"confirm": ACCEPT}}
    assert sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s2", **retry)))[0]["result"]["content"][0][
        "text"] == "second"
    assert sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s1", **retry)))[0]["result"]["content"][0][
        "text"] == "first"
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, id=9, requestState="s3", **retry)))
    assert err["id"] == 9 and err["error"]["code"] == MISS_CODE
    assert ("closest: tools/call deploy id=2 (#2, chain c1, retry of round 1); "
            'differs in params.requestState: recorded "s1", live "s3"') in err["error"]["message"]
    assert r.misses[0]["differences"][0]["field"] == "params.requestState"


def test_an_ignored_request_state_is_not_compared(tmp_path):
    """`--ignore params.requestState` leaves the state out on both sides: a retry that echoes the
    served state, or one that alters it, is served (each was a miss that called the live state
    absent). Near miss: ignoring another path still compares the state."""
    t = Traffic()
    deploy(t, "prod", "s1", "first")
    deploy(t, "prod", "s2", "second")
    retry = {"inputResponses": {"confirm": ACCEPT}}
    r = replayer(tmp_path, t, ignore=("params.requestState",))
    for state, text in (("s1", "first"), ("altered", "second")):
        [ok] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState=state, **retry)))
        assert ok["result"]["content"][0]["text"] == text, ok
    assert r.misses == []
    r = replayer(tmp_path, t, ignore=("params.arguments.nonce",))
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState="altered", **retry)))
    assert 'differs in params.requestState: recorded "s1", live "altered"' in err["error"]["message"]


@pytest.mark.parametrize("state, shown", [(42, "live 42"), (None, "live null"), ({"s": 1}, 'live {"s":1}')])
def test_a_request_state_that_is_present_is_never_called_absent(tmp_path, state, shown):
    """A live requestState that is not a string is shown as it is (it was `live absent`); near miss:
    a retry without one is `live absent`."""
    t = Traffic()
    deploy(t, "prod", "s1", "first")
    retry = {"inputResponses": {"confirm": ACCEPT}}
    r = replayer(tmp_path, t)
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState=state, **retry)))
    assert f'differs in params.requestState: recorded "s1", {shown}' in err["error"]["message"]
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, **retry)))
    assert 'differs in params.requestState: recorded "s1", live absent' in err["error"]["message"]


def test_input_responses_that_are_present_are_never_called_absent(tmp_path):
    """inputResponses that are not an object are shown as they are (they were `live absent`); near
    miss: the object with the same keys is served."""
    t = Traffic()
    deploy(t, "prod", "s1", "first")
    r = replayer(tmp_path, t)
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s1", inputResponses=["confirm"])))
    assert 'params.inputResponses (keys): recorded ["confirm"], live ["confirm"]' in err["error"]["message"]
    [ok] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s1", inputResponses={"confirm": ACCEPT})))
    assert ok["result"]["content"][0]["text"] == "first"


def test_input_responses_match_by_their_keys_not_the_answers(tmp_path):
    t = Traffic()
    deploy(t, "prod", "s1", "done")
    r = replayer(tmp_path, t, repeats=True)
    declined = {"confirm": {"action": "decline"}}
    assert "result" in sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s1", inputResponses=declined)))[0]
    other = {"approval": ACCEPT}
    [err] = sent(r.answer(tool("deploy", {"env": "prod"}, requestState="s1", inputResponses=other)))
    assert ('params.inputResponses (keys): recorded ["confirm"], live ["approval"]' in err["error"]["message"])


def test_meta_and_ids_do_not_count_but_arguments_do(tmp_path):
    t = Traffic()
    a = t.tool("deploy", {"env": "prod", "replicas": 2})
    t.result(a, {"content": []})
    r = replayer(tmp_path, t, repeats=True)
    live = request("tools/call", {"name": "deploy", "arguments": {"replicas": 2.0, "env": "prod"}}, id="x",
                   progressToken="p", traceparent="00-1-2-01")
    assert sent(r.answer(live))[0]["id"] == "x"
    [err] = sent(r.answer(tool("deploy", {"env": "prod", "replicas": 3})))
    assert "closest: tools/call deploy id=1 (#0, chain c1); differs in params.arguments.replicas: recorded 2, live 3" \
           in err["error"]["message"]


def test_ignored_paths_are_left_out_of_matching(tmp_path):
    t = Traffic()
    a = t.tool("deploy", {"env": "prod", "nonce": "n1"})
    t.result(a, {"content": []})
    live = tool("deploy", {"env": "prod", "nonce": "n2"})
    assert "error" in sent(replayer(tmp_path, t).answer(live))[0]
    assert "result" in sent(replayer(tmp_path, t, ignore=("params.arguments.nonce",)).answer(live))[0]


def test_order_any_strict_and_repeats(tmp_path):
    t = Traffic()
    for name in ("a", "b"):
        x = t.tool(name, {})
        t.result(x, {"content": [{"type": "text", "text": name}]})
    any_order = replayer(tmp_path, t)
    assert "result" in sent(any_order.answer(tool("b", {})))[0]
    assert "result" in sent(any_order.answer(tool("a", {})))[0]
    [again] = sent(any_order.answer(tool("a", {})))
    assert "it was served already (allow repeats to serve it again)" in again["error"]["message"]
    strict = replayer(tmp_path, t, order="strict")
    [err] = sent(strict.answer(tool("b", {})))
    assert "closest: tools/call a id=1" in err["error"]["message"] and "strict order" in err["error"]["message"]
    assert "result" in sent(strict.answer(tool("a", {})))[0]
    assert "result" in sent(strict.answer(tool("b", {})))[0]
    [done] = sent(strict.answer(tool("b", {})))
    assert "the recording has no request left to serve" in done["error"]["message"]
    repeats = replayer(tmp_path, t, repeats=True)
    assert all("result" in sent(repeats.answer(tool("a", {})))[0] for _ in range(3))
    assert (repeats.served, repeats.misses) == (3, [])


def test_progress_goes_to_the_live_token_or_not_at_all(tmp_path):
    t = Traffic()
    a = t.call("tools/call", {"name": "slow", "arguments": {}}, progressToken=1)
    t.notify("notifications/progress", {"progressToken": 1, "progress": 1}, direction="s2c")
    t.notify("notifications/message", {"level": "info", "data": "working"}, direction="s2c")
    t.result(a, {"content": []})
    r = replayer(tmp_path, t, repeats=True)
    with_token = sent(r.answer(request("tools/call", {"name": "slow", "arguments": {}}, id=5, progressToken="tok")))
    assert [m.get("method") for m in with_token] == ["notifications/progress", "notifications/message", None]
    assert with_token[0]["params"]["progressToken"] == "tok" and with_token[2]["id"] == 5
    without = sent(r.answer(request("tools/call", {"name": "slow", "arguments": {}}, id=6)))
    assert [m.get("method") for m in without] == ["notifications/message", None]


def test_what_takes_no_recorded_answer(tmp_path):
    t = Traffic()
    a = t.tool("deploy", {})
    t.result(a, {"content": []})
    r = replayer(tmp_path, t)
    assert r.answer(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    assert r.answer(b'{"jsonrpc":"2.0","id":3,"result":{}}') is None
    assert sent(r.answer(request("ping", {}, id=4))) == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    bad = r.answer(b'{"jsonrpc":"2.0","id":')
    assert bad.status == 400 and sent(bad)[0]["error"]["code"] == -32600
    assert (r.served, r.synthesized, len(r.misses)) == (0, 1, 1)


def test_http_status_and_headers_are_replayed_without_framing_ones(tmp_path):
    t = Traffic("http")
    a = t.tool("deploy", {})
    t.error(a, -32602, "Invalid or expired requestState", status=400,
            headers=(("content-type", "application/json"), ("date", "Mon"), ("content-length", "99"),
                     ("mcp-session-id", "abc")))
    ans = replayer(tmp_path, t).answer(tool("deploy", {}), "/mcp")
    assert ans.status == 400 and not ans.stream
    assert ans.headers == (("content-type", "application/json"), ("mcp-session-id", "abc"))
    [err] = sent(replayer(tmp_path, t).answer(tool("deploy", {}), "/other"))
    assert 'path: recorded "/mcp", live "/other"' in err["error"]["message"]


@pytest.mark.parametrize("pattern, kept", [
    ("result._meta", {"result": {"a": 1}}),
    ("result._meta.io.modelcontextprotocol/serverInfo.version", {"result": {"a": 1, "_meta": {
        "io.modelcontextprotocol/serverInfo": {"name": "s"}}}}),
    ("**.version", {"result": {"a": 1, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}}}}),
    ("result.*", {"result": {}}),
])
def test_paths(pattern, kept):
    value = {"result": {"a": 1, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}}}
    assert strip_paths(value, parse_paths([pattern])) == kept


def unanswered_recording() -> Traffic:
    """`slow` was never answered (the server died; progress came first); `stuck` the client cancelled."""
    t = Traffic()
    a = t.call("tools/call", {"name": "stuck", "arguments": {}})
    t.notify("notifications/cancelled", {"requestId": a})
    t.call("tools/call", {"name": "slow", "arguments": {}}, progressToken=1)
    t.notify("notifications/progress", {"progressToken": 1, "progress": 1}, direction="s2c")
    t.close()
    return t


def test_a_request_the_recorded_server_never_answered_gets_the_replays_own_error(tmp_path):
    """It was served by sending nothing (a client waited for ever, 0 misses): now what was recorded
    for it, then an error of the replay's own, counted as a miss, and a note at load. Near miss: a
    request the recorded client cancelled is served as recorded, with no response and no miss."""
    r = replayer(tmp_path, unanswered_recording())
    assert r.script.note_lines() == [f"{r.script.path}: tools/call slow id=2 (#2, chain c2) has no recorded response "
                                     "(the recorded server never answered it)"]
    ans = r.answer(request("tools/call", {"name": "slow", "arguments": {}}, id=7, progressToken="p"))
    progress, err = sent(ans)
    assert progress["params"]["progressToken"] == "p"
    assert err["id"] == 7 and err["error"]["code"] == MISS_CODE
    assert err["error"]["message"] == ("mrtr-inspect replay: the recording has no response to tools/call slow id=2 "
                                       "(#2, chain c2): the recorded server never answered it")
    assert ans.stream and ans.status == 200
    assert [m["closest_message"] for m in r.misses] == [2] and r.served == 0
    assert sent(r.answer(tool("stuck", {}, id=8))) == []
    assert r.served == 1 and len(r.misses) == 1


def test_a_second_server_discover_says_what_to_do(tmp_path):
    """A second client session against a one-session recording: the miss on server/discover says
    how to serve it again, and the initialize the client falls back to says why it came (both misses
    read as two bugs). Near miss: any other request served already keeps the plain reason."""
    t = Traffic()
    d = t.call("server/discover", {})
    t.result(d, {"supportedVersions": ["2026-07-28"]}, result_type=None)
    a = t.tool("a", {})
    t.result(a, {"content": []})
    r = replayer(tmp_path, t)
    assert "result" in sent(r.answer(request("server/discover", {}, id=1)))[0]
    assert "result" in sent(r.answer(tool("a", {}, id=2)))[0]
    [again] = sent(r.answer(request("server/discover", {}, id=3)))
    assert again["error"]["message"].endswith(
        "it was served already (allow repeats to serve it again); a second client session? Each one begins with "
        "server/discover: --allow-repeats (allow_repeats=True in the pytest plugin) serves it again, or record "
        "both sessions. A client given this error may fall back to initialize, a second miss")
    [legacy] = sent(r.answer(request("initialize", {"protocolVersion": "2025-11-25"}, id=4)))
    assert legacy["error"]["message"].endswith(
        "the recorded client began with server/discover, not initialize: a client falls back to initialize when "
        "server/discover fails (see the miss before this one)")
    [tool_again] = sent(r.answer(tool("a", {}, id=5)))
    assert tool_again["error"]["message"].endswith("it was served already (allow repeats to serve it again)")
    [other] = sent(r.answer(tool("b", {}, id=6)))
    assert "server/discover" not in other["error"]["message"]


def test_a_redacted_argument_matches_the_secret_it_stands_for_and_only_it(tmp_path):
    """A recording made with `redact_paths` holds placeholders where the secrets were; serve redacts
    the live request the same way (the same key) before matching, so the same secret matches and
    another does not, and a miss never shows the live secret. Near miss: without the redaction,
    the placeholder matches nothing (the bug: every such request was a miss)."""
    from mrtr_inspect.recording.redaction import Redactor

    redactor = Redactor(b"machine-key", paths=["params.arguments.token"])
    t = Traffic()
    a = t.tool("login", {"token": redactor.placeholder("s3cret")})
    t.result(a, {"content": [{"type": "text", "text": "welcome"}]})
    r = replayer(tmp_path, t, redact=redactor.redact_json)
    assert sent(r.answer(tool("login", {"token": "s3cret"})))[0]["result"]["content"][0]["text"] == "welcome"
    r = replayer(tmp_path, t, redact=redactor.redact_json)
    wrong = sent(r.answer(tool("login", {"token": "guess"})))[0]
    assert wrong["error"]["code"] == MISS_CODE and "guess" not in json.dumps(wrong)
    assert redactor.placeholder("guess") in wrong["error"]["message"]
    r = replayer(tmp_path, t)
    miss = sent(r.answer(tool("login", {"token": "s3cret"})))[0]["error"]
    assert miss["code"] == MISS_CODE and "the recording holds a redacted value there" in miss["message"]
    assert "redacted value" not in wrong["error"]["message"]  # both redacted: a different secret, no hint


def _keyed(t: Traffic, *redactors) -> Traffic:
    """The recording's header names the keys its placeholders were made with, as a writer's does."""
    from dataclasses import replace as dc_replace

    t.frames[0] = dc_replace(t.frames[0], info={"redaction": {"keys": [r.key_id for r in redactors]}})
    return t


def test_placeholders_of_the_same_key_match_their_secret_only_and_a_miss_says_both_are_placeholders(tmp_path):
    from mrtr_inspect.recording.redaction import Redactor

    rec = Redactor(b"recording-machine", paths=["params.arguments.token"])
    t = Traffic()
    a = t.tool("login", {"token": rec.placeholder("s3cret")})
    t.result(a, {"content": [{"type": "text", "text": "welcome"}]})
    _keyed(t, rec)
    same = Redactor(b"recording-machine", paths=["params.arguments.token"])
    r = replayer(tmp_path, t, redactor=same)
    assert not r.lenient
    assert "result" in sent(r.answer(tool("login", {"token": "s3cret"})))[0]
    r = replayer(tmp_path, t, redactor=same)
    [miss] = sent(r.answer(tool("login", {"token": "guess"})))
    assert miss["error"]["code"] == MISS_CODE and "guess" not in json.dumps(miss)
    assert "both sides are redacted placeholders there, made with the same redaction key" in miss["error"]["message"]


def test_placeholders_of_another_key_match_any_live_placeholder_there_and_no_clear_value(tmp_path):
    """A fresh CI home has another key: the recorded placeholder cannot be compared with the live
    one, so any value the live side redacted at that place matches (documented, docs/replay.md).
    Near misses: a live side that does not redact the path (a clear value) still misses; another
    argument that differs still misses."""
    from mrtr_inspect.recording.redaction import Redactor

    rec = Redactor(b"recording-machine", paths=["params.arguments.token"])
    t = Traffic()
    a = t.tool("login", {"token": rec.placeholder("s3cret"), "user": "ann"})
    t.result(a, {"content": [{"type": "text", "text": "welcome"}]})
    _keyed(t, rec)
    ci = Redactor(b"fresh-ci-home", paths=["params.arguments.token"])
    r = replayer(tmp_path, t, redactor=ci)
    assert r.lenient
    assert "result" in sent(r.answer(tool("login", {"token": "s3cret", "user": "ann"})))[0]
    r = replayer(tmp_path, t, redactor=ci)
    [other] = sent(r.answer(tool("login", {"token": "s3cret", "user": "bob"})))
    assert other["error"]["code"] == MISS_CODE and "params.arguments.user" in other["error"]["message"]
    r = replayer(tmp_path, t, redactor=Redactor(b"fresh-ci-home", keep=["token"]))  # the path not redacted live
    [clear] = sent(r.answer(tool("login", {"token": "s3cret", "user": "ann"})))
    assert "the recording holds a redacted value there" in clear["error"]["message"]
    # a recording older than the key ids (no `redaction` in its header) is read as of another key
    old = Traffic()
    b = old.tool("login", {"token": rec.placeholder("s3cret")})
    old.result(b, {"content": []})
    assert replayer(tmp_path, old, redactor=rec).lenient


def test_a_redacted_query_parameter_matches_the_same_secret_and_no_other(tmp_path):
    from dataclasses import replace as dc_replace

    from mrtr_inspect.core.events import HttpRequest
    from mrtr_inspect.recording.redaction import Redactor

    key = Redactor(b"machine")
    t = Traffic("http")
    a = t.tool("deploy", {"env": "prod"})
    t.result(a, {"content": []})
    t.frames = [dc_replace(f, path=key.url("/mcp?api_key=s3cret&page=1")) if type(f) is HttpRequest else f
                for f in t.frames]
    _keyed(t, key)
    assert "api_key=[redacted:" in load_script(save(t.frames, tmp_path / "q.jsonl")).exchanges[0].http.path
    r = replayer(tmp_path, t, redactor=Redactor(b"machine"))
    assert "result" in sent(r.answer(tool("deploy", {"env": "prod"}, id=a), "/mcp?api_key=s3cret&page=1"))[0]
    r = replayer(tmp_path, t, redactor=Redactor(b"machine"))
    [miss] = sent(r.answer(tool("deploy", {"env": "prod"}, id=a), "/mcp?api_key=guess&page=1"))
    assert miss["error"]["code"] == MISS_CODE and "guess" not in json.dumps(miss) and "path:" in miss["error"]["message"]
    r = replayer(tmp_path, t, redactor=Redactor(b"another-machine"))  # another key: any redacted value
    assert "result" in sent(r.answer(tool("deploy", {"env": "prod"}, id=a), "/mcp?api_key=other&page=1"))[0]
    r = replayer(tmp_path, t, redactor=Redactor(b"another-machine"))
    [page] = sent(r.answer(tool("deploy", {"env": "prod"}, id=a), "/mcp?api_key=s3cret&page=2"))
    assert page["error"]["code"] == MISS_CODE  # near miss: the rest of the query still counts
