"""The tool-poisoning lint on the real servers the tests have (tests/e2e/peer_tools.py): the
reference server-everything and server-filesystem, and the TypeScript SDK's example servers, fetched
live. The lint is always on, so any warning here is a false positive."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.e2e import ROOT
from tests.e2e.peer_tools import PEERS, lint, node, peer_lists


def test_no_lint_warning_on_the_peers_tool_definitions():
    if node() is None:
        pytest.skip("node is not installed: the peers (tests/peers) cannot run")
    if not (PEERS / "server-filesystem").exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the peers (tests/peers) cannot be installed")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=ROOT / "tests" / "peers", check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
    lists = peer_lists()
    assert {"server-everything", "server-filesystem"} <= set(lists)
    counts = {}
    for name, responses in lists.items():
        tools, found = lint(responses)
        assert found == [], (name, [f.message for f in found])
        counts[name] = tools
    assert counts["server-everything"] >= 10 and counts["server-filesystem"] >= 10
    # the lint runs on these very bytes: one hidden character makes a warning
    raw = lists["server-filesystem"][0].replace(b'"description":"', b'"description":"\\u200b', 1)
    assert [f.rule for f in lint([raw])[1]] == ["tool-poisoning-hidden-text"]
