"""`mrtr-inspect stdio -- CMD`: what the tee promises, each on a real process.

The child programs (`respond`, `echo`, `signals`…) are in tests/e2e/__init__.py.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e import EOF_LINE, helper, recorded_lines, records, tee_cmd
from tests.traffic import dumps, meta

# a tools/call carrying a requestState no result issued: an error finding (request-state-unsolicited)
FORGED = dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "deploy", "arguments": {"env": "prod"}, "requestState": "forged", "_meta": meta()}}) + b"\n"
RULE = b"request-state-unsolicited"
SERVER_LOG = b"respond: started\n"  # what the `respond` child writes to its stderr


def wait_until(condition, timeout: float = 30.0, what: str = "condition"):
    """Poll `condition` until it returns something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def read_line(stream, timeout: float = 30.0) -> bytes:
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, "no line from the process"
    return stream.readline()


def read_to_eof(stream, timeout: float = 60.0) -> bytes:
    """Everything until end of file (not until the process exits), or fail after `timeout` seconds."""
    fd, out = stream.fileno(), []
    deadline = time.monotonic() + timeout
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(out)
        out.append(chunk)
    raise AssertionError("no end of file")


def analysis_pid(tee) -> int:
    """The tee's analysis process: the child that runs the tee's own command line (it was forked)."""
    me = Path(f"/proc/{tee.pid}/cmdline").read_bytes()
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == tee.pid and (d / "cmdline").read_bytes() == me:
                    kids.append(int(d.name))
            except (OSError, IndexError):
                continue
    assert len(kids) == 1, kids
    return kids[0]


# -- stdout carries the protocol only; findings on stderr ---------------------------------------


def test_stdout_is_the_childs_and_findings_go_to_stderr_as_plain_lines(procs):
    child = helper("respond")
    direct = procs.run(child, FORGED)
    teed = procs.run(tee_cmd(cmd=child), FORGED)
    assert teed.returncode == direct.returncode == 0
    assert teed.stdout == direct.stdout  # nothing of the tee's on stdout
    assert RULE not in teed.stdout
    lines = teed.stderr.splitlines(keepends=True)
    assert SERVER_LOG in lines  # the child's stderr passes through
    ours = [line for line in lines if line != SERVER_LOG]
    assert all(line.startswith(b"mrtr-inspect: ") for line in ours)
    assert any(line.startswith(b"mrtr-inspect: error request-state-unsolicited [c1 #0] tools/call id=1") for line in ours)
    assert b"\x1b[" not in teed.stderr


def test_findings_are_rich_on_a_terminal(procs):
    master, slave = pty.openpty()
    p = procs.start(tee_cmd(cmd=helper("respond")), stderr=slave)
    os.close(slave)
    p.stdin.write(FORGED)
    p.stdin.close()
    seen = b""
    try:
        while select.select([master], [], [], 30)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert p.wait(30) == 0
    assert RULE in seen
    assert b"\x1b[" in seen  # styled by rich
    assert b"mrtr-inspect: error" not in seen  # not the plain form
    assert RULE not in p.stdout.read()


def test_quiet_leaves_stderr_to_the_child(procs):
    teed = procs.run(tee_cmd("--quiet", cmd=helper("respond")), FORGED)
    assert teed.returncode == 0
    assert teed.stderr == SERVER_LOG


# -- signals, exit status, end of file ----------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_reach_the_child_and_its_death_is_the_exit_status(procs, sig):
    p = procs.start(tee_cmd(cmd=helper("signals")))
    assert read_line(p.stdout) == b"ready\n"
    p.send_signal(sig)
    assert read_line(p.stdout) == f"got {int(sig)}\n".encode()
    assert p.wait(30) == 128 + sig
    assert b"Traceback" not in p.stderr.read()


def test_exit_status_is_the_childs(procs):
    done = procs.run(tee_cmd(cmd=helper("respond", "7")), FORGED)
    assert done.returncode == 7


