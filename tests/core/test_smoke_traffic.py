"""The test traffic builder and the pipeline agree on the simplest chain, stdio and HTTP."""

import pytest

from tests.traffic import ACCEPT, ELICIT, Traffic


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_one_round_chain(transport):
    t = Traffic(transport)
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    t.tick(2.0)  # the user thinks
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.result(b, {"content": []})
    r = t.run()
    assert len(r.chains) == 1
    c = r.chain("c1")
    assert (c["method"], c["target"], c["rounds"], c["outcome"], c["link"]) == ("tools/call", "deploy", 1, "complete", "state")
    assert c["requests"] == [a, b]
    assert c["duration_ms"] >= 2000
    assert not r.errors()
