"""The command line's commands that play a recording to a live peer: `replay serve`, `replay verify`,
`probe` and `probe-client` (CONTRACTS.md). cli.py adds them to `main`."""

from __future__ import annotations

import sys

import click

from .cli_options import _ALLOW_HOST_HELP, _IGNORE_HELP, build_config, fail, rule_options

_VERIFY_IGNORE_HELP = _IGNORE_HELP + (" A notification method (notifications/progress) leaves those notifications "
                                      "out; notifications.*.params.message that member of each.")


@click.group()
def replay() -> None:
    """Play a recording back: its server side to a live client (serve), its client side to a live
    server (verify). See docs/replay.md."""


def _match_on(names: tuple[str, ...], python_path: tuple[str, ...]) -> tuple[bool, tuple]:
    """`--match-on`: 'answers', and MODULE:FUNCTION custom matchers, imported (after --python-path)."""
    import importlib

    sys.path[:0] = list(python_path)
    custom = []
    for name in names:
        if name == "answers":
            continue
        module, _, attr = name.partition(":")
        try:
            fn = importlib.import_module(module)
            for part in attr.split("."):
                fn = getattr(fn, part)
        except (ImportError, AttributeError, ValueError) as e:
            fail(f"--match-on {name}: 'answers' or MODULE:FUNCTION, importable ({type(e).__name__}: {e})")
        if not attr or not callable(fn):
            fail(f"--match-on {name}: 'answers' or MODULE:FUNCTION, a function of (recorded, live)")
        custom.append((name.rsplit(":", 1)[-1], fn))
    return "answers" in names, tuple(custom)