def test_a_server_that_dies_with_a_request_open_is_said_live_and_by_check_of_the_recording(procs, tmp_path):
    """Issue 25 item 9: the child exits 3 with the client's request unanswered (the client still
    connected): the live warning names the status and the request, the chain ends `error`, and the
    recording (its session end carries the exit status) gives `check` the same."""
    rec, rep = tmp_path / "died.jsonl", tmp_path / "report.json"
    p = procs.start(tee_cmd("--record", str(rec), "--report", str(rep), cmd=helper("die_on_request", "3")))
    assert p.stdin is not None and p.stderr is not None
    p.stdin.write(FORGED.replace(b'"requestState":"forged",', b""))
    p.stdin.flush()  # and keep stdin open: the client waits for its answer
    assert p.wait(60) == 3
    said = b"mrtr-inspect: warning upstream-error [c1 #0] the server process exited with status 3, leaving 1 request " \
           b"unanswered: tools/call id=1 (message #0); 1 chain waiting on it ended as error"
    assert said in p.stderr.read()
    report = json.loads(rep.read_text())
    assert [c["outcome"] for c in report["chains"]] == ["error"]
    assert records(rec)[-1]["info"] == {"exit": 3}
    checked = procs.run([*tee_cmd(cmd=[])[:3], "check", "--format", "json", str(rec)])
    again = json.loads(checked.stdout)
    assert [c["outcome"] for c in again["chains"]] == ["error"]
    assert [f["message"] for f in again["findings"] if f["rule"] == "upstream-error"] == \
           [f["message"] for f in report["findings"] if f["rule"] == "upstream-error"]


def test_end_of_input_reaches_the_child(procs):
    p = procs.start(tee_cmd(cmd=helper("respond")))
    p.stdin.write(FORGED)
    p.stdin.flush()
    assert json.loads(read_line(p.stdout))["id"] == 1
    p.stdin.close()
    assert read_line(p.stdout) == EOF_LINE  # the child saw its stdin end
    assert p.wait(30) == 0


def test_end_of_output_reaches_the_client(procs):
    p = procs.start(tee_cmd(cmd=helper("half_close")))
    assert p.stdout.read().endswith(b'"data":"bye"}}\n')  # returns at end of file
    assert p.poll() is None  # ... while the child, and so the tee, still run
    p.stdin.close()
    assert p.wait(30) == 0


def test_a_client_that_stops_reading_is_passed_on_to_the_child(procs):
    p = procs.start(tee_cmd(cmd=helper("until_epipe")))
    read_line(p.stdout)
    p.stdout.close()
    assert p.wait(30) == 3  # the child's write failed as it would on a direct pipe


def test_a_child_that_stops_reading_is_passed_on_to_the_client(procs):
    p = procs.start(tee_cmd(cmd=helper("deaf")), stderr=subprocess.DEVNULL)  # a finding per message
    assert read_line(p.stdout) == b"deaf\n"
    deadline = time.monotonic() + 30
    with pytest.raises(BrokenPipeError):  # as it would be on a direct pipe
        while time.monotonic() < deadline:
            os.write(p.stdin.fileno(), FORGED)
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 128 + signal.SIGTERM


# -- what passes, byte for byte -----------------------------------------------------------------


def test_a_50_mb_message_and_a_last_line_without_newline_pass_intact(procs, tmp_path):
    big = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"blob":"' + \
          b"x" * (50 * 1024 * 1024) + b'"}}}'
    last = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
    data = big + b"\n" + last
    record = tmp_path / "big.jsonl"
    done = procs.run(tee_cmd("--record", str(record), cmd=helper("echo")), data, timeout=120)
    assert done.returncode == 0
    assert done.stdout == data
    for d in ("c2s", "s2c"):
        assert recorded_lines(record, d) == [big, last]
    tails = [r for r in records(record) if r.get("k") == "line" and r.get("eol") is False]
    assert sorted(r["d"] for r in tails) == ["c2s", "s2c"]


def test_a_line_past_max_message_bytes_passes_and_is_recorded_whole_then_reported_not_analysed(procs, tmp_path):
    """A 5 MiB line with max_message_bytes at 1 MiB: forwarded and recorded byte for byte (it waits
    in a temporary file, not in the tee's memory), reported as message-too-large live and by
    `check`; `export --to html` does not carry it."""
    big = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"blob":"' + \
          b"x" * (5 << 20) + b'"}}}'
    after = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
    data = big + b"\n" + after + b"\n"
    conf, record, rep = tmp_path / "mrtr.toml", tmp_path / "big.jsonl", tmp_path / "r.json"
    conf.write_text("max_message_bytes = 1048576\n")
    done = procs.run(tee_cmd("--config", str(conf), "--record", str(record), "--report", str(rep),
                             cmd=helper("echo")), data, timeout=120)
    assert done.returncode == 0 and done.stdout == data
    for d in ("c2s", "s2c"):
        assert recorded_lines(record, d) == [big, after]
    live = [f for f in json.loads(rep.read_text())["findings"] if f["rule"] == "message-too-large"]
    assert len(live) == 2 and {"(stdin)", "(stdout)"} == {f["message"].split(" ")[5] for f in live}  # the line and its echo
    assert "is 5.0 MiB" in live[0]["message"]
    run = [sys.executable, "-m", "mrtr_inspect"]
    out = procs.run(run + ["check", "--config", str(conf), "--format", "json", str(record)])
    found = [f for f in json.loads(out.stdout)["findings"] if f["rule"] == "message-too-large"]
    assert [f["message"] for f in found] == [f["message"] for f in live]
    page = tmp_path / "p.html"
    assert procs.run(run + ["export", "--config", str(conf), "--to", "html", "--output", str(page), str(record)]).returncode == 0
    assert page.stat().st_size < 1 << 20 and b"message-too-large" in page.read_bytes()


