"""mrtr-inspect in stock mitmproxy, as installed with the package (pip users have no checkout):

    mitmdump -s "$(mrtr-inspect addon-path)" --mode reverse:http://127.0.0.1:3000 \
        --set mrtr_record=session.jsonl --set mrtr_report=report.json

`mrtr-inspect addon-path` prints where this file is. It records and analyses the MCP traffic of
the proxy and adds the "MCP JSON-RPC" contentview; docs/http-proxy.md says more. A checkout has the
same at addons/mrtr_inspect.py. Importing this module registers the contentview (mitmproxy's
script loader does that).
"""

from mitmproxy import contentviews

from mrtr_inspect.adapters.contentview import McpJsonRpc
from mrtr_inspect.adapters.host_guard import HostGuard
from mrtr_inspect.adapters.mitm_addon import MrtrInspect

contentviews.add(McpJsonRpc)
addons = [HostGuard(), MrtrInspect()]  # the guard first: a refused request (403) is not recorded
