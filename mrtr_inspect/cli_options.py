"""The pieces the command line's modules share (cli.py, cli_replay.py): one-line failures, the
rule options and the configuration they build, the help of options several commands take."""

from __future__ import annotations

import sys

import click

from .config import Config
from .core.findings import SEVERITIES, Severity

EXIT_USAGE = 2


def say(message: str) -> None:
    """One line on stderr, `mrtr-inspect: ` first; what it quotes of a file or the traffic cannot
    act on the terminal or start a line of its own (outputs.text.printable)."""
    from .outputs.text import tool_line

    click.echo(tool_line(message), err=True, nl=False)


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """One line on stderr, then exit (never a traceback)."""
    say(message)
    sys.exit(code)


def _parse_severity(items: tuple[str, ...]) -> dict[str, Severity]:
    out = {}
    for item in items:
        rid, sep, level = item.partition("=")
        level = level.strip().lower()
        if not sep or level not in SEVERITIES:
            fail(f"--severity takes ID=error|warning|info, not {item!r}")
        out[rid.strip()] = Severity(level)
    return out


def build_config(severity: tuple[str, ...] = (), disable: tuple[str, ...] = (), base: Config | None = None) -> Config:
    """`base`, else the configuration file (`--config PATH`, or the one found from the current
    directory; see settings.py), with the command-line options on top."""
    from .rules import load_rules
    from .rules.registry import REGISTRY
    from .settings import load

    load_rules()
    if base is None:
        ctx = click.get_current_context(silent=True)
        base, found = load(REGISTRY, ctx.meta.get(CONFIG_META) if ctx is not None else None)
        for note in found.notes if found is not None else ():
            say(f"note: {note}")
    cfg = base
    sev = _parse_severity(severity)
    for rid in list(sev) + list(disable):
        if rid not in REGISTRY:
            fail(f"unknown rule id {rid!r} (see `mrtr-inspect rules`)")
    cfg.severity.update(sev)
    cfg.disabled.update(disable)
    return cfg


CONFIG_META = "mrtr_inspect.config"


def _remember_config(ctx: click.Context, _param, value: str | None) -> None:
    if value is not None:
        ctx.meta[CONFIG_META] = value


def config_option(fn):
    return click.option("--config", metavar="PATH", expose_value=False, callback=_remember_config,
                        help="Settings file (.mrtr-inspect.toml or pyproject.toml) instead of the one found "
                             "from the current directory.")(fn)


def rule_options(fn):
    fn = config_option(fn)
    fn = click.option("--disable", "disable", multiple=True, metavar="ID", help="Turn a rule off (repeatable).")(fn)
    fn = click.option("--severity", "severity", multiple=True, metavar="ID=LEVEL",
                      help="Change a rule's severity: error, warning or info (repeatable).")(fn)
    return fn


_ALLOW_HOST_HELP = ("Listeners (the proxy, --metrics, replay serve) also answer requests whose Host or Origin "
                    "names NAME (any port; '*': any name). By default only localhost, 127.0.0.1, [::1] and the "
                    "listening address are answered; others get 403 (DNS rebinding protection). Repeatable.")


def export_options(fn):
    """The live exports of the tee and the proxy (docs/observability.md), and `--allow-host`: the
    names their listeners (the proxy, `--metrics`) answer to besides the loopback ones."""
    fn = click.option("--allow-host", "allow_host", multiple=True, metavar="NAME", help=_ALLOW_HOST_HELP)(fn)
    fn = click.option("--metrics", "metrics", metavar="HOST:PORT",
                      help="Serve Prometheus metrics at http://HOST:PORT/metrics while it runs.")(fn)
    fn = click.option("--otlp-endpoint", "otlp_endpoint", metavar="URL",
                      help="Send one OTLP/HTTP span per chain to this collector (a base URL; /v1/traces is "
                           "appended). OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_EXPORTER_OTLP_* "
                           "variables set it too.")(fn)
    return fn


def hop_option(fn):
    """`--hop NAME` of the tee and the proxy (RULES.md §11)."""
    return click.option("--hop", "hop", metavar="NAME",
                        help="Name the hop this session records (front, back…): check of several hops' recordings "
                             "ties a gateway's front chains to the back chains they caused.")(fn)


_IGNORE_HELP = ("Leave this JSON path out (dotted, into the whole message: params.arguments.nonce, "
                "result._meta; * is one member or index, ** any depth). Repeatable.")
