"""The pass of RULES.md §4.5, `MESSAGES`: what it remembers of a capture session (`_State`) and its
one step, `_update`, which brings that up to date with each observation before any check of it runs
(registry.py): the client messages whose id could not be read, the version retry and the fallback a
modern error calls for, requests whose HTTP stream broke, cancelled requests, servers shown to be
modern (and the findings that waited for that), and the subscription of a server notification."""

from __future__ import annotations

import re

from ...core.era import MODERN
from ...core.messages import (
    BATCH,
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    ERROR as ERROR_KIND,
    INVALID,
    LEGACY_VERSIONS,
    LOG_LEVEL_KEY,
    NOTIFICATION,
    REQUEST,
    RESULT,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    Message,
    id_key,
)
from ...core.observations import Cancelled, Decoded, ExchangeDone
from ...core.events import C2S
from ..common import (
    METHOD_NOT_FOUND,
    MODERN_CODES,
    UNSUPPORTED_VERSION,
    bounded,
    client_at,
    endpoint,
    error_code,
    on_stream_of,
    params,
)
from ..registry import Pass


LOG_LEVELS = {"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}
LISTEN = "subscriptions/listen"
LISTEN_FILTER = {  # notification -> the listen filter field that opts into it
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
RESOURCE_UPDATED = "notifications/resources/updated"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LISTEN_TYPES = frozenset(LISTEN_FILTER) | {RESOURCE_UPDATED, ACKNOWLEDGED}


# --- the per-message pass ------------------------------------------------------------------------------------


class _State:
    """What the per-message pass remembers about one capture session (dropped at SessionOver): what
    `_update` keeps, then what the message in hand means for the checks (set by `_update` for the
    kinds of message whose checks read it), then what single checks keep for themselves."""

    __slots__ = ("ctx", "unreadable", "cancelled", "retry", "modern_error", "broken", "modern", "pending", "discover",
                 "excused", "retry_for", "fallback_for", "reissue_of", "cancel", "released", "listen",
                 "once", "situations", "progress", "acked")

    def __init__(self, ctx) -> None:
        self.ctx = ctx  # the pass's context: what `_update` reads of the pipeline (the requests in flight)
        self.unreadable = 0  # stdio: client messages whose id could not be read, not yet answered by an id-less error
        self.cancelled: dict[int, tuple] = {}  # request index -> (request, cancel notification), stdio
        self.retry: dict = {}  # client -> (the -32022 error, its supported versions)
        self.modern_error: dict = {}  # client -> (a recognized modern error, whether it allows a legacy fallback)
        self.broken: dict = {}  # (peer, id key) -> request whose HTTP stream ended without a response
        self.modern: set = set()  # endpoints shown to be modern servers
        self.pending: dict = {}  # endpoint -> findings waiting for evidence that the server is modern (`_pend`)
        self.discover = ctx.knowledge.discover  # the inspector's DiscoverResults, per session
        # the message in hand: a server's id-less error answering an unreadable client message (stdio);
        # what a client request answers (a -32022's (error, supported versions), a recognized modern
        # error's (error, whether it allows a legacy fallback), the request whose stream broke); the
        # cancel of a response's request; the findings a server's answer releases (shown modern); a
        # server notification's subscription
        self.excused = False
        self.retry_for: tuple | None = None
        self.fallback_for: tuple | None = None
        self.reissue_of: Message | None = None
        self.cancel: tuple | None = None
        self.released: list | tuple = ()
        self.listen: _OnListen = _NOT_ON_LISTEN
        # what one check keeps for itself
        self.once: set = set()
        self.situations: dict = {}  # log rule id -> the situation it last reported
        self.progress: dict = {}  # request index -> (its last progress value, the notification's index)
        self.acked: dict = {}  # listen request index -> the listen, once its subscription is acknowledged


def _update(obs, st: _State) -> _State:
    """The pass's one step (registry.py): what an observation changes in the session's state, made
    before any check of it runs."""
    t = type(obs)
    if t is Decoded:
        msg = obs.msg
        k = msg.kind
        if msg.direction == C2S:
            if k == REQUEST:
                x = obs.exchange
                ti = type(msg.id)
                if ti is not int and ti is not str and msg.transport == "stdio":
                    st.unreadable += 1  # the server may answer it with an id-less error
                st.retry_for = st.retry.pop(client_at(msg, x), None) if st.retry else None
                st.fallback_for = st.modern_error.pop(client_at(msg, x), None) if (
                    st.modern_error and msg.method == "initialize") else None
                st.reissue_of = st.broken.pop((msg.peer, msg.idk), None) if (
                    st.broken and x is not None and msg.transport == "http") else None
            elif (k == INVALID or k == BATCH) and msg.problem_reason is not None and obs.exchange is None:
                st.unreadable += 1  # a stdio client message with no id to read (not JSON, a batch)
        elif k == RESULT or k == ERROR_KIND:
            req = obs.request
            st.cancel = st.cancelled.pop(req.index, None) if st.cancelled and req is not None else None
            st.released = ()
            if k == RESULT:
                # a result with resultType, or a DiscoverResult, shows its server to be modern: findings
                # waiting for that evidence are released (`report_released`; written here, not called:
                # every result passes)
                res = msg.result
                if msg.era is MODERN and type(res) is dict and req is not None and (
                        "resultType" in res or req.method == "server/discover"):
                    x = obs.exchange
                    where = msg.session if x is None else (msg.session, x.path)  # endpoint(msg, x), for every result
                    if where not in st.modern:
                        _modern_evidence(where, st)
            else:
                st.excused = False
                if msg.id is None and req is None and obs.exchange is None and st.unreadable:
                    st.unreadable -= 1
                    st.excused = True
                _modern_error(obs, st)
        elif k == NOTIFICATION:
            st.listen = _on_listen(obs, st)
    elif t is Cancelled:
        n, req = obs.notification, obs.request
        if req is not None and n.kind == NOTIFICATION and n.transport == "stdio":
            bounded(st.cancelled, req.index, (req, n))  # the server must send nothing more for it
    elif t is ExchangeDone:
        x = obs.exchange
        req = _lost_request(x)
        if req is not None:
            bounded(st.broken, (x.peer, req.idk), req)  # its peer may send it again
    return st


MESSAGES = Pass("messages", state=_State, update=_update, update_on=(Decoded, Cancelled, ExchangeDone),
                gates_read_state=True)

def _lost_request(x):
    """The modern request of an exchange that ended without a response carrying its id (else None)."""
    req = x.request
    if req is None or req.era is not MODERN:
        return None
    for r in x.responses:
        if r.idk == req.idk:
            return None
    return req

def _modern_evidence(where, st: _State) -> None:
    st.modern.add(where)
    st.released = st.pending.pop(where, ())


def _modern_error(obs: Decoded, st: _State) -> None:
    """A recognized modern error (-32020, -32021, -32022, or on HTTP a 404 with -32601) shows its
    server to be modern; the client's next request is judged against it (a version retry, a fallback
    to initialize)."""
    msg, x = obs.msg, obs.exchange
    if obs.request is None:
        return
    code = error_code(msg)
    if code not in MODERN_CODES and not (code == METHOD_NOT_FOUND and x is not None and x.status == 404):
        return
    where = endpoint(msg, x)
    if where not in st.modern:
        _modern_evidence(where, st)
    legacy_ok = False
    if code == UNSUPPORTED_VERSION:
        data = msg.error.get("data")
        supported = data.get("supported") if type(data) is dict else None
        if type(supported) is list:
            bounded(st.retry, client_at(msg, x), (msg, [v for v in supported if type(v) is str]))
            legacy_ok = any(v in LEGACY_VERSIONS for v in supported if type(v) is str)
    bounded(st.modern_error, client_at(msg, x), (msg, legacy_ok))

class _OnListen:
    """Where a modern server notification stands with the subscriptions: the listen it belongs to
    (None: none, or none known), and, when its subscriptionId tag is wrong or missing, what to say."""

    __slots__ = ("listen", "untagged")

    def __init__(self, listen: Message | None, untagged: tuple | None) -> None:
        self.listen = listen
        self.untagged = untagged  # (the listen or None, the tag, whether it was tagged at all)


_NOT_ON_LISTEN = _OnListen(None, None)


def _on_listen(obs: Decoded, st: _State) -> _OnListen:
    """The subscription of a server notification (HTTP: the listen request's SSE stream; stdio: the
    listen its `_meta` names), for the subscription checks of the message."""
    msg = obs.msg
    found = _NOT_ON_LISTEN
    if msg.era is MODERN:
        x = obs.exchange
        m = params(msg).get("_meta")
        tagged = type(m) is dict and SUBSCRIPTION_ID_KEY in m
        sid = m.get(SUBSCRIPTION_ID_KEY) if tagged else None
        req = on_stream_of(x)
        if req is not None:
            if req.method == LISTEN:  # another request's own stream: sse-notification-unrelated (§4.6)
                found = _OnListen(req, (req, sid, tagged) if id_key(sid) != req.idk else None)
        elif x is None:
            if not tagged:
                if msg.method in LISTEN_TYPES:
                    found = _OnListen(None, (None, sid, tagged))
            else:
                listen = obs.flight.get(id_key(sid))
                if listen is None or listen.method != LISTEN:
                    found = _OnListen(None, (None, sid, tagged))
                else:
                    found = _OnListen(listen, None)
    return found


# --- the gate of the pass's checks that an ordinary message cannot trigger ---------------------------------


def _unusual(obs: Decoded, st: _State) -> bool:
    """What the gated checks of the pass can find something in (envelope.py, meta.py; one gate, tested
    once per message): a message the core found a problem with or noted something about; a request
    whose id is neither a string nor an integer or whose method is a notification's; a response that
    is not a result object paired with its request. Then, for a client request (the checks of its
    `_meta`): one that is not modern, or a modern one whose `_meta` lacks clientCapabilities (an
    object) or clientInfo, names a key not yet known to be well formed, or carries a progressToken;
    for a server's result (the checks of its request and `_meta`): one that is not a modern result to
    a modern request, or whose request lacks clientCapabilities (an object), sets a logLevel or is a
    subscriptions/listen, or whose `_meta` lacks serverInfo or names a key not yet known to be well
    formed. And what the checks reading `update`'s findings for the message need: a client request
    after a -32022 (`retry_for`); a server's response to a cancelled request (`cancel`), one that
    releases findings waiting for a modern server (`released`), a result to a request whose version
    the session's DiscoverResult does not list. Most messages are none of these: the gate spares
    them the calls (each check still tests its own condition, and an unusual message gets every
    gated check of its kind)."""
    msg = obs.msg
    if msg.problem_reason is not None or msg.note is not None:
        return True
    k = msg.kind
    if k == REQUEST:
        ti = type(msg.id)
        method = msg.method
        if (ti is not int and ti is not str) or (method is not None and method.startswith("notifications/")):
            return True
        if msg.direction != C2S:
            return False
        if msg.era is not MODERN or st.retry_for is not None:
            return True
        meta = msg.params["_meta"]
        return (type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict or CLIENT_INFO_KEY not in meta
                or not _good_keys.issuperset(meta) or meta.get("progressToken") is not None)
    if k == RESULT or k == ERROR_KIND:
        req = obs.request
        if k == ERROR_KIND or type(msg.result) is not dict or req is None:
            return True
        if msg.direction == C2S:
            return False
        if req.era is not MODERN or msg.era is not MODERN or st.cancel is not None or st.released:
            return True
        if st.discover:  # protocol-version-unsupported-served: a version its server does not list
            disc = st.discover.get(msg.session)
            supported = disc.get("supportedVersions") if type(disc) is dict else None
            if type(supported) is list and req.version is not None and req.version not in supported:
                return True
        meta = req.params["_meta"]
        if (type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict or meta.get(LOG_LEVEL_KEY) is not None
                or req.method == LISTEN):
            return True
        m = msg.result.get("_meta")
        return type(m) is not dict or SERVER_INFO_KEY not in m or not _good_keys.issuperset(m)
    return False


# --- _meta key names ---------------------------------------------------------------------------------------

_LABEL = re.compile(r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
_key_ok: dict[str, str | None] = {}  # key -> why it is invalid (None: valid); a memo, bounded below
_good_keys: set[str] = set()  # the valid keys of _key_ok, so a whole _meta is checked with one set operation
# (`_good_keys.issuperset(meta)`: no keys view made, as `meta.keys() <= _good_keys` makes one)


def meta_key_problem(key: str) -> str | None:
    """Why a `_meta` key name breaks the format of basic/index.mdx `_meta` (None when it does not)."""
    if key in _key_ok:
        return _key_ok[key]
    why = None
    if key not in _TRACE_KEYS:
        prefix, slash, name = key.partition("/")
        if slash and not all(_LABEL.fullmatch(label) for label in prefix.split(".")):
            why = f"its prefix {prefix + '/'!r} is not dot-separated labels that start with a letter and end with a letter or digit"
        elif not _NAME.fullmatch(name if slash else key):
            why = f"its name {(name if slash else key)!r} does not begin and end with a letter or digit, or holds other characters than - _ ."
    if len(_key_ok) > 4096:
        _key_ok.clear()
        _good_keys.clear()
    _key_ok[key] = why
    if why is None:
        _good_keys.add(key)
    return why
