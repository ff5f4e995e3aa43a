"""The proxy's `--ui`: the proxy in a child process, the view in this one, following its recording.

The proxy (adapters/proxy.py) runs as it always does, forked before any thread exists, with its
live view off and its stderr lines sent here through a pipe: the view shows the last one in its top
line, and they are all said on stderr once the view has given the terminal back. The recording is
the one `--record` names, or one in a private temporary folder (0700) removed at the end. `q` in
the view stops the proxy as SIGINT would; the exit status is the proxy's.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import Callable

from ..config import Config
from ..outputs.text import tool_line

PREFIX = "mrtr-inspect: "


def run_proxy_with_ui(start: Callable[[str], int], record: str | None, config: Config | None = None,
                      parse: Callable | None = None) -> int:
    """`start(record_path)` runs the proxy (in the child) and returns its exit status."""
    folder = None
    if record is None:
        folder = tempfile.mkdtemp(prefix="mrtr-inspect-ui-")
        record = os.path.join(folder, "proxy.jsonl")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the proxy: its stderr to the pipe, no terminal of its own
        code = 70
        try:
            os.close(read_end)
            os.dup2(write_end, 2)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
            code = start(record)
        except SystemExit as e:  # a bad option: its line is said already
            code = e.code if isinstance(e.code, int) else 1
        finally:
            os._exit(code)
    os.close(write_end)
    lines: list[str] = []
    listening = threading.Event()

    def read() -> None:
        with os.fdopen(read_end, "r", encoding="utf-8", errors="backslashreplace") as f:
            for line in f:
                lines.append(line)
                if line.startswith(PREFIX + "listening on "):
                    listening.set()
        listening.set()  # the proxy is gone (a startup error: said below)

    reader = threading.Thread(target=read, daemon=True, name="mrtr-inspect-ui-proxy-log")
    reader.start()
    listening.wait()
    code = 0
    try:
        if lines and lines[-1].startswith(PREFIX + "listening on "):
            code = _view(record, lines, config, parse)
    finally:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:  # pragma: no cover - it ended already
            pass
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        reader.join(timeout=5)
        for line in lines:
            sys.stderr.write(line if line.startswith(PREFIX) else tool_line(line.rstrip("\n")))
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return status if status > 0 else code


def _view(record: str, lines: list[str], config: Config | None, parse: Callable | None) -> int:
    from . import run_ui

    return run_ui([record], follow=True, config=config, parse=parse, said=lines)
