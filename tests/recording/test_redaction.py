"""Redaction: secrets become stable placeholders; every other byte stays as it was."""

from __future__ import annotations

import copy
import json
import os
import re
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core.events import HttpBody, HttpEnd, HttpRequest, HttpResponse, SseEvent, StdioLine
from mrtr_inspect.recording import redaction
from mrtr_inspect.recording.redaction import MEMBERS, Redactor, default_member, member_key
from mrtr_inspect.recording.writer import RecordingWriter, redaction_key
from tests.core.strategies import FUZZ

PLACEHOLDER = re.compile(r"\[redacted:[0-9a-f]{12}\]")
PATHS = ["params.arguments.password", "params.inputResponses.*.content.token", "result.items.*"]


def token(value: str) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


# ---------------------------------------------------------------------------------------------
# headers


@pytest.mark.parametrize("name", ["Authorization", "authorization", "Proxy-Authorization"])
@pytest.mark.parametrize("scheme", ["Bearer", "Basic", "DPoP"])
def test_authorization_keeps_its_scheme(name, scheme):
    r = Redactor(b"k")
    (k, v), = r.redact_headers(((name, f"{scheme} sk-live-123"),))
    assert k == name
    s, _, cred = v.partition(" ")
    assert s == scheme and PLACEHOLDER.fullmatch(cred) and cred == r.placeholder("sk-live-123")


def test_authorization_without_a_scheme_is_redacted_whole():
    r = Redactor(b"k")
    assert r.header_value("Authorization", "sk-live-123") == r.placeholder("sk-live-123")
    assert r.header_value("Authorization", "Bearer") == r.placeholder("Bearer")


def test_the_same_secret_gives_the_same_placeholder_with_the_same_key():
    a, b = Redactor(b"key-1"), Redactor(b"key-1")
    assert a.placeholder("s3cret") == b.placeholder("s3cret")
    assert a.header_value("Authorization", "Bearer s3cret") == b.header_value("authorization", "Bearer s3cret")
    assert a.placeholder("s3cret") != a.placeholder("s3cret2")  # different secrets differ
    assert a.placeholder("s3cret") != Redactor(b"key-2").placeholder("s3cret")  # the key matters
    assert a.placeholder(a.placeholder("s3cret")) == a.placeholder("s3cret")  # redacting twice changes nothing


@pytest.mark.parametrize("name", ["Cookie", "Set-Cookie", "X-API-Key", "api-key", "X-Auth-Token", "X-Goog-Api-Key",
                                  "X-My-Secret", "X-Client-Password", "X-Credential-Id", "anthropic-api-key"])
def test_secret_headers_are_redacted(name):
    r = Redactor(b"k")
    assert r.redact_headers(((name, "value"),)) == ((name, r.placeholder("value")),)


def test_other_headers_are_kept_in_order_and_a_configured_one_is_redacted():
    r = Redactor(b"k", headers=["X-Tenant"])
    h = (("Content-Type", "application/json"), ("Mcp-Session-Id", "abc"), ("x-tenant", "acme"), ("Accept", "*/*"))
    assert r.redact_headers(h) == (h[0], h[1], ("x-tenant", r.placeholder("acme")), h[3])
    plain = (("Content-Type", "application/json"),)
    assert r.redact_headers(plain) is plain


# ---------------------------------------------------------------------------------------------
# JSON paths


def test_json_path_redaction_replaces_only_the_secret_token():
    r = Redactor(b"k", paths=PATHS)
    raw = (b'{ "jsonrpc" : "2.0", "id":1,"method":"tools/call","params":{"name":"login","arguments":'
           b'{"user":"ann","password" :  "hunter\\u0032"},\n"inputResponses":{"k1":{"action":"accept","content":'
           b'{"token":"tok-1","keep":"x"}},"k2":{"content":{"token":"tok-2"}}}}}')
    out = r.redact_json(raw)
    expected = (raw.replace(b'"hunter\\u0032"', token(r.placeholder("hunter2")))
                .replace(b'"tok-1"', token(r.placeholder("tok-1"))).replace(b'"tok-2"', token(r.placeholder("tok-2"))))
    assert out == expected
    assert b"hunter" not in out and b"tok-" not in out


