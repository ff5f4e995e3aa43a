"""rawjson: what json.loads hides (duplicates, constants, depth, UTF-8), and raw string tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_inspect.core import rawjson
from mrtr_inspect.core.rawjson import Duplicate, ParseError, parse, raw_member_token
from tests.core.strategies import FUZZ


def reason(raw: bytes, **kw) -> str:
    with pytest.raises(ParseError) as e:
        parse(raw, **kw)
    return e.value.reason


# ---------------------------------------------------------------------------------------------
# parse


def test_plain_message_has_no_duplicates():
    p = parse(b'{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":2}]}}')
    assert p.value == {"jsonrpc": "2.0", "id": 1, "result": {"a": [1, {"b": 2}]}}
    assert p.duplicates == ()


def test_duplicates_with_their_path_and_count_the_last_value_wins():
    raw = b'{"id":1,"id":2,"result":{"inputRequests":{"k":1,"k":2,"k":3}},"list":[{"x":0},{"x":1,"x":2}]}'
    p = parse(raw)
    assert p.value["id"] == 2 and p.value["result"]["inputRequests"] == {"k": 3}
    assert set(p.duplicates) == {
        Duplicate((), "id", 2),
        Duplicate(("result", "inputRequests"), "k", 3),
        Duplicate(("list", 1), "x", 2),
    }


def test_duplicate_names_spelled_with_different_escapes_are_duplicates():
    p = parse(b'{"a":1,"\\u0061":2}')
    assert p.value == {"a": 2} and p.duplicates == (Duplicate((), "a", 2),)


@pytest.mark.parametrize("raw", [b"NaN", b"[Infinity]", b'{"a":-Infinity}', b'{"a":1,"a":2,"b":NaN}'])
def test_non_json_constants_are_refused(raw):
    assert reason(raw) == "constant"


def test_depth_is_bounded():
    deep = b"[" * 201 + b"]" * 201
    assert reason(deep) == "depth"
    assert parse(b"[" * 200 + b"]" * 200).value is not None
    assert reason(b"[" * 6 + b"]" * 6, max_depth=5) == "depth"
    # brackets inside strings do not count
    assert parse(b'["' + b"[" * 500 + b'"]').value == ["[" * 500]


def test_deep_nesting_with_a_duplicate_and_a_generous_bound_is_a_parse_error_not_a_crash():
    raw = b"[" * 3000 + b'{"a":1,"a":1}' + b"]" * 3000
    assert reason(raw, max_depth=10_000) == "depth"


@pytest.mark.parametrize("raw, why", [
    (b'{"a":1} {"b":2}', "extra-data"),
    (b'{"a":1}x', "extra-data"),
    (b'{"a":1,"a":2} x', "extra-data"),  # a duplicate before the extra data
    (b'[{"a":1,"a":2},', "json"),  # a duplicate before the syntax error
    (b"", "empty"),
    (b"  \t ", "empty"),
    (b"{", "json"),
    (b"{'a':1}", "json"),
])
def test_not_one_json_value(raw, why):
    assert reason(raw) == why


def test_a_number_longer_than_python_converts_is_a_parse_error():
    assert reason(b"1" * 5000) == "json"
    assert reason(b'{"id":' + b"9" * 5000 + b',"a":1,"a":2}') == "json"


def test_invalid_utf8_with_its_position():
    with pytest.raises(ParseError) as e:
        parse(b'{"a":"caf\xc3"}')
    assert e.value.reason == "utf8" and e.value.position == 9
    with pytest.raises(ParseError) as e:
        parse(b'\xff{"a":1}')
    assert e.value.position == 0


def test_lone_surrogate_escapes_are_json():
    assert parse(b'"\\ud800"').value == "\ud800"


_TOKENS = [b"{", b"}", b"[", b"]", b":", b",", b'"a"', b'"b"', b'"\\u0061"', b'"\\"', b"1", b"-0.5e3", b"true",
           b"null", b"NaN", b"Infinity", b" ", b"\n", b"x", b"\xc3\xa9", b"\xff", b'"', b"1" * 4400]


@FUZZ
@given(st.one_of(st.binary(max_size=300), st.lists(st.sampled_from(_TOKENS), max_size=40).map(b"".join)))
def test_parse_raises_only_parse_error(raw):
    try:
        p = parse(raw)
    except ParseError as e:
        assert e.reason in ("utf8", "json", "extra-data", "constant", "depth", "empty")
        return
    # accepted: Python's own parser agrees on the value
    assert p.value == json.loads(raw)


def _outcome(fn, raw: bytes, **kw):
    try:
        r = fn(raw, **kw)
    except ParseError as e:
        return ("error", e.reason, e.detail, e.position)
    value, dups = (r.value, r.duplicates) if type(r) is rawjson.Parsed else r
    return ("ok", json.dumps(value, sort_keys=True), dups)


_EDGES = [b'{"a":1}', b' {"a":1}', b'{"a":1} ', b'{"a":1}{}', b'{"a":1,"a":2}', b'[[[[1]]]]', b"", b"  ",
          b'{"a":NaN}', b'{"a":[1,', b'"\\ud800"', b'{"a":{"b":1,"b":1}} ']


@pytest.mark.parametrize("raw", _EDGES)
def test_parse_value_is_parse_without_the_record(raw):
    assert _outcome(rawjson.parse_value, raw) == _outcome(parse, raw)
    assert _outcome(rawjson.parse_value, raw, max_depth=2) == _outcome(parse, raw, max_depth=2)


@FUZZ
@given(st.one_of(st.binary(max_size=300), st.lists(st.sampled_from(_TOKENS), max_size=40).map(b"".join)))
def test_parse_value_agrees_with_parse(raw):
    assert _outcome(rawjson.parse_value, raw) == _outcome(parse, raw)
    assert _outcome(rawjson.parse_value, raw, max_depth=3) == _outcome(parse, raw, max_depth=3)


# the fast path (orjson and the exact-bytes proof) against the raw-preserving parser

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4), max_leaves=30)


def _spellings(value) -> list[bytes]:
    """`value` written by orjson (its canonical form, when orjson can write it) and by Python's encoder
    in several styles, with an escaped slash and a repeated first member: the fast path must take
    only what it proves, and give the raw-preserving parser's answer whichever it takes."""
    import orjson

    out = []
    try:
        canonical = orjson.dumps(value)
    except TypeError:  # an integer past 64 bits
        canonical = None
    for text in (json.dumps(value, ensure_ascii=False, separators=(",", ":")), json.dumps(value),
                 json.dumps(value, ensure_ascii=True, separators=(",", ":")).replace("/", "\\/")):
        out.append(text.encode("utf-8", "surrogatepass"))
    if canonical is not None:
        out.append(canonical)
        if canonical.startswith(b"{") and canonical != b"{}":
            first = canonical[1:].split(b",", 1)[0]  # (a member, or a member's beginning: either way a test)
            out.append(b"{" + first + b"," + canonical[1:])
    return out


