"""The embedded mitmproxy leaves out 26 of mitmdump's addons (`proxy.reverse_proxy_master`), on the
ground that with default options they act on nothing. Checked here against the mitmproxy installed:
each addon left out is given every HTTP hook it has, on a complete flow, with default options and
reverse mode, and must leave the flow as it was. The same check sees a change once such an addon is
switched on, so it can tell."""

from __future__ import annotations

import asyncio
import inspect

from mitmproxy import addons
from mitmproxy.addons import anticache, errorcheck, keepserving, readfile
from mitmproxy.test import taddons, tflow

from mrtr_inspect.adapters.proxy import reverse_proxy_master

HOOKS = ("requestheaders", "request", "responseheaders", "response", "error")


def _kept() -> set[type]:
    async def master_addons() -> set[type]:
        return {type(a) for a in reverse_proxy_master().addons.chain}

    return asyncio.run(master_addons())


def _left_out() -> list:
    keep = _kept()
    everything = addons.default_addons() + [keepserving.KeepServing(), readfile.ReadFileStdin(),
                                            errorcheck.ErrorCheck()]
    return [a for a in everything if type(a) not in keep]


def _changes(addon, **options) -> list[str]:
    """The hooks of `addon` that changed a flow, with `options` set (besides reverse mode)."""
    changed = []

    async def run() -> None:
        for hook in HOOKS:
            fn = getattr(addon, hook, None)
            if fn is None:
                continue
            flow = tflow.tflow(resp=True, err=hook == "error")
            flow.request.headers["Cache-Control"] = "no-cache"
            flow.request.headers["If-None-Match"] = "etag"
            before = flow.get_state()
            out = fn(flow)
            if inspect.isawaitable(out):
                await out
            if flow.get_state() != before:
                changed.append(hook)

    with taddons.context(addon) as tctx:
        tctx.configure(addon, mode=["reverse:http://127.0.0.1:3000"], **options)
        asyncio.run(run())
    return changed


def test_the_embedded_mitmproxy_keeps_what_a_reverse_proxy_uses():
    names = {t.__name__ for t in _kept()}
    assert {"Core", "Proxyserver", "NextLayer", "TlsConfig", "Block", "DisableH2C", "UpdateAltSvc"} <= names
    assert len(names) < len(addons.default_addons())


def test_every_addon_left_out_leaves_a_flow_alone_with_default_options():
    left = _left_out()
    assert len(left) >= 20
    acted = {type(a).__name__: c for a in left if (c := _changes(a))}
    assert acted == {}


def test_the_check_sees_an_addon_that_acts():
    assert _changes(anticache.AntiCache(), anticache=True) == ["request"]
