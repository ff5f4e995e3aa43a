"""The command line (CONTRACTS.md). Click commands only: parse options, call into the package,
choose an output."""

from __future__ import annotations

import contextlib
import sys

import click

from .version import __version__
from .config import Config
from .core.findings import RANK, Severity
from .errors import UserError

from .cli_options import (_IGNORE_HELP, build_config, config_option, export_options, fail, hop_option,
                          rule_options, say)


def _allowed_hosts(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--allow-host` values as they are matched; a bad one is one line, exit 2."""
    from .hosts import allow_host

    try:
        return tuple(allow_host(v) for v in values)
    except ValueError as e:
        fail(str(e))


def open_exports(otlp_endpoint: str | None, metrics: str | None, quiet: bool = False, allow_host: tuple[str, ...] = ()):
    """The live exports asked for (None: none); a bad value or a port in use is one line, exit 2.
    Where the metrics are served is said on stderr (under --quiet only when port 0 chose it).
    `allow_host`: the names the metrics server answers to besides the loopback ones (hosts.py)."""
    from .adapters.exports import Exports

    try:
        exports = Exports.open(otlp_endpoint, metrics, allow_host)
    except ValueError as e:
        fail(str(e))
    if exports is not None and exports.metrics is not None and (not quiet or metrics.endswith(":0")):
        say(f"metrics on {exports.metrics.url}")
    return exports


class _Cli(click.Group):
    """The command line: a usage error is one line, the reason and where the help is (CONTRACTS.md:
    exit 2 with a one-line reason), not click's usage block; so is a `UserError` (errors.py: an
    unreadable recording, a bad settings file, a file that cannot be written…), its reason alone;
    everything else as click does it."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "mrtr-inspect"
            fail(f"{e.format_message()} (see '{where} --help')", e.exit_code)
        except UserError as e:
            fail(str(e))
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            say("aborted")
            sys.exit(1)
        sys.exit(rv if type(rv) is int else 0)  # ctx.exit(code) comes back as its code


@click.group(cls=_Cli, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--upstream", metavar="URL", help="The Streamable HTTP server to put the proxy in front of.")
@click.option("--listen", metavar="HOST:PORT", default="127.0.0.1:8788", show_default=True,
              help="Where the proxy listens (port 0 picks a free one).")
@click.option("--record", metavar="PATH", help="Record the session to PATH (appends a new session).")
@click.option("--report", metavar="PATH", help="Write the JSON report to PATH on exit.")
@click.option("--quiet", is_flag=True, help="No live view; findings only in the report.")
@click.option("--ui", "with_ui", is_flag=True, help="Show the interactive terminal view (`mrtr-inspect ui`) of "
              "the traffic as it passes, in this terminal; q stops the proxy.")
@hop_option
@export_options
@rule_options
@click.version_option(__version__, prog_name="mrtr-inspect")
@click.pass_context
def main(ctx: click.Context, upstream, listen, record, report, quiet, with_ui, hop, otlp_endpoint, metrics,
         allow_host, severity, disable) -> None:
    """Watch MCP traffic, stitch multi-round requests (MRTR), check them against the 2026-07-28
    specification, record and replay them.

    \b
      mrtr-inspect --upstream http://127.0.0.1:3000/mcp     reverse proxy (HTTP)
      mrtr-inspect stdio -- python server.py               tee for a stdio server
      mrtr-inspect check session.jsonl                     analyse a recording
      mrtr-inspect show session.jsonl                      its chains, round by round
    """
    if ctx.invoked_subcommand is not None:
        return
    if not upstream:
        given = [p.opts[0] for p in ctx.command.params if p.name not in ("upstream", "version", "help")
                 and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)]
        if given:  # proxy options without the proxy: not the help a bare `mrtr-inspect` shows
            fail(f"{', '.join(given)} without --upstream: the proxy needs the server to put itself in front of "
                 "(or name a command, e.g. `mrtr-inspect stdio --record PATH -- CMD`)")
        click.echo(ctx.get_help())
        return
    config = build_config(severity, disable)
    try:
        from .adapters.proxy import run_proxy
    except ImportError as e:  # pragma: no cover - depends on the installation
        fail(f"the HTTP proxy is not available: {e}")
    allow = _allowed_hosts(allow_host)
    if with_ui:
        from .ui import filter_parser
        from .ui.live import run_proxy_with_ui

        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            fail("--ui needs a terminal")

        def start(path: str) -> int:  # in the proxy's process, which has no thread yet
            exports = open_exports(otlp_endpoint, metrics, True, allow)
            return run_proxy(upstream, listen=listen, record=path, report=report, quiet=True, config=config,
                             exports=exports, hop=hop, allow_host=allow)

        sys.exit(run_proxy_with_ui(start, record, config, filter_parser()))
    exports = open_exports(otlp_endpoint, metrics, quiet, allow)
    sys.exit(run_proxy(upstream, listen=listen, record=record, report=report, quiet=quiet, config=config,
                       exports=exports, hop=hop, allow_host=allow))


class _TeeCommand(click.Command):
    """`stdio`: its own options, then CMD, whose options pass as they are (after `--`, or after CMD's
    first word). An option it does not know before CMD is a mistyped one of its own, not the server
    to start (`--recrod s.jsonl -- server` ran `--recrod`, exit 127)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        params = {name: p for p in self.get_params(ctx) for name in (*p.opts, *p.secondary_opts)}
        i = 0
        while i < len(args) and args[i] != "--" and args[i].startswith("-") and args[i] != "-":
            name, eq, _ = args[i].partition("=")
            p = params.get(name)
            if p is None:
                ctx.fail(f"no such option: {name} (the server command goes after --)")
            takes_value = isinstance(p, click.Option) and not p.is_flag and not p.count
            i += 2 if takes_value and not eq else 1
        return super().parse_args(ctx, args)


@main.command(cls=_TeeCommand, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--record", metavar="PATH", help="Record the session to PATH (appends a new session).")
@click.option("--report", metavar="PATH", help="Write the JSON report to PATH when the server exits.")
@click.option("--quiet", is_flag=True, help="Nothing on stderr but the server's own output.")
@hop_option
@export_options
@rule_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def stdio(record, report, quiet, hop, otlp_endpoint, metrics, allow_host, severity, disable, cmd) -> None:
    """Tee for a stdio server: start this instead of CMD. stdin and stdout carry the protocol
    unchanged; findings go to stderr; the exit status is CMD's.

    \b
      mrtr-inspect stdio --record s.jsonl -- python server.py
    """
    from .adapters.stdio_tee import run_tee

    config = build_config(severity, disable)
    exports = open_exports(otlp_endpoint, metrics, quiet, _allowed_hosts(allow_host))
    sys.exit(run_tee(list(cmd), record=record, report=report, quiet=quiet, config=config, exports=exports, hop=hop))


def _parse_filter(_ctx: click.Context, _param, value: str | None):
    """`--filter EXPR` parsed before anything runs: a bad one is one line naming the term, exit 2.
    An empty expression is no filter (it keeps everything)."""
    if value is None:
        return None
    from .filter import FilterError, parse

    try:
        flt = parse(value)
    except FilterError as e:
        fail(f"--filter: {e}")
    return None if flt.empty else flt


def filter_option(what: str):
    """`--filter EXPR` (docs/filter.md); `what` says what it narrows in this command."""
    def deco(fn):
        return click.option("--filter", "flt", metavar="EXPR", callback=_parse_filter,
                            help=f"Only {what} this filter keeps: terms such as tool:NAME, rule:ID, "
                                 "severity:LEVEL, outcome:O, id:N, rounds>N, a word; and, or, not, "
                                 "parentheses (docs/filter.md).")(fn)
    return deco


def _analyse(paths: tuple[str, ...], config: Config, progress: str | None = None, flt=None, judge: bool = False,
             observe=None):
    """Run recordings through the analysis; returns the report builder, narrowed by the filter
    `flt` when one is given (outputs/narrow.py). Raises UnreadableRecording (a UserError: one
    line, exit 2). `progress`: the bar's label, on a terminal (outputs/progress.py). `judge`:
    `check`'s judgments too (the baseline, the contract: api.judged). `observe`: sees every
    observation (`Analysis`)."""
    from .api import analysed, judged
    from .outputs import progress as bar

    watch = None
    if progress is not None and bar.wanted():
        def watch(builder):
            return bar.Progress(progress, bar.total_bytes(paths), bar.bytes_read(paths),
                                lambda: builder.chain_count, "chains", enabled=True)
    builder = (judged if judge else analysed)(paths, config, watch, sessions=flt is not None and "session" in flt.fields,
                                              observe=observe)
    for line in builder.notes:
        say(f"note: {line}")
    if flt is None:
        return builder
    from .outputs.narrow import narrow_report

    try:
        return narrow_report(builder, flt, builder.sessions)
    finally:
        builder.close()


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit", "markdown"]), default="text",
              show_default=True, help="markdown: for a job summary or a pull-request comment (docs/ci.md).")
@click.option("--output", type=click.Path(dir_okay=False), help="Write there instead of stdout.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default="error",
              show_default=True, help="Exit 1 when a finding at or above this severity is reported.")
@click.option("--verbose", "-v", is_flag=True, help="Text and markdown formats: list info findings too.")
@click.option("--baseline", "baseline_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Compare the servers' tools, prompts and resources with this lock file (`mrtr-inspect baseline "
                   "save`): each change is a definition-* finding (docs/ci.md).")
