"""`export --to har|html|mermaid|otlp`: each format's structure, checked field by field against the
specification it follows (HAR 1.2, OTLP/JSON), and the HTML page against hostile recordings."""

from __future__ import annotations

import json
import re
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mrtr_inspect.core.events import HttpEnd, HttpRequest, HttpResponse, SseEvent
from mrtr_inspect.outputs.exporters.capture import load
from mrtr_inspect.outputs.show import render_mermaid
from tests.outputs.conftest import HOSTILE, HTTP_FIXTURE, STDIO_FIXTURE, faulty, run_cli, save
from tests.traffic import ACCEPT, ELICIT, Traffic


def export(src: Path, to: str, out: Path) -> str:
    r = run_cli("export", src, "--to", to, "--output", out)
    assert r.exit_code == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"mrtr-inspect: wrote {out}: {to}")
    assert out.stat().st_mode & 0o777 == 0o600
    return out.read_text(encoding="utf-8")


def report(src: Path) -> dict:
    return json.loads(run_cli("check", src, "--format", "json", "--fail-on", "never").stdout)


# -- HAR 1.2 ----------------------------------------------------------------------------------------

NAME_VALUE = {"name", "value"}


def _is_name_values(items) -> bool:
    return isinstance(items, list) and all(isinstance(h, dict) and NAME_VALUE <= set(h) for h in items)


def assert_har_1_2(har: dict) -> None:
    """The fields HAR 1.2 requires, with their types (the specification has no official schema)."""
    log = har["log"]
    assert log["version"] == "1.2" and {"name", "version"} <= set(log["creator"])
    for page in log["pages"]:
        assert {"startedDateTime", "id", "title", "pageTimings"} <= set(page)
    for e in log["entries"]:
        datetime.fromisoformat(e["startedDateTime"].replace("Z", "+00:00"))
        assert isinstance(e["time"], (int, float)) and e["cache"] == {}
        req, resp, t = e["request"], e["response"], e["timings"]
        assert {"method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"} <= set(req)
        assert _is_name_values(req["headers"]) and _is_name_values(req["queryString"]) and req["cookies"] == []
        assert req["url"].startswith("http")
        if "postData" in req:
            assert {"mimeType", "text"} <= set(req["postData"])
        assert {"status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL",
                "headersSize", "bodySize"} <= set(resp)
        assert {"size", "mimeType"} <= set(resp["content"]) and _is_name_values(resp["headers"])
        assert {"send", "wait", "receive"} <= set(t) and all(t[k] >= 0 for k in ("send", "wait", "receive"))
        assert e["time"] == pytest.approx(sum(v for v in t.values() if v >= 0), abs=0.01)
        assert e["pageref"] in {p["id"] for p in log["pages"]}


def test_har_of_an_http_recording(tmp_path):
    har = json.loads(export(HTTP_FIXTURE, "har", tmp_path / "s.har"))
    assert_har_1_2(har)
    cap = load([str(HTTP_FIXTURE)])
    frames = [f for _, _, f in cap.frames]
    requests = [f for f in frames if type(f) is HttpRequest]
    entries = har["log"]["entries"]
    assert len(entries) == len(requests)
    by_x = {e["_mrtr"]["exchange"]: e for e in entries}
    for req in requests:
        e = by_x[req.exchange]
        resp = next(f for f in frames if type(f) is HttpResponse and f.exchange == req.exchange)
        end = next(f for f in frames if type(f) is HttpEnd and f.exchange == req.exchange)
        assert e["request"]["method"] == req.method and e["request"]["url"].endswith(req.path)
        assert e["request"]["postData"]["text"].encode() == req.body
        assert [(h["name"], h["value"]) for h in e["request"]["headers"]] == list(req.headers)
        assert e["response"]["status"] == resp.status
        assert datetime.fromisoformat(e["startedDateTime"].replace("Z", "+00:00")).timestamp() == pytest.approx(req.time, abs=1e-6)
        assert e["timings"]["wait"] == pytest.approx((resp.time - req.time) * 1000, abs=0.002)
        assert e["timings"]["receive"] == pytest.approx((end.time - resp.time) * 1000, abs=0.002)
        events = [f.raw for f in frames if type(f) is SseEvent and f.exchange == req.exchange]
        if events:  # an event stream: its events one after the other
            assert e["response"]["content"]["text"].encode() == b"".join(events)
            assert e["response"]["content"]["mimeType"].startswith("text/event-stream")
    # what each exchange is to its chain
    c1 = report(HTTP_FIXTURE)["chains"][0]
    first = next(e for e in entries if e["_mrtr"]["messages"][0]["index"] == c1["timeline"][0]["message"])
    retry = next(e for e in entries if e["_mrtr"]["messages"][0]["index"] == c1["timeline"][1]["message"])
    assert (first["_mrtr"]["chain"], first["_mrtr"]["round"]) == (c1["id"], 0)
    assert (retry["_mrtr"]["chain"], retry["_mrtr"]["round"]) == (c1["id"], 1)
    assert first["_mrtr"]["messages"][1]["step"] == "input_required, round 1"
    assert f"{c1['id']}: retry of round 1" in retry["comment"]
    assert any(f["rule"] == "chain-linked" for f in retry["_mrtr"]["findings"])


