"""Summaries: a chain as the JSON report shows it, and what a round asked or a retry answered in short.

`chain_summary` is the chain object of the JSON report (CONTRACTS.md), with its timeline and its
rounds; `Chain.summary()` gives it. `summarize_requests` (a round's `inputRequests`: method, mode,
fields, a line of text) and `summarize_responses` (a retry's `inputResponses`) are taken when the
round opens and the retry links, while the messages are still held: the report, `show`, the live
view and the chain rules read them after the messages are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from orjson import dumps as _orjson

from .jsontext import dumps_with
from .era import Era
from .vocabulary import Link, Outcome

if TYPE_CHECKING:  # pragma: no cover
    from .chains import Chain, LegacyRound


# `round` of a float (the products with 1000.0 always are) without `round`'s lookup of `__round__`,
# which makes a bound method each time: the same function, called at once
_round = float.__round__


_ENUMS = frozenset((Outcome, Link, Era))


def _plain(x: Any) -> Any:
    """A member of the vocabulary as its plain string (its `_value_`: `value` is a Python property),
    anything else as it is (None stays None)."""
    return x._value_ if type(x) in _ENUMS else x


def chain_summary(chain: "Chain") -> dict:
    """The chain as the JSON report shows it (CONTRACTS.md), with its timeline.

    Each dict is made whole where its common shape allows (a dict display, one step, instead of a
    store per member), and each attribute read once: this runs once for every chain `check`
    reports. The members' order is the report's. The vocabulary's values (outcome, link, era) are
    plain strings, as the JSON report gives them back: orjson would otherwise ask each member for its
    `value`, a Python call, in each of the chain line's two passes (outputs/report.py `_spaced`)."""
    timeline = []
    add = timeline.append
    for r in chain.requests:
        rd = r.round
        response = r.response_kind if not r.cancelled else "cancelled"
        if rd is None:  # the first request
            entry: dict[str, Any] = {"id": r.id, "message": r.index, "time": r.time, "response": response}
        else:
            t = r.time
            link = r.link
            answered = r.answered_summary
            if link is not None and answered is not None:  # a retry as most are
                entry = {"id": r.id, "message": r.index, "time": t, "retries_round": rd.n,
                         "wait_ms": _round((t - rd.irr_time) * 1000.0, 3), "link": _plain(link.via), "answered": answered,
                         "response": response}
            else:
                entry = {"id": r.id, "message": r.index, "time": t, "retries_round": rd.n,
                         "wait_ms": _round((t - rd.irr_time) * 1000.0, 3)}
                if link is not None:
                    entry["link"] = _plain(link.via)
                if answered is not None:
                    entry["answered"] = answered
                entry["response"] = response
        if r.response_index is not None:
            entry["response_message"] = r.response_index
            entry["response_time"] = r.response_time
        if r.error_code is not None:
            entry["error_code"] = r.error_code
        add(entry)
    rounds = [{"round": rd.n, "message": rd.irr_index, "time": rd.irr_time, "asked": rd.asked,
               "request_state": rd.state_hash[:16] if rd.state_hash else None} for rd in chain.rounds]
    outcome = chain.outcome
    if outcome == Outcome.ABANDONED:
        rd = chain.unanswered_round
        if rd is not None:  # the wait no retry ended: up to the abandonment
            rounds[-1]["unanswered_ms"] = round((chain.end - rd.irr_time) * 1000.0, 3)
    for q in chain.asks:  # a legacy chain's rounds: the server's questions and the client's answers
        rounds.append(_legacy_round(chain, q))
    d = {
        "id": chain.id,
        "method": chain.method,
        "target": chain.target,
        "rounds": len(rounds),
        "requests": [r.id for r in chain.requests],
        "outcome": _plain(outcome or Outcome.OPEN),
        "link": _plain(chain.link),
        "duration_ms": chain.duration_ms,
        "era": _plain(chain.era),
        "peer": chain.peer,
        "start": chain.start,
        "end": chain.end,
        "error_code": chain.error_code,
        "timeline": timeline,
        "round_details": rounds,
    }
    if chain.hop is not None:
        d["hop"] = chain.hop
    return d


def _legacy_round(chain: "Chain", q: "LegacyRound") -> dict:
    """A legacy round as the report shows it: the round of an MRTR chain (its question under
    `asked`), with how it was tied (`link`), the server request's id, and the answer: its message,
    time, summary (`answered`) and the user's answering time (`wait_ms`); unanswered when the chain
    ended, the wait up to that end (`unanswered_ms`)."""
    d: dict[str, Any] = {"round": q.n, "message": q.index, "time": q.time, "asked": q.asked, "request_state": None,
                         "link": q.via, "server_request": q.id}
    if q.answer_time is not None:
        d["response"] = q.answer_kind
        d["response_message"] = q.answer_index
        d["response_time"] = q.answer_time
        if q.answered is not None:
            d["answered"] = q.answered
        if q.error_code is not None:
            d["error_code"] = q.error_code
        d["wait_ms"] = round((q.answer_time - q.time) * 1000.0, 3)
    elif chain.closed:
        d["unanswered_ms"] = round((chain.end - q.time) * 1000.0, 3)
    return d


_DUMPS = dumps_with(ensure_ascii=False, default=str)


def _short(text: Any, n: int = 72) -> str:
    s = text if isinstance(text, str) else _DUMPS(text)
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