@FUZZ
@given(_VALUES)
def test_the_fast_path_agrees_with_the_raw_preserving_parser(value):
    for raw in _spellings(value):
        for depth in (rawjson.MAX_DEPTH, 3):
            assert _outcome(rawjson.parse_value, raw, max_depth=depth) == _outcome(parse, raw, max_depth=depth), raw


@pytest.mark.parametrize("raw", [b'{"a":18446744073709551616}', b'{"a":1E5}', b'{"a":1e5}', b'{"a":-0}',
                                 b'{"a":"\\u00e9"}', b'{"a":"\\/"}', b'{"a":1,"a":1}', b'{"a":"\\ud800"}',
                                 b'[1.0,1.00,10e-1]', b'{"a":1}\n', b'\xef\xbb\xbf{"a":1}', b'{"a":NaN}'])
def test_what_the_proof_refuses_gives_the_raw_preserving_answer(raw):
    assert _outcome(rawjson.parse_value, raw) == _outcome(parse, raw)


def test_canonical_bytes_take_the_fast_path_and_others_do_not(monkeypatch):
    seen = []
    monkeypatch.setattr(rawjson, "parse_text", lambda text, max_depth: seen.append(text) or parse(text.encode(), max_depth))
    monkeypatch.setattr(rawjson, "_SCAN", lambda text, at: seen.append(text) or json.JSONDecoder().raw_decode(text, at))
    msg = b'{"jsonrpc":"2.0","id":7,"params":{"requestState":"eyJ\xc3\xa9","n":-1.5e-7,"x":[true,null]}}'
    assert rawjson.parse_value(msg) == (json.loads(msg), ()) and seen == []
    assert rawjson.parse_value(b'{"id":7, "a":1}') == ({"id": 7, "a": 1}, ()) and seen == ['{"id":7, "a":1}']


def test_loads_is_json_loads():
    for raw in (b'{"t":1795997950.62,"s":"ab","k":"req"}', b'{"t":1, "x":18446744073709551616}', b'{"a":1,"a":2}'):
        assert json.dumps(rawjson.loads(raw)) == json.dumps(json.loads(raw))
    with pytest.raises(ValueError):
        rawjson.loads(b"{")


@FUZZ
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4), max_leaves=30))
def test_parse_agrees_with_json_on_valid_documents(value):
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert reason(raw) == "utf8"
        return
    p = parse(raw)
    assert p.value == json.loads(raw) and p.duplicates == ()


# ---------------------------------------------------------------------------------------------
# raw_member_token

STATE_PATH = ("params", "requestState")


