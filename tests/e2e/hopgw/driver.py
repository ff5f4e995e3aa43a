"""The test gateway (gateway.py) as a client under test for `probe-client`: its back side is a
client of the probe server. This starts the gateway in the 2026-07-28 era with the probe server's
stdio command line as its upstream, waits for it to listen, then drives its front with our small
correct client (tests/probe/mrtr_client.py: deploy, each round answered, 20 rounds at most), and
stops it.

    python -m tests.e2e.hopgw.driver [--bug NAME] [--request-timeout S] -- {server}

Exit 0 when the front's call completed, 1 otherwise (the gateway's stderr is passed on).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from tests.probe import mrtr_client


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    upstream = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser()
    p.add_argument("--bug")
    p.add_argument("--request-timeout", type=float, default=90.0)
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if not upstream:
        raise SystemExit("usage: driver.py [--bug NAME] -- UPSTREAM-COMMAND...")
    gw = [sys.executable, "-m", "tests.e2e.hopgw.gateway", "--era", "modern",
          *(["--bug", args.bug] if args.bug else []), "--", *upstream]
    proc = subprocess.Popen(gw, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout is not None else ""
        if not line.startswith("listening on "):
            print(f"the gateway did not start (exit status {proc.wait()})", file=sys.stderr)
            return 1
        url = line.split("listening on ", 1)[1].strip()
        return mrtr_client.main(["http", url, "--request-timeout", f"{args.request_timeout:g}"])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