def test_json_path_wildcards_match_array_indexes_and_leave_non_strings():
    r = Redactor(b"k", paths=PATHS)
    raw = b'{"result":{"items":["a",{"x":"b"},7,"c"]},"params":{"arguments":{"password":12345}}}'
    out = json.loads(r.redact_json(raw))
    assert out == {"result": {"items": [r.placeholder("a"), {"x": "b"}, 7, r.placeholder("c")]},
                   "params": {"arguments": {"password": 12345}}}


def test_json_path_redaction_reaches_into_batches():
    r = Redactor(b"k", paths=PATHS)
    raw = b'[{"params":{"arguments":{"password":"p1"}}},{"params":{"arguments":{"password":"p2"}}},"p3"]'
    assert r.redact_json(raw) == (raw.replace(b'"p1"', token(r.placeholder("p1")))
                                  .replace(b'"p2"', token(r.placeholder("p2"))))


def test_json_path_redaction_leaves_what_it_cannot_read():
    r = Redactor(b"k", paths=PATHS)
    for raw in (b"\xff\xfe", b"not json", b'{"params":{"arguments":{"other":"x"}}}', b""):
        assert r.redact_json(raw) == raw
    assert Redactor(b"k").redact_json(b'{"params":{"arguments":{"other":"x"}}}') == (
        b'{"params":{"arguments":{"other":"x"}}}')  # no paths configured, no secret's name


secret_text = st.text(min_size=1, max_size=12)
# member names that are not secrets' (`AUTH`, `pwd`, `_sid` would be redacted by name, rightly)
filler_key = st.text(max_size=4).filter(lambda k: not default_member(k))
filler = st.recursive(st.none() | st.integers() | st.text(max_size=6),
                      lambda c: st.lists(c, max_size=3) | st.dictionaries(filler_key, c, max_size=3),
                      max_leaves=8)


@FUZZ
@given(secret_text, filler, filler, st.sampled_from([None, 0, 2]), st.booleans())
def test_json_path_redaction_changes_the_token_and_nothing_else(secret, around, inside, indent, ascii_only):
    doc = {"before": around, "params": {"arguments": {"x": inside, "password": secret}}}  # the last string
    raw = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    r = Redactor(b"k", paths=["params.arguments.password"])
    out = r.redact_json(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert out == raw  # not UTF-8: left alone
        return
    tok = json.dumps(secret, ensure_ascii=ascii_only).encode("utf-8")
    at = raw.rindex(tok)
    assert out == raw[:at] + token(r.placeholder(secret)) + raw[at + len(tok):]
    doc["params"]["arguments"]["password"] = r.placeholder(secret)
    assert json.loads(out) == doc


@FUZZ
@given(st.binary(max_size=200))
def test_redaction_never_raises(raw):
    r = Redactor(b"k", paths=PATHS)
    assert isinstance(r.redact_json(raw), bytes)
    assert isinstance(r.redact_sse(raw), bytes)


# ---------------------------------------------------------------------------------------------
# SSE events and frames

SECRET_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"items":["s3cret"]}}'


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_sse_data_redaction(eol):
    r = Redactor(b"k", paths=PATHS)
    raw = b"event: message" + eol + b"id: 7" + eol + b"data: " + SECRET_BODY + eol + eol
    out = r.redact_sse(raw)
    assert out == raw.replace(b'"s3cret"', token(r.placeholder("s3cret")))


def test_sse_data_split_over_several_lines_is_redacted_too():
    r = Redactor(b"k", paths=PATHS)
    raw = b'data: {"jsonrpc":"2.0","id":1,\ndata:"result":{"items":\r\ndata: ["s3cret", "other"]}}\n\n'
    out = r.redact_sse(raw)
    assert out == raw.replace(b'"s3cret"', token(r.placeholder("s3cret"))).replace(b'"other"', token(r.placeholder("other")))