@click.option("--contract", "contract_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Judge the run against this contract (TOML; instead of the settings' [contract] table): each "
                   "breach is a contract-* finding (docs/contracts.md).")
@filter_option("the chains and findings")
@rule_options
def check(paths, fmt, output, fail_on, verbose, baseline_file, contract_file, flt, severity, disable) -> None:
    """Analyse recordings offline. Exit 0: nothing at or above --fail-on; 1: findings at or
    above it; 2: unreadable input or bad usage. With --filter, the report holds the chains and
    findings the filter keeps, and the exit status counts those findings.

    \b
      mrtr-inspect check session.jsonl --baseline mcp-baseline.json --contract contract.toml
    """
    from .recording.files import open_private, unwritable, why

    config = build_config(severity, disable)
    if baseline_file is not None:
        config.baseline = baseline_file
    if contract_file is not None:
        from .contract import read_contract

        config.contract = read_contract(contract_file)
    if output and (reason := unwritable(output, "output")):
        fail(reason)  # before the analysis, not after it
    builder = _analyse(paths, config, progress="check", flt=flt, judge=True)
    try:
        # 0600 when new (it may quote answers); `-` is stdout; a link or a FIFO is written through
        with open_private(output) if output else contextlib.nullcontext(sys.stdout) as out:
            if fmt == "json":
                builder.write_json(out)
            elif fmt == "text":
                _check_text(builder, out, verbose)
            elif fmt == "markdown":
                from .outputs import markdown

                markdown.write(builder, out, fail_on, verbose)
            else:
                from .outputs import formats

                formats.write(fmt, builder, out, fail_on=fail_on)
    except OSError as e:
        if not output:
            raise
        fail(f"cannot write output {output}: {why(e)}")
    counts = builder.severity_counts
    builder.close()
    if fail_on != "never" and any(n and RANK[s] >= RANK[fail_on] for s, n in counts.items()):
        sys.exit(1)