# A round's or a retry's summary is kept by the bytes of what it summarises: servers ask the same forms
# again and again and clients answer them alike, and a summary (about 12k instructions: the C encoder and
# the whitespace folded, for each value) costs several times the key (orjson's bytes of the value, about
# 2k). The summaries are shared between the rounds and retries of equal values: read only (the report,
# the live view and the rules read them; nothing changes them). A summary depends on the value alone,
# and orjson's bytes name a JSON value (key order included) but for a NaN or an infinity, which it
# writes as `null`: a value whose bytes hold `null` is summarised but not kept, a value orjson does not
# write (an integer past 64 bits, a lone surrogate) neither. Keys are str (a bytes object orjson wrote
# holds a 4 KiB allocation while it is kept); at most `_KEPT` of each kind, of at most `_KEY_CHARS`.
_KEPT = 2048  # (the bench recording asks 1,231 distinct forms in 200,000 messages: 98% found kept)
_KEY_CHARS = 1024
_ASKED: dict[str, dict] = {}
_ANSWERED: dict[str, dict | None] = {}


def _kept(cache: dict, summarize: Callable[[Any], Any], value: Any) -> Any:
    """`summarize(value)`, shared by values of the same bytes (see above)."""
    try:
        key = _orjson(value).decode("utf-8")
    except TypeError:  # (orjson's error for what it does not write)
        return summarize(value)
    return _kept_by(cache, summarize, value, key)


def _kept_by(cache: dict, summarize: Callable[[Any], Any], value: Any, key: str) -> Any:
    """`_kept`, the value's bytes (`key`) written already."""
    got = cache.get(key, cache)
    if got is not cache:
        return got
    got = summarize(value)
    if len(key) <= _KEY_CHARS and "null" not in key:
        cache[key] = got
        if len(cache) > _KEPT:
            try:  # the oldest first
                del cache[next(iter(cache))]
            except (KeyError, RuntimeError, StopIteration):  # another analysis' thread changed it meanwhile: next time
                pass
    return got


def summarize_requests(input_requests: dict | None) -> dict:
    """What a round asked, in short: per input request its method, a line of text and what its
    kind shows (a form's fields, a URL, a token bound). Shared by rounds that asked the same (`_kept`)."""
    if not input_requests:
        return {}
    return _kept(_ASKED, _summarize_requests, input_requests)


def summarize_requests_text(input_requests: dict | None) -> tuple[dict, str | None]:
    """`summarize_requests`, and orjson's text of the input requests that keys it (None: there are
    none, or orjson does not write them): a round keeps that text for its retired form
    (`retired._asked_form`) instead of writing it again when its chain closes."""
    if not input_requests:
        return {}, None
    try:
        text = _orjson(input_requests).decode("utf-8")
    except TypeError:  # (orjson's error for what it does not write)
        return _summarize_requests(input_requests), None
    return _kept_by(_ASKED, _summarize_requests, input_requests, text), text


def _summarize_requests(input_requests: dict) -> dict:
    out: dict[str, Any] = {}
    for key, req in input_requests.items():
        if type(req) is not dict:
            out[key] = {"method": None, "summary": _short(req)}
            continue
        method = req.get("method")
        params = req.get("params") if type(req.get("params")) is dict else {}
        s: dict[str, Any] = {"method": method}
        if method == "elicitation/create":
            s["mode"] = params.get("mode", "form")
            s["summary"] = _short(params.get("message", ""))
            schema = params.get("requestedSchema")
            if type(schema) is dict and type(schema.get("properties")) is dict:
                s["fields"] = list(schema["properties"])
            if params.get("url"):
                s["url"] = _short(params.get("url"))
        elif method == "sampling/createMessage":
            msgs = params.get("messages")
            first = ""
            if type(msgs) is list and msgs and type(msgs[0]) is dict:
                c = msgs[0].get("content")
                if type(c) is dict:
                    first = c.get("text", c.get("type", ""))
                elif type(c) is list and c and type(c[0]) is dict:
                    first = c[0].get("text", c[0].get("type", ""))
            s["summary"] = _short(first)
            if "maxTokens" in params:
                s["maxTokens"] = params.get("maxTokens")
        elif method == "roots/list":
            s["summary"] = "the client's roots"
        else:
            s["summary"] = _short(params)
        out[key] = s
    return out


def summarize_responses(input_responses: Any) -> dict | None:
    """What a retry answered, in short: per answer its action, model or roots and a line of text.
    Shared by retries that answered the same (`_kept`)."""
    if type(input_responses) is not dict:
        return None
    return _kept(_ANSWERED, _summarize_responses, input_responses)


def _summarize_responses(input_responses: dict) -> dict:
    out: dict[str, Any] = {}
    for key, resp in input_responses.items():
        if type(resp) is not dict:
            out[key] = {"summary": _short(resp)}
        elif "action" in resp:
            s: dict[str, Any] = {"action": resp.get("action")}
            if "content" in resp:
                s["summary"] = _short(resp.get("content"))
            out[key] = s
        elif "roots" in resp:
            roots = resp.get("roots")
            n = len(roots) if type(roots) is list else 0
            first = roots[0].get("uri") if n and type(roots[0]) is dict else None
            out[key] = {"summary": f"{n} root{'s' if n != 1 else ''}" + (f": {first}" + (" …" if n > 1 else "") if first else "")}
        elif "model" in resp or "role" in resp:
            c = resp.get("content")
            text = c.get("text", c.get("type")) if type(c) is dict else c
            out[key] = {"model": resp.get("model"), "summary": _short(text)}
        else:
            out[key] = {"summary": _short(resp)}
    return out