def test_frames_are_redacted_where_secrets_live():
    r = Redactor(b"k", paths=PATHS)
    body = b'{"params":{"arguments":{"password":"pw"}}}'
    red = body.replace(b'"pw"', token(r.placeholder("pw")))
    req = HttpRequest(1.0, "h", 1, "POST", "/mcp", (("Authorization", "Bearer t0k"), ("Accept", "*/*")), body, "1.2.3.4")
    got = r.frame(req)
    assert got.body == red and got.headers == (("Authorization", f"Bearer {r.placeholder('t0k')}"), ("Accept", "*/*"))
    assert (got.method, got.path, got.client, got.exchange, got.time) == ("POST", "/mcp", "1.2.3.4", 1, 1.0)
    resp = HttpResponse(2.0, "h", 1, 200, (("Set-Cookie", "sid=abc; Path=/"),))
    assert r.frame(resp).headers == (("Set-Cookie", r.placeholder("sid=abc; Path=/")),)
    assert r.frame(StdioLine(3.0, "s", "c2s", body)).data == red
    assert r.frame(HttpBody(4.0, "h", 1, body)).data == red
    assert r.frame(SseEvent(5.0, "h", 1, b"data: " + body + b"\n\n")).raw == b"data: " + red + b"\n\n"
    end = HttpEnd(6.0, "h", 1)
    assert r.frame(end) is end
    plain = HttpResponse(2.0, "h", 1, 200, (("content-type", "application/json"),))
    assert r.frame(plain) is plain


def test_writers_with_the_same_key_write_the_same_placeholder(tmp_path):
    req = HttpRequest(1.0, "h", 1, "POST", "/mcp", (("Authorization", "Bearer t0k"),), b"{}")
    texts = []
    for name in ("a.jsonl", "b.jsonl"):
        with RecordingWriter(tmp_path / name, "http", {}, redactor=Redactor(b"shared"), start_time=0.0) as w:
            w.write(req)
        texts.append((tmp_path / name).read_text())
    placeholders = [PLACEHOLDER.findall(t) for t in texts]
    assert placeholders[0] == placeholders[1] == [Redactor(b"shared").placeholder("t0k")]
    assert "t0k" not in texts[0] + texts[1]


def test_the_redaction_key_comes_from_the_environment_or_a_private_cache_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTR_INSPECT_REDACTION_KEY", "from-env")
    assert redaction_key() == b"from-env"
    monkeypatch.delenv("MRTR_INSPECT_REDACTION_KEY")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = redaction_key()
    path = tmp_path / "mrtr-inspect" / "redaction.key"
    assert path.read_bytes() == first and len(first) == 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert redaction_key() == first  # kept: placeholders stay the same across recordings


# ---------------------------------------------------------------------------------------------
# URLs, command lines, session headers (issue 12 item 1)


def test_secret_query_parameters_are_redacted_and_the_rest_of_the_url_kept():
    r = Redactor(b"k")
    url = "/mcp?api_key=s3cret&page=2&token=t%2Fk&ACCESS_TOKEN=a1&max_tokens=100&tokenizer=gpt2#frag"
    assert r.url(url) == (f"/mcp?api_key={r.placeholder('s3cret')}&page=2&token={r.placeholder('t/k')}"
                          f"&ACCESS_TOKEN={r.placeholder('a1')}&max_tokens=100&tokenizer=gpt2#frag")
    assert r.url(r.url(url)) == r.url(url)  # redacting twice changes nothing
    for plain in ("/mcp", "/mcp?page=2&author=ann&keyword=x&q=", "/mcp?token", "/mcp?token="):
        assert r.url(plain) is plain  # near misses: nothing secret-looking, or no value


def test_a_secret_in_a_header_and_in_a_query_has_one_placeholder():
    r = Redactor(b"k")
    (_, auth), = r.redact_headers((("Authorization", "Bearer abc"),))
    assert r.url("/mcp?access_token=abc") == f"/mcp?access_token={auth.split(' ')[1]}"