def _check_text(builder, out, verbose: bool) -> None:
    from .outputs.text import FindingPrinter, chain_line, summary_line

    printer = FindingPrinter(out, min_severity=Severity.INFO if verbose else Severity.WARNING)
    for f in builder.findings():
        printer.finding(f)
    chains = sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    if chains:
        printer.line("chains:", style="bold")
        for c in chains:
            printer.line("  " + (f"[{c['hop']}] " if c.get("hop") else "") + chain_line(c))
    if builder.hops is not None:  # some session named its hop (RULES.md §11)
        from .outputs.show import hop_line

        printer.line(f"hops: {len(builder.hops)} linked pair{'s' if len(builder.hops) != 1 else ''}", style="bold")
        for h in builder.hops:
            printer.line("  " + hop_line(h))
    s = builder.summary()
    line = summary_line(s)
    if s["infos"] and not verbose:
        line += " (-v lists the infos)"
    if builder.filter is not None:
        line += f", kept by --filter {builder.filter!r}"
    printer.line(line, style="bold")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "mermaid", "json"]), default="text", show_default=True)
@filter_option("the chains")
@config_option
def show(paths, fmt, flt) -> None:
    """The logical requests (chains) of a recording, round by round: what was asked, what was
    answered, how long the user took. Several recordings are one capture; when their sessions name
    their hops (--hop), each front chain is drawn with the back chains it caused."""
    from .outputs.show import render_json, render_mermaid_hops, render_text

    builder = _analyse(tuple(paths), build_config(), flt=flt)
    chains = sorted(builder.chains(), key=lambda c: int(c["id"][1:]))
    hops = builder.hops
    builder.close()
    if fmt == "text" and flt is not None and not chains:
        click.echo(f"no chain matches --filter {flt.text!r}")
    elif fmt == "text":  # without named hops, the views of one hop (hop_story: each chain alone)
        render_text(chains, sys.stdout, color=sys.stdout.isatty(), hops=hops)
    elif fmt == "mermaid":
        render_mermaid_hops(chains, hops, sys.stdout)
    else:
        render_json(chains, sys.stdout, hops)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@filter_option("the chains")
