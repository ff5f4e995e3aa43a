"""Bodies whose content-encoding fails: nothing is lost, and the frames say why."""

import gzip
import json
import io

from mrtr_inspect.core.events import HttpBody, HttpEnd, SseEvent
from mrtr_inspect.core.findings import Finding
from mrtr_inspect.core.framing import HttpFramer, decode_body
from mrtr_inspect.outputs.report import ReportBuilder


def test_a_cut_gzip_body_is_decoded_as_far_as_it_goes_and_says_so():
    body = gzip.compress(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    data, note = decode_body(body[:-6], "gzip")  # the trailer (CRC, size) is missing
    assert data == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert "cut short" in note
    data, note = decode_body(body, "gzip")
    assert "cut short" not in note


def _stream(encoding: str, chunks: list[bytes]) -> list:
    f = HttpFramer("s")
    f.request_head(0.0, 1, "POST", "/mcp", (), "")
    f.request_end(0.0, 1)
    out = f.response_head(0.0, 1, 200, (("content-type", "text/event-stream"), ("content-encoding", encoding)))
    for c in chunks:
        out += f.response_data(0.0, 1, c)
    return out + f.response_end(0.0, 1)


def test_an_event_stream_in_an_unknown_encoding_is_kept_as_it_arrived():
    frames = _stream("x-unknown", [b"data: {}\n", b"\n"])
    bodies = [f for f in frames if type(f) is HttpBody]
    assert not [f for f in frames if type(f) is SseEvent]
    assert len(bodies) == 1 and bodies[0].data == b"data: {}\n\n"
    assert "x-unknown" in bodies[0].body_note and not bodies[0].complete
    assert type(frames[-1]) is HttpEnd


def test_an_event_stream_whose_gzip_breaks_keeps_the_events_before_and_the_bytes_after():
    good = gzip.compress(b"data: {\"a\":1}\n\n")
    frames = _stream("gzip", [good[:-8], b"not gzip at all"])
    events = [f for f in frames if type(f) is SseEvent]
    bodies = [f for f in frames if type(f) is HttpBody]
    assert [e.raw for e in events] == [b'data: {"a":1}\n\n']
    assert len(bodies) == 1 and bodies[0].data == b"not gzip at all"


def test_the_report_survives_a_lone_surrogate():
    r = ReportBuilder(["x"])
    r.add_finding(Finding("inspector-error", "warning", "tool \ud800 unknown"))
    out = io.StringIO()
    r.write_json(out)
    assert json.loads(out.getvalue())["findings"][0]["message"] == "tool \ud800 unknown"
    r.close()
