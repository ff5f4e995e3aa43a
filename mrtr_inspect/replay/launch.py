"""`python -m mrtr_inspect.replay.launch DIR ERRFILE -- CMD...`: runs CMD in DIR with its stderr
appended to ERRFILE, by exec (CMD is the process its starter started: signals, stdin and stdout are
its own). The pytest plugin starts the server to record this way: from the rootdir, where fixtures
are found too, whatever directory pytest was run from, and with what the server says kept, so that a
server that dies before answering fails the test with the end of what it said."""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: python -m mrtr_inspect.replay.launch DIR ERRFILE -- CMD...")
    where, errfile, cmd = argv[0], argv[1], argv[3:]
    fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        os.chdir(where)
        os.execvp(cmd[0], cmd)
    except OSError as e:
        os.write(2, f"mrtr-inspect: cannot start {cmd[0]!r} in {where}: {e.strerror or e}\n".encode())
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
