"""`replay` on recordings it cannot play, and `export --to fixture`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.replay.export import export_fixture
from mrtr_inspect.replay.script import ReplayError, load_script
from tests.traffic import Traffic

from .conftest import ROOT, SAMPLE, WAIT, cli, save
from .sdk_client import EXPECTED, call
from .test_sdk_stdio import RECORDING

HEADER = {"mrtr-inspect": "recording", "version": 1, "session": "s1", "transport": "stdio", "t": 1.0}


UNPLAYABLE = {
    "not a recording": (b"hello\n", "not an mrtr-inspect recording (no recording header on the first line)"),
    "format version 7": (json.dumps({**HEADER, "version": 7}).encode() + b"\n",
                         "recording format version 7 is not supported (this mrtr-inspect reads version 1)"),
    "nothing to serve": (json.dumps(HEADER).encode() + b"\n", "the recording holds no client request to replay"),
}


@pytest.mark.parametrize("command", [["replay", "serve", "--stdio"], ["replay", "verify"]])
@pytest.mark.parametrize("case", sorted(UNPLAYABLE))
def test_a_recording_that_cannot_be_played_exits_2_with_one_line(tmp_path, command, case):
    data, reason = UNPLAYABLE[case]
    path = tmp_path / "r.jsonl"
    path.write_bytes(data)
    extra = ["--", *SAMPLE] if command[-1] == "verify" else []
    r = cli(*command, str(path), *extra)
    assert r.returncode == 2
    assert r.stdout == b""
    assert r.stderr.decode().splitlines() == [f"mrtr-inspect: {path}: {reason}"]


def test_a_torn_last_line_is_tolerated_with_a_note(tmp_path):
    data = RECORDING.read_bytes()
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[: len(data) - 20])  # the session-end record, cut mid-write
    r = cli("replay", "serve", "--stdio", str(torn), input=b"")
    assert r.returncode == 0
    err = r.stderr.decode().splitlines()
    assert err[0] == f"mrtr-inspect: note: {torn}: the last line was torn (the recorder stopped mid-write); it was skipped"
    assert err[1] == f"mrtr-inspect: replay of {torn}: 0 requests served, 0 misses, 14 recorded requests not asked for"


@pytest.mark.parametrize("args, reason", [
    (["serve", "REC", "--stdio", "--listen", "127.0.0.1:0"], "--listen and --stdio exclude each other"),
    (["serve", "REC", "--listen", "nowhere"], "--listen takes HOST:PORT, not 'nowhere'"),
    (["verify", "REC"], "replay verify needs the live server: --upstream URL, or -- CMD [ARG...] (one of them)"),
    (["verify", "REC", "--upstream", "http://127.0.0.1:1/mcp"], "cannot reach http://127.0.0.1:1/mcp: "),
    (["verify", "REC", "--", "./no-such-server"], "cannot start './no-such-server': No such file or directory"),
    # checked before the client is served, not once it is done
    (["serve", "REC", "--stdio", "--summary", "/nonexistent-mrtr/s.json"],
     "cannot write summary /nonexistent-mrtr/s.json: No such file or directory"),
    (["serve", "REC", "--stdio", "--record", "/nonexistent-mrtr/r.jsonl"],
     "cannot write recording /nonexistent-mrtr/r.jsonl: No such file or directory"),
    (["verify", "REC", "--record", "/nonexistent-mrtr/r.jsonl", "--", *SAMPLE],
     "cannot write recording /nonexistent-mrtr/r.jsonl: No such file or directory"),
])
def test_bad_usage_exits_2_with_one_line(args, reason):
    r = cli("replay", *[str(RECORDING) if a == "REC" else a for a in args])
    assert r.returncode == 2
    [line] = r.stderr.decode().splitlines()
    assert line.startswith(f"mrtr-inspect: {reason}")


def test_the_summary_is_created_private(tmp_path):
    summary = tmp_path / "s.json"
    r = cli("replay", "serve", "--stdio", str(RECORDING), "--summary", str(summary), input=b"")
    assert r.returncode == 0, r.stderr
    assert json.loads(summary.read_text())["served"] == 0
    assert summary.stat().st_mode & 0o777 == 0o600


def _serve_proc(*args: str, input: bytes):
    """`mrtr-inspect replay serve ARGS` to its end: (its process id, its return code)."""
    proc = subprocess.Popen([sys.executable, "-m", "mrtr_inspect", "replay", "serve", *args], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.communicate(input, timeout=WAIT)
    return proc.pid, proc.returncode


def test_a_summary_path_with_pid_gives_each_process_its_own(tmp_path):
    """Two processes from one command line (as a client that starts its server command twice): with
    `{pid}` each keeps its own summary, the first one's miss is not overwritten by the second's
    clean run (near miss: a path without `{pid}` is used as it is, by the last process)."""
    miss = b'{"jsonrpc":"2.0","id":8,"method":"tools/nothing","params":{}}\n'
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    args = ("--stdio", str(RECORDING), "--quiet", "--summary")
    first = _serve_proc(*args, str(tmp_path / "s-{pid}.json"), input=miss)
    second = _serve_proc(*args, str(tmp_path / "s-{pid}.json"), input=ping)
    assert (first[1], second[1]) == (1, 0)
    one = json.loads((tmp_path / f"s-{first[0]}.json").read_text())
    two = json.loads((tmp_path / f"s-{second[0]}.json").read_text())
    assert [m["request"] for m in one["misses"]] == ["tools/nothing id=8"] and one["synthesized"] == 0
    assert two["misses"] == [] and two["synthesized"] == 1
    assert (tmp_path / f"s-{first[0]}.json").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "s-{pid}.json").exists()

    plain = tmp_path / "plain.json"
    for data in (miss, ping):
        _serve_proc(*args, str(plain), input=data)
    assert json.loads(plain.read_text())["misses"] == []  # the last one's
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("plain")) == ["plain.json"]


def test_a_miss_is_told_in_one_inert_line(tmp_path):
    """The exit summary quotes the live client's request: a method that carries terminal controls
    and a newline stays on its line, escaped (near miss: the ordinary miss line is as before)."""
    hostile = '{"jsonrpc":"2.0","id":7,"method":"tools/\\u001b]0;pwned\\u0007\\nmrtr-inspect: forged","params":{}}\n'
    plain = '{"jsonrpc":"2.0","id":8,"method":"tools/nothing","params":{}}\n'
    r = cli("replay", "serve", "--stdio", str(RECORDING), "--quiet", input=(hostile + plain).encode())
    err = r.stderr.decode()
    assert "\x1b" not in err and "\x07" not in err
    assert not [line for line in err.splitlines() if not line.startswith("mrtr-inspect: ")]
    assert "miss: tools/\\x1b]0;pwned\\x07\\nmrtr-inspect: forged id=7: " in err
    assert "mrtr-inspect: miss: tools/nothing id=8: " in err


# -- export ---------------------------------------------------------------------------------------


def test_export_keeps_the_chosen_chains_and_what_belongs_to_no_chain(tmp_path):
    out = tmp_path / "release.jsonl"
    done = export_fixture(str(RECORDING), str(out), chains=["c2"])
    script = load_script(out)
    assert [ex.label() for ex in script.exchanges] == [
        "server/discover id=1 (#0)", "tools/list id=4 (#2)",
        "tools/call release id=5 (#4, chain c1)", "tools/call release id=6 (#6, chain c1, retry of round 1)",
        "tools/call release id=7 (#8, chain c1, retry of round 2)", "tools/call release id=8 (#10, chain c1, retry of round 3)"]
    assert (done.chains, done.exchanges, done.sessions) == (["c2"], 6, 1)
    only = export_fixture(str(RECORDING), str(tmp_path / "only.jsonl"), chains=["c2"], only_chains=True)
    assert only.exchanges == 4
    with pytest.raises(ReplayError, match=r"no chain c9 \(its chains: c1, c2, c3, c4, c5\)"):
        export_fixture(str(RECORDING), str(tmp_path / "x.jsonl"), chains=["c9"])


def test_export_redacts_and_takes_the_machine_out_of_the_headers(tmp_path):
    out = tmp_path / "fixture.jsonl"
    r = cli("export", str(RECORDING), "--to", "fixture", "--output", str(out), "--chain", "c2",
            "--redact-path", "params.inputResponses.*.content.notes")
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().splitlines() == [
        f"mrtr-inspect: wrote {out}: 6 requests in 1 session, chains c2"]
    assert out.stat().st_mode & 0o777 == 0o600
    header = next(read_frames(out))
    assert "pid" not in header.info and header.info["command"] == ["python", "-m", "mrtr_inspect.samples.server"]
    assert header.info["exported"]["chains"] == ["c2"]
    answers = [ex.request.params["inputResponses"] for ex in load_script(out).exchanges
               if "inputResponses" in ex.request.params]
    assert [list(a) for a in answers] == [["tag"], ["confirm"], ["notes"]]
    assert answers[2]["notes"]["content"]["notes"].startswith("[redacted:")
    assert answers[0]["tag"]["content"]["tag"] == "v1.0.0"  # only the path asked


def test_a_redacted_export_still_serves_the_real_client(tmp_path):
    """inputResponses are matched by their keys: redacting what the user answered keeps the fixture
    playable (the recorded server's reply, with the real notes, is what the client gets)."""
    out = tmp_path / "fixture.jsonl"
    export_fixture(str(RECORDING), str(out), chains=["c2"], redact_paths=["params.inputResponses.*.content.notes"])
    assert call([sys.executable, "-m", "mrtr_inspect", "replay", "serve", "--stdio", str(out)], "release") == [
        EXPECTED["release"]]


def test_export_warns_of_machine_paths_left_in_payloads(tmp_path):
    t = Traffic()
    a = t.tool("read", {"path": "/home/alice/notes.txt"})
    t.result(a, {"content": []})
    src = save(t.frames, tmp_path / "r.jsonl")
    done = export_fixture(str(src), str(tmp_path / "out.jsonl"))
    assert done.machine_paths == [(2, "/home/alice/notes.txt")]
    assert "warning: " in done.lines()[1] and "/home/alice/notes.txt" in done.lines()[1]
    clean = export_fixture(str(src), str(tmp_path / "clean.jsonl"), redact_paths=["params.arguments.path"])
    assert clean.machine_paths == []


def test_the_committed_fixtures_name_no_machine(tmp_path):
    for path in (ROOT / "fixtures").glob("test_*/*.jsonl"):
        text = path.read_text()
        for needle in ("/work/", "/tmp/", "/root/", "/home/", '"pid"'):
            assert needle not in text, f"{path} mentions {needle}"


def test_a_summary_that_cannot_be_written_any_more_does_not_stop_the_replay(tmp_path, capsys):
    """The summary's folder goes away while the client is served: the client is still answered, the
    failure is said once, and the run's status is 1 (near miss: while it can be written, nothing is
    said and it holds the count)."""
    from mrtr_inspect.replay.serve import ServeSession

    folder = tmp_path / "out"
    folder.mkdir()
    summary = folder / "s.json"
    session = ServeSession(load_script(str(RECORDING)), summary_path=str(summary))
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert session.answer(ping) is not None and session.summary_failed is None
    assert json.loads(summary.read_text())["synthesized"] == 1 and capsys.readouterr().err == ""
    summary.unlink()
    folder.rmdir()
    for n in (2, 3):
        assert session.answer(ping.replace(b'"id":1', b'"id":%d' % n)) is not None
    assert session.summary_failed and "cannot write summary" in session.summary_failed
    err = capsys.readouterr().err
    assert err.count("cannot write summary") == 1 and err.count("\n") == 1
    session.close()
    assert not folder.exists()