class _PaceCommand(click.Command):
    """`--pace` takes an optional value, `recorded` (the only pace there is): `--pace recorded` and
    `--pace` alone mean the same, and `--pace PATH` still reads PATH as the recording."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        skip = False
        for i, a in enumerate(args):
            if skip:
                skip = False
                continue
            if a == "--":
                out += args[i:]
                break
            if a == "--pace=recorded" or (a == "--pace" and args[i + 1:i + 2] == ["recorded"]):
                out.append("--pace")
                skip = a == "--pace"
                continue
            out.append(a)
        return super().parse_args(ctx, out)


def _faults(specs: tuple[str, ...]) -> tuple:
    from .replay.faults import parse_fault

    try:
        return tuple(parse_fault(s) for s in specs)
    except ValueError as e:
        fail(f"--fault: {e}")


@replay.command("serve", cls=_PaceCommand)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--listen", metavar="HOST:PORT", help="Serve Streamable HTTP there (port 0 picks a free one). "
              "Default: HTTP on 127.0.0.1:8788 for an HTTP recording, stdio for a stdio one.")
@click.option("--stdio", "use_stdio", is_flag=True, help="Serve on stdin and stdout: usable as a client's server command.")
@click.option("--strict", is_flag=True, help="Requests must come in recorded order (default: any order).")
@click.option("--ignore", multiple=True, metavar="PATH", help=_IGNORE_HELP)
@click.option("--allow-repeats", is_flag=True, help="Serve a recorded request again when no unused one matches.")
@click.option("--pace", is_flag=True, help="Send replies (and stream events) at their recorded pace "
              "(`--pace recorded` says the same).")
@click.option("--fault", "fault", multiple=True, metavar="KIND[:ARG][@WHICH]",
              help="Inject a fault: delay[:SECONDS], disconnect, malformed or error[:CODE], on the request WHICH "
                   "picks (N, METHOD[:TARGET], chain; default the first after the handshake). Repeatable. "
                   "docs/replay.md, Faults.")
@click.option("--fault-seed", type=int, metavar="N",
              help="Faults without @WHICH go to requests at random, from this seed (reproducible).")
@click.option("--fault-rate", type=click.FloatRange(0.0, 1.0), default=0.25, show_default=True,
              help="With --fault-seed: the probability that a request gets a fault.")
@click.option("--match-on", "match_on", multiple=True, metavar="NAME",
              help="Match on more: 'answers' (the values of inputResponses, not only their keys), or "
                   "MODULE:FUNCTION, a custom matcher f(recorded, live) (docs/replay.md). Repeatable.")
@click.option("--python-path", "python_path", multiple=True, metavar="DIR",
              help="Where --match-on modules are imported from (added to sys.path). Repeatable.")
@click.option("--allow-host", "allow_host", multiple=True, metavar="NAME", help=_ALLOW_HOST_HELP)
@click.option("--record", metavar="PATH", help="Record the live session to PATH.")
@click.option("--summary", metavar="PATH", help="Keep a JSON summary there (rewritten after each request); "
              "{pid} in PATH is replaced by the process id.")
@click.option("--quiet", is_flag=True, help="No findings on stderr (the exit summary stays).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="never",
              show_default=True, help="Exit 1 when the live session has findings at or above this severity.")
@click.option("--redact-path", "redact_path", multiple=True, metavar="PATH",
              help="A JSON path the recording was redacted at, beyond the settings' redact_paths: the live "
              "value is redacted there too before matching (docs/replay.md).")
@rule_options
def replay_serve(path, listen, use_stdio, strict, ignore, allow_repeats, pace, fault, fault_seed, fault_rate, match_on,
                 python_path, allow_host, record, summary, quiet, fail_on, redact_path, severity, disable) -> None:
    """A recording's server side, played back to a live client. A request that matches no recorded
    one gets a JSON-RPC error naming the closest one. Exit 0; 1 after misses; 2 on unreadable input."""
    from .replay import run
    from .replay.serve import ServeOptions

    from .recording.writer import redactor_for

    config = build_config(severity, disable)
    config.redact_paths = [*config.redact_paths, *redact_path]
    answers, custom = _match_on(match_on, python_path)
    # the live request redacted as the recording was: a recorded placeholder matches the value it stands for
    options = ServeOptions("strict" if strict else "any", ignore, allow_repeats, pace, redactor=redactor_for(config),
                           answers=answers, custom=custom, faults=_faults(fault), fault_seed=fault_seed,
                           fault_rate=fault_rate)
    sys.exit(run.serve(path, listen=listen, stdio=use_stdio, options=options, record=record, summary=summary,
                       quiet=quiet, fail_on=fail_on, config=config, allow_host=tuple(allow_host)))


@replay.command("verify")
@click.argument("path", type=click.Path(dir_okay=False))
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.option("--upstream", metavar="URL", help="The live Streamable HTTP server (else: -- CMD [ARG...]).")
@click.option("--ignore", multiple=True, metavar="PATH", help=_VERIFY_IGNORE_HELP)
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="HTTP: set this header on every request (a real token for a redacted one). Repeatable.")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for one response.")
@click.option("--record", metavar="PATH", help="Record the live session to PATH.")
@click.option("--quiet", is_flag=True, help="No findings on stderr.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="never",
              show_default=True, help="Exit 1 when the live session has findings at or above this severity.")
@rule_options
def replay_verify(path, cmd, upstream, ignore, headers, timeout, record, quiet, fail_on, severity, disable) -> None:
    """A recording's client side, played against a live server (a fresh process per recorded
    session for `-- CMD`). Exit 0 when every response matches the recorded one, 1 otherwise.

    \b
      mrtr-inspect replay verify session.jsonl -- python server.py
      mrtr-inspect replay verify session.jsonl --upstream http://127.0.0.1:3000/mcp
    """
    from .replay import run
    from .replay.verify import VerifyOptions

    config = build_config(severity, disable)
    options = VerifyOptions(tuple(ignore), timeout, tuple(run.parse_header(h) for h in headers))
    sys.exit(run.verify(path, upstream=upstream, cmd=tuple(cmd), options=options, record=record, quiet=quiet,
                        fail_on=fail_on, config=config))


# -- probe (mrtr_inspect/probe/) --------------------------------------------------------------------


@click.command("probe")
@click.argument("path", type=click.Path(dir_okay=False))
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.option("--upstream", metavar="URL", help="The live Streamable HTTP server (else: -- CMD [ARG...]).")
@click.option("--only", "only", metavar="MUTATION,...", help="Only these mutations (docs/probes.md lists them).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit"]), default="text",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="Write there instead of stdout.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--allow-remote", is_flag=True, help="Probe an upstream that is not a loopback address.")
@click.option("--dry-run", is_flag=True, help="Show what each probe would send; send nothing.")
@click.option("--reuse", is_flag=True, help="stdio: one server process for every probe (default: a fresh one each).")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds one probe may take.")
@click.option("--max-rounds", type=click.IntRange(1), default=10, show_default=True,
              help="Rounds a probe may play before its mutated request.")
@click.option("--record", metavar="PATH", help="Record the probe's own traffic to PATH (the report's message indexes).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="HTTP: set this header on every request. Repeatable.")
@rule_options
def probe_command(path, cmd, upstream, only, fmt, output, fail_on, allow_remote, dry_run, reuse, timeout, max_rounds,
                  record, headers, severity, disable) -> None:
    """Active probes (docs/rules.md §12, docs/probes.md): each recorded chain with a round is played against the live
    server up to that round, then sent mutated (a tampered requestState, a missing answer…); the
    server's reaction is judged. Exit 0: nothing at or above --fail-on; 1: findings at or above it;
    2: bad usage, unreadable input, or a server that cannot be started or reached; 130: interrupted
    by Ctrl-C, 143 by SIGTERM (the server under test stops, what was judged is written).

    \b
      mrtr-inspect probe session.jsonl -- python server.py
      mrtr-inspect probe session.jsonl --upstream http://127.0.0.1:3000/mcp --only tampered-state
    """
    from .probe.command import probe
    from .probe.runner import ProbeOptions
    from .probe.stop import StopSignals
    from .recording.files import unwritable
    from .replay import run

    config = build_config(severity, disable)
    if output and (reason := unwritable(output, "output")):
        fail(reason)
    names = tuple(n.strip() for n in (only or "").split(",") if n.strip())
    options = ProbeOptions(names, timeout, max_rounds, reuse, dry_run)
    with StopSignals() as stop:
        code, _, _ = probe(path, upstream=upstream, cmd=tuple(cmd), options=options, fmt=fmt, output_path=output,
                           fail_on=fail_on, allow_remote=allow_remote, record=record,
                           headers=tuple(run.parse_header(h) for h in headers), config=config, stop=stop)
    sys.exit(code)


@click.command("probe-client")
@click.argument("path", type=click.Path(dir_okay=False))
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.option("--mutation", "mutation", metavar="NAME,...", help="Only these mutations (docs/probe-client.md lists them).")
@click.option("--transport", type=click.Choice(["http", "stdio"]),
              help="How the client reaches the probe server (default: stdio when CMD holds {server}, http when it "
                   "holds {url}, else the recording's).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit"]), default="text",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="Write there instead of stdout.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds the client may run per mutation (fault-delay holds its answer this long).")
@click.option("--window", type=click.FloatRange(min=0.0), default=2.0, show_default=True,
              help="parallel: seconds the first call's answer waits for a second call.")
@click.option("--listen", "host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Where the HTTP probe server listens (a free port).")
@click.option("--allow-remote", is_flag=True, help="Let the probe server listen on an address that is not loopback.")
@click.option("--record", metavar="DIR", help="Keep each mutation's traffic there (NN-MUTATION.jsonl), for `show`.")
@rule_options
def probe_client_command(path, cmd, mutation, transport, fmt, output, fail_on, timeout, window, host, allow_remote,
                         record, severity, disable) -> None:
    """Client probes (docs/rules.md §14, docs/probe-client.md): the recording's server side, changed on
    purpose (a rotated requestState, a state-only result, sixty rounds, a held-back answer…), played
    to the client command, which runs once per mutation; how it copes is judged, and every exchange
    by the passive rules. {url} in CMD becomes the probe server's URL (HTTP), {server} its stdio
    command line. Exit 0: nothing at or above --fail-on; 1: findings at or above it; 2: bad usage,
    unreadable input, or a client that could not be driven; 130: interrupted by Ctrl-C, 143 by SIGTERM
    (what was judged is written).

    \b
      mrtr-inspect probe-client session.jsonl -- python my_client.py --url {url}
      mrtr-inspect probe-client session.jsonl --mutation state-only -- python my_client.py -- {server}
    """
    from .probe.client_command import probe_client
    from .probe.client_runner import ClientOptions
    from .recording.files import unwritable

    config = build_config(severity, disable)
    if output and (reason := unwritable(output, "output")):
        fail(reason)
    names = tuple(n.strip() for n in (mutation or "").split(",") if n.strip())
    options = ClientOptions(names, transport, timeout, window, host, record)
    code, _, _ = probe_client(path, tuple(cmd), options=options, fmt=fmt, output_path=output, fail_on=fail_on,
                              allow_remote=allow_remote, config=config)
    sys.exit(code)
