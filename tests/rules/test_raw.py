"""duplicate-member-name: repeated member names anywhere but inputRequests/inputResponses, at info."""

from tests.traffic import ACCEPT, ELICIT, Traffic


def _deploy_with_raw_retry(raw_retry: bytes) -> Traffic:
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.line("c2s", raw_retry)
    return t


def test_a_repeated_name_in_arguments_and_at_the_top_is_reported_with_its_path():
    t = Traffic()
    t.line("c2s", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","params":{"_meta":{}}}')
    t.line("c2s", b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x",'
                  b'"arguments":{"env":"prod","env":"staging"},"_meta":{}}}')
    r = t.run()
    found = r.of("duplicate-member-name")
    assert [(f.severity, f.details["path"], f.details["name"]) for f in found] == [
        ("info", [], "id"), ("info", ["params", "arguments"], "env")]
    assert "params.arguments" in found[1].message and "'env' 2 times" in found[1].message


def test_near_miss_input_responses_have_their_own_rule_and_clean_messages_nothing():
    retry = (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"},'
             b'"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}},'
             b'"confirm":{"action":"decline"}},"requestState":"s1","_meta":{}}}')
    r = _deploy_with_raw_retry(retry).run()
    assert not r.of("duplicate-member-name")
    assert r.of("input-responses-duplicate-key")
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.result(b, {"content": []})
    assert not t.run().of("duplicate-member-name")
