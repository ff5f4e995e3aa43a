"""The pytest plugin as vcrpy and pytest-recording users expect it (issue 14, items 2, 4, 5, 6):
where the server to record runs and what a dying one says; answers compared on request; custom
matchers; re-recording that keeps an unchanged fixture, and `new_episodes`; `before_record` on
messages; CI and record-mode details. User projects run by pytest in a subprocess, as in
test_plugin.py."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mrtr_inspect.replay.script import load_script

from .test_plugin import pytest_run

HEAD = textwrap.dedent('''
    import sys

    import pytest

    from tests.replay.sdk_client import EXPECTED, call

    SAMPLE = [sys.executable, "-m", "mrtr_inspect.samples.server"]
''')


def project(where: Path, body: str, tests_dir: str = "") -> Path:
    """A user's project with a pytest.ini at its root (the rootdir) and test_user.py in `tests_dir`."""
    (where / "pytest.ini").write_text("[pytest]\n")
    d = where / tests_dir
    d.mkdir(parents=True, exist_ok=True)
    (d / "test_user.py").write_text(HEAD + textwrap.dedent(body))
    return where


def section(out: str, test: str) -> str:
    """What pytest reported of one failing test (its section, up to the next)."""
    m = re.search(rf"^_+ {re.escape(test)} _+$(.*?)(?=^_+ \S+ _+$|^=+ )", out, re.M | re.S)
    return m.group(1) if m else ""


# ---- item 5: where the server runs, and a server that dies

FROM_ROOT = '''
    @pytest.mark.mrtr_replay(server=[sys.executable, "server.py"])
    def test_release(mrtr_replay):
        assert call(mrtr_replay.command, "release") == [EXPECTED["release"]]
        assert mrtr_replay.cwd is not None and (mrtr_replay.cwd / "server.py").exists()
'''


def test_the_server_to_record_runs_from_the_rootdir_whatever_the_current_directory(tmp_path):
    user = project(tmp_path, FROM_ROOT, tests_dir="tests")
    (user / "server.py").write_text('import runpy\nrunpy.run_module("mrtr_inspect.samples.server", run_name="__main__")\n')
    r = pytest_run(user, cwd=user / "tests")  # `cd tests && pytest`
    assert r.returncode == 0, r.stdout + r.stderr
    assert (user / "fixtures" / "test_user" / "test_release.jsonl").exists()


DIES = '''
    DEAD = [sys.executable, "-c", "import sys; sys.stderr.write('boom: no config file\\\\n'); sys.exit(3)"]


    @pytest.mark.mrtr_replay(server=DEAD)
    def test_dead(mrtr_replay):
        call(mrtr_replay.command, "release")
'''


def test_a_server_that_dies_before_answering_fails_the_test_with_its_stderr(tmp_path):
    user = project(tmp_path, DIES)
    r = pytest_run(user, "-rf")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert ("mrtr-inspect: the server to record exited before answering (exit status 3; it ran from the rootdir "
            f"{user}); its stderr ends:\n  boom: no config file") in out, out
    assert "Connection closed" not in out and "Traceback" not in out
    assert not (user / "fixtures" / "test_user" / "test_dead.jsonl").exists()


# ---- item 2: answers compared on request, and custom matchers

