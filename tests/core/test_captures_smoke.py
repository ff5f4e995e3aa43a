"""Every real capture decodes and stitches; the clean ones give no error finding."""

import pytest

from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.inspector import ChainEvent, Inspector
from mrtr_inspect.core.messages import Message
from tests.captures import capture_frames, capture_names

NAMES = capture_names()


def analyse(name):
    insp = Inspector()
    outs = []
    for f in capture_frames(name):
        outs += insp.feed(f)
    outs += insp.close()
    return outs


@pytest.mark.skipif(not NAMES, reason="shared/captures not present")
@pytest.mark.parametrize("name", NAMES)
def test_capture_decodes_and_stitches(name):
    outs = analyse(name)
    msgs = [o for o in outs if type(o) is Message]
    assert msgs and all(m.kind != "invalid" for m in msgs), [m.problem for m in msgs if m.kind == "invalid"]
    chains = [o.chain for o in outs if type(o) is ChainEvent and o.kind == "closed"]
    tool_calls = [m for m in msgs if m.kind == "request" and m.method == "tools/call"]
    if "legacy" not in name:
        assert chains, name
        assert sum(len(c.requests) for c in chains) == len(tool_calls)
    inspector_errors = [o for o in outs if type(o) is Finding and o.rule == "inspector-error"]
    assert not inspector_errors, inspector_errors