# -- a child that cannot start ------------------------------------------------------------------


def test_a_child_that_cannot_start_gives_one_line_and_127(procs, tmp_path):
    record = tmp_path / "r.jsonl"
    missing = str(tmp_path / "no-such-server")
    done = procs.run(tee_cmd("--record", str(record), cmd=[missing, "--flag"]))
    assert done.returncode == 127
    assert done.stdout == b""
    assert done.stderr.count(b"\n") == 1
    assert done.stderr.startswith(b"mrtr-inspect: cannot start ") and missing.encode() in done.stderr
    end = records(record)[-1]
    assert end["k"] == "session-end" and "cannot start" in end["info"]["error"]


# -- recording and report -----------------------------------------------------------------------


def test_record_creates_a_private_file_and_appends_a_session_per_run(procs, tmp_path):
    record = tmp_path / "s.jsonl"
    cmd = tee_cmd("--record", str(record), cmd=helper("respond"))
    assert procs.run(cmd, FORGED).returncode == 0
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    first = record.read_bytes()
    assert procs.run(cmd, FORGED).returncode == 0
    both = record.read_bytes()
    assert both.startswith(first) and len(both) > len(first)
    recs = records(record)
    headers = [r for r in recs if r.get("mrtr-inspect") == "recording"]
    ends = [r for r in recs if r.get("k") == "session-end"]
    assert len(headers) == len(ends) == 2
    assert headers[0]["session"] != headers[1]["session"]
    assert [e["info"] for e in ends] == [{"exit": 0}, {"exit": 0}]
    assert recorded_lines(record, "c2s") == [FORGED[:-1]] * 2


def test_hop_names_the_session_in_its_header_and_a_bad_name_is_refused(procs, tmp_path):
    record = tmp_path / "s.jsonl"
    assert procs.run(tee_cmd("--record", str(record), "--hop", "back", cmd=helper("respond")), FORGED).returncode == 0
    (header,) = [r for r in records(record) if r.get("mrtr-inspect") == "recording"]
    assert header["hop"] == "back"
    bad = procs.run(tee_cmd("--record", str(tmp_path / "b.jsonl"), "--hop", "no spaces", cmd=helper("respond")), FORGED)
    assert bad.returncode == 2 and b"--hop: a hop name is 1 to 32 letters" in bad.stderr
    assert not (tmp_path / "b.jsonl").exists()


def test_report_has_the_contract_shape(procs, tmp_path):
    report, record = tmp_path / "report.json", tmp_path / "r.jsonl"
    done = procs.run(tee_cmd("--quiet", "--report", str(report), "--record", str(record), cmd=helper("respond")),
                     FORGED)
    assert done.returncode == 0
    r = json.loads(report.read_text())
    assert r["format"] == "mrtr-inspect.report/1"
    assert r["tool"]["name"] == "mrtr-inspect" and isinstance(r["tool"]["version"], str)
    assert r["inputs"] == [str(record)]
    assert set(r["summary"]) == {"messages", "chains", "errors", "warnings", "infos"}
    assert (r["summary"]["messages"], r["summary"]["chains"]) == (3, 1)  # request, result, notification
    assert r["summary"]["errors"] >= 1
    [c] = r["chains"]
    assert {k: c[k] for k in ("id", "method", "target", "rounds", "requests", "outcome", "link")} == {
        "id": "c1", "method": "tools/call", "target": "deploy", "rounds": 0, "requests": [1],
        "outcome": "complete", "link": None}
    assert isinstance(c["duration_ms"], float)
    f = next(f for f in r["findings"] if f["rule"] == RULE.decode())
    assert f["severity"] == "error" and f["messages"] == [0] and isinstance(f["message"], str)
    assert set(f) >= {"rule", "severity", "message", "chain", "messages", "spec", "conformance"}


