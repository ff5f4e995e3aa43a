"""Golden comparison: the analysis gives byte-identical outputs before and after a change.

Two corpora, both judged by the code of the working tree:

* recordings: every recording under fixtures/ (the captures of fixtures/captures, in their own
  format, made into recordings with tests/captures.capture_frames), the seed recordings, the
  test_sdk_* fixtures and a generated 20,000-message bench recording (gen_recording.py, seed 1).
  Each gives the text of `mrtr-inspect check --format json` and of `show --format json`, run
  in-process through the command line's own code;
* harvested runs: the frames (and the configuration) of every Inspector the fast test suites build
  (tests/rules, tests/core, tests/recording, tests/adapters/test_offline.py,
  tests/test_rules_reference.py), captured once by
  `harvest`; each run, fed through the analysis (`mrtr_inspect.analysis`: the core and the rules),
  gives every output (messages with their decoded fields and pairing, chain events with the chain's
  summary, findings) as JSON lines. These reach nearly every rule.

    python bench/golden.py harvest   [--dir out/golden]   # capture the test suites' runs (once)
    python bench/golden.py make      [--dir out/golden]   # write the golden outputs of this tree
    python bench/golden.py compare   [--dir out/golden]   # exit 1 and show the first differences

`make` is run once, before a change; `compare` after it. The golden files stay out of git (out/).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

HARVESTED = "harvested.jsonl"
SUITES = ["tests/rules", "tests/core", "tests/recording", "tests/adapters/test_offline.py",  # was tests/recording's
          "tests/test_rules_reference.py"]


# -- the recordings -------------------------------------------------------------------------------


def recordings(work: Path) -> list[str]:
    """The recordings of the corpus, copied (the captures made into recordings, the bench recording
    generated) under `work`/recordings; their paths relative to `work`, where the command line runs,
    so that the reports' `inputs` do not depend on where the tree is."""
    from gen_recording import generate
    from tests.captures import capture_frames, capture_names

    from mrtr_inspect.recording import format as fmt

    made = work / "recordings"
    made.mkdir(parents=True, exist_ok=True)
    want: dict[str, bytes] = {}
    for name in capture_names():
        want[f"capture_{name}"] = b"".join(fmt.encode(f) for f in capture_frames(name))
    for folder in sorted((ROOT / "fixtures").iterdir()):
        if folder.is_dir() and folder.name != "captures":
            for p in sorted(folder.glob("*.jsonl")):
                want[f"{folder.name}__{p.name}"] = p.read_bytes()
    out = []
    for name, data in want.items():
        path = made / name
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        out.append(f"recordings/{name}")
    bench = made / "bench_20k.jsonl"
    if not bench.exists():
        generate(str(bench), 20_000)
    out.append("recordings/bench_20k.jsonl")
    return out


def cli_outputs(path: str) -> dict[str, str]:
    """`check --format json` and `show --format json` of one recording, as the command line writes them."""
    from click.testing import CliRunner

    from mrtr_inspect.cli import main

    runner = CliRunner()
    out = {}
    for name, args in (("check", ["check", str(path), "--format", "json", "--fail-on", "never"]),
                       ("show", ["show", str(path), "--format", "json"])):
        r = runner.invoke(main, args, catch_exceptions=False)
        out[name] = f"exit {r.exit_code}\n" + r.stdout
    return out


# -- the harvested runs ---------------------------------------------------------------------------


