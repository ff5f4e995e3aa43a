"""A trivial stdio server for the tee benchmark: answers each request line with a result of the same
id, flushing each message as an MCP server does. Reads `{"jsonrpc":"2.0","id":N,...` lines.

    echo_server.py [RECEIVED]   with RECEIVED, each request line read is first appended to that file
                                (one write each), so a test knows what crossed to the server
"""

import os
import sys


def main() -> None:
    out = sys.stdout.buffer
    log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if len(sys.argv) > 1 else None
    for line in sys.stdin.buffer:
        if log is not None:
            os.write(log, line)
        start = line.index(b'"id":') + 5
        rid = line[start:line.index(b",", start)]
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text","text":"ok"}],'
                  b'"isError":false,"resultType":"complete"}}\n')
        out.flush()


if __name__ == "__main__":
    main()
