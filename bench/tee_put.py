"""CPU time of the tee's own work on its forwarding threads, per message, in-process: what each
chunk costs between `os.read` and passing it on (`Tap.put`: the recording's records encoded and
appended, the spooler woken), with the processes around it (the client, the server, the analysis
process) left out. It explains `tee_throughput.py`'s "tee process CPU" figure.

The messages are `tee_throughput.py`'s (its tools/call requests and the echo server's results),
alternated, one chunk each (as the tee reads them when it keeps up), put on a real `Tap` with a
`StdioRecorder` on a temporary recording (as with `--record`) and a following `Spooler` whose pipe
a thread drains; each chunk is then written to /dev/null as the forwarding threads write it on.
The figure is the main thread's CPU time (`time.thread_time`: the spooler's and the drainer's
threads are not in it) per message, the median of `--turns` turns, each a process of its own.
`--chunk N` puts N messages per chunk (the tee reads several at once when it falls behind).

    python bench/tee_put.py [--messages 100000] [--turns 7] [--chunk 1] [--against DIR] [--instructions]

`--against DIR` measures another checkout in turns alternated with this one. `--instructions`
counts instructions instead (callgrind, as bench/instructions.py; the whole process' threads): a
run of 3 x `--messages` less a run of `--messages`, divided by the 2 x `--messages` between them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from _util import alternated_turns, instructions_per, show_counts, show_turns

ROOT = Path(__file__).resolve().parent.parent


def _turn(messages: int, chunk: int) -> float:
    """One turn in this process: the main thread's CPU seconds per message."""
    sys.path.insert(0, str(ROOT / "bench"))
    from tee_throughput import request

    from mrtr_inspect.adapters.analysis_process import C2S, S2C, Spooler, write_all
    from mrtr_inspect.adapters.recorder import StdioRecorder
    from mrtr_inspect.adapters.stdio_tee import Tap
    from mrtr_inspect.config import Config
    from mrtr_inspect.recording.writer import RecordingWriter, redactor_for

    def result(i: int) -> bytes:
        return (b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"ok"}],'
                b'"isError":false,"resultType":"complete"}}\n' % i)

    pairs = messages // 2
    reqs = [b"".join(request(i + j) for j in range(chunk)) for i in range(1, pairs + 1, chunk)]
    ress = [b"".join(result(i + j) for j in range(chunk)) for i in range(1, pairs + 1, chunk)]
    r, w = os.pipe()

    def drain() -> None:
        while os.read(r, 1 << 16):
            pass

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    out = os.open(os.devnull, os.O_WRONLY)
    with tempfile.TemporaryDirectory() as tmp:
        config = Config()
        writer = RecordingWriter(str(Path(tmp) / "r.jsonl"), "stdio", {}, redactor_for(config))
        spool = Spooler(w)
        spool.follow(writer.fileno())
        tap = Tap(spool, StdioRecorder(writer, limit=config.max_message_bytes), config.max_message_bytes,
                  config.max_backlog_bytes, follow=True)
        put, now, write = tap.put, time.time, os.write
        t0 = time.thread_time()
        for q, a in zip(reqs, ress):  # as forwarding.forward_both (or pump) puts and writes each chunk
            put(C2S, now(), q)
            if (n := write(out, q)) < len(q):
                write_all(out, q[n:])
            put(S2C, now(), a)
            if (n := write(out, a)) < len(a):
                write_all(out, a[n:])
        cpu = time.thread_time() - t0
        tap.finish({"exit": 0}, now())
        spool.thread.join()
    drainer.join()
    return cpu / (2 * len(reqs) * chunk)


def _instructions(trees: dict[str, Path], messages: int, chunk: int) -> dict:
    per = instructions_per(trees, "tee_put", ["--chunk", str(chunk)], "--messages", messages)
    print(f"the tee's forwarding-side work, instructions per message (callgrind; {3 * messages} messages less "
          f"{messages}, {chunk} per chunk):")
    show_counts(per, 2)
    return per


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=7)
    ap.add_argument("--chunk", type=int, default=1, help="messages per chunk")
    ap.add_argument("--against", help="another checkout, measured in turns alternated with this one")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a turn of this process' tree
    ap.add_argument("--instructions", action="store_true", help="count instructions (callgrind) instead of CPU time")
    args = ap.parse_args(argv)
    if args.one:
        print(_turn(args.messages, args.chunk))
        return {}
    trees = {"this tree": ROOT} | ({"against": Path(args.against).resolve()} if args.against else {})
    if args.instructions:
        return _instructions(trees, args.messages, args.chunk)
    per = alternated_turns(Path(__file__).resolve(), ["--messages", str(args.messages), "--chunk", str(args.chunk)],
                           trees, args.turns)
    print(f"the tee's forwarding-side work, CPU per message (µs; {args.messages} messages, {args.chunk} per "
          f"chunk, median of {args.turns} turns; load {os.getloadavg()[0]:.1f}):")
    return show_turns(per, 2)


if __name__ == "__main__":
    main()