class Harvest:
    """A pytest plugin: every Inspector built during the run, with its config and the frames fed."""

    def __init__(self) -> None:
        self.runs: list[dict] = []

    def pytest_sessionstart(self, session) -> None:
        from mrtr_inspect.core import inspector
        from mrtr_inspect.recording import format as fmt

        cls = inspector.Inspector
        runs = self.runs
        # the entry points every frame goes through: step/step_line/end since the core hands out
        # events (feed/feed_line/close call them), feed/close before; hooking the outer pair of a
        # tree whose analysis calls the inner one sees no frame at all
        if hasattr(cls, "step"):
            names = {"frame": "step", "line": "step_line", "end": "end"}
        else:
            names = {"frame": "feed", "line": "feed_line" if hasattr(cls, "feed_line") else None, "end": "close"}
        init = cls.__init__
        frame_in, end_in = getattr(cls, names["frame"]), getattr(cls, names["end"])
        line_in = getattr(cls, names["line"]) if names["line"] else None

        def _init(insp, config=None, *args, **kw):
            init(insp, config, *args, **kw)
            run = {"config": dataclasses.asdict(insp.config), "ops": [], "ok": True}
            insp.__dict__["_golden"] = run
            runs.append(run)

        def _note(insp, frame) -> None:
            run = insp.__dict__.get("_golden")
            if run is not None and run["ok"]:
                try:
                    line = fmt.encode(frame)
                    if fmt.decode(line) != frame:
                        run["ok"] = False
                    run["ops"].append(["feed", line.decode("utf-8", "surrogateescape")])
                except Exception:
                    run["ok"] = False

        def _frame(insp, frame):
            _note(insp, frame)
            return frame_in(insp, frame)

        def _line(insp, time, session, direction, data, eol=True):
            from mrtr_inspect.core.events import StdioLine

            _note(insp, StdioLine(time, session, direction, data, eol))
            return line_in(insp, time, session, direction, data, eol)

        def _end(insp, time=None):
            run = insp.__dict__.get("_golden")
            if run is not None:
                run["ops"].append(["close", time])
            return end_in(insp, time)

        cls.__init__ = _init
        setattr(cls, names["frame"], _frame)
        setattr(cls, names["end"], _end)
        if line_in is not None:
            setattr(cls, names["line"], _line)


def harvest(work: Path) -> None:
    import pytest

    plugin = Harvest()
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-x", *[str(ROOT / s) for s in SUITES]], plugins=[plugin])
    if code != 0:
        sys.exit(f"the test suites failed ({code}): harvest from a passing tree")
    seen, kept = set(), 0
    work.mkdir(parents=True, exist_ok=True)
    with open(work / HARVESTED, "w", encoding="utf-8") as f:
        for run in plugin.runs:
            if not run["ok"] or not run["ops"]:
                continue
            line = json.dumps({"config": run["config"], "ops": run["ops"]}, sort_keys=True, default=list)
            h = hashlib.sha256(line.encode("utf-8", "surrogateescape")).digest()
            if h in seen:
                continue
            seen.add(h)
            f.write(line + "\n")
            kept += 1
    bad = sum(1 for run in plugin.runs if not run["ok"])
    print(f"harvested {kept} distinct runs (of {len(plugin.runs)} inspectors; {bad} left out: a frame that does not "
          f"survive the recording format) into {work / HARVESTED}")


def _config(d: dict):
    from mrtr_inspect.config import Config

    c = Config(**d)
    c.disabled = set(c.disabled)
    return c


_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-f]+")


class Pairing:
    """The pairing of each message of a frame, from the analysis' observations (`Analysis(observe=)`):
    the request a response answers, and a request's chain place (a retry's ends with its chain)."""

    def __init__(self) -> None:
        self.places: dict = {}  # message -> (the request it answers, its chain place or None, linked)

    def observe(self, obs) -> None:
        from mrtr_inspect.core.observations import Decoded, LegacyAsked

        t = type(obs)
        if t is Decoded:
            if obs.request is not None or obs.creq is not None:
                self.places[obs.msg] = (obs.request, obs.creq, obs.creq is not None and obs.creq.link is not None)
        elif t is LegacyAsked and obs.round is not None:
            self.places[obs.msg] = (None, obs.round.request, True)

    def of(self, msg) -> tuple:
        req, creq, linked = self.places.pop(msg, (None, None, False))
        if linked and creq.chain.closed:
            creq = None  # a retry's place, or a legacy question's, ends when its chain closes
        return req, creq