def test_url_headers_and_the_request_path_of_a_frame_are_redacted():
    r = Redactor(b"k")
    req = HttpRequest(1.0, "h", 1, "POST", "/mcp?key=K1", (("Referer", "http://a/x?sig=S1&x=1"), ("Accept", "*/*")))
    got = r.frame(req)
    assert got.path == f"/mcp?key={r.placeholder('K1')}"
    assert got.headers == (("Referer", f"http://a/x?sig={r.placeholder('S1')}&x=1"), ("Accept", "*/*"))
    resp = HttpResponse(2.0, "h", 1, 302, (("Location", "https://b/cb?code=1&client_secret=CS"),))
    assert r.frame(resp).headers == (("Location", f"https://b/cb?code={r.placeholder('1')}&client_secret={r.placeholder('CS')}"),)
    plain = HttpResponse(2.0, "h", 1, 302, (("Location", "https://b/cb?page=1"),))
    assert r.frame(plain) is plain


def test_command_line_secrets_are_redacted():
    r = Redactor(b"k")
    p = r.placeholder
    cmd = ["npx", "server", "--api-key", "V1", "--token=V2", "TOKEN=V3", "-e", "GITHUB_PAT=V4",
           "--header", "Authorization: Bearer V5", "https://h/mcp?apikey=V6&x=1", "--url=https://h/?secret=V7",
           "--max-tokens", "100", "--no-token", "file.py", "--password", "--verbose", "PATH=/bin", "X-Tenant: acme"]
    assert r.command(cmd) == [
        "npx", "server", "--api-key", p("V1"), f"--token={p('V2')}", f"TOKEN={p('V3')}", "-e", f"GITHUB_PAT={p('V4')}",
        "--header", f"Authorization: Bearer {p('V5')}", f"https://h/mcp?apikey={p('V6')}&x=1",
        f"--url=https://h/?secret={p('V7')}",
        "--max-tokens", "100", "--no-token", "file.py", "--password", "--verbose", "PATH=/bin", "X-Tenant: acme"]


def test_configured_names_are_added_and_kept_ones_left_alone():
    r = Redactor(b"k", query=["tenant"], args=["--dsn"], keep=["token", "X-Api-Key"])
    assert r.url("/mcp?tenant=acme&token=t&api_key=a") == f"/mcp?tenant={r.placeholder('acme')}&token=t&api_key={r.placeholder('a')}"
    assert r.command(["s", "--dsn", "pg://u:p@h", "--token", "t"]) == ["s", "--dsn", r.placeholder("pg://u:p@h"), "--token", "t"]
    assert r.redact_headers((("X-Api-Key", "v"),)) == (("X-Api-Key", "v"),)


def test_the_session_header_is_redacted_and_names_the_key():
    from mrtr_inspect.core.events import SessionStart

    r = Redactor(b"k")
    start = SessionStart(0.0, "s", "stdio", {"command": ["srv", "--token", "T"], "upstream": "http://h/mcp?key=U"})
    got = r.frame(start)
    assert got.info == {"command": ["srv", "--token", r.placeholder("T")], "upstream": f"http://h/mcp?key={r.placeholder('U')}",
                        "redaction": {"keys": [r.key_id]}}
    assert r.key_id != Redactor(b"other").key_id and len(r.key_id) == 12
    again = Redactor(b"other").frame(got)  # a fixture exported on another machine: both keys named
    assert again.info["redaction"] == {"keys": sorted([r.key_id, Redactor(b"other").key_id])}


def test_the_writer_redacts_the_header_line(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, "stdio", {"command": ["srv", "--api-key", "sk-secret-value"]}, redactor=Redactor(b"k")):
        pass
    text = path.read_text()
    assert "sk-secret-value" not in text and Redactor(b"k").placeholder("sk-secret-value") in text


def test_one_path_syntax_double_star_and_indexes():
    r = Redactor(b"k", paths=["**.token", "result.content[0].text"])
    raw = b'{"params":{"a":{"token":"t1"},"token":"t2"},"result":{"content":[{"text":"x"},{"text":"y"}]}}'
    out = json.loads(r.redact_json(raw))
    assert out["params"] == {"a": {"token": r.placeholder("t1")}, "token": r.placeholder("t2")}
    assert out["result"]["content"] == [{"text": r.placeholder("x")}, {"text": "y"}]
    assert r.unmatched() == []
    typo = Redactor(b"k", paths=["params.arguments.apitoken"])
    typo.redact_json(b'{"params":{"arguments":{"api_token":"x"}}}')
    assert typo.unmatched() == ["params.arguments.apitoken"]


