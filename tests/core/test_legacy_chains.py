"""RULES.md §13: a legacy chain's rounds are the questions its server asked while the request was open.

A 2025-11-25 server asks with a request of its own (elicitation/create, sampling/createMessage,
roots/list) and waits for the client's answer. The question is tied to the open request by evidence
only: the request's own POST event stream (`stream`), a `_meta` relation (`related`), or on stdio
being the only request open (`time`); otherwise it is left unattached, and said so (info).
"""

from __future__ import annotations

import gc

import pytest

from mrtr_inspect.analysis import Analysis
from mrtr_inspect.core.chains import Chain, LegacyRound
from mrtr_inspect.core.events import HttpEnd, HttpResponse, SseEvent, StdioLine
from mrtr_inspect.core.inspector import ChainEvent
from tests.rules.test_legacy import legacy_http, legacy_stdio, session_headers
from tests.traffic import Traffic, dumps

SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Summarize this"}}], "maxTokens": 100}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "a summary"}, "model": "m1"}
FORM = {"message": "Deploy?", "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}}}
UNATTACHED = "legacy-server-request-unattached"


def ask(t: Traffic, sid: int, method: str, params: dict | None = None, meta: dict | None = None) -> None:
    """The server's request `sid` on the pipe."""
    p = dict(params or {})
    if meta:
        p["_meta"] = meta
    t.server({"jsonrpc": "2.0", "id": sid, "method": method, **({"params": p} if p else {})})


def answer(t: Traffic, sid: int, result: dict) -> None:
    t.client({"jsonrpc": "2.0", "id": sid, "result": result})


def legacy_call(t: Traffic, name: str, id=None):
    return t.call("tools/call", {"name": name, "arguments": {}}, id=id, with_meta=False)


def done(t: Traffic, id, text: str = "ok") -> None:
    t.result(id, {"content": [{"type": "text", "text": text}]}, with_meta=False, result_type=None)


# --- stdio ----------------------------------------------------------------------------------------------------------


def test_a_question_while_the_only_request_is_open_is_its_round_with_the_answer_and_the_wait():
    t = legacy_stdio()
    a = legacy_call(t, "summarize")  # message #3
    ask(t, 0, "sampling/createMessage", SAMPLE)  # #4
    t.tick(2.5)  # the user takes 2.5 s
    answer(t, 0, SAMPLED)  # #5
    done(t, a)  # #6
    r = t.run()
    c = r.chain()
    assert (c["era"], c["rounds"], c["link"], c["outcome"], c["requests"]) == ("legacy", 1, "time", "complete", [a])
    (rd,) = c["round_details"]
    assert (rd["round"], rd["message"], rd["server_request"], rd["link"]) == (1, 4, 0, "time")
    assert rd["asked"] == {"0": {"method": "sampling/createMessage", "summary": "Summarize this", "maxTokens": 100}}
    assert (rd["response"], rd["response_message"]) == ("result", 5)
    assert rd["answered"] == {"0": {"model": "m1", "summary": "a summary"}}
    assert 2500 <= rd["wait_ms"] < 2502
    assert c["duration_ms"] > rd["wait_ms"]  # the true duration: from the request to its result, the wait inside
    assert not r.of(UNATTACHED)
    kinds = [e.kind for e in r.events if e.chain.id == "c1"]
    assert kinds == ["opened", "round", "answered", "closed"]


def test_a_question_naming_its_request_in_meta_is_tied_to_it_among_several_open():
    t = legacy_stdio()
    a = legacy_call(t, "deploy")
    b = legacy_call(t, "summarize")
    ask(t, 0, "elicitation/create", FORM, meta={"relatedRequestId": a})
    answer(t, 0, {"action": "accept", "content": {"confirm": True}})
    done(t, b)
    done(t, a)
    r = t.run()
    deploy, summarize = (next(c for c in r.chains if c["target"] == n) for n in ("deploy", "summarize"))
    assert (deploy["rounds"], deploy["link"], summarize["rounds"]) == (1, "related", 0)
    assert deploy["round_details"][0]["answered"] == {"0": {"action": "accept", "summary": '{"confirm": true}'}}
    assert not r.of(UNATTACHED)


@pytest.mark.parametrize("cancel_other", [False, True])
def test_near_miss_a_question_naming_nothing_while_two_requests_are_open_is_left_unattached_and_said_so(cancel_other):
    t = legacy_stdio()
    a = legacy_call(t, "deploy")
    b = legacy_call(t, "summarize")
    if cancel_other:  # a cancel for an id not in flight leaves both open (RULES.md decision 14)
        t.notify("notifications/cancelled", {"requestId": 999})
    ask(t, 0, "elicitation/create", FORM)
    answer(t, 0, {"action": "accept", "content": {"confirm": True}})
    done(t, b)
    done(t, a)
    r = t.run()
    assert [c["rounds"] for c in r.chains] == [0, 0]  # never by guess
    (f,) = r.of(UNATTACHED)
    assert f.severity == "info" and f.messages == [5 + cancel_other] and f.chain is None
    assert "2 legacy chain requests were open" in f.message
    assert f.spec.startswith("https://modelcontextprotocol.io/specification/2025-11-25/")


def test_near_miss_a_server_ping_or_a_question_with_no_chain_open_is_no_round_and_no_finding():
    t = legacy_stdio()
    ask(t, 0, "roots/list")  # nothing open: the server syncs its roots on its own
    answer(t, 0, {"roots": []})
    a = legacy_call(t, "deploy")
    ask(t, 1, "ping")  # not a question
    t.client({"jsonrpc": "2.0", "id": 1, "result": {}})
    done(t, a)
    r = t.run()
    assert r.chain()["rounds"] == 0 and not r.of(UNATTACHED)


def test_a_modern_chain_gets_no_legacy_rounds():
    t = Traffic()
    a = t.tool("deploy")
    ask(t, 0, "sampling/createMessage", SAMPLE)  # a modern stdio server asking: server-initiated-request
    answer(t, 0, SAMPLED)
    t.result(a)
    r = t.run()
    assert r.chain()["rounds"] == 0 and r.of("server-initiated-request") and not r.of(UNATTACHED)


def test_a_cancelled_request_is_not_open_so_a_later_question_is_the_only_open_requests_round():
    """RULES.md decision 14 (issue 25 item 17), as FastMCP, the TypeScript SDK v2 and server-everything
    show it on stdio: the client cancels request A, whose server never answers it, then calls B; the
    server's question while B is the only request really open is B's round, by `time`."""
    t = legacy_stdio()
    a = legacy_call(t, "slow")  # message #3
    t.notify("notifications/cancelled", {"requestId": a, "reason": "user gave up"})  # #4
    b = legacy_call(t, "deploy")  # #5
    ask(t, 0, "elicitation/create", FORM)  # #6
    answer(t, 0, {"action": "accept", "content": {"confirm": True}})  # #7
    done(t, b)  # #8
    r = t.run()
    slow, deploy = (next(c for c in r.chains if c["target"] == n) for n in ("slow", "deploy"))
    assert (slow["outcome"], slow["rounds"]) == ("cancelled", 0)
    assert (deploy["rounds"], deploy["link"], deploy["outcome"]) == (1, "time", "complete")
    assert deploy["round_details"][0]["message"] == 6
    assert not r.of(UNATTACHED)


def test_a_cancelled_request_answered_late_still_is_not_open():
    """Decision 14: "whether or not the server ever answers it". The late answer to A comes after B's
    question, and a cancelled request that is no chain's (tools/list) does not count either."""
    t = legacy_stdio()
    a = legacy_call(t, "slow")
    listing = t.request("tools/list", {}, with_meta=False)
    t.notify("notifications/cancelled", {"requestId": a})
    t.notify("notifications/cancelled", {"requestId": listing})
    b = legacy_call(t, "deploy")
    ask(t, 0, "roots/list")
    answer(t, 0, {"roots": []})
    done(t, a, "too late")  # the server answers the cancelled call after all
    done(t, b)
    r = t.run()
    deploy = next(c for c in r.chains if c["target"] == "deploy")
    assert (deploy["rounds"], deploy["link"]) == (1, "time")
    assert not r.of(UNATTACHED)
    assert r.of("message-after-cancel")  # the late answer is still paired with its request and judged


def test_an_unanswered_question_waits_until_the_chain_ends():
    t = legacy_stdio()
    a = legacy_call(t, "deploy")
    ask(t, 0, "elicitation/create", FORM)
    t.tick(1.0)
    t.notify("notifications/cancelled", {"requestId": a})
    r = t.run()
    c = r.chain()
    (rd,) = c["round_details"]
    assert c["outcome"] == "cancelled" and c["rounds"] == 1
    assert "response_message" not in rd and 1000 <= rd["unanswered_ms"] < 1003


def test_an_elicitation_answer_that_mismatches_the_form_names_its_chain():
    t = legacy_stdio()
    a = legacy_call(t, "deploy")
    ask(t, 0, "elicitation/create", FORM)
    answer(t, 0, {"action": "accept", "content": {"confirm": "yes"}})
    done(t, a)
    (f,) = t.run().of("elicit-result-schema-mismatch")
    assert f.chain == "c1" and f.messages == [4, 5]
    assert f.spec == "https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#form-mode-security"
    assert f.conformance is None


# --- HTTP -----------------------------------------------------------------------------------------------------------


def http_chain(question_on: str, meta: dict | None = None) -> Traffic:
    """A legacy tools/call whose server asks roots/list on the POST's own stream, or on the GET stream."""
    h = legacy_http()
    hdr = session_headers()
    get = h.post(b"", headers=hdr, method="GET")
    h.frames.append(HttpResponse(h.tick(), h.session, get, 200, (("content-type", "text/event-stream"),)))
    call = h.request("tools/call", {"name": "workspace", "arguments": {}}, with_meta=False)
    x = h.post(call, headers=hdr)
    h.frames.append(HttpResponse(h.tick(), h.session, x, 200, (("content-type", "text/event-stream"),)))
    q = {"jsonrpc": "2.0", "id": 0, "method": "roots/list", **({"params": {"_meta": meta}} if meta else {})}
    on = x if question_on == "post" else get
    h.frames.append(SseEvent(h.tick(), h.session, on, b"event: message\ndata: " + dumps(q) + b"\n\n"))
    h.tick(0.25)
    reply = h.post({"jsonrpc": "2.0", "id": 0, "result": {"roots": [{"uri": "file:///w", "name": "w"}]}}, headers=hdr)
    h.respond(reply, 202, b"")
    final = {"jsonrpc": "2.0", "id": call["id"], "result": {"content": [{"type": "text", "text": "1 root"}]}}
    h.frames.append(SseEvent(h.tick(), h.session, x, b"event: message\ndata: " + dumps(final) + b"\n\n"))
    h.frames.append(HttpEnd(h.tick(), h.session, x, None))
    h.frames.append(HttpEnd(h.tick(), h.session, get, None))
    return h


def test_http_a_question_on_the_posts_own_event_stream_is_that_requests_round():
    r = http_chain("post").run()
    c = r.chain()
    assert (c["era"], c["rounds"], c["link"], c["outcome"]) == ("legacy", 1, "stream", "complete")
    rd = c["round_details"][0]
    assert rd["asked"]["0"]["method"] == "roots/list" and rd["answered"] == {"0": {"summary": "1 root: file:///w"}}
    assert 250 <= rd["wait_ms"] < 252
    assert not r.of(UNATTACHED)


def test_http_a_question_on_the_get_stream_is_tied_only_by_a_meta_relation():
    related = http_chain("get", meta={"relatedRequestId": 2}).run()
    assert (related.chain()["rounds"], related.chain()["link"]) == (1, "related")
    # near miss: on the GET stream, being the only request open is no evidence
    alone = http_chain("get").run()
    assert alone.chain()["rounds"] == 0 and alone.chain()["link"] is None
    (f,) = alone.of(UNATTACHED)
    assert "GET stream" in f.message


# --- a legacy chain and its modern twin read alike ------------------------------------------------------------------


def _shape(c: dict) -> tuple:
    return (c["rounds"], [a["method"] for r in c["round_details"] for a in r["asked"].values()], c["outcome"])


def test_a_legacy_chain_and_a_modern_chain_of_the_same_tool_have_the_same_shape():
    modern = Traffic()
    a = modern.tool("summarize")
    modern.irr(a, {"s": {"method": "sampling/createMessage", "params": SAMPLE}}, state="st")
    b = modern.tool("summarize", inputResponses={"s": SAMPLED}, requestState="st")
    modern.result(b)
    legacy = legacy_stdio()
    c = legacy_call(legacy, "summarize")
    ask(legacy, 0, "sampling/createMessage", SAMPLE)
    answer(legacy, 0, SAMPLED)
    done(legacy, c)
    m, lg = modern.run().chain(), legacy.run().chain()
    assert _shape(m) == _shape(lg) == (1, ["sampling/createMessage"], "complete")
    # the question and the answer are summarised alike
    assert list(m["round_details"][0]["asked"].values()) == list(lg["round_details"][0]["asked"].values())
    assert [e["answered"] for e in m["timeline"] if "answered" in e][0]["s"] == lg["round_details"][0]["answered"]["0"]


# --- memory ---------------------------------------------------------------------------------------------------------


def test_closed_legacy_chains_with_rounds_are_freed_by_reference_counting():
    SESSION = "legacy-freed-by-refcount"
    gc.collect()
    gc.disable()
    try:
        insp = Analysis()
        lines = [b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                 b'"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}']
        feed = [("c2s", lines[0]), ("s2c", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",'
                                           b'"capabilities":{},"serverInfo":{"name":"s","version":"1"}}}')]
        for i in range(200):
            feed += [("c2s", b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t"}}' % (i + 2)),
                     ("s2c", b'{"jsonrpc":"2.0","id":%d,"method":"roots/list"}' % i),
                     ("c2s", b'{"jsonrpc":"2.0","id":%d,"result":{"roots":[]}}' % i),
                     ("s2c", b'{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}' % (i + 2))]
        closed = 0
        for n, (d, raw) in enumerate(feed):
            for o in insp.feed(StdioLine(1000.0 + n, SESSION, d, raw)):  # type: ignore[arg-type]
                closed += type(o) is ChainEvent and o.kind == "closed"
        # this analysis' own: a thread an earlier test left running may hold or make others meanwhile
        left = [o for o in gc.get_objects() if (type(o) is Chain and o.session == SESSION)
                or (type(o) is LegacyRound and o.chain.session == SESSION)]
    finally:
        gc.enable()
    assert closed == 200
    assert 0 < len([o for o in left if type(o) is Chain]) <= 20  # only the last few wait for their release
    assert len([o for o in left if type(o) is LegacyRound]) <= 20
