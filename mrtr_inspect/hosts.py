"""Who may talk to a listener of ours: the `Host` and `Origin` a request must carry (DNS rebinding).

A web page whose name the attacker points at 127.0.0.1 (DNS rebinding) reaches a loopback listener
from the user's browser, with its own name in `Host` and `Origin`. The specification asks servers to
refuse a present, invalid `Origin` with 403 (basic/transports/streamable-http.mdx, "Security
Warning"); the proxy rewrites `Host` before it forwards, so a server's own check (the official SDK
answers 421) never sees the name: every listener of ours (the proxy, the addon in mitmproxy's reverse
mode, `replay serve` and the pytest plugin's HTTP replay, `--metrics`) checks them itself, before
anything else, and answers 403 otherwise.

Allowed by default: `localhost`, `127.0.0.1` and `[::1]` with any port, the address the listener was
asked to listen on, and the local address the connection came in on (a client that names the
machine by its address names no one else's). `--allow-host NAME` (repeatable) adds a name; `*`
allows any (the check off). A request without `Host` is refused; one without `Origin` is fine (not
a browser's cross-origin request); a present `Origin` must be `http://` or `https://` with an allowed
name (any port), so `null` is refused.
"""

from __future__ import annotations

import json
from typing import IO, Callable, Iterable
from urllib.parse import urlsplit

from .outputs.text import tool_line

LOOPBACK = ("localhost", "127.0.0.1", "::1")
ANY = "*"
# the specification allows a JSON-RPC error response without an id as the body of the 403
FORBIDDEN_CODE = -32000
_UNSPECIFIED = frozenset({"", "0.0.0.0", "::"})


def _name(authority: str) -> str | None:
    """The host name of a `Host` value (`name`, `name:port`, `[v6]:port`), lowercased, or None when
    it is not one."""
    a = authority.strip()
    if a.startswith("["):
        end = a.find("]")
        if end < 0 or (a[end + 1:] and not (a[end + 1] == ":" and a[end + 2:].isdigit())):
            return None
        name = a[1:end]
    else:
        name, sep, port = a.rpartition(":")
        if not sep:
            name = a
        elif not port.isdigit() or ":" in name:
            return None
    name = name.lower()
    return name if name and all(c.isalnum() or c in "-._:%" for c in name) else None


def allow_host(value: str) -> str:
    """A `--allow-host` value as it is matched: a host name or address (`[v6]` or bare), any port;
    ValueError with a reason for anything else (a port, a URL)."""
    v = value.strip()
    if v == ANY:
        return ANY
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    name = _name(f"[{v}]" if ":" in v else v)
    if name is None or "/" in value or (":" in v and v.count(":") == 1):
        raise ValueError(f"--allow-host takes a host name or address (any port is allowed), not {value!r}")
    return name


class HostPolicy:
    """The names a listener answers to. `listen` is the host it was asked to listen on."""

    def __init__(self, allow: Iterable[str] = (), listen: str | None = None) -> None:
        names = set(LOOPBACK)
        for a in allow:
            names.add(allow_host(a))
        if listen and listen.strip("[]").lower() not in _UNSPECIFIED:
            names.add(listen.strip("[]").lower())
        self.any = ANY in names
        self.names = frozenset(names - {ANY})

    def _allowed(self, name: str | None, local: str | None) -> bool:
        return name is not None and (self.any or name in self.names
                                     or (local is not None and name == local.lower().split("%")[0]))

    def refusal(self, host: str | None, origin: str | None, local: str | None = None) -> str | None:
        """None when a request with this `Host` and `Origin` (None: absent), on a connection whose
        local address is `local`, may be served; else the reason, one line for a log."""
        if self.any:
            return None
        if host is None:
            return "a request without a Host header"
        if not self._allowed(_name(host), local):
            return f"Host {host!r} is not a name of this listener"
        if origin is not None:
            try:
                u = urlsplit(origin.strip())
                scheme, name = u.scheme, u.hostname
            except ValueError:
                scheme = name = None
            if scheme not in ("http", "https") or not self._allowed(name, local):
                return f"Origin {origin!r} is not allowed"
        return None


def forbidden_body(reason: str, hint: str = "--allow-host NAME") -> bytes:
    """The 403's body: a JSON-RPC error response without an id, as the specification allows."""
    return json.dumps({"jsonrpc": "2.0", "error": {
        "code": FORBIDDEN_CODE,
        "message": f"mrtr-inspect: forbidden: {reason} (DNS rebinding protection; {hint} allows a name)"}}).encode()


SAID_AT_MOST = 20  # distinct refusals said on stderr; more are counted only


def refusals(say: Callable[[str], None], hint: str = "--allow-host NAME") -> Callable[[str], None]:
    """What a listener calls with each refusal's reason: one line to `say` once per reason (a page
    retrying says it once), for at most SAID_AT_MOST reasons; never raises."""
    said: set[str] = set()

    def refused(reason: str) -> None:
        if reason in said or len(said) >= SAID_AT_MOST:
            return
        said.add(reason)
        try:
            say(f"refused (403): {reason}; if that is you, {hint} allows the name")
        except Exception:  # pragma: no cover - a listener never fails for its log's sake
            pass

    return refused


def stderr_line(err: IO[str]) -> Callable[[str], None]:
    """`say` for `refusals`: a line of ours on `err`."""
    def say(text: str) -> None:
        err.write(tool_line(text))
        err.flush()
    return say


def asgi_guard(app, policy: HostPolicy | None = None):
    """An ASGI app (the sample server of `make demo`) behind the same check: 403 with
    `forbidden_body` before the app sees a request whose Host or Origin is not allowed."""
    policy = policy or HostPolicy()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
            server = scope.get("server")
            reason = policy.refusal(header(headers, "host"), header(headers, "origin"), server[0] if server else None)
            if reason is not None:
                body = forbidden_body(reason)
                await send({"type": "http.response.start", "status": 403, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of a header (case-insensitive), or None."""
    for k, v in headers:
        if k.lower() == name:
            return v
    return None
