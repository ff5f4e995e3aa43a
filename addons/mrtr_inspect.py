"""mrtr-inspect in stock mitmproxy: records and analyses the MCP traffic of a reverse proxy.

    mitmdump -s addons/mrtr_inspect.py --mode reverse:http://127.0.0.1:3000 \
        --set mrtr_record=session.jsonl --set mrtr_report=report.json

Also adds the "MCP JSON-RPC" contentview. With mitmweb, or `-w FILE`, run with `--set
store_streamed_bodies=true` so flows keep the bodies the addon streams. docs/http-proxy.md says more.
The installed package ships the same script (mrtr_inspect/addon.py): `mitmdump -s "$(mrtr-inspect addon-path)"`.
"""

import sys
from pathlib import Path

try:
    import mrtr_inspect  # noqa: F401
except ImportError:  # run from a checkout that is not installed: use it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mitmproxy import contentviews

from mrtr_inspect.adapters.contentview import McpJsonRpc
from mrtr_inspect.adapters.host_guard import HostGuard
from mrtr_inspect.adapters.mitm_addon import MrtrInspect

contentviews.add(McpJsonRpc)
addons = [HostGuard(), MrtrInspect()]  # the guard first: a refused request (403) is not recorded
