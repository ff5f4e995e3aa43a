"""The embedded proxy's analysis reading its recording as it grows (live_inputs.RecordedHttpInput,
proxy.AnalysisProcess with `follow`, the spooler's FOLLOW and UPTO notices): no copy of the records is
handed over, the live report is `check`'s of the recording, a follower behind by max_backlog_bytes
skips whole exchanges and says how many messages, and a recording that stops hands records again."""

from __future__ import annotations

import asyncio
import copy
import json
import os

import pytest

from mrtr_inspect.adapters import analysis_process as ap
from mrtr_inspect.adapters import proxy
from mrtr_inspect.adapters.live_analysis import LiveAnalysis, http_info
from mrtr_inspect.adapters.live_inputs import RecordedHttpInput
from mrtr_inspect.adapters.offline import analyze
from mrtr_inspect.adapters.recorder import HttpRecorder
from mrtr_inspect.config import Config
from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SseEvent
from mrtr_inspect.outputs.report import ReportBuilder
from mrtr_inspect.recording import format as fmt
from mrtr_inspect.recording.reader import read_frames
from mrtr_inspect.recording.redaction import Redactor
from mrtr_inspect.recording.writer import RecordingWriter, redactor_for
from tests.adapters.test_tee_follow import fail_after_writes
from tests.captures import captures_dir

JSON = (("content-type", "application/json"),)


def _steps(name: str = "http_auto.jsonl", times: int = 1) -> list[tuple]:
    """The addon's steps for an SDK capture (requests taken whole, responses stepped, event streams
    chunk by chunk), `times` over with the exchanges renumbered."""
    records = [json.loads(line) for line in (captures_dir() / name).read_text().splitlines() if line.strip()]
    top = max(r["n"] for r in records)
    out = []
    for i in range(times):
        for r in records:
            t, x = r["t"] + i, r["n"] + i * top
            if r["dir"] == "req":
                headers = tuple((r.get("headers") or {}).items())
                out.append(("request_message", (t, x, r["method"], r["path"], headers, "127.0.0.1",
                                                (r.get("body") or "").encode(), True)))
            elif r["dir"] == "resp_head":
                out.append(("response_head", (t, x, r["status"], tuple((r.get("headers") or {}).items()))))
            elif r["dir"] == "resp_chunk":
                out.append(("response_data", (t, x, r["raw"].encode())))
            elif r["dir"] == "resp_end":
                out.append(("response_end", (t, x, None)))
    return out


def _ping(x: int, pad: int = 0) -> list[tuple]:
    request = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"%s"}}' % (x, b"p" * pad)
    answer = b'{"jsonrpc":"2.0","id":%d,"result":{}}' % x
    return [("request_message", (float(x), x, "POST", "/mcp", JSON, "", request, True)),
            ("response_message", (x + 0.1, x, 200, JSON, answer, x + 0.2, None))]


class Notices:
    """A spooler stand-in: keeps what it is put, counts its wake-ups."""

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.wakes = 0
        self.queued = self.written = 0
        self.followed: int | None = None

    def put(self, kind: int, t: float, data: bytes = b"") -> None:
        self.queued += len(data)
        self.items.append((kind, data))

    def follow(self, fd: int) -> None:
        self.followed = fd

    def wake(self) -> None:
        self.wakes += 1


def _check(rec, config=None) -> dict:
    again = ReportBuilder([str(rec)])
    analyze([str(rec)], again.add, config or Config())
    return again.to_dict()


def _run(tmp_path, monkeypatch, steps, config=None, fail_after=None, follow=True) -> tuple[dict, proxy.AnalysisProcess]:
    """The proxy's parts as run_proxy joins them, in this process: an AnalysisProcess following the
    recording (its header deferred until the proxy listens), the real spooler and pipe, then the
    analysis process' loop (`analysis_main`) until END. `fail_after`: the recording cannot be
    written after that many writes (a full disk); `follow` False: the records handed over instead."""
    config = config or Config()
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "test")
    rec, rep = tmp_path / "rec.jsonl", tmp_path / "report.json"
    r, w = os.pipe()
    monkeypatch.setattr(proxy, "fork_analysis", lambda make: (0, ap.Spooler(w)))
    monkeypatch.setattr(proxy.os, "waitpid", lambda pid, options: (pid, 0))
    writer = RecordingWriter(rec, "http", http_info("http://127.0.0.1:1/mcp"), redactor_for(config), session="h",
                             deferred=True)
    reader = writer.reader()
    assert reader is not None
    followed = (reader[0], None) if follow else None
    if fail_after is not None:
        fail_after_writes(writer, fail_after)
    a = proxy.AnalysisProcess(None, HttpRecorder("h", writer.redactor, writer), config.max_backlog_bytes, follow=follow)
    forked = copy.deepcopy(writer.redactor)  # the analysis process' copy, forked before the traffic

    async def feed() -> None:
        writer.begin()  # the proxy listens
        a.ready()
        for step in steps:
            a.put(step)
        a.finish({"exchanges": 0})
    asyncio.run(feed())
    writer.redactor = forked
    make = lambda: LiveAnalysis(writer.start, config, writer, None, ReportBuilder([str(rec)]), str(rep),
                                forwarder_records=True, follow=followed)
    assert ap.analysis_main(r, make) == 0
    return json.loads(rep.read_text()), a


