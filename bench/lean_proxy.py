"""mitmproxy as mrtr-inspect embeds it, without mrtr-inspect: the same `reverse_proxy_master` (the same
addons), lazy upstream connections, reverse mode, and no mrtr-inspect addon, no analysis process. The
baseline for what mrtr-inspect's own work costs, apart from what its leaner mitmproxy saves.

    python bench/lean_proxy.py http://127.0.0.1:PORT CONFDIR     # prints "listening at 127.0.0.1:PORT"
"""

from __future__ import annotations

import asyncio
import signal
import sys

from mrtr_inspect.adapters.proxy import reverse_proxy_master


class _Say:
    def running(self) -> None:
        from mitmproxy import ctx
        port = ctx.master.addons.get("proxyserver").listen_addrs()[0][1]
        print(f"listening at 127.0.0.1:{port}", flush=True)


async def main(origin: str, confdir: str) -> None:
    master = reverse_proxy_master()
    master.addons.add(_Say())
    master.options.update(mode=[f"reverse:{origin}"], listen_host="127.0.0.1", listen_port=0,
                          connection_strategy="lazy", confdir=confdir)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, master.shutdown)
    await master.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