ANSWERS = '''
    from mrtr_inspect.replay.plugin import register_matcher
    from mrtr_inspect.samples import client as sample
    from matchers import no_staging

    register_matcher("no_staging", no_staging)


    @pytest.fixture
    def says_no(monkeypatch):
        monkeypatch.setitem(sample.ANSWERS, "confirm", False)  # the recorded client said yes


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_answer_keys_only(mrtr_replay, says_no):
        """The near miss: by default only which questions a retry answers counts."""
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", match_on=["answers"])
    def test_answers_stdio(mrtr_replay, says_no):
        call(mrtr_replay.command, "deploy")


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", match_on=["answers"], transport="http")
    def test_answers_http(mrtr_replay, says_no):
        call(mrtr_replay.url, "deploy")


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", match_on=["answers"])
    def test_same_answers(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", ignore=["params.arguments.env"], match_on=["no_staging"])
    def test_custom_by_name_stdio(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", ignore=["params.arguments.env"], match_on=[no_staging],
                             transport="http")
    def test_custom_function_http(mrtr_replay):
        call(mrtr_replay.url, "deploy", deploy={"env": "staging"})


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", ignore=["params.arguments.env"], match_on=[no_staging])
    def test_custom_near_miss(mrtr_replay):
        assert call(mrtr_replay.command, "deploy", deploy={"env": "prod"}) == [EXPECTED["deploy"]]


    @pytest.mark.mrtr_replay("fixtures/shared.jsonl", match_on=["no_such"])
    def test_unknown_matcher(mrtr_replay):
        pass
'''

MATCHERS = '''
def no_staging(recorded, live):
    """A matcher of the user's: staging is never answered from a recording."""
    if live.get("params", {}).get("arguments", {}).get("env") == "staging":
        return "staging is never served from a recording"
    return None
'''


def test_answers_are_compared_on_request_and_custom_matchers_are_asked(tmp_path):
    import shutil

    from .test_sdk_stdio import RECORDING

    user = project(tmp_path, ANSWERS)
    (user / "matchers.py").write_text(MATCHERS)
    (user / "fixtures").mkdir()
    shutil.copy(RECORDING, user / "fixtures" / "shared.jsonl")
    r = pytest_run(user, "-rfE")
    out = r.stdout
    assert "4 failed, 3 passed, 1 error" in out, out + r.stderr
    for name in ("test_answers_stdio", "test_answers_http"):
        assert ("differs in params.inputResponses.confirm.content.confirm: recorded true, live false"
                in section(out, name)), section(out, name)
    for name in ("test_custom_by_name_stdio", "test_custom_function_http"):
        assert "differs in matcher no_staging: staging is never served from a recording" in section(out, name)
    assert ("ERROR test_user.py::test_unknown_matcher - Failed: mrtr-inspect: mrtr_replay: match_on: no matcher "
            "'no_such' (known: 'answers', 'no_staging'; register_matcher(name, fn) adds one)") in out


# ---- item 6: before_record on frames, a hook that raises, CI=false, the hint of a miss, summary()

SCRUB = '''
    import dataclasses
    import json

    from mrtr_inspect.core.events import HttpRequest, StdioLine


    def scrub_text(frame):
        """docs/replay.md's worked example: an argument scrubbed from the client's requests."""
        if type(frame) is StdioLine and frame.direction == "c2s":
            field = "data"
        elif type(frame) is HttpRequest and frame.body:
            field = "body"
        else:
            return frame
        try:
            msg = json.loads(getattr(frame, field))
        except ValueError:
            return frame
        args = msg.get("params", {}).get("arguments") if isinstance(msg, dict) else None
        if isinstance(args, dict) and "text" in args:
            args["text"] = "<scrubbed>"
            return dataclasses.replace(frame, **{field: json.dumps(msg).encode()})
        return frame


    def broken(frame):
        raise KeyError("params")


    @pytest.mark.mrtr_replay(server=SAMPLE, before_record=scrub_text)
    def test_scrubbed(mrtr_replay):
        assert call(mrtr_replay.command, "summarize", summarize={"text": "my secret"}) == [EXPECTED["summarize"]]
        s = mrtr_replay.summary()
        assert s["mode"] == "record" and s["processes"] == 1 and s["chains"] == 1 and s["misses"] == []
        assert s["messages"] > 0 and all("rule" in f for f in s["findings"])


    @pytest.mark.mrtr_replay(server=SAMPLE, before_record=broken)
    def test_broken_hook(mrtr_replay):
        call(mrtr_replay.command, "deploy")
'''


