"""The pytest plugin's options as a user writes them: wrong values are one-line errors of the test
(not ignored, not tracebacks), the marker's help lists them all, and two tests never share a
default recording unasked. User projects run by pytest in a subprocess, as in test_plugin.py."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from .test_plugin import pytest_run
from .test_sdk_stdio import RECORDING

HEAD = textwrap.dedent('''
    import pytest

    from tests.replay.sdk_client import EXPECTED, call
''')

WRONG = HEAD + textwrap.dedent('''
    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", ignore="params.arguments.env")
    def test_ignore_a_str(mrtr_replay):
        pass


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", order="strct")
    def test_order(mrtr_replay):
        pass


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", transport="htp")
    def test_transport(mrtr_replay):
        pass


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", transport="http", order="strct")
    def test_order_over_http(mrtr_replay):
        pass


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", ignore=["params.arguments.env"], order="strict",
                             transport="stdio", allow_misses=False)
    def test_right(mrtr_replay):
        """The near miss: the same options, right; the ignore is one path, and it works."""
        assert call(mrtr_replay.command, "deploy", deploy={"env": "staging"}) == [EXPECTED["deploy"]]
''')

CONFIG = HEAD + textwrap.dedent('''
    @pytest.fixture
    def mrtr_config():
        return {"ignores": ["params.arguments.env"], "allow_miss": True}


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_config(mrtr_replay):
        pass
''')


def project(where: Path, **modules: str) -> Path:
    for name, text in modules.items():
        path = where / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (where / "fixtures").mkdir(exist_ok=True)
    shutil.copy(RECORDING, where / "fixtures" / "shared.jsonl")
    return where


def test_wrong_option_values_are_one_line_errors(tmp_path):
    user = project(tmp_path, test_wrong=WRONG, test_config=CONFIG)
    r = pytest_run(user, "-rE")
    out = r.stdout
    assert "1 passed, 5 errors" in out, out + r.stderr
    prefix = "ERROR test_wrong.py::{} - Failed: mrtr-inspect: mrtr_replay: "
    assert (prefix.format("test_ignore_a_str") + "ignore is a list of strings, not the str 'params.arguments.env' "
            "(write ignore=['params.arguments.env'])") in out
    assert prefix.format("test_order") + "order is 'any' or 'strict', not 'strct'" in out
    assert prefix.format("test_order_over_http") + "order is 'any' or 'strict', not 'strct'" in out
    assert prefix.format("test_transport") + "transport is 'stdio' or 'http', not 'htp'" in out
    assert ("ERROR test_config.py::test_config - Failed: mrtr-inspect: mrtr_config: unknown key allow_miss, ignores "
            "(known: server, upstream,") in out
    assert "Traceback" not in out and "ValueError" not in out


def test_the_marker_help_lists_every_option(tmp_path):
    r = pytest_run(tmp_path, "--markers")
    [line] = [x for x in r.stdout.splitlines() if x.startswith("@pytest.mark.mrtr_replay(")]
    for option in ("server=None", "upstream=None", "transport=None", "order='any'", "ignore=()", "pace=False",
                   "allow_repeats=False", "allow_misses=False", "redact_paths=()", "redact_headers=()",
                   "before_record=None"):
        assert option in line, line


SAME_NAME = HEAD + textwrap.dedent('''
    def test_tool(mrtr_replay):
        pass
''')

IDS = HEAD + textwrap.dedent('''
    @pytest.mark.parametrize("region", ["staging/eu", "staging_eu"])
    def test_region(mrtr_replay, region):
        pass


    @pytest.mark.parametrize("region", ["us", "eu"])
    def test_distinct(mrtr_replay, region):
        pass
''')

OWN_PATH = textwrap.dedent('''
    import pytest


    @pytest.fixture
    def mrtr_recording_path(request):
        return request.config.rootpath / "fixtures" / "integration" / f"{request.node.name}.jsonl"
''')


def test_two_tests_never_share_a_default_recording_unasked(tmp_path):
    user = project(tmp_path, **{"unit/__init__": "", "unit/test_api": SAME_NAME, "integration/__init__": "",
                                "integration/test_api": SAME_NAME, "test_ids": IDS})
    for name in ("test_api/test_tool", "test_ids/test_region[staging_eu]", "test_ids/test_distinct[us]",
                 "test_ids/test_distinct[eu]"):
        path = user / "fixtures" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RECORDING, path)
    r = pytest_run(user, "-rE", "--mrtr-record-mode=none")
    out = r.stdout
    assert "2 passed, 4 errors" in out, out + r.stderr
    assert ("ERROR unit/test_api.py::test_tool - Failed: mrtr-inspect: unit/test_api.py::test_tool and "
            "integration/test_api.py::test_tool would share the recording fixtures/test_api/test_tool.jsonl: give "
            "each its own path (@pytest.mark.mrtr_replay('fixtures/….jsonl'), or an mrtr_recording_path fixture in "
            "a conftest.py), or give them the same path in the marker to share it on purpose") in out
    assert "ERROR integration/test_api.py::test_tool - Failed: mrtr-inspect: integration/test_api.py::test_tool and" in out
    assert ("ERROR test_ids.py::test_region[staging/eu] - Failed: mrtr-inspect: test_ids.py::test_region[staging/eu] "
            "and test_ids.py::test_region[staging_eu] would share the recording "
            "fixtures/test_ids/test_region[staging_eu].jsonl") in out

    # the near misses: one folder names its own recordings (a conftest.py), ids that stay apart
    (user / "integration" / "conftest.py").write_text(OWN_PATH)
    (user / "fixtures" / "integration").mkdir()
    shutil.copy(RECORDING, user / "fixtures" / "integration" / "test_tool.jsonl")
    r = pytest_run(user, "-rE", "--mrtr-record-mode=none", "unit", "integration", "test_ids.py::test_distinct")
    assert "4 passed" in r.stdout, r.stdout + r.stderr


def test_tests_may_share_a_recording_given_in_the_marker(tmp_path):
    shared = HEAD + textwrap.dedent('''
        @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
        def test_tool(mrtr_replay):
            pass
    ''')
    user = project(tmp_path, **{"unit/__init__": "", "unit/test_api": shared, "integration/__init__": "",
                                "integration/test_api": shared})
    r = pytest_run(user, "--mrtr-record-mode=none")
    assert "2 passed" in r.stdout, r.stdout + r.stderr
