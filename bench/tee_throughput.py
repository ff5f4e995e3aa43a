"""The tee's throughput against a relay of the same hop count (target 0.85x) and a direct pipe (0.5x).

A driver writes N small JSON-RPC requests (tools/call, SDK-shaped, one write per message) to a trivial
echo server (bench/echo_server.py, one flushed result per request) and reads the N results back,
writing and reading at the same time. Timed: from the first request to the last result, after a
warm-up round trip (so process start-up is not counted). Three ways, alternated, REPEAT times each:

  direct:  driver ⇄ echo server
  relay:   driver ⇄ relay ⇄ echo server   (bench/relay.c built with `cc -O2 -pthread` when a C compiler
           is there, else bench/relay.py: two threads copying, the tee's hop count and nothing else)
  tee:     driver ⇄ mrtr-inspect stdio --record FILE -- echo server   (recording and analysis on)

The ratios are median(relay) / median(tee), the tee's throughput as a fraction of the relay's (the
floor of any tee: what one more process in the pipe costs), and median(direct) / median(tee); each
with the range of the rounds' own ratios.
Also shown: how long after the last result the tee exited (its analysis catching up; it may trail
the stream, never slow it), that the recording holds every message, and the CPU time the tee's own
process (its forwarding threads: forwarding, recording, the hand-off to the analysis; not the
analysis process) had spent when the last result arrived, per 1,000 messages: unlike the wall
times, it hardly depends on what else the machine runs.

With `--against DIR` a fourth way is alternated with them: the tee of the tree at DIR (another
checkout, such as the tree before a change), on the same echo server, with its ratios and CPU.

    python bench/tee_throughput.py [--messages 50000] [--repeat 11] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from _util import PY, ROOT, env_with_project, median, verdict

TARGET = 0.5
RELAY_TARGET = 0.85
META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":'
        '{"name":"bench","version":"1.0"},"io.modelcontextprotocol/clientCapabilities":{}}')


def request(i: int) -> bytes:
    return (f'{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":'
            f'{{"text":"message {i}"}},{META}}}}}\n').encode()


def cpu_of(pid: int) -> float:
    """CPU seconds of a running process (all its threads): the scheduler's nanoseconds on a CPU of
    each thread (/proc/PID/task/*/schedstat), else user + system time in clock ticks (/proc/PID/stat)."""
    try:
        return sum(int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
                   for t in os.listdir(f"/proc/{pid}/task")) / 1e9
    except (OSError, ValueError, IndexError):
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(cmd: list[str], n: int, stderr, cpu: list | None = None, tree: Path = ROOT) -> tuple[float, float]:
    """(seconds from the first request to the last result, seconds from then to the process' exit);
    `cpu` gets the process' CPU seconds spent on the stream; `tree`: the checkout whose code runs."""
    env = env_with_project()
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0,
                         env=env, cwd=tree)
    w, r = p.stdin.fileno(), p.stdout.fileno()
    os.write(w, request(0))  # warm-up: both processes are up once this comes back
    buf = b""
    while b"\n" not in buf:
        buf += os.read(r, 65536)
    lines = [request(i) for i in range(1, n + 1)]

    def write_all() -> None:
        for line in lines:
            os.write(w, line)

    writer = threading.Thread(target=write_all)
    cpu0 = cpu_of(p.pid)
    t0 = time.perf_counter()
    writer.start()
    seen = 0
    while seen < n:
        chunk = os.read(r, 65536)
        if not chunk:
            raise RuntimeError(f"{cmd[0]} closed its output after {seen} of {n} results")
        seen += chunk.count(b"\n")
    stream = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(cpu_of(p.pid) - cpu0)
    writer.join()
    p.stdin.close()
    p.wait()
    p.stdout.close()
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}")
    return stream, time.perf_counter() - t0 - stream


def relay_command(tmp: str) -> tuple[list[str], str]:
    """The relay: bench/relay.c built into `tmp` when `cc` is there, else bench/relay.py."""
    cc = shutil.which("cc")
    if cc is not None:
        exe = os.path.join(tmp, "relay")
        built = subprocess.run([cc, "-O2", "-pthread", "-o", exe, str(ROOT / "bench" / "relay.c")],
                               capture_output=True, text=True)
        if built.returncode == 0:
            return [exe], "C relay (bench/relay.c, cc -O2)"
        print(f"  (cc failed, the Python relay instead: {built.stderr.strip()[:200]})")
    return [PY, str(ROOT / "bench" / "relay.py")], "Python relay (bench/relay.py; no C compiler)"


def _line(name: str, runs: list[float], n: int) -> str:
    m = median(runs)
    return (f"  {name}: {m:.3f} s ({2 * n / m:,.0f} msg/s)   range {min(runs):.3f}-{max(runs):.3f}"
            f"   runs: {', '.join(f'{x:.3f}' for x in runs)}")


def _ratio(name: str, base: list[float], tee: list[float], target: float) -> float:
    ratio = median(base) / median(tee)
    rounds = [b / t for b, t in zip(base, tee)]
    print(f"  tee / {name}: {ratio:.2f}x (rounds {min(rounds):.2f}x-{max(rounds):.2f}x; target >= {target}x):"
          f" {verdict(ratio, target, True)}")
    return ratio


def main() -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--against", type=Path, help="another checkout whose tee is alternated with this one's")
    args = ap.parse_args()
    server = [PY, str(ROOT / "bench" / "echo_server.py")]
    direct, relay, tee, trail, cpu = [], [], [], [], []
    other: dict[str, list[float]] = {"tee": [], "trail": [], "cpu": []}
    with tempfile.TemporaryDirectory() as tmp:
        relay_cmd, relay_kind = relay_command(tmp)
        for i in range(args.repeat):
            direct.append(drive(server, args.messages, subprocess.DEVNULL)[0])
            relay.append(drive([*relay_cmd, *server], args.messages, subprocess.DEVNULL)[0])
            rec = Path(tmp) / f"tee-{i}.jsonl"
            with open(Path(tmp) / "stderr.txt", "wb") as err:
                s, after = drive([PY, "-m", "mrtr_inspect", "stdio", "--record", str(rec), "--", *server],
                                 args.messages, err, cpu)
            tee.append(s)
            trail.append(after)
            _whole(rec, args.messages)
            if args.against is not None:
                with open(Path(tmp) / "stderr.txt", "wb") as err:
                    s, after = drive([PY, "-m", "mrtr_inspect", "stdio", "--record", str(rec), "--", *server],
                                     args.messages, err, other["cpu"], args.against.resolve())
                other["tee"].append(s)
                other["trail"].append(after)
                _whole(rec, args.messages)
    n = args.messages
    print(f"tee throughput, {n} requests + {n} results, {args.repeat} alternated round(s), medians:")
    print(_line("direct pipe", direct, n))
    print(_line(relay_kind, relay, n))
    print(_line("tee (record + analysis)", tee, n))
    print(f"  tee exited {median(trail):.3f} s after the last result (analysis catching up)")
    print(f"  tee process CPU (forwarding, recording, hand-off): {median(cpu) / (2 * n) * 1e6:.2f} ms per 1,000 messages"
          f"   runs: {', '.join(f'{x * 1e3:.1f}' for x in cpu)} ms")
    print(f"  relay / direct pipe: {median(direct) / median(relay):.2f}x")
    _ratio("direct pipe", direct, tee, TARGET)
    ratio = _ratio("relay", relay, tee, RELAY_TARGET)
    if args.against is not None:
        print(f"the tee of {args.against}, alternated with the others:")
        print(_line("tee (record + analysis)", other["tee"], n))
        print(f"  tee exited {median(other['trail']):.3f} s after the last result")
        print(f"  tee process CPU: {median(other['cpu']) / (2 * n) * 1e6:.2f} ms per 1,000 messages"
              f"   runs: {', '.join(f'{x * 1e3:.1f}' for x in other['cpu'])} ms")
        _ratio("relay", relay, other["tee"], RELAY_TARGET)
        print(f"  this tree's tee / that tree's: {median(other['tee']) / median(tee):.2f}x by the medians")
    return ratio


def _whole(rec: Path, n: int) -> None:
    """The recording holds every message; then it goes (the next way records there too)."""
    frames = sum(1 for line in open(rec, "rb") if b'"k":"line"' in line.split(b"\t", 1)[0])
    if frames != 2 * (n + 1):
        raise RuntimeError(f"the recording holds {frames} lines, not {2 * (n + 1)}")
    rec.unlink()


if __name__ == "__main__":
    main()