def test_har_findings_and_errors_land_on_their_entries(tmp_path):
    t = faulty("http")
    x = t.post(t.request("tools/call", {"name": "gone", "arguments": {}}))
    t.frames.append(HttpEnd(t.tick(), t.session, x, "client-disconnected"))
    late = Traffic("http", session="late", start=t.tick(), with_session_start=False)  # no header of its own
    late.result(late.tool("more", {}), {"content": []})
    har = json.loads(export(save(t.frames + late.frames, tmp_path / "r.jsonl"), "har", tmp_path / "r.har"))
    assert_har_1_2(har)  # every entry's pageref is a page
    assert [p["id"] for p in har["log"]["pages"]] == ["s1", "late"]
    entries = har["log"]["entries"][:-1]
    reused = [e for e in entries if any(f["rule"] == "retry-reused-id" for f in e["_mrtr"]["findings"])]
    assert [e["_mrtr"]["round"] for e in reused] == [0, 1]  # it names the first request and the retry
    assert reused[0]["_mrtr"]["findings"][0]["spec"].startswith("https://modelcontextprotocol.io/")
    assert entries[-1]["response"]["status"] == 0 and entries[-1]["response"]["_error"] == "client-disconnected"


@pytest.mark.parametrize("with_stdio", [True, False])
def test_har_export_says_what_the_har_holds(tmp_path, with_stdio):
    """A recording with stdio sessions too: the line counts the HAR's entries and chains, not the
    recording's, and says the stdio sessions were left out (near miss: HTTP only, nothing left out)."""
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(HTTP_FIXTURE.read_bytes() + (STDIO_FIXTURE.read_bytes() if with_stdio else b""))
    out = tmp_path / "x.har"
    r = run_cli("export", src, "--to", "har", "--output", out)
    assert r.exit_code == 0, r.stderr
    entries = json.loads(out.read_text(encoding="utf-8"))["log"]["entries"]
    chains = {e["_mrtr"]["chain"] for e in entries} - {None}
    assert entries and chains and len(report(src)["chains"]) == len(chains) * (2 if with_stdio else 1)
    said = r.stderr.strip().splitlines()[-1]
    assert said.startswith(f"mrtr-inspect: wrote {out}: har, {len(entries)} entries of {len(chains)} chains, ")
    assert ("1 stdio session left out" in said) is with_stdio


def test_har_of_a_stdio_recording_is_refused(tmp_path):
    r = run_cli("export", STDIO_FIXTURE, "--to", "har", "--output", tmp_path / "x.har")
    assert r.exit_code == 2 and not (tmp_path / "x.har").exists()
    assert r.stderr.count("\n") == 1 and "stdio sessions only" in r.stderr