def stats(paths, fmt, flt) -> None:
    """Per method and target: chains, outcomes, rounds, and the percentiles (p50, p90, p99, max) of
    the whole chain, of the server's time and of the user's answering time; and per tool, prompt and
    resource what it costs a model's context: the bytes of its definition as offered, a token
    estimate, the bytes of its results (docs/observability.md)."""
    from .offered import Offered
    from .outputs import stats as st

    offered = Offered()
    builder = _analyse(paths, build_config(), flt=flt, observe=offered.observe)
    doc = st.stats(builder.chains(), offered.servers())
    builder.close()
    if flt is not None:  # the JSON names the filter, after its format; the costs are of no chain: left out
        doc = {"format": doc["format"], "filter": flt.text, "groups": doc["groups"]}
    if fmt == "json":
        st.write_json(doc, sys.stdout)
    elif flt is not None and not doc["groups"]:
        click.echo(f"no chain matches --filter {flt.text!r}")
    else:
        st.write_text(doc, sys.stdout, color=sys.stdout.isatty())


@main.command("ui")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--follow", is_flag=True, help="Keep reading the recordings as a tee or a proxy appends to them.")
@click.option("--filter", "filter_text", metavar="EXPR", default="",
              help="Show only what this filter expression matches (`/` changes it in the view).")
@rule_options
def ui_command(paths, follow, filter_text, severity, disable) -> None:
    """An interactive terminal view of recordings: the chains (a list you can scroll, filter and
    open), each chain's rounds, questions, state digests and findings, the raw bytes of each
    message. `--follow` shows a recording as it is written. The footer shows the keys; q quits.

    \b
      mrtr-inspect ui session.jsonl
      mrtr-inspect ui --follow ~/.mrtr-inspect/recordings/github.jsonl
    """
    from .ui import filter_parser, run_ui

    config = build_config(severity, disable)
    parse = filter_parser()
    if filter_text.strip():
        if parse is None:
            fail("--filter: the filter language is not available in this version")
        try:
            parse(filter_text)
        except Exception as e:  # FilterError: one line naming the term
            fail(f"--filter: {e}")
    from .recording.reader import check_readable

    for path in paths:  # before the screen is taken: UnreadableRecording is one line, exit 2
        check_readable(path)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("ui needs a terminal (for a report use `check`, for the chains `show`)")
    sys.exit(run_ui(paths, follow=follow, filter_text=filter_text, config=config, parse=parse))


@main.group("baseline")
def baseline_group() -> None:
    """Lock files of what servers offer: `baseline save` writes one from recordings, `check
    --baseline FILE` reports what changed since (docs/ci.md)."""


@baseline_group.command("save")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", metavar="FILE", required=True, type=click.Path(dir_okay=False),
              help="The lock file to write ('-': standard output).")
@config_option
def baseline_save(paths, output) -> None:
    """The tools, prompts, resources and resource templates each server offered in the
    recordings (by its serverInfo name), as a lock file to review and commit: sorted, so saving
    the same recordings again gives the same bytes.

    \b
      mrtr-inspect baseline save session.jsonl --output mcp-baseline.json
    """
    from . import baseline
    from .recording.files import write_private

    offered = _offered(paths)
    doc = baseline.lock(offered.servers())
    if not doc["servers"]:
        fail("the recordings hold no tools/list, prompts/list, resources/list or resources/templates/list result: "
             "nothing to save")
    write_private(output, baseline.dumps(doc))
    if output != "-":
        say(f"baseline of {baseline.counts(doc)} written to {output}")


def _offered(paths: tuple[str, ...]):
    """What the servers of the recordings offered (offered.Offered), the recordings analysed once."""
    from .api import analysed
    from .offered import Offered

    offered = Offered()
    builder = analysed(paths, build_config(), None, observe=offered.observe)
    for line in builder.notes:
        say(f"note: {line}")
    builder.close()
    return offered


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@rule_options
def rules_command(fmt, severity, disable) -> None:
    """Every rule: id, severity and summary by catalog section, with the configuration applied
    (the effective severity; disabled rules marked). docs/rules.md has the details."""
    from .docs import registered, write_listing

    write_listing(fmt, registered(), build_config(severity, disable), sys.stdout)