def test_before_record_scrubs_as_documented_and_a_hook_that_raises_is_one_line(tmp_path):
    user = project(tmp_path, SCRUB)
    r = pytest_run(user, "-rE")
    out = r.stdout
    assert "2 passed, 1 error" in out, out + r.stderr  # the hook fails the teardown of a passing body
    fixture = user / "fixtures" / "test_user" / "test_scrubbed.jsonl"
    calls = [ex.request.params for ex in load_script(fixture).exchanges if ex.request.method == "tools/call"]
    assert calls and all(p["arguments"]["text"] == "<scrubbed>" for p in calls)  # the server's echo is its own
    broken = user / "fixtures" / "test_user" / "test_broken_hook.jsonl"
    assert (f"ERROR test_user.py::test_broken_hook - Failed: mrtr-inspect: {broken} is not written: before_record "
            "raised KeyError: 'params' on a SessionStart frame (docs/replay.md: before_record)") in out
    assert "Traceback" not in out and not broken.exists()


CI_MISS = '''
    @pytest.mark.mrtr_replay("fixtures/shared.jsonl")
    def test_staging(mrtr_replay):
        call(mrtr_replay.command, "deploy", deploy={"env": "staging"})
        print("MODE", mrtr_replay.mode)


    @pytest.mark.mrtr_replay(server=SAMPLE)
    def test_new(mrtr_replay):
        assert call(mrtr_replay.command, "deploy") == [EXPECTED["deploy"]]
        print("MODE", mrtr_replay.mode)
'''


def test_ci_false_is_not_ci_and_a_miss_says_how_to_record_again(tmp_path):
    import shutil

    from .test_sdk_stdio import RECORDING

    user = project(tmp_path, CI_MISS)
    (user / "fixtures").mkdir()
    shutil.copy(RECORDING, user / "fixtures" / "shared.jsonl")
    r = pytest_run(user, "-rf", CI="false")  # not CI: mode once, the missing recording is recorded
    assert "MODE record" in r.stdout, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert ("if the code under test changed on purpose, record the fixture again: pytest --mrtr-record-mode=all "
            "(the marker needs server=[...] or upstream=URL)") in section(r.stdout, "test_staging")
    ci = pytest_run(user, "test_user.py::test_new", "--mrtr-record-mode=none", CI="true")
    assert ci.returncode == 0, ci.stdout + ci.stderr  # recorded by the first run, replayed
    (user / "fixtures" / "test_user" / "test_new.jsonl").unlink()
    ci = pytest_run(user, "test_user.py::test_new", CI="1")
    assert "no recording at" in ci.stdout and ci.returncode == 1


# ---- item 4: re-recording keeps an unchanged fixture; new_episodes adds what is new

TOOLS = '''
    import os


    @pytest.mark.mrtr_replay(server=SAMPLE)
    def test_tools(mrtr_replay):
        tools = os.environ["TOOLS"].split(",")
        assert call(mrtr_replay.command, *tools) == [EXPECTED[t] for t in tools]
        print("MODE", mrtr_replay.mode)
'''


def _calls(path: Path) -> list[str]:
    return [ex.request.params["name"] for ex in load_script(path).exchanges
            if ex.request.method == "tools/call" and "requestState" not in ex.request.params]


def test_re_recording_keeps_an_unchanged_fixture_and_new_episodes_adds_what_is_new(tmp_path):
    user = project(tmp_path, TOOLS)
    fixture = user / "fixtures" / "test_user" / "test_tools.jsonl"

    def run(tools: str, *args: str) -> str:
        r = pytest_run(user, *args, TOOLS=tools)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    assert "MODE record" in run("release")
    first = fixture.read_bytes()
    for mode in ("all", "new_episodes"):  # the same session again: new times, ids, sealed states; same meaning
        assert "MODE record" in run("release", f"--mrtr-record-mode={mode}")
        assert fixture.read_bytes() == first, mode
    # new_episodes: a session that asks something new is added; what was there stays
    assert "MODE record" in run("deploy", "--mrtr-record-mode=new_episodes")
    assert fixture.read_bytes().startswith(first) and _calls(fixture) == ["release", "deploy"]
    assert "MODE replay" in run("deploy") and "MODE replay" in run("release")  # both served from it
    # all: what changed replaces the fixture
    assert "MODE record" in run("summarize", "--mrtr-record-mode=all")
    assert _calls(fixture) == ["summarize"]