def test_with_a_recording_the_analysis_is_handed_no_records_only_notices(tmp_path, monkeypatch):
    """Following, a step's write hands nothing over and wakes nothing: no RECORDS item, no copy;
    FOLLOW gives where the header ended. Near miss: without `follow` the records are handed over, the same bytes the
    recording holds after its header."""
    for follow in (True, False):
        spool = Notices()
        monkeypatch.setattr(proxy, "fork_analysis", lambda make: (0, spool))
        rec = tmp_path / f"{follow}.jsonl"
        writer = RecordingWriter(rec, "http", {}, Redactor(b"k"), session="h", deferred=True)
        a = proxy.AnalysisProcess(None, HttpRecorder("h", writer.redactor, writer), follow=follow)

        async def feed() -> None:
            writer.begin()
            a.ready()
            for step in _steps():
                a.put(step)
            await asyncio.sleep(2 * proxy.FLUSH_AFTER)  # the wake (following) or the batch's flush is due
            a._flush()
        asyncio.run(feed())
        header = len(rec.read_bytes().split(b"\n", 1)[0]) + 1
        if follow:  # (the analysis looks at the file itself: LiveAnalysis.look)
            assert [k for k, _ in spool.items] == [ap.FOLLOW, ap.C2S_EOF] and spool.wakes == 0
            assert ap.SKIPPED.unpack(spool.items[0][1])[0] == header and spool.followed == writer.fileno()
        else:
            assert b"".join(d for k, d in spool.items if k == ap.C2S) == rec.read_bytes()[header:]
            assert spool.wakes == 0 and spool.followed is None


def test_the_live_report_of_a_proxy_follower_is_the_check_of_the_recording(tmp_path, monkeypatch):
    """An SDK session's steps (event streams included) three times over, through the real spooler and
    pipe: the analysis reads the recording and its report equals `check` of it, every message
    analysed, nothing skipped."""
    live, a = _run(tmp_path, monkeypatch, _steps(times=3))
    check = _check(tmp_path / "rec.jsonl")
    assert live == check
    assert live["summary"]["messages"] > 0 and a.skipped == 0 and "notes" not in live
    assert len(live["chains"]) == 3


