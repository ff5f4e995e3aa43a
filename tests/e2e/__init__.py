"""End-to-end helpers: real processes, each started by the test that needs it.

Small programs the tests put around or behind mrtr-inspect live here as functions taking an argv;
`helper("name", *args)` is the command that runs one in a fresh interpreter:

    capture DIR -- CMD...     a transparent pipe recorder: runs CMD, copies stdin to it and its stdout
                              to ours, keeping each direction byte for byte in DIR/c2s and DIR/s2c
    sdk_client TOOLS -- CMD   the sample client (official SDK) calling TOOLS (a,b,c) on a stdio server
    echo                      copies stdin to stdout, chunk by chunk, unchanged
    respond [CODE]            says `respond: started` on stderr, answers each request line with a
                              complete result; at end of input sends the notification EOF_LINE and
                              exits CODE (0)
    signals                   says `ready`, then on SIGINT or SIGTERM says `got N` and dies of N
    half_close                writes one line, closes stdout, waits for end of input, exits 0
    until_epipe               writes lines until its stdout breaks, then exits 3
    deaf                      closes its stdin, says `deaf`, waits for a signal
    die_on_request CODE       reads one line and exits CODE without answering it (a server that crashes)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def helper(name: str, *args: str) -> list[str]:
    """The command running `tests.e2e.<name>(argv)` in a new interpreter (run it with cwd=ROOT)."""
    return [sys.executable, "-c", f"import sys, tests.e2e as e; e.{name}(sys.argv[1:])", *args]


def tee_cmd(*options: str, cmd: list[str]) -> list[str]:
    """`mrtr-inspect stdio OPTIONS -- CMD`."""
    return [sys.executable, "-m", "mrtr_inspect", "stdio", *options, "--", *cmd]


def env() -> dict[str, str]:
    """The environment of every process a test starts: this checkout importable, a fixed redaction key."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("MRTR_INSPECT_REDACTION_KEY", "test-key")
    return e


def recorded_lines(path: Path, direction: str) -> list[bytes]:
    """The payloads of the stdio `line` frames of one direction, in file order."""
    out = []
    for line in path.read_bytes().splitlines():
        head, _, payload = line.partition(b"\t")
        rec = json.loads(head)
        if rec.get("k") == "line" and rec["d"] == direction:
            out.append(payload)
    return out


def records(path: Path) -> list[dict]:
    """The records (the JSON before the TAB) of a recording."""
    return [json.loads(line.partition(b"\t")[0]) for line in path.read_bytes().splitlines()]


# -- programs -----------------------------------------------------------------------------------


def _copy(src: int, dst: int, keep, done) -> None:
    while chunk := os.read(src, 65536):
        keep.write(chunk)
        keep.flush()
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
    done()


def _close_stdout() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def capture(argv: list[str]) -> None:
    out = Path(argv[0])
    cmd = argv[2:]
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    with open(out / "c2s", "wb") as c2s, open(out / "s2c", "wb") as s2c:
        up = threading.Thread(target=_copy, args=(0, child.stdin.fileno(), c2s, child.stdin.close), daemon=True)
        down = threading.Thread(target=_copy, args=(child.stdout.fileno(), 1, s2c, _close_stdout))
        up.start()
        down.start()
        down.join()
        code = child.wait()
    sys.exit(code)


def sdk_client(argv: list[str]) -> None:
    import anyio
    from mcp import StdioServerParameters

    from mrtr_inspect.samples import client

    tools = tuple(argv[0].split(","))
    cmd = argv[2:]
    target = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ), cwd=os.getcwd())
    for line in anyio.run(client.run, target, tools):
        print(line, flush=True)


def echo(argv: list[str]) -> None:
    while chunk := os.read(0, 65536):
        view = memoryview(chunk)
        while view:
            view = view[os.write(1, view):]


EOF_LINE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"end of input"}}\n'


def respond(argv: list[str]) -> None:
    sys.stderr.write("respond: started\n")
    sys.stderr.flush()
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        if "id" in msg and "method" in msg:
            result = {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
            sys.stdout.flush()
    sys.stdout.buffer.write(EOF_LINE)
    sys.stdout.flush()
    sys.exit(int(argv[0]) if argv else 0)


def die_on_request(argv: list[str]) -> None:
    sys.stdin.buffer.readline()
    os._exit(int(argv[0]))


def signals(argv: list[str]) -> None:
    def report(signum, frame) -> None:
        sys.stdout.write(f"got {signum}\n")
        sys.stdout.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGINT, report)
    signal.signal(signal.SIGTERM, report)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        signal.pause()


def half_close(argv: list[str]) -> None:
    os.write(1, b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"bye"}}\n')
    os.close(1)
    while os.read(0, 65536):
        pass


def until_epipe(argv: list[str]) -> None:
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"tick"}}\n'
    try:
        while True:
            os.write(1, line)
    except BrokenPipeError:
        sys.exit(3)


def deaf(argv: list[str]) -> None:
    os.close(0)
    sys.stdout.write("deaf\n")
    sys.stdout.flush()
    while True:
        signal.pause()
