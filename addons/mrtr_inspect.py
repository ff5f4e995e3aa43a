"""mrtr-inspect in stock mitmproxy: records and analyses the MCP traffic of a reverse proxy.

    mitmdump -s addons/mrtr_inspect.py --mode reverse:http://127.0.0.1:3000 \
        --set mrtr_record=session.jsonl --set mrtr_report=report.json

Also adds the "MCP JSON-RPC" contentview. With mitmweb, or `-w FILE`, run with `--set
store_streamed_bodies=true` so flows keep the bodies the addon streams. docs/http-proxy.md says more.
The installed package ships the same script (mrtr_inspect/addon.py), which this one runs:
`mitmdump -s "$(mrtr-inspect addon-path)"`.
"""

import runpy
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent

# this checkout's package, installed or not: mitmproxy puts the script's folder first on sys.path, where
# `import mrtr_inspect` would find this very file
sys.path.insert(0, str(CHECKOUT))

# run afresh each time mitmproxy (re)loads this script, as it runs a script: a new addon each time
addons = runpy.run_path(str(CHECKOUT / "mrtr_inspect" / "addon.py"))["addons"]
