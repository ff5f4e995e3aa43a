"""The stdio probe server of `probe-client` (the `{server}` command line): the recording's server
side on stdin and stdout, changed by one mutation (client_mutations.py), its traffic recorded and
what the mutation did kept in a summary file for the judging process.

    python -m mrtr_inspect.probe.clientserve --mutation NAME --record PATH --summary PATH RECORDING
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from ..replay.script import ReplayError, load_script
    from ..replay.serve import ServeOptions, ServeSession, serve_stdio
    from .client_mutations import DIRECTORS

    p = argparse.ArgumentParser(prog="mrtr_inspect.probe.clientserve")
    p.add_argument("--mutation", required=True, choices=sorted(DIRECTORS))
    p.add_argument("--record", required=True)
    p.add_argument("--summary", required=True)
    p.add_argument("--window", type=float, default=2.0)
    p.add_argument("--hold", type=float, default=None, help="fault-delay: send the answer after this many seconds")
    p.add_argument("recording")
    args = p.parse_args(argv)
    try:
        script = load_script(args.recording)
        director = DIRECTORS[args.mutation](script, args.window)
        director.hold = args.hold
        session = ServeSession(script, ServeOptions(), "stdio", None, args.record, args.summary,
                               director=director, info={"probe": args.mutation})
    except ReplayError as e:
        sys.stderr.write(f"mrtr-inspect probe server: {e}\n")
        return 2
    serve_stdio(session)
    return 0


if __name__ == "__main__":
    sys.exit(main())
