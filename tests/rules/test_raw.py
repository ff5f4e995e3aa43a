"""duplicate-member-name: repeated member names anywhere but inputRequests/inputResponses, at info;
at warning for the members that decide meaning repeated with different values (RULES.md §10.11)."""

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
        ("warning", [], "id"), ("info", ["params", "arguments"], "env")]  # the id decides meaning (§10.11)
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


# --- RULES.md §10.11: duplicate members that decide meaning, with different values, are warnings ---------


def _dups(*lines: tuple[str, bytes]):
    t = Traffic()
    for direction, raw in lines:
        t.line(direction, raw)
    return [(f.severity, f.details["path"], f.details["name"], f.details.get("values"))
            for f in t.run().of("duplicate-member-name")]


META = b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}'


def test_a_response_repeating_id_or_result_type_with_different_values_is_a_warning():
    found = _dups(("c2s", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},' + META
                   + b'}}'),
                  ("s2c", b'{"jsonrpc":"2.0","id":1,"id":1001,"result":{"resultType":"complete",'
                          b'"resultType":"input_required","content":[]}}'))
    assert found == [("warning", ["result"], "resultType", ['"complete"', '"input_required"']),
                     ("warning", [], "id", ["1", "1001"])]
    t = Traffic()
    t.line("s2c", b'{"jsonrpc":"2.0","id":1,"id":1001,"result":{}}')
    [f] = t.run().of("duplicate-member-name")
    assert "with different values (1 and 1001)" in f.message and "may each act on another one" in f.message


def test_the_members_of_decision_11_each_and_a_state_shown_hashed():
    found = _dups(
        ("c2s", b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":2,"method":"tools/call","method":"tools/list",'
                b'"params":{"name":"deploy","name":"delete","requestState":"sekrit-1","requestState":"sekrit-2",'
                b'"inputResponses":{},"inputResponses":{"k":{}},"arguments":{},' + META + b'}}'),
        ("c2s", b'{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a","uri":"file:///b",'
                + META + b'}}'),
        ("s2c", b'[{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{},'
                b'"inputRequests":{"q":{}},"requestState":"a","requestState":"b"},"error":{"code":1,"message":"x"},'
                b'"error":{"code":2,"message":"y"}}]'))
    assert {(tuple(p), n) for s, p, n, _ in found if s == "warning"} == {
        ((), "jsonrpc"), ((), "method"), (("params",), "name"), (("params",), "requestState"),
        (("params",), "inputResponses"), (("params",), "uri"), ((0, "result"), "inputRequests"),
        ((0, "result"), "requestState"), ((0,), "error")}
    states = [v for s, p, n, v in found if n == "requestState"]
    assert all(x.startswith("sha256:") for v in states for x in v)


def test_near_miss_same_values_other_members_and_non_mrtr_targets_stay_info():
    found = _dups(
        ("c2s", b'{"jsonrpc":"2.0","id":1,"id":1,"method":"tools/call","params":{"name":"a","arguments":'
                b'{"env":"prod","env":"qa"},"_meta":{},"_meta":{"x":1}}}'),  # equal id; arguments and _meta are not decisive
        ("c2s", b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"name":"a","name":"b"}}'),  # not MRTR
        ("s2c", b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[{}]}}'),  # result's other members
        ("s2c", b'{"jsonrpc":"2.0","id":1,"result":{"x":{"id":1,"id":2}}}'))  # an id deeper down
    assert found and all(s == "info" and v is None for s, p, n, v in found), found
    assert _dups(("s2c", b'{"jsonrpc":"2.0","id":1,"id":1.0,"result":{}}'))[0][0] == "warning"  # 1 and 1.0 differ