# -- export -----------------------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--to", "to", type=click.Choice(["fixture", "har", "html", "mermaid", "otlp"]), required=True,
              help="The format to export to (docs/formats.md).")
@click.option("--output", metavar="PATH", required=True, type=click.Path(dir_okay=False), help="Where to write it.")
@click.option("--chain", "chains", multiple=True, metavar="ID", help="fixture: keep this chain (repeatable; default all).")
@click.option("--only-chains", is_flag=True, help="fixture: drop the requests that belong to no chain (discovery…).")
@click.option("--redact-path", multiple=True, metavar="PATH",
              help="Redact the strings at this JSON path (docs/configuration.md) too; a path that matches nothing is said.")
@click.option("--redact-header", multiple=True, metavar="NAME", help="Redact this header too.")
@filter_option("the chains (fixture: with --chain, those of them) and findings")
@rule_options
def export(paths, to, output, chains, only_chains, redact_path, redact_header, flt, severity, disable) -> None:
    """A recording in another form. `--to fixture`: trimmed to chosen chains, redacted, without
    machine details in its session headers, ready to commit and to replay. `har`, `html`, `mermaid`
    (Markdown when PATH ends in .md), `otlp`: see docs/formats.md. `html` and `mermaid` take several
    recordings as one capture: with named hops (--hop), a front chain and the back chains it caused
    are drawn together."""
    from .replay import run

    if to != "fixture":
        from .outputs.exporters import export as export_to

        config = build_config(severity, disable)
        sys.exit(_say(export_to(list(paths), to, output, config, redact_path, redact_header, flt)))
    if len(paths) != 1:
        fail("--to fixture exports one recording at a time")
    path = paths[0]
    config = build_config(severity, disable)
    if flt is not None:
        chains = _filtered_chains(path, config, flt, chains)
    sys.exit(run.export(path, to, output, chains=chains, only_chains=only_chains, redact_paths=redact_path,
                        redact_headers=redact_header, config=config))


def _filtered_chains(path: str, config: Config, flt, chains: tuple[str, ...]) -> tuple[str, ...]:
    """The chains of `path` the filter keeps (of `chains`, when some are named); none is one line, exit 2."""
    builder = _analyse((path,), config, flt=flt)
    kept = [c["id"] for c in sorted(builder.chains(), key=lambda c: int(c["id"][1:]))]
    builder.close()
    if chains:
        kept = [c for c in dict.fromkeys(chains) if c in kept]
    if not kept:
        fail(f"{path}: no chain {'named by --chain ' if chains else ''}matches --filter {flt.text!r}")
    return tuple(kept)


def _say(lines: list[str]) -> int:
    for line in lines:
        say(line)
    return 0


@main.command("import")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--output", metavar="PATH", required=True, type=click.Path(dir_okay=False),
              help="The recording to write (an existing one gets new sessions appended).")
@config_option
def import_command(path, output) -> None:
    """A HAR file or a mitmproxy flow file (mitmdump -w) into a recording that check, show, export
    and replay read. Redacted like a live recording."""
    from .adapters.importer import import_file
    from .outputs import progress as bar

    config = build_config()
    written = bar.Tally()
    with bar.Progress("import", bar.total_bytes([path]), bar.bytes_read([path]), written, "exchanges written"):
        lines = import_file(path, output, config, written)
    sys.exit(_say(lines))



@main.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--ignore", multiple=True, metavar="PATH", help=_IGNORE_HELP)
def diff_command(a, b, fmt, ignore) -> None:
    """What changed from recording A to recording B, by meaning: the tools, prompts and resources
    offered, each chain's rounds, questions and outcome, the results. Ids, times, session ids and
    requestStates are not changes. Exit 0: the same; 1: they differ; 2: unreadable input.

    \b
      mrtr-inspect diff before.jsonl after.jsonl
      mrtr-inspect diff before.jsonl after.jsonl --ignore result.structuredContent.at --format json
    """
    from . import diff

    changes, notes = diff.diff(a, b, ignore)
    if fmt == "json":
        diff.write_json(sys.stdout, a, b, changes, notes)
    else:
        diff.write_text(sys.stdout, a, b, changes, notes, color=sys.stdout.isatty())
    sys.exit(1 if changes else 0)