def _digest(o, pairing: Pairing) -> str:
    """One output as a JSON line; a message with its pairing right after the message's frame: the
    request a response answers, a request's chain."""
    from mrtr_inspect.core.findings import Finding
    from mrtr_inspect.core.inspector import ChainEvent
    from mrtr_inspect.core.messages import REQUEST, Message

    t = type(o)
    if t is Message:
        req, creq = pairing.of(o)
        creq = creq if o.kind == REQUEST else None
        d = {"m": o.index, "time": o.time, "session": o.session, "dir": o.direction, "transport": o.transport,
             "x": o.exchange, "raw": o.raw.decode("utf-8", "surrogateescape"), "kind": o.kind, "id": repr(o.id),
             "method": o.method, "dups": repr(o.duplicates), "problem": o.problem, "reason": o.problem_reason,
             "era": o.era, "version": o.version, "peer": o.peer,
             "request": req.index if req is not None else None, "batch": o.batch, "note": o.note,
             "chain": creq.chain.id if creq is not None else None, "value": repr(o.value)}
    elif t is ChainEvent:
        d = {"c": o.kind, "time": o.time, "chain": o.chain.summary()}
    elif t is Finding:
        d = {"f": o.to_json()}
    else:
        d = {"other": _ADDRESS.sub("", repr(o))}  # an object's address differs from run to run
    return json.dumps(d, sort_keys=True, ensure_ascii=True, default=repr)


def run_outputs(run: dict) -> list[str]:
    from mrtr_inspect.analysis import Analysis
    from mrtr_inspect.recording import format as fmt

    pairing = Pairing()
    a = Analysis(_config(run["config"]), pairing.observe)
    out = []
    for op, arg in run["ops"]:
        outs = a.feed(fmt.decode(arg.encode("utf-8", "surrogateescape"))) if op == "feed" else a.close(arg)
        out += [_digest(o, pairing) for o in outs]
        pairing.places.clear()
    return out


# -- make and compare -----------------------------------------------------------------------------


def outputs(work: Path):
    """(name, text) of every golden output, in a stable order."""
    paths = recordings(work)
    here = os.getcwd()
    os.chdir(work)
    try:
        for path in paths:
            for kind, text in cli_outputs(path).items():
                yield f"{kind}/{path.rsplit('/', 1)[-1]}", text
    finally:
        os.chdir(here)
    h = work / HARVESTED
    if not h.exists():
        sys.exit(f"{h} missing: run `golden.py harvest` first")
    with open(h, encoding="utf-8") as f:
        for n, line in enumerate(f):
            yield f"runs/{n:05d}", "\n".join(run_outputs(json.loads(line))) + "\n"


def make(work: Path) -> None:
    gold = work / "gold"
    gold.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, text in outputs(work):
        p = gold / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", errors="surrogateescape")
        n += 1
    print(f"wrote {n} golden outputs under {gold}")


def compare(work: Path, show: int = 5) -> int:
    gold = work / "gold"
    bad, n = [], 0
    for name, text in outputs(work):
        n += 1
        p = gold / name
        want = p.read_text(encoding="utf-8", errors="surrogateescape") if p.exists() else None
        if want != text:
            bad.append(name)
            if len(bad) <= show:
                _show_diff(name, want, text)
    total = sum(1 for p in gold.rglob("*") if p.is_file())
    if total != n:
        print(f"the golden corpus has {total} outputs, this run gave {n}")
        bad.append("(count)")
    print(f"{n} outputs compared: " + ("identical" if not bad else f"{len(bad)} DIFFER: " + ", ".join(bad[:20])))
    return 1 if bad else 0


def _show_diff(name: str, want: str | None, got: str) -> None:
    import difflib

    print(f"--- {name}")
    if want is None:
        print("    (no golden output)")
        return
    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "golden", "now", n=0, lineterm="")
    for i, line in enumerate(diff):
        if i >= 12:
            print("    …")
            break
        print("    " + line[:300])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["harvest", "make", "compare"])
    ap.add_argument("--dir", default=str(ROOT / "out" / "golden"))
    args = ap.parse_args()
    os.chdir(ROOT)
    os.environ.setdefault("MRTR_INSPECT_REDACTION_KEY", "test-key")
    work = Path(args.dir).resolve()
    t0 = time.perf_counter()
    if args.action == "harvest":
        harvest(work)
        code = 0
    elif args.action == "make":
        make(work)
        code = 0
    else:
        code = compare(work)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
