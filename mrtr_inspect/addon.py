"""mrtr-inspect in stock mitmproxy, as installed with the package (pip users have no checkout):

    mitmdump -s "$(mrtr-inspect addon-path)" --mode reverse:http://127.0.0.1:3000 \
        --set mrtr_record=session.jsonl --set mrtr_report=report.json

`mrtr-inspect addon-path` prints where this file is. It records and analyses the MCP traffic of
the proxy and adds the "MCP JSON-RPC" contentview; docs/http-proxy.md says more. A checkout has the
same at addons/mrtr_inspect.py (which runs this file). Importing this module registers the
contentview (mitmproxy's script loader does that).

A mitmproxy installed on its own (pipx, Homebrew, the standalone binaries) has a Python of its own,
without mrtr-inspect: loading the addon there logs one line saying how to install mrtr-inspect into
that Python (mitmproxy then stops, as for any error at startup), not an import traceback.
"""

import logging
import sys
from pathlib import Path


def not_installed(error: ImportError) -> str:
    """The one line for a mitmproxy whose Python lacks mrtr-inspect (or one of its dependencies)."""
    missing = (error.name or "mrtr_inspect").split(".")[0]
    exe = sys.executable
    said = f"mrtr-inspect: the addon cannot load: this mitmproxy's Python ({exe}) has no module {missing!r}"
    if getattr(sys, "frozen", False):
        return (f"{said}, and mitmproxy's standalone binaries cannot have packages added: install mitmproxy with "
                "pipx, then mrtr-inspect into it: `pipx install mitmproxy && pipx inject mitmproxy mrtr-inspect`")
    prefix = Path(sys.prefix)
    if prefix.parent.name == "venvs" and "pipx" in prefix.parent.parent.name:
        return f"{said}: install mrtr-inspect into it: `pipx inject {prefix.name} mrtr-inspect`"
    return (f"{said}: install mrtr-inspect into that Python: `pip --python {exe} install mrtr-inspect` "
            "(a mitmproxy installed by pipx: `pipx inject mitmproxy mrtr-inspect`)")


try:
    from mitmproxy import contentviews

    from mrtr_inspect.adapters.contentview import McpJsonRpc
    from mrtr_inspect.adapters.host_guard import HostGuard
    from mrtr_inspect.adapters.mitm_addon import MrtrInspect
except ModuleNotFoundError as e:
    logging.getLogger("mrtr_inspect").error(not_installed(e))
    addons = []
else:
    contentviews.add(McpJsonRpc)
    addons = [HostGuard(), MrtrInspect()]  # the guard first: a refused request (403) is not recorded