# -- HTML -------------------------------------------------------------------------------------------


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_escapes_what_the_recording_says(tmp_path):
    page = export(save(faulty().frames, tmp_path / "r.jsonl"), "html", tmp_path / "r.html")
    p = _Page()
    p.feed(page)
    tags = {t for t, _ in p.tags}
    assert "script" not in tags and "img" not in tags and "b" not in tags  # nothing of the recording became markup
    assert HOSTILE not in page and "<b>bold</b>" not in page and "</script>" not in page
    text = "".join(p.text)
    assert HOSTILE in text  # shown, as text: the chain's name
    assert '"note": "<b>bold</b> & </details>"' in text  # the message, pretty-printed
    # self-contained: nothing is loaded from anywhere
    assert not [a for _, a in p.tags if "src" in a]
    assert not [a for t, a in p.tags if t == "link"]
    csp = next(a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "script" not in csp


def test_html_shows_chains_round_by_round_findings_and_messages(tmp_path):
    page = export(HTTP_FIXTURE, "html", tmp_path / "s.html")
    rep = report(HTTP_FIXTURE)
    p = _Page()
    p.feed(page)
    ids = {a.get("id") for _, a in p.tags}
    assert {c["id"] for c in rep["chains"]} <= ids  # a section per chain
    assert sum(1 for t, _ in p.tags if t == "details") == rep["summary"]["messages"]  # every message, collapsed
    assert {f"m{i}" for i in range(rep["summary"]["messages"])} <= ids
    text = " ".join(p.text)
    assert "asks confirm: elicitation/create (form) 'Deploy to production?' fields confirm" in text
    assert re.search(r"the user took \d+ ms to answer round 1", text)
    spec_links = {a["href"] for t, a in p.tags if t == "a" and a.get("href", "").startswith("https://")}
    assert "https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr" in spec_links
    local = {a["href"][1:] for t, a in p.tags if t == "a" and a.get("href", "").startswith("#")}
    assert local <= ids  # every in-page link has its target


def test_html_and_mermaid_count_in_words_one_info_one_round_zero_rounds(tmp_path):
    """Issue 25 item 16: "1 infos", "0 round(s)" read as a machine's; one is singular, the rest plural."""
    t = Traffic()
    a = t.tool("deploy", {"env": "prod"})
    t.irr(a, {"confirm": ELICIT}, state="s1")
    b = t.tool("deploy", {"env": "prod"}, inputResponses={"confirm": ACCEPT}, requestState="s1")
    t.result(b, {"content": []})
    c = t.tool("status", {})
    t.result(c, {"content": []})
    rec = save(t.frames, tmp_path / "r.jsonl")
    page = export(rec, "html", tmp_path / "r.html")
    assert "6 messages · 2 chains · 0 errors · 0 warnings · 1 info</p>" in page  # chain-linked, the one info
    assert ">1 round · " in page and ">0 rounds · " in page and "(s)" not in page
    diagrams = export(rec, "mermaid", tmp_path / "r.mmd")
    assert "%% c1 tools/call deploy: complete, 1 round\n" in diagrams
    assert "%% c2 tools/call status: complete, 0 rounds\n" in diagrams


# -- Mermaid ----------------------------------------------------------------------------------------


def test_mermaid_is_the_diagrams_of_show(tmp_path):
    text = export(HTTP_FIXTURE, "mermaid", tmp_path / "s.mmd")
    assert text == run_cli("show", HTTP_FIXTURE, "--format", "mermaid").stdout
    md = export(HTTP_FIXTURE, "mermaid", tmp_path / "s.md")
    blocks = re.findall(r"```mermaid\n(.*?)```", md, re.S)
    assert len(blocks) == len(report(HTTP_FIXTURE)["chains"])
    assert "".join(b + "\n" for b in blocks) == text
    assert md.startswith("## c1 tools/call deploy\n")


# -- OTLP/JSON --------------------------------------------------------------------------------------

HEX32, HEX16 = re.compile(r"^[0-9a-f]{32}$"), re.compile(r"^[0-9a-f]{16}$")
VALUE_KEYS = {"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"}


def _attrs(items: list[dict]) -> dict:
    out = {}
    for kv in items:
        assert set(kv) == {"key", "value"} and len(kv["value"]) == 1 and set(kv["value"]) <= VALUE_KEYS
        (kind, v), = kv["value"].items()
        if kind == "intValue":
            assert isinstance(v, str) and int(v) is not None  # int64: a decimal string
            v = int(v)
        elif kind == "arrayValue":
            v = [next(iter(x.values())) for x in v["values"]]
        out[kv["key"]] = v
    return out


def assert_otlp(doc: dict) -> list[dict]:
    """OTLP/JSON as the protocol's specification maps it (lowerCamelCase keys, hex ids, integer
    enums, 64-bit integers as strings); returns the spans."""
    spans = []
    for rs in doc["resourceSpans"]:
        assert set(rs) <= {"resource", "scopeSpans", "schemaUrl"}
        _attrs(rs["resource"]["attributes"])
        for ss in rs["scopeSpans"]:
            assert ss["scope"]["name"] == "mrtr-inspect"
            for s in ss["spans"]:
                assert set(s) <= {"traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano",
                                  "endTimeUnixNano", "attributes", "events", "status", "links", "flags", "traceState"}
                assert HEX32.match(s["traceId"]) and HEX16.match(s["spanId"])
                assert "parentSpanId" not in s or HEX16.match(s["parentSpanId"])
                assert s["kind"] in (1, 3) and isinstance(s["startTimeUnixNano"], str)
                assert int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
                for ev in s.get("events", ()):
                    assert set(ev) == {"timeUnixNano", "name", "attributes"} and ev["timeUnixNano"].isdigit()
                    _attrs(ev["attributes"])
                if "status" in s:
                    assert s["status"]["code"] in (0, 1, 2)
                spans.append({**s, "attrs": _attrs(s["attributes"])})
    return spans


def test_otlp_a_trace_per_chain_with_exchanges_and_waits(tmp_path):
    text = export(save(faulty().frames, tmp_path / "r.jsonl"), "otlp", tmp_path / "t.json")
    assert text.count("\n") == 1  # one line: also a JSON-lines file for the collector's otlpjsonfile receiver
    doc = json.loads(text)
    spans = assert_otlp(doc)
    rep = report(tmp_path / "r.jsonl")
    traces = {s["traceId"] for s in spans}
    assert len(traces) == len(rep["chains"]) == 2
    c1 = rep["chains"][0]
    mine = [s for s in spans if s["attrs"]["mrtr.chain.id"] == "c1"]
    root = next(s for s in mine if "parentSpanId" not in s)
    assert root["name"] == "tools/call deploy" and root["attrs"]["mrtr.rounds"] == 1
    assert root["attrs"]["mrtr.outcome"] == "complete" and root["attrs"]["gen_ai.tool.name"] == "deploy"
    assert int(root["startTimeUnixNano"]) == round(c1["start"] * 1e6) * 1000
    assert int(root["endTimeUnixNano"]) == round(c1["end"] * 1e6) * 1000
    children = [s for s in mine if s.get("parentSpanId") == root["spanId"]]
    assert len(children) == len(mine) - 1
    exchanges = [s for s in children if s["kind"] == 3]
    assert [(s["attrs"]["jsonrpc.request.id"], s["attrs"]["mrtr.round"], s["attrs"]["mrtr.response"])
            for s in exchanges] == [("2", 0, "input_required"), ("2", 1, "result")]
    wait = next(s for s in children if s["name"] == "waiting for input (round 1)")
    assert wait["startTimeUnixNano"] == exchanges[0]["endTimeUnixNano"]  # from the input_required…
    assert wait["endTimeUnixNano"] == exchanges[1]["startTimeUnixNano"]  # …to the retry
    assert (int(wait["endTimeUnixNano"]) - int(wait["startTimeUnixNano"])) / 1e9 > 1.5
    assert wait["attrs"]["mrtr.asked"] == ["confirm: elicitation/create"]
    # the finding is an event on the retry's span; the error chain is marked as such
    assert [ev["name"] for ev in exchanges[1].get("events", ())] == ["retry-reused-id", "chain-linked"]
    c2_root = next(s for s in spans if s["attrs"]["mrtr.chain.id"] == "c2" and "parentSpanId" not in s)
    assert c2_root["status"]["code"] == 2
    resource = _attrs(doc["resourceSpans"][0]["resource"]["attributes"])
    assert resource["service.name"] == "test-server" and resource["mrtr.session"] == "s1"


def test_otlp_ids_are_derived_from_the_recording(tmp_path):
    a = export(HTTP_FIXTURE, "otlp", tmp_path / "a.json")
    b = export(HTTP_FIXTURE, "otlp", tmp_path / "b.json")
    assert a == b
    spans = assert_otlp(json.loads(a))
    assert len({s["spanId"] for s in spans}) == len(spans)
    assert len({s["traceId"] for s in spans}) == len(report(HTTP_FIXTURE)["chains"])
    other = save(faulty(session="other").frames, tmp_path / "o.jsonl")
    assert not {s["traceId"] for s in spans} & {s["traceId"] for s in assert_otlp(json.loads(export(other, "otlp", tmp_path / "o.json")))}


def test_export_of_an_unreadable_file_says_why(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    r = run_cli("export", bad, "--to", "html", "--output", tmp_path / "x.html")
    assert r.exit_code == 2 and "not an mrtr-inspect recording" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("to", ["html", "fixture"])
def test_an_export_that_cannot_be_written_says_why_in_one_line(to, tmp_path):
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "sub" / "x.out"
    r = run_cli("export", HTTP_FIXTURE, "--to", to, "--output", out)
    assert r.exit_code == 2 and r.stderr == f"mrtr-inspect: cannot write {out}: Not a directory\n"


def test_export_takes_the_rule_options_as_check_does(recording, tmp_path):
    """`--disable` and `--severity` shape an export's findings as they shape `check`'s (near miss:
    without them, the export has the finding)."""
    def said(*options: str) -> str:
        r = run_cli("export", recording, "--to", "otlp", "--output", tmp_path / "x.json", *options)
        assert r.exit_code == 0, r.stderr
        return (tmp_path / "x.json").read_text(encoding="utf-8")

    assert "retry-reused-id" in said()
    assert "retry-reused-id" not in said("--disable", "retry-reused-id")
    def severity(text: str) -> str:
        otlp = json.loads(text)
        spans = [s for r in otlp["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
        [event] = [e for s in spans for e in s.get("events", ()) if e["name"] == "retry-reused-id"]
        return next(a["value"]["stringValue"] for a in event["attributes"] if a["key"] == "mrtr.severity")

    assert severity(said()) == "error" and severity(said("--severity", "retry-reused-id=info")) == "info"
    r = run_cli("export", recording, "--to", "otlp", "--output", tmp_path / "y.json", "--disable", "no-such-rule")
    assert r.exit_code == 2 and "unknown rule id 'no-such-rule'" in r.stderr