def test_secret_members_are_redacted_by_name_and_look_alikes_are_not():
    """Issue 25, item 6: members named as secrets, in any case and separator style, anywhere in a
    message, without a configured path; the rest byte for byte. Near misses: counts and MCP's own
    opaque values (`max_tokens`, `progressToken`, `requestState`, `cursor`…), and a schema that
    describes a `password` property (an object, not a string) keep their bytes."""
    r = Redactor(b"k")
    names = ["password", "api_token", "access_token", "apiKey", "API-KEY", "Api_Key", "client-secret", "refreshToken",
             "id_token", "private_key", "token", "auth", "credentials", "secret", "passwd"]
    body = {n: f"v{i}" for i, n in enumerate(names)}
    clear = {"max_tokens": "a", "maxTokens": "b", "tokens": "c", "tokenCount": "d", "usage": "e", "progressToken": "f",
             "requestState": "g", "cursor": "h", "nextCursor": "i", "keyword": "j"}
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"arguments": {**body, **clear}, "_meta": {"progressToken": "p"}}}).encode()
    out = r.redact_json(raw)
    expect = raw
    for i, n in enumerate(names):
        expect = expect.replace(f'"{n}": "v{i}"'.encode(), f'"{n}": "{r.placeholder(f"v{i}")}"'.encode())
    assert out == expect
    schema = b'{"result":{"tools":[{"inputSchema":{"properties":{"password":{"type":"string"}},"required":["password"]}}]}}'
    assert r.redact_json(schema) is schema


def test_a_secret_member_with_separators_before_doubled_or_after_its_name_is_redacted():
    """Every name `member_key` takes for a secret's (it drops every `-`, `_`, `.` and space) is
    redacted: the byte search that decides whether a message is walked allowed one separator between
    two characters only, so `_token` (a CSRF field), `api__key`, `-password` and `token_` were
    recorded in the clear. Near misses keep their bytes: `_tokens`, `max__tokens`, `token_count`."""
    r = Redactor(b"k")
    for name in ("_token", "api__key", "-password", "token_", " secret ", "access._-token", "__Client_Secret__"):
        assert r.secret_member(name), name
        raw = json.dumps({"params": {"arguments": {name: "hunter2", "n": 1}}}).encode()
        assert json.loads(r.redact_json(raw))["params"]["arguments"] == {name: r.placeholder("hunter2"), "n": 1}, name
        inner = json.dumps({"result": {"content": [{"type": "text", "text": json.dumps({name: "hunter2"})}]}}).encode()
        assert b"hunter2" not in r.redact_json(inner), name
    for name in ("_tokens", "max__tokens", "token_count", "tokens_", "_"):
        assert not r.secret_member(name), name
        raw = json.dumps({"params": {"arguments": {name: "hunter2"}}}).encode()
        assert r.redact_json(raw) is raw, name


# what a member-name search sees: pieces of secrets' names, separators, the bytes around a member
_PIECES = st.sampled_from([*{member_key(m) for m in MEMBERS}, "api", "tok", "en", "s", "pass", "word", "key", "x",
                           "-", "_", ".", " ", '"', '\\', ":", "\t", "\n", "\x0b", "\x0c", "\r", "{", ",", "\xe9",
                           "\xff", "\x00", "apikeys", "tokens"])