@pytest.mark.parametrize("text, token", [
    ('{"params":{"requestState":"abc"}}', '"abc"'),
    ('{"params":{"requestState":"a\\u0062c\\/"}}', '"a\\u0062c\\/"'),  # escapes as sent
    ('{"params":{"requestState":"say \\"hi\\""}}', '"say \\"hi\\""'),
    ('{ "params" : { "requestState" : "x" , "b" : 1 } }', '"x"'),
    ('{"params":{"requestState":12}}', "12"),
    ('{"params":{"requ\\u0065stState":"esc-name"}}', '"esc-name"'),  # a name spelled with an escape
    ('{"x":{"requestState":"decoy"},"params":{"requ\\u0065stState":"real"}}', '"real"'),
    # decoys: the same name elsewhere, in strings, deeper, in arrays
    ('{"requestState":"top","params":{"x":{"requestState":"deep"},"requestState":"real"}}', '"real"'),
    ('{"params":{"note":"\\"requestState\\":\\"fake\\"","requestState":"real"}}', '"real"'),
    ('{"params":[{"requestState":"in-array"}]}', None),
    ('{"params":{"requestState":{"nested":"obj"}}}', None),
    ('{"params":{"requestState":"first","requestState":"last"}}', '"last"'),  # the last wins, as in Python
    ('{"params":{"other":1}}', None),
    ('{"result":{"requestState":"r"}}', None),
])
def test_raw_member_token(text, token):
    assert raw_member_token(text, STATE_PATH) == token
    assert raw_member_token(text, STATE_PATH, json.loads(text)) == token  # the shortcut, given the parsed value


@FUZZ
@given(st.recursive(st.none() | st.integers() | st.text(alphabet='"\\é:{}a', max_size=6),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["params", "requestState", "a", 're"q']), c, max_size=3), max_leaves=20),
       st.booleans())
def test_raw_member_token_shortcut_agrees_with_the_tokenizer(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert raw_member_token(text, STATE_PATH, value) == raw_member_token(text, STATE_PATH)


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(alphabet='"\\é:{}a\x01\u2028', max_size=6),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["params", "requestState", "a", 're"q']), c, max_size=3), max_leaves=20))
def test_the_canonical_token_is_the_raw_token(value):
    import orjson

    raw = orjson.dumps({"params": value}) if type(value) is not dict else orjson.dumps(value)
    parsed, dups, canonical = rawjson.parse_message(raw)
    assert canonical and dups == ()
    for path in (STATE_PATH, ("params",), ("a",), ("params", "a", "requestState")):
        assert rawjson.canonical_token(parsed, path) == raw_member_token(raw.decode(), path)


def test_raw_member_token_agrees_with_the_parsed_value():
    text = '{"jsonrpc":"2.0","result":{"resultType":"input_required","requestState":"\\u00e9t\\u00E9\\n"}}'
    tok = raw_member_token(text, ("result", "requestState"))
    assert json.loads(tok) == json.loads(text)["result"]["requestState"] == "été\n"


@FUZZ
@given(st.text(max_size=200))
def test_raw_member_token_never_raises(text):
    tok = raw_member_token(text, STATE_PATH)
    assert tok is None or isinstance(tok, str)


def test_nesting_depth_ignores_brackets_in_strings():
    assert rawjson.nesting_depth('[{"a":"[[[{{{"}]') == 2


def _nest(levels: str, leaf: Any) -> Any:
    """Containers nested as `levels` says from the outside in ("a" an array, "o" an object with the key "")."""
    for kind in reversed(levels):
        leaf = [leaf] if kind == "a" else {"": leaf}
    return leaf


@given(st.text(alphabet="ao", min_size=1, max_size=80), st.sampled_from([[], {}, 0, "[[", "x" * 5]),
       st.integers(1, 90), st.booleans())
def test_the_depth_bound_lets_nothing_too_deep_through(levels, leaf, max_depth, spaced):
    """`_shallow` (the fast path's look at the depth) never passes a text nested deeper than the
    bound, however arrays and objects mix, compact or spaced, brackets in strings or not."""
    text = json.dumps(_nest(levels, leaf), separators=None if spaced else (",", ":"))
    raw = text.encode()
    if rawjson._shallow(raw, len(raw), max_depth):
        assert rawjson.nesting_depth(text) <= max_depth, text
    assert _outcome(rawjson.parse_value, raw, max_depth=max_depth) == _outcome(parse, raw, max_depth=max_depth)


def test_the_depth_bound_is_tight_for_objects_and_counts_arrays():
    d = 300  # objects alone: `{"":` and `}` a level, `{}` innermost, 5d - 3 bytes
    raw = json.dumps(_nest("o" * (d - 1), {}), separators=(",", ":")).encode()
    assert len(raw) == 5 * d - 3
    assert rawjson._shallow(raw, len(raw), d) and not rawjson._shallow(raw, len(raw), d - 1)
    assert rawjson.parse_value(raw, max_depth=d) == (_nest("o" * (d - 1), {}), ())
    with pytest.raises(ParseError, match="nesting depth 300 exceeds 299"):
        rawjson.parse_value(raw, max_depth=d - 1)
    arrays = json.dumps(_nest("ao" * 100, 0), separators=(",", ":")).encode()  # 701 bytes, depth 200
    assert len(arrays) + 3 <= 5 * 199  # (by the length alone it would pass)
    assert not rawjson._shallow(arrays, len(arrays), 199)
    assert rawjson._shallow(arrays, len(arrays), 200)