def test_a_recording_on_a_fifo_is_not_read_back_and_the_analysis_gets_the_chunks(procs, tmp_path):
    """--record on a FIFO (its reader elsewhere): the analysis cannot read it back as it grows, so
    the tee hands it the chunks, as without a recording; the report has every message and the
    finding, the FIFO every record. Near miss: test_report_has_the_contract_shape, a recording on a
    file, which the analysis reads back, gives the same summary."""
    from tests.recording.test_output_files import fifo_read

    report, fifo = tmp_path / "report.json", tmp_path / "r.fifo"
    with fifo_read(fifo) as got:
        done = procs.run(tee_cmd("--quiet", "--report", str(report), "--record", str(fifo), cmd=helper("respond")),
                         FORGED)
    assert done.returncode == 0
    r = json.loads(report.read_text())
    assert (r["summary"]["messages"], r["summary"]["chains"]) == (3, 1) and r["inputs"] == [str(fifo)]
    assert RULE.decode() in {f["rule"] for f in r["findings"]}
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(got[0])
    assert recorded_lines(copy, "c2s") == [FORGED[:-1]] and len(recorded_lines(copy, "s2c")) == 2
    assert records(copy)[-1]["k"] == "session-end"


# -- the analysis never holds the traffic up ----------------------------------------------------


def test_traffic_flows_while_the_analysis_is_stopped(procs, tmp_path):
    record = tmp_path / "r.jsonl"
    p = procs.start(tee_cmd("--record", str(record), cmd=helper("echo")))
    p.stdin.write(FORGED)
    p.stdin.flush()
    assert read_line(p.stdout) == FORGED  # the child is up, so is the analysis (forked before it)
    pid = analysis_pid(p)
    os.kill(pid, signal.SIGSTOP)
    try:
        data = b"".join(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%d"}}\n' % i
                        for i in range(20_000))  # far more than a pipe holds
        writer = threading.Thread(target=lambda: (p.stdin.write(data), p.stdin.close()))
        writer.start()
        assert read_to_eof(p.stdout) == data  # all of it, while the analysis is stopped
        writer.join()
        assert p.poll() is None  # the tee waits for its analysis
    finally:
        os.kill(pid, signal.SIGCONT)
    assert p.wait(60) == 0
    # ... which recorded everything
    assert len(recorded_lines(record, "s2c")) == 20_001
    assert records(record)[-1] == {**records(record)[-1], "k": "session-end", "info": {"exit": 0}}


def test_an_analysis_stopped_past_max_backlog_bytes_skips_ahead_and_says_so(procs, tmp_path):
    """max_backlog_bytes at 1 MiB and the analysis stopped while 3 MB cross: the traffic and the
    recording are whole, the tee held no more than the backlog for the analysis, which skipped
    whole lines: it says so live and at the end, and the report's note gives the number (what it
    analysed and what it skipped are every line) and names `check` of the recording. Near miss:
    test_traffic_flows_while_the_analysis_is_stopped (20,000 lines, under the default 64 MiB) skips none."""
    record, report, err = tmp_path / "r.jsonl", tmp_path / "report.json", tmp_path / "err.txt"
    config = tmp_path / "settings.toml"
    config.write_text("max_backlog_bytes = 1048576\n")
    with open(err, "wb") as e:
        p = procs.start(tee_cmd("--quiet", "--config", str(config), "--record", str(record), "--report", str(report),
                                cmd=helper("echo")), stderr=e)
        p.stdin.write(FORGED)
        p.stdin.flush()
        assert read_line(p.stdout) == FORGED
        pid = analysis_pid(p)
        os.kill(pid, signal.SIGSTOP)
        try:
            data = b"".join(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%d"}}\n' % i
                            for i in range(40_000))
            writer = threading.Thread(target=lambda: (p.stdin.write(data), p.stdin.close()))
            writer.start()
            assert read_to_eof(p.stdout) == data
            writer.join()
        finally:
            os.kill(pid, signal.SIGCONT)
        assert p.wait(120) == 0
    assert len(recorded_lines(record, "c2s")) == len(recorded_lines(record, "s2c")) == 40_001
    r = json.loads(report.read_text())
    [note] = [n for n in r.get("notes", []) if "skipped" in n]
    skipped = int(note.split("skipped ", 1)[1].split()[0])
    assert skipped > 0 and r["summary"]["messages"] + skipped == 2 * 40_001
    assert note.endswith(f"`mrtr-inspect check {record}` gives the full verdict")
    said = err.read_text()
    assert "the live analysis fell 1 MiB behind the traffic (max_backlog_bytes)" in said and note in said