@main.command("wrap")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--server", "servers", multiple=True, metavar="NAME", help="Wrap this server only (repeatable; default: every stdio server).")
@click.option("--record-dir", metavar="DIR", help="Where the tee records, one DIR/NAME.jsonl per server "
              "(default: ~/.mrtr-inspect/recordings).")
@click.option("--client", type=click.Choice(["claude-desktop", "claude-code", "cursor", "vscode", "windsurf"]),
              help="Instead of CONFIG: that client's usual configuration file on this system.")
@click.option("--list", "list_clients", is_flag=True, help="List the clients' usual configuration files and exit.")
def wrap_command(config, servers, record_dir, client, list_clients) -> None:
    """Put the tee in front of the stdio servers of an MCP client's configuration (mcpServers or
    servers): each starts `mrtr-inspect stdio --record DIR/NAME.jsonl -- ITS COMMAND`, env, cwd and
    the rest kept; URL servers stay as they are. A backup stays beside the file; `unwrap` restores it.

    \b
      mrtr-inspect wrap ~/.cursor/mcp.json --server github
      mrtr-inspect wrap --client claude-desktop --record-dir ~/mcp-recordings
    """
    from . import wrap

    if list_clients:
        for line in wrap.listing():
            click.echo(line)
        return
    sys.exit(_say(wrap.wrap(_config_file(config, client), servers, record_dir)))


def _config_file(config: str | None, client: str | None) -> str:
    from . import wrap

    if bool(config) == bool(client):
        fail("name the configuration file (CONFIG) or --client, one of them")
    return config or str(wrap.find_client_config(client))


@main.command("unwrap")
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--client", type=click.Choice(["claude-desktop", "claude-code", "cursor", "vscode", "windsurf"]),
              help="Instead of CONFIG: that client's usual configuration file on this system.")
def unwrap_command(config, client) -> None:
    """Restore the configuration `wrap` changed, byte for byte. Refused when the file changed since
    (the backup beside it is kept)."""
    from . import wrap

    sys.exit(_say(wrap.unwrap(_config_file(config, client))))


@main.command("mcp")
@click.option("--recordings", metavar="DIR", help="The folder of recordings to serve (*.jsonl, subfolders too; "
              "default: ~/.mrtr-inspect/recordings, where `wrap` records).")
@rule_options
def mcp_command(recordings, severity, disable) -> None:
    """An MCP server (stdio) for coding agents over a folder of recordings: list them, check one
    (with --filter's language), read a chain round by round, list findings, explain a rule, diff
    two recordings, read stats; the recordings as resources. Add it to a client as the command
    `mrtr-inspect mcp --recordings DIR` (docs/agents.md).
    """
    import os

    from .wrap import DEFAULT_RECORD_DIR

    config = build_config(severity, disable)
    if recordings is not None and not os.path.isdir(os.path.expanduser(recordings)):
        fail(f"--recordings {recordings}: not a folder")
    try:
        from .agent.server import run as serve
    except ImportError as e:  # pragma: no cover - depends on the installation
        fail(f"the MCP server needs the mcp package (pip install 'mcp>=2.3,<2.4'): {e}")
    sys.exit(serve(recordings or DEFAULT_RECORD_DIR, config))


@main.command("addon-path")
def addon_path() -> None:
    """The path of the mitmproxy addon script the package ships, for stock mitmproxy:

    \b
      mitmdump -s "$(mrtr-inspect addon-path)" --mode reverse:http://127.0.0.1:3000
    """
    from pathlib import Path

    click.echo(str(Path(__file__).resolve().with_name("addon.py")))


@main.command()
@click.option("--out", "out_dir", default="mrtr-inspect-demo", show_default=True,
              help="Where the demo leaves its recording and report.")
def demo(out_dir) -> None:
    """The main job on a bundled sample: a sample MRTR server, mrtr-inspect in front of it, a
    scripted client through it; then the chains it recorded."""
    from .demo import run_demo

    sys.exit(run_demo(out_dir))


if __name__ == "__main__":  # pragma: no cover
    main()


from .cli_replay import probe_client_command, probe_command, replay  # noqa: E402

for _command in (replay, probe_command, probe_client_command):
    main.add_command(_command)
