"""The live side of a replay, seen by the core: what the live peer sent and what it was sent, as
frames, through the analysis (`analysis.Analysis`, the core and the rules: so a live client that
alters a served requestState is reported as any client would be), and optionally into a recording
of its own. As in the tee and the proxy, the frames are redacted first (the configuration's
`redact_paths` and `redact_headers` too), and the analysis sees what the recording holds."""

from __future__ import annotations

import threading
import time

from ..analysis import Analysis
from ..config import Config
from ..core.events import Direction, Headers, SessionEnd, SessionStart, StdioLine
from ..core.findings import Finding
from ..core.framing import HttpFramer
from ..core.messages import ERROR, Message
from ..outputs.text import FindingPrinter
from ..recording.writer import RecordingError, RecordingWriter, new_session_id, redactor_for
from .script import ReplayError

OWN_REPLY = "mrtr-inspect replay: "  # how the replay's own error replies (misses, refusals) begin


class LiveLog:
    def __init__(self, transport: str, info: dict | None = None, config: Config | None = None,
                 record: str | None = None, printer: FindingPrinter | None = None) -> None:
        self.session = new_session_id()
        self.insp = Analysis(config)
        self.printer = printer
        self.findings: list[Finding] = []
        self.own: set[int] = set()  # the indexes of the replay's own error replies (misses)
        self.left_out = 0  # findings about those replies, not reported
        self.lock = threading.Lock()
        redactor = redactor_for(config)
        self.redact = redactor.frame
        try:
            self.writer = RecordingWriter(record, transport, info, redactor, session=self.session) if record else None
        except RecordingError as e:
            raise ReplayError(str(e)) from None
        self.http = HttpFramer(self.session)
        self._feed([SessionStart(time.time(), self.session, transport, dict(info or {}))], record=False)

    def _feed(self, frames: list, record: bool = True) -> None:
        with self.lock:
            for f in frames:
                f = self.redact(f)
                if record and self.writer is not None:
                    self.writer.write_redacted(f)
                self._outs(self.insp.feed(f))

    def _outs(self, outs: list) -> None:
        for o in outs:
            t = type(o)
            if t is Message and o.kind == ERROR and o.direction == Direction.S2C and type(o.error) is dict \
                    and str(o.error.get("message", "")).startswith(OWN_REPLY):
                self.own.add(o.index)
            elif t is Finding:
                if self.own and not self.own.isdisjoint(o.messages):
                    self.left_out += 1  # about the replay's own reply to a miss, not about the recording or the client
                    continue
                self.findings.append(o)
                if self.printer is not None:
                    self.printer.finding(o)

    # -- stdio ------------------------------------------------------------------------------------
    def line(self, direction: str, data: bytes) -> None:
        self._feed([StdioLine(time.time(), self.session, direction, data)])  # type: ignore[arg-type]

    # -- HTTP -------------------------------------------------------------------------------------
    def request(self, x: int, method: str, path: str, headers: Headers, body: bytes, client: str = "") -> None:
        t = time.time()
        h = self.http
        self._feed(h.request_head(t, x, method, path, headers, client) + h.request_data(t, x, body) + h.request_end(t, x))

    def response_head(self, x: int, status: int, headers: Headers) -> None:
        self._feed(self.http.response_head(time.time(), x, status, headers))

    def response_data(self, x: int, data: bytes) -> None:
        self._feed(self.http.response_data(time.time(), x, data))

    def response_end(self, x: int, error: str | None = None) -> None:
        self._feed(self.http.response_end(time.time(), x, error))

    # -- the end ----------------------------------------------------------------------------------
    def close(self, info: dict | None = None) -> list[Finding]:
        t = time.time()
        with self.lock:
            self._outs(self.insp.feed(SessionEnd(t, self.session, info or {})))
            self._outs(self.insp.close(t))
            if self.writer is not None:
                self.writer.close(info, t)
                self.writer = None
        return self.findings
