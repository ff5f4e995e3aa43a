"""A trivial stdio server for the tee benchmark: answers each request line with a result of the same
id, flushing each message as an MCP server does. Reads `{"jsonrpc":"2.0","id":N,...` lines."""

import sys


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        start = line.index(b'"id":') + 5
        rid = line[start:line.index(b",", start)]
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text","text":"ok"}],'
                  b'"isError":false,"resultType":"complete"}}\n')
        out.flush()


if __name__ == "__main__":
    main()