def test_a_proxy_follower_never_reads_a_half_record(tmp_path):
    """Records appended one byte at a time, the follower asked after each byte: it gives each record
    once, whole, when its LF is there; another writer's records are not its. Near miss: nothing is
    read before the proxy says where its session begins."""
    writer = RecordingWriter(tmp_path / "rec.jsonl", "http", {}, Redactor(b"k"), session="h")
    file, start = writer.reader()  # type: ignore[misc]
    frames = [HttpRequest(1.0, "h", 1, "POST", "/mcp", JSON, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', "", True),
              HttpRequest(1.5, "other", 1, "POST", "/mcp", JSON, b"{}", "", True),
              HttpBody(2.0, "h", 1, b'{"jsonrpc":"2.0","id":1,"result":{}}', True),
              SseEvent(2.5, "h", 2, b"data: {}\n\n"),
              HttpEnd(3.0, "h", 1, None)]
    data = b"".join(map(fmt.encode, frames))
    follower = RecordedHttpInput("h", None, lambda: None, file, 1 << 20, lambda: None)
    writer.append(data[:10])
    assert list(follower.items(start + 10)) == []  # not started
    follower.start(start)
    got = list(follower.items(start + 10))
    for i in range(10, len(data)):
        writer.append(data[i:i + 1])
        got += follower.items(start + i + 1)
    assert got == [f for f in frames if f.session == "h"]


def test_a_proxy_follower_behind_by_the_backlog_skips_whole_exchanges_and_counts_them(tmp_path):
    """max_backlog_bytes at 8 KiB and 200 exchanges appended before the follower looks, the first one
    begun and read before: that one is read whole, the exchanges that begin while it is behind are
    skipped whole (a request and a response body each counted) until it is 4 KiB from the end, then
    read whole. Near miss: a follower asked after each exchange skips none."""
    writer = RecordingWriter(tmp_path / "rec.jsonl", "http", {}, Redactor(b"k"), session="h")
    file, start = writer.reader()  # type: ignore[misc]
    recorder = HttpRecorder("h", writer.redactor)  # the records, appended here
    began: list[bool] = []
    follower = RecordedHttpInput("h", None, lambda: None, file, 8192, lambda: began.append(True))
    follower.start(start)
    first, *rest = [recorder.records(step) for x in range(1, 201) for step in _ping(x, pad=40)]
    writer.append(first)
    got = list(follower.items(0))
    assert [type(f) for f in got] == [HttpRequest]
    for records in rest:
        writer.append(records)
    got += follower.items(0)
    exchanges = sorted({f.exchange for f in got})
    assert began == [True] and exchanges[0] == 1
    whole = [HttpRequest, HttpResponse, HttpBody, HttpEnd]
    assert [type(f) for f in got if f.exchange == 1] == whole  # the one begun before, read whole
    assert 1 < len(exchanges) < 200 and exchanges[1:] == list(range(exchanges[1], 201))  # the last ones, whole
    assert follower.skipped == 2 * (exchanges[1] - 2)
    assert [type(f) for f in got if f.exchange == 200] == whole

    near = RecordingWriter(tmp_path / "near.jsonl", "http", {}, Redactor(b"k"), session="h")
    file, start = near.reader()  # type: ignore[misc]
    recorder = HttpRecorder("h", near.redactor)
    follower = RecordedHttpInput("h", None, lambda: None, file, 8192, lambda: began.append(True))
    follower.start(start)
    got = []
    for x in range(1, 201):
        for step in _ping(x, pad=40):
            near.append(recorder.records(step))
        got += follower.items(0)
    assert follower.skipped == 0 and len({f.exchange for f in got}) == 200 and began == [True]


def test_a_proxy_follower_behind_says_so_in_the_report(tmp_path, monkeypatch):
    """The whole proxy path with max_backlog_bytes at 8 KiB and the analysis reading only at the end:
    the report's note gives the count, which with the messages analysed is every message, and names
    `check` of the recording, which sees them all."""
    steps = [s for x in range(1, 301) for s in _ping(x, pad=40)]
    live, a = _run(tmp_path, monkeypatch, steps, Config(max_backlog_bytes=8192))
    rec = tmp_path / "rec.jsonl"
    [note] = live["notes"]
    skipped = int(note.split("skipped ", 1)[1].split()[0])
    assert skipped > 0 and live["summary"]["messages"] + skipped == 600 and a.skipped == 0
    assert note == (f"the live analysis skipped {skipped} messages, behind the traffic by max_backlog_bytes (8 KiB); "
                    f"the recording keeps every message: `mrtr-inspect check {rec}` gives the full verdict")
    assert _check(rec)["summary"]["messages"] == 600


def test_a_proxy_recording_that_stops_hands_the_analysis_records_again(tmp_path, monkeypatch):
    """The recording cannot be written after 40 writes (a full disk): the analysis read what reached
    the file, the messages of the failed write are counted as skipped, and every later step's records
    are handed over and analysed; together they are every message."""
    steps = [s for x in range(1, 61) for s in _ping(x)]
    live, a = _run(tmp_path, monkeypatch, steps, fail_after=40)
    rec = tmp_path / "rec.jsonl"
    recorded = sum(1 for f in read_frames(rec) if type(f) in (HttpRequest, HttpBody))
    assert recorded == 40 and a.skipped == 1 and not a.following
    assert live["summary"]["messages"] + a.skipped == 120
    assert live["notes"] == [f"the live analysis skipped {a.skipped} messages, as the recording it read stopped, "
                             "or behind the traffic by max_backlog_bytes (64 MiB); the recording stopped (it could "
                             "not be written): it does not keep every message either"]


@pytest.mark.parametrize("follow", [True, False], ids=["following", "handed records"])
def test_the_proxy_analysis_counts_the_redaction_paths_the_proxy_matched(tmp_path, monkeypatch, capsys, follow):
    """The proxy redacts (and records) a configured path's values; its analysis, reading the records
    back (or handed them), counts that path as matched, so the end says nothing of it; a path that
    matched nothing is said, with the one it likely meant (as the tee's analysis does)."""
    said = {}
    for name, path in (("right", "params.arguments.deploy_key"), ("typo", "params.arguments.deploykey")):
        body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{"deploy_key":"s3"}}}'
        steps = [("request_message", (1.0, 1, "POST", "/mcp", JSON, "", body, True)),
                 ("response_message", (1.1, 1, 200, JSON, b'{"jsonrpc":"2.0","id":1,"result":{}}', 1.2, None))]
        (tmp_path / name).mkdir()
        _run(tmp_path / name, monkeypatch, steps, Config(redact_paths=[path]), follow=follow)
        said[name] = capsys.readouterr().err
        assert (b'"s3"' in (tmp_path / name / "rec.jsonl").read_bytes()) == (name == "typo")
    assert "redaction path" not in said["right"]
    assert ("warning: redaction path params.arguments.deploykey matched no string value: nothing was redacted there "
            "(did you mean params.arguments.deploy_key?)") in said["typo"]
