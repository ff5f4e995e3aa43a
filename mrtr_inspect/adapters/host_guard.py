"""The proxy's DNS rebinding check (hosts.py), as a mitmproxy addon loaded before `MrtrInspect` (in
the embedded proxy, run by `MrtrInspect`'s own hooks first: one addon fewer for every event to visit).

In reverse mode a request is addressed to the proxy itself: its `Host` and `Origin` must name it
(loopback names, the listening address, `--allow-host` / `mrtr_allow_host`), else it is answered
403 by the proxy and never forwarded, recorded or analysed. mitmproxy rewrites `Host` to the
upstream's before any addon sees the request (unless `keep_host_header`), which is also why a
server's own check never sees the name the browser used: the guard has mitmproxy keep the client's
`Host`, checks it, then rewrites it as mitmproxy would have (the upstream's host and port). A user
who set `keep_host_header` keeps the client's `Host` forwarded. Other modes (a forward proxy) are
left alone: there `Host` names the destination, not us.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Callable

from mitmproxy import ctx, exceptions, http
from mitmproxy.net.http import url
from mitmproxy.proxy.mode_specs import ReverseMode

from ..hosts import HostPolicy, forbidden_body, refusals

logger = logging.getLogger("mrtr_inspect")

REFUSED = "mrtr-inspect refused"  # flow.metadata key of a refused flow: the other hooks leave it alone


_VERDICTS = 256  # verdicts (and Host values) remembered; past them all are forgotten at once
_UNSEEN = object()


def refused(flow: http.HTTPFlow) -> bool:
    return REFUSED in flow.metadata


class HostGuard:
    """`allow` and `say` given: the embedded proxy (`--allow-host`, one line on stderr per new
    reason); else stock mitmproxy, with the `mrtr_allow_host` option and mitmproxy's log."""

    def __init__(self, allow: tuple[str, ...] | None = None, say: Callable[[str], None] | None = None) -> None:
        self.embedded = allow is not None
        self.allow = allow or ()
        self.policy = HostPolicy(self.allow)
        self.rewrite = False  # we asked mitmproxy to keep Host: rewrite it after the check
        self._setting = False
        hint = "--allow-host NAME" if self.embedded else "--set mrtr_allow_host=NAME"
        self._hint = hint
        self._tell = refusals(say or (lambda line: logger.warning("mrtr-inspect: %s", line)), hint)
        # the verdicts of `policy` on the (Host, Origin, local address) seen, and the Host values
        # rewritten to: a client sends the same ones request after request
        self._verdicts: tuple[HostPolicy, dict] = (self.policy, {})
        self._hostports: dict[tuple, str] = {}

    def load(self, loader) -> None:
        if not self.embedded:
            loader.add_option("mrtr_allow_host", Sequence[str], [],
                              "Reverse mode: also answer requests whose Host or Origin names this (any port; '*': "
                              "any name). By default only localhost, 127.0.0.1, [::1] and listen_host are "
                              "answered; others get 403 (DNS rebinding protection). Repeatable.")

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if updated & {"mrtr_allow_host", "listen_host"}:
            allow = self.allow if self.embedded else tuple(getattr(opts, "mrtr_allow_host", ()))
            try:
                self.policy = HostPolicy(allow, opts.listen_host)
            except ValueError as e:
                raise exceptions.OptionsError(str(e).replace("--allow-host", "mrtr_allow_host")) from None
        if updated & {"mode", "keep_host_header"} and not self._setting:
            reverse = any(m.startswith("reverse:") for m in opts.mode)
            if reverse and not opts.keep_host_header:
                self.rewrite = True
                self._setting = True
                try:
                    opts.update(keep_host_header=True)
                finally:
                    self._setting = False
            elif "keep_host_header" in updated:
                self.rewrite = False

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not self.applies(flow):
            return
        req = flow.request
        if not self.refuses(flow, req.host_header, req.headers.get("origin")):
            value = self.host_value(flow)
            if value is not None:
                req.host_header = value

    @staticmethod
    def applies(flow: http.HTTPFlow) -> bool:
        """Whether the guard judges this flow (a live one, in reverse mode)."""
        return flow.live and isinstance(flow.client_conn.proxy_mode, ReverseMode)

    def refuses(self, flow: http.HTTPFlow, host: str | None, origin: str | None) -> bool:
        """Whether the request with this `Host` and `Origin` (as `headers.get` reads them; None:
        absent) is refused: then it is answered 403 here, and said."""
        sock = flow.client_conn.sockname
        key = (host, origin, sock[0] if sock else None)
        verdicts = self._verdicts
        if verdicts[0] is not self.policy:  # the policy changed (configure): what it said is forgotten
            verdicts = self._verdicts = (self.policy, {})
        reason = verdicts[1].get(key, _UNSEEN)
        if reason is _UNSEEN:
            reason = self.policy.refusal(*key)
            if len(verdicts[1]) >= _VERDICTS:
                verdicts[1].clear()
            verdicts[1][key] = reason
        if reason is None:
            return False
        flow.metadata[REFUSED] = reason
        flow.comment = f"mrtr-inspect: refused (403): {reason}"
        flow.response = http.Response.make(403, forbidden_body(reason, self._hint),
                                           {"content-type": "application/json"})
        self._tell(reason)
        return True

    def host_value(self, flow: http.HTTPFlow) -> str | None:
        """The `Host` an accepted request goes upstream with, as mitmproxy would have written it (the
        upstream's host and port); None when the guard leaves `Host` as it is."""
        if not self.rewrite or flow.server_conn.address is None:
            return None
        where = (flow.server_conn.tls, flow.server_conn.address)
        value = self._hostports.get(where)
        if value is None:
            if len(self._hostports) >= _VERDICTS:
                self._hostports.clear()
            host, port = where[1]
            value = self._hostports[where] = url.hostport("https" if where[0] else "http", host, port)
        return value
