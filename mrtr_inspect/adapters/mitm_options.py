"""The addon's options in stock mitmproxy (`--set mrtr_record=PATH` …): declared (`declare`), then
checked and opened into what a session needs (`open_session`), from the addon's `configure`."""

from __future__ import annotations

import time
from typing import NamedTuple, Optional

from mitmproxy import exceptions

from ..config import Config
from ..core.hops import hop_problem
from ..recording.files import unwritable
from ..recording.writer import RecordingError, RecordingWriter, redactor_for
from ..settings import SettingsError, load_project
from .exports import Exports
from .live_analysis import http_info

OPTIONS = {
    "mrtr_record": "Record the MCP traffic to this file (mrtr-inspect recording; an existing recording gets a new "
                   "session appended).",
    "mrtr_report": "Write the mrtr-inspect JSON report (chains and findings) to this file on exit.",
    "mrtr_peer_header": "A request header whose value identifies the client (principal) for chain stitching, "
                        "instead of Authorization, then client address plus clientInfo.",
    "mrtr_otlp_endpoint": "Send one OTLP/HTTP span per chain to this collector (a base URL; /v1/traces is "
                          "appended). The OTEL_EXPORTER_OTLP_* variables set it too.",
    "mrtr_metrics": "Serve Prometheus metrics at http://HOST:PORT/metrics.",
    "mrtr_hop": "Name the hop this session records (front, back…): check of several hops' recordings ties a "
                "gateway's front chains to the back chains they caused.",
    "mrtr_config": "mrtr-inspect settings file (.mrtr-inspect.toml or pyproject.toml) instead of the one found "
                   "from the current directory.",
}
#: the options of a session: a change ends it and begins another with the new settings
SESSION_OPTIONS = frozenset(OPTIONS)


def declare(loader) -> None:
    for name, text in OPTIONS.items():
        loader.add_option(name, Optional[str], None, text)


class Session(NamedTuple):
    """What the options ask of a session, checked and opened (`open_session`)."""

    config: Config
    notes: tuple[str, ...]  # what the settings file said (`note: …` lines)
    exports: Exports | None
    writer: RecordingWriter | None  # deferred: its header once the session begins
    report: str | None
    info: dict  # the session header's (`http_info`)

    def drop(self) -> None:
        """Not begun after all: nothing written (the writer removes a file it made), nothing served."""
        try:
            if self.writer is not None:
                self.writer.close({}, time.time())
        finally:
            if self.exports is not None:
                self.exports.close()


def open_session(opts, config: Config | None, upstream: str) -> Session:
    """A session's settings, recording and exports from mitmproxy's options; `OptionsError` says what
    is wrong (nothing is left open then). `config`: the addon's own, else (None) the project's
    settings as the command line reads them (`mrtr_config`, else the file found from the current
    directory; docs/configuration.md)."""
    notes: tuple[str, ...] = ()
    if config is None:
        try:
            config, found = load_project(opts.mrtr_config)
        except SettingsError as e:
            raise exceptions.OptionsError(str(e)) from None
        notes = tuple(found.notes) if found is not None else ()
    if opts.mrtr_peer_header:
        config.peer_header = opts.mrtr_peer_header
    live = not getattr(opts, "rfile", None)  # flows read from a file (-r) may have begun late
    info = http_info(upstream, live, opts.mrtr_hop)
    try:
        if opts.mrtr_hop is not None and (reason := hop_problem(opts.mrtr_hop)):
            raise ValueError(f"mrtr_hop: {reason}")
        if opts.mrtr_report and (reason := unwritable(opts.mrtr_report, "report")):
            raise ValueError(reason)
        exports = Exports.open(opts.mrtr_otlp_endpoint, opts.mrtr_metrics, tuple(getattr(opts, "mrtr_allow_host", ())))
    except ValueError as e:
        raise exceptions.OptionsError(str(e)) from None
    try:
        writer = RecordingWriter(opts.mrtr_record, "http", info, redactor_for(config), deferred=True) \
            if opts.mrtr_record else None
    except RecordingError as e:
        if exports is not None:
            exports.close()
        raise exceptions.OptionsError(str(e)) from None
    return Session(config, notes, exports, writer, opts.mrtr_report, info)