@FUZZ
@given(st.lists(_PIECES, max_size=24), st.lists(st.sampled_from(["api_token", "my-secret", "pin", "x.y"]), max_size=2))
def test_the_member_search_finds_the_same_texts_with_re2_and_with_re(pieces, extra):
    """The member-name search runs in RE2 (a DFA, one pass: the tee searches whole chunks) when
    google-re2 is installed, else in Python's `re`: both find a secret's name in the same texts,
    whatever the names configured (a near miss, such as `"tokens":` or a name with no `":` after it,
    is found by neither)."""
    pytest.importorskip("re2", reason="google-re2 (a dependency) is not installed here")
    keys = {member_key(m) for m in MEMBERS} | {member_key(e) for e in extra}
    by_re2, by_re = redaction._member_search(keys, "re2"), redaction._member_search(keys, "re")
    assert by_re2 is not by_re and "re2" in type(by_re2.__self__).__module__
    text = "".join(pieces).encode("latin-1")
    assert (by_re2(text) is None) == (by_re(text) is None), text
    for name in ("token", "api_key", *extra):  # a name as a member: both find it; as a value only: neither
        member = b'{"a":' + text + b',"' + name.encode() + b'" :"v"}'
        assert by_re2(member) is not None and by_re(member) is not None, member
    value = text.replace(b":", b"") + b'"tokens":"token"'
    assert (by_re2(value) is None) == (by_re(value) is None) and by_re(b'"tokens":"token"') is None


def test_the_member_search_takes_every_space_before_the_colon_and_every_separator_in_both_engines():
    pytest.importorskip("re2", reason="google-re2 (a dependency) is not installed here")
    keys = {member_key(m) for m in MEMBERS}
    by_re2, by_re = redaction._member_search(keys, "re2"), redaction._member_search(keys, "re")
    for space in (b"", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b" \n\t"):
        for name in (b"token", b"_api__key_", b"client-secret", b"pass.word", b"to ken", b'\\"token\\'):
            text = b'{"n":1,"' + name + b'"' + space + b':"v"}'
            assert by_re2(text) is not None and by_re(text) is not None, text
    for miss in (b'{"tokens":"v"}', b'{"token" x:"v"}', b'{"token\x1f:"v"}', b'{"to/ken":"v"}', b'{"token"\xa0:"v"}',
                 b'{"token"', b'"token"'):
        assert by_re2(miss) is None and by_re(miss) is None, miss


# the text search's pieces: the member search's, in both cases, and escapes a name could hide behind
_TEXT_PIECES = st.one_of(_PIECES, _PIECES.map(lambda p: "".join(c.upper() if c.isascii() else c for c in p)),
                         st.sampled_from(["\xc9", "\\u0070", "\\u0041", "\\u005F", "\\u002d", "\\u0030", "\\u00e9",
                                          "\\u0020", "\\u00", "\\U0070", "u0070", "T", "K"]))


@FUZZ
@given(st.lists(_TEXT_PIECES, max_size=24), st.lists(st.sampled_from(["api_token", "my-secret", "pin", "x.y", "Ab"]),
                                                     max_size=2))
def test_the_text_search_answers_as_the_lower_cased_search(pieces, extra):
    """`may_redact` asks RE2 for a name on the text as it is (`_text_search`: each letter of a name
    in both cases): it finds one in exactly the texts where the search of the text lower-cased finds
    one, whatever the case of the text and the names configured; its search for an escape finds
    what `re` finds; and `may_redact`, which asks the two apart, answers as the search of the text
    lower-cased or the escape search (so the redaction never misses a name it redacted before)."""
    pytest.importorskip("re2", reason="google-re2 (a dependency) is not installed here")
    keys = {member_key(m) for m in MEMBERS} | {member_key(e) for e in extra}
    rx, escape = redaction._text_search(keys)  # google-re2's compiled patterns, called directly
    copied = copy.deepcopy(rx)  # (as the redactor is copied for an analysis: by its pattern)
    by_re = redaction._member_search(keys, "re")
    r = Redactor(b"k", members=sorted(keys))
    assert r._text_rx is not None
    text = "".join(pieces).encode("latin-1")
    for t in (text, b'{"a":' + text + b',"Api_Key" :"v"}', text.replace(b":", b""), b'"' + text + b'":1'):
        found = rx._regexp.Match(redaction._UNANCHORED, t, 0, len(t))[0][0] >= 0
        assert found == (by_re(t.lower()) is not None) == (copied.search(t) is not None), t
        by_escape = escape._regexp.Match(redaction._UNANCHORED, t, 0, len(t))[0][0] >= 0
        assert by_escape == (redaction._ESCAPED_NAME_CHAR(t) is not None), t
        pad = t + b" " * redaction.SEARCH_BY_DFA_ABOVE  # (past it, `may_redact` asks RE2)
        escaped = pad.find(b"\\u00") >= 0 and redaction._ESCAPED_NAME_CHAR(pad) is not None
        assert r.may_redact(pad) == (by_re(pad.lower()) is not None or escaped), t


