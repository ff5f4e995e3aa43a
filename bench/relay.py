"""The Python stand-in for bench/relay.c, when no C compiler is there: the tee's hop count and
nothing else (two threads copying stdin to a child's stdin and its stdout to stdout).

    relay.py CMD [ARGS...]
"""

import os
import subprocess
import sys
import threading


def copy(src: int, dst: int) -> None:
    while data := os.read(src, 65536):
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view):]
    os.close(dst)


def main() -> int:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    child = subprocess.Popen(sys.argv[1:], stdin=in_r, stdout=out_w)
    os.close(in_r)
    os.close(out_w)
    threads = [threading.Thread(target=copy, args=(0, in_w)), threading.Thread(target=copy, args=(out_r, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