# ---- issue 25 item 10: the other transport's attribute says which transport the test has

TRANSPORTS = '''
    import subprocess


    @pytest.mark.mrtr_replay("fixtures/http.jsonl")
    def test_command_of_http(mrtr_replay):
        subprocess.run(mrtr_replay.command)


    @pytest.mark.mrtr_replay("fixtures/stdio.jsonl")
    def test_url_of_stdio(mrtr_replay):
        mrtr_replay.url.startswith("http")


    @pytest.mark.mrtr_replay("fixtures/http.jsonl", transport="stdio")
    def test_http_recording_served_over_stdio(mrtr_replay):
        assert mrtr_replay.command[-1].endswith("http.jsonl")
        assert getattr(mrtr_replay, "url", None) is None
'''


def test_the_attribute_of_the_other_transport_names_the_transport_and_how_to_pick_the_other(tmp_path):
    import shutil

    from . import test_sdk_http, test_sdk_stdio

    user = project(tmp_path, TRANSPORTS)
    (user / "fixtures").mkdir()
    shutil.copy(test_sdk_stdio.RECORDING, user / "fixtures" / "stdio.jsonl")
    shutil.copy(test_sdk_http.RECORDING, user / "fixtures" / "http.jsonl")
    r = pytest_run(user, "-rf", "--mrtr-record-mode=none")
    assert "2 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    http = section(r.stdout, "test_command_of_http")
    assert "NoneType" not in http
    assert (f"WrongTransport: mrtr_replay.command: this test's server runs over HTTP (the recording "
            f"{user / 'fixtures' / 'http.jsonl'} was recorded over HTTP), so it has no command: use mrtr_replay.url "
            "(mrtr_replay.transport says which one is set), or give the marker transport='stdio' (a recording "
            "replays over either transport)") in http, http
    stdio = section(r.stdout, "test_url_of_stdio")
    assert ("WrongTransport: mrtr_replay.url: this test's server runs over stdio (the recording "
            f"{user / 'fixtures' / 'stdio.jsonl'} was recorded over stdio), so it has no url: use "
            "mrtr_replay.command (mrtr_replay.transport says which one is set), or give the marker "
            "transport='http' (a recording replays over either transport)") in stdio, stdio


def test_while_recording_the_other_transport_says_how_to_record_over_it(tmp_path):
    from mrtr_inspect.replay.plugin import MrtrReplay, WrongTransport

    upstream = MrtrReplay(tmp_path / "x.jsonl", "record", "http", {"upstream": "http://127.0.0.1:1/mcp"})
    upstream.url = "http://127.0.0.1:2/mcp"
    assert upstream.url == "http://127.0.0.1:2/mcp"
    try:
        upstream.command
    except WrongTransport as e:
        assert str(e) == ("mrtr_replay.command: this test's server runs over HTTP (the marker names upstream=URL), "
                          "so it has no command: use mrtr_replay.url (mrtr_replay.transport says which one is set), "
                          "or give the marker transport='stdio' with server=[...] a stdio server command")
    else:
        raise AssertionError("no error")
    stdio = MrtrReplay(tmp_path / "x.jsonl", "record", "stdio", {"server": ["srv"], "transport": "stdio"})
    assert getattr(stdio, "url", None) is None  # an AttributeError: hasattr and getattr's default still work
    try:
        stdio.url
    except WrongTransport as e:
        assert "(the marker gives transport='stdio')" in str(e)
        assert str(e).endswith("give the marker transport='http' with server=[...] an HTTP server command "
                               "(its {port} filled in) or upstream=URL")