def test_may_redact_finds_a_name_in_any_case_and_at_any_length():
    """Short texts are searched by `re`, longer ones by RE2 in one pass (`SEARCH_BY_DFA_ABOVE`):
    both find a secret's name whatever its case, and a near miss in neither."""
    r = Redactor(b"k")
    for pad in (b"", b" " * redaction.SEARCH_BY_DFA_ABOVE, b"x" * 500):
        for name in (b"token", b"TOKEN", b"Api-Key", b"CLIENT_secret", b"\\u0074oken", b'\\"Access_Token\\'):
            raw = b'{"p":"' + pad + b'","' + name + b'":"v"}'
            assert r.may_redact(raw), raw
        for miss in (b"tokens", b"MAX_TOKENS", b"progressToken", b"\\u00e9", b"to/ken"):
            raw = b'{"p":"' + pad + b'","' + miss + b'":"v"}'
            assert not r.may_redact(raw), raw


def test_a_secret_member_inside_a_string_that_holds_json_has_the_same_placeholder():
    r = Redactor(b"k")
    raw = json.dumps({"result": {"content": [{"type": "text", "text": json.dumps({"access_token": 'ab"c\\d', "n": 1})}],
                                 "structuredContent": {"access_token": 'ab"c\\d', "n": 1}}}).encode()
    out = json.loads(r.redact_json(raw))
    p = r.placeholder('ab"c\\d')
    assert out["result"]["structuredContent"]["access_token"] == p
    assert json.loads(out["result"]["content"][0]["text"]) == {"access_token": p, "n": 1}


def test_keep_and_redact_members_narrow_and_extend_the_member_list():
    r = Redactor(b"k", keep=["Password"], members=["pin-code"])
    raw = b'{"password":"x","pinCode":"1234","PIN_CODE":"5678"}'
    assert r.redact_json(raw) == (b'{"password":"x","pinCode":"%s","PIN_CODE":"%s"}'
                                  % (r.placeholder("1234").encode(), r.placeholder("5678").encode()))


def test_broadened_header_and_query_names_and_credential_looking_ids():
    r = Redactor(b"k")
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzZXNzaW9uIn0.c2lnbmF0dXJlc2VjcmV0MTIz"
    got = dict(r.redact_headers((("Ocp-Apim-Subscription-Key", "a"), ("X-Functions-Key", "b"), ("X-Hub-Signature", "c"),
                                 ("Link", '<https://h/n?token=d&page=2>; rel="next"'), ("Mcp-Session-Id", jwt),
                                 ("Last-Event-ID", "42"), ("Sec-Fetch-Mode", "cors"))))
    assert got == {"Ocp-Apim-Subscription-Key": r.placeholder("a"), "X-Functions-Key": r.placeholder("b"),
                   "X-Hub-Signature": r.placeholder("c"), "Link": f'<https://h/n?token={r.placeholder("d")}&page=2>; rel="next"',
                   "Mcp-Session-Id": r.placeholder(jwt), "Last-Event-ID": "42", "Sec-Fetch-Mode": "cors"}
    assert r.url("/cb?code=C&state=s&X-Amz-Signature=S") == f"/cb?code={r.placeholder('C')}&state=s&X-Amz-Signature={r.placeholder('S')}"
    assert r.redact_sse(f"id: {jwt}\ndata: {{}}\n\n".encode()) == f"id: {r.placeholder(jwt)}\ndata: {{}}\n\n".encode()
    assert r.redact_sse(b"id: 7\ndata: {}\n\n") == b"id: 7\ndata: {}\n\n"