def test_a_signal_after_the_child_exited_ends_the_wait_for_the_analysis(procs, tmp_path):
    report = tmp_path / "report.json"
    p = procs.start(tee_cmd("--report", str(report), cmd=helper("respond", "5")))
    p.stdin.write(FORGED)
    p.stdin.flush()
    read_line(p.stdout)
    pid = analysis_pid(p)
    os.kill(pid, signal.SIGSTOP)
    try:
        p.stdin.close()
        assert read_line(p.stdout) == EOF_LINE
        assert read_to_eof(p.stdout) == b""  # the child is gone; the tee now waits for its analysis
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(0.2)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 5  # the child's status, at once
    finally:
        os.kill(pid, signal.SIGCONT)
    # the analysis, in a session of its own, finishes the report by itself
    r = wait_until(lambda: report.exists() and report.read_text().endswith("}\n") and json.loads(report.read_text()),
                   what="the report")
    assert RULE.decode() in {f["rule"] for f in r["findings"]}


def test_a_killed_tee_still_leaves_a_closed_recording_and_a_report(procs, tmp_path):
    record, report = tmp_path / "r.jsonl", tmp_path / "report.json"
    p = procs.start(tee_cmd("--record", str(record), "--report", str(report), cmd=helper("respond")))
    p.stdin.write(FORGED)
    p.stdin.flush()
    read_line(p.stdout)
    p.kill()
    p.wait(30)
    wait_until(lambda: report.exists() and report.read_text().endswith("}\n"), what="the report")
    recs = records(record)
    assert recs[-1]["k"] == "session-end"
    assert len(recorded_lines(record, "c2s")) == 1
    assert RULE.decode() in {f["rule"] for f in json.loads(report.read_text())["findings"]}


# -- the project's redaction settings; the report's path ----------------------------------------


def test_configured_redaction_reaches_the_recording_with_the_sample_client(procs, tmp_path):
    """redact_paths of the settings file (here --config) apply to the tee's recording: the answer the
    sample client typed and the tool argument are placeholders; the rest stays as it crossed."""
    import sys

    conf = tmp_path / "mrtr.toml"
    conf.write_text('redact_paths = ["params.inputResponses.*.content.notes", "params.arguments.version"]\n')
    record, report = tmp_path / "r.jsonl", tmp_path / "report.json"
    tee = tee_cmd("--quiet", "--config", str(conf), "--record", str(record), "--report", str(report),
                  cmd=[sys.executable, "-m", "mrtr_inspect.samples.server"])
    done = procs.run(helper("sdk_client", "release", "--", *tee), timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"release: released 1.0.0" in done.stdout  # the server got the real values
    c2s = b"\n".join(recorded_lines(record, "c2s"))
    assert b'"notes":"first release"' not in c2s and b'"version":"1.0.0"' not in c2s
    assert b'"notes":"[redacted:' in c2s and b'"version":"[redacted:' in c2s
    assert b'"tag":"v1.0.0"' in c2s  # a sibling of a redacted path: kept
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    check = procs.run([sys.executable, "-m", "mrtr_inspect", "check", str(record), "--format", "json",
                       "--config", str(conf)])
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["findings"] == json.loads(report.read_text())["findings"]


def test_a_report_that_cannot_be_written_is_one_line_and_exit_2_before_the_child_starts(procs, tmp_path):
    report = tmp_path / "missing" / "report.json"
    done = procs.run(tee_cmd("--report", str(report), cmd=helper("respond")), FORGED)
    assert done.returncode == 2
    assert done.stderr == f"mrtr-inspect: cannot write report {report}: No such file or directory\n".encode()
    assert done.stdout == b""  # the child never ran


def test_a_report_that_fails_at_the_end_is_said_and_the_status_stays_the_childs(procs, tmp_path):
    """Its folder is gone by the end of the session: one line on stderr; the exit status is still the
    child's (CONTRACTS.md), unlike the proxy's."""
    folder = tmp_path / "out"
    folder.mkdir()
    report = folder / "report.json"
    tee = procs.start(tee_cmd("--quiet", "--report", str(report), cmd=helper("respond", "3")))
    tee.stdin.write(FORGED)
    tee.stdin.flush()
    assert read_line(tee.stdout) != b""  # the session is under way: the path was checked
    folder.rmdir()
    out, err = tee.communicate(b"", timeout=60)
    assert tee.returncode == 3
    assert f"mrtr-inspect: cannot write report {report}: No such file or directory".encode() in err
