"""What the terminal view shows, kept small: a row per chain and per finding, the rest on disk.

The analysis runs in a thread of its own (`Feeder`): it reads the recordings (`Follower`: as they
grow, with `--follow`), feeds the core and hands the outputs to the `Store`. The store keeps, per
chain, the few fields the list shows and sorts on (`Row`), and writes the chain's whole summary (the
JSON report's chain object) and every finding to an anonymous temporary file, read back only for the
chain or finding on the screen and when a filter is applied. A message's raw bytes are not kept at
all: the store remembers where its record is in the recording and reads it again when asked.

Everything a row holds that came from the traffic is `printable` already; the view still shows it as
text, never as markup (ui/app.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import threading
import time
from array import array
from bisect import bisect_right
from itertools import compress
from typing import Any, Callable, Iterable, Protocol

from ..analysis import Analysis
from ..config import Config
from ..core.events import HttpBody, HttpRequest, HttpResponse, SseEvent, StdioLine
from ..core.findings import RANK, SEVERITIES, Finding
from ..core.hops import HopsCorrelated
from ..core.inspector import ChainEvent
from ..core.messages import Message
from ..outputs.text import printable
from ..recording import format as fmt
from ..recording.reader import Follower

SEVERITY = {v: k for k, v in RANK.items()}  # 3 → error
POLL_SECONDS = 0.2  # --follow: how often the recordings are looked at again


class Query(Protocol):
    """A parsed filter expression (filter.py: `parse(text)`)."""

    def matches(self, chain: dict, findings: list[dict], session: str | None = None) -> bool: ...

    def matches_finding(self, finding: dict, chain: dict | None = None, session: str | None = None) -> bool: ...


class Row:
    """One chain as the list shows it. `where`: its summary's place in the spool (None while it is
    open: `live` holds the summary then)."""

    __slots__ = ("seq", "method", "target", "outcome", "rounds", "duration_ms", "waited_ms", "worst",
                 "worst_rule", "nfind", "hop", "session", "where", "live", "findings")

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.worst = 0
        self.worst_rule = ""
        self.nfind = 0
        self.where: int | None = None
        self.live: dict | None = None
        self.findings: array | None = None  # the indexes of its findings

    @property
    def id(self) -> str:
        return f"c{self.seq}"


def waited_ms(c: dict) -> float:
    """The time the chain waited for the user (outputs.text.chain_line's sum)."""
    return (sum(e.get("wait_ms", 0) for e in c.get("timeline", ()))
            + sum(r.get("unanswered_ms", 0) + r.get("wait_ms", 0) for r in c.get("round_details", ())))


class _Spool:
    """JSON documents appended to an anonymous temporary file (random name, O_EXCL, unlinked at
    once), read back by place from any thread (`pread`)."""

    def __init__(self) -> None:
        self._f = tempfile.TemporaryFile(prefix="mrtr-inspect-ui-")
        self._fd = self._f.fileno()
        self._size = 0
        self._pending = bytearray()
        self._lock = threading.Lock()

    def add(self, doc: Any) -> int:
        """Append `doc`; its place (offset and length in one int: one object per row, not three)."""
        data = json.dumps(doc, default=str).encode("ascii")  # lone surrogates kept as escapes
        with self._lock:
            where = (self._size + len(self._pending)) << 32 | len(data)
            self._pending += data
        return where

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                os.write(self._fd, self._pending)  # the file ends where its offset is: appended
                self._size += len(self._pending)
                self._pending.clear()

    def get(self, where: int) -> Any:
        off, n = where >> 32, where & 0xFFFFFFFF
        with self._lock:
            if off >= self._size:
                data = bytes(self._pending[off - self._size: off - self._size + n])
            else:
                data = os.pread(self._fd, n, off)
        return json.loads(data)

    def close(self) -> None:
        self._f.close()


_INTERN: dict[str, str] = {}


def _short(value: Any, n: int = 120) -> str:
    """A field from the traffic as a row keeps it: printable, at most `n` characters, one copy for
    the many rows that share it (tool names, methods, sessions)."""
    s = printable(value if isinstance(value, str) else "" if value is None else str(value))
    if len(s) > n:
        s = s[: n - 1] + "…"
    if len(_INTERN) < 50_000:
        return _INTERN.setdefault(s, s)
    return s


class Store:
    """Rows of chains and findings, the filter's verdicts, the places of messages; fed from the
    analysis thread (`ingest`), read from the view's thread. `generation` grows with every change."""

    def __init__(self, inputs: Iterable[str] = ()) -> None:
        self.inputs = [str(p) for p in inputs]
        self._lock = threading.RLock()
        self._chains = _Spool()
        self._findings = _Spool()
        self.rows: list[Row | None] = [None]  # by chain number (c1 is rows[1])
        self.count = 0  # chains shown (rows that exist)
        self.messages = 0
        self.severity = {s: 0 for s in SEVERITIES}
        self.sessions: dict[str, int] = {}
        self.hop_names: dict[str, int] = {}
        self.hops: list[dict] | None = None
        self.notes: list[str] = []
        self.said: list[str] = []  # what the proxy said (its --ui): the view shows the last line
        self.status = "reading"  # reading, following, done, failed: …
        # findings: severity rank, rule, chain number (0: none), place in the spool
        self.f_rank = array("b")
        self.f_chain = array("i")
        self.f_where = array("q")
        self.f_rule: list[str] = []
        self._orphans: dict[int, list[int]] = {}  # findings of a chain that has no row yet
        # where each message's record is: the first message index of a record, its input, offset, length
        self.m_first = array("q")
        self.m_input = array("H")
        self.m_off = array("q")
        self.m_len = array("i")
        self.readers: list[Follower] = []
        # the query: the filter's verdicts (1: matches) and the pickers
        self.query: Query | None = None
        self.session: str | None = None
        self.hop: str | None = None
        # one byte per chain number and per finding: 1 where it matches the filter, and where the
        # pickers keep it; what is listed is where both are 1 (`_positions`: no Python loop per row)
        self._cmatch = bytearray(1)
        self._cpick = bytearray(1)
        self._fmatch = bytearray()
        self._fpick = bytearray()
        self._query_gen = 0
        self.filtering: tuple[int, int] | None = None  # (done, of) while a filter is applied
        self.generation = 0
        self._visible: tuple[int, array] | None = None
        self._visible_findings: tuple[int, array] | None = None

    # -- from the analysis thread -----------------------------------------------------------------
    def ingest(self, outs: list, place: tuple[int, int, int] | None = None, live: bool = False) -> None:
        """The outputs of one record (`place`: its input, offset and length) or of the end. `live`:
        open chains get a row too (--follow, once the recordings were read up to their end)."""
        with self._lock:
            first = True
            for out in outs:
                t = type(out)
                if t is Message:
                    self.messages += 1
                    if first and place is not None:
                        first = False
                        self.m_first.append(out.index)
                        self.m_input.append(place[0])
                        self.m_off.append(place[1])
                        self.m_len.append(place[2])
                elif t is ChainEvent:
                    if out.kind == "closed":
                        self._chain(out.chain.summary(), out.chain.session, closed=True)
                    elif live:
                        self._chain(out.chain.summary(), out.chain.session, closed=False)
                elif t is Finding:
                    self._finding(out)
                elif t is HopsCorrelated:
                    self.hops = out.entries()
            self.generation += 1

    def open_chains(self, chains: Iterable) -> None:
        """Rows for the chains still open when the recordings were first read to their end (--follow)."""
        with self._lock:
            for c in chains:
                self._chain(c.summary(), c.session, closed=False)
            self.generation += 1

    def flush(self) -> None:
        self._chains.flush()
        self._findings.flush()

    def _chain(self, c: dict, session: str, closed: bool) -> None:
        seq = int(c["id"][1:])
        rows = self.rows
        if seq >= len(rows):
            rows.extend([None] * (seq + 1 - len(rows)))
            self._cmatch.extend(bytes(seq + 1 - len(self._cmatch)))
            self._cpick.extend(bytes(seq + 1 - len(self._cpick)))
        row = rows[seq]
        if row is None:
            row = rows[seq] = Row(seq)
            self.count += 1
            row.method = _short(c.get("method"))
            row.target = _short(c.get("target"))
            row.session = _short(session, 64)
            row.hop = _short(c.get("hop")) if c.get("hop") is not None else ""
            self.sessions[row.session] = self.sessions.get(row.session, 0) + 1
            if row.hop:
                self.hop_names[row.hop] = self.hop_names.get(row.hop, 0) + 1
            self._cpick[seq] = self._picked(row)
            if seq in self._orphans:
                for i in self._orphans.pop(seq):
                    self._attach(row, i)
                    self._fpick[i] = self._cpick[seq]
                    if self.query is not None:  # judged without its chain when it came
                        self._fmatch[i] = _safe(self.query.matches_finding, self.finding(i), c, row.session)
        row.outcome = _short(c.get("outcome"))
        row.rounds = c.get("rounds", 0)
        row.duration_ms = c.get("duration_ms") or 0.0
        row.waited_ms = waited_ms(c)
        if closed:
            row.where, row.live = self._chains.add(c), None
        else:
            row.live = c
        self._judge(row, c)

    def _finding(self, f: Finding) -> None:
        i = len(self.f_where)
        d = f.to_json()
        rank = RANK.get(f.severity, 0)
        self.severity[f.severity] = self.severity.get(f.severity, 0) + 1
        seq = int(f.chain[1:]) if isinstance(f.chain, str) and f.chain[1:].isdigit() else 0
        self.f_rank.append(rank)
        self.f_chain.append(seq)
        self.f_where.append(self._findings.add(d))
        self.f_rule.append(_short(f.rule))
        q = self.query
        row = self.rows[seq] if 0 < seq < len(self.rows) else None
        self._fmatch.append(1 if q is None else _safe(q.matches_finding, d, *self._about(row)))
        self._fpick.append(1 if self.session is None and self.hop is None else
                           self._cpick[seq] if row is not None else 0)
        if seq:
            if row is None:
                self._orphans.setdefault(seq, []).append(i)
            else:
                self._attach(row, i)
                if self.query is not None:
                    self._judge(row)

    def _attach(self, row: Row, i: int) -> None:
        if row.findings is None:
            row.findings = array("i")
        row.findings.append(i)
        row.nfind += 1
        if self.f_rank[i] > row.worst:
            row.worst, row.worst_rule = self.f_rank[i], self.f_rule[i]

    def _judge(self, row: Row, c: dict | None = None) -> None:
        q = self.query
        if q is None:
            self._cmatch[row.seq] = 1
            return
        if c is None:
            c = self.chain(row.seq)
        self._cmatch[row.seq] = _safe(q.matches, c, self.findings_of(row.seq), row.session)

    def _about(self, row: Row | None) -> tuple[dict | None, str | None]:
        """A finding's chain and session, for the filter's chain terms."""
        return (self.chain(row.seq), row.session) if row is not None else (None, None)

    # -- from the view's thread -------------------------------------------------------------------
    def row(self, seq: int) -> Row | None:
        return self.rows[seq] if 0 < seq < len(self.rows) else None

    def chain(self, seq: int) -> dict:
        """The chain's summary, as the JSON report has it."""
        row = self.rows[seq]
        assert row is not None
        live, where = row.live, row.where
        if live is not None:
            return live
        assert where is not None
        return self._chains.get(where)

    def findings_of(self, seq: int) -> list[dict]:
        row = self.rows[seq]
        return [self.finding(i) for i in (row.findings or ())] if row is not None else []

    def finding(self, i: int) -> dict:
        return self._findings.get(self.f_where[i])

    def raw(self, index: int) -> tuple[str, bytes] | None:
        """The record that carried message `index`: what it was (one line) and its payload's bytes
        as they crossed the wire; None when the message's place is not known."""
        with self._lock:
            k = bisect_right(self.m_first, index) - 1
            if k < 0:
                return None
            where = (self.m_input[k], self.m_off[k], self.m_len[k])
        reader = self.readers[where[0]] if where[0] < len(self.readers) else None
        if reader is None:
            return None
        try:
            frame = fmt.decode(reader.record(where[1], where[2]))
        except (OSError, fmt.FormatError):
            return None
        t = type(frame)
        src = f"{os.path.basename(self.inputs[where[0]])}, byte {where[1]}"
        if t is StdioLine:
            return f"stdio line, {frame.direction}, session {frame.session} ({src})", frame.data
        if t is HttpRequest:
            return f"HTTP {frame.method} {frame.path}, request body, session {frame.session} ({src})", frame.body
        if t is SseEvent:
            return f"HTTP response event (SSE), exchange {frame.exchange}, session {frame.session} ({src})", frame.raw
        if t is HttpBody:
            return f"HTTP response body, exchange {frame.exchange}, session {frame.session} ({src})", frame.data
        if t is HttpResponse:  # pragma: no cover - a response head carries no message
            return f"HTTP response {frame.status} ({src})", b""
        return f"{t.__name__} ({src})", b""

    def set_query(self, query: Query | None, session: str | None = None, hop: str | None = None) -> None:
        """Show only what `query` matches (None: everything), of that session and hop. The chains
        already there are judged again in a thread of its own (`filtering` says how far it is)."""
        with self._lock:
            if (session, hop) != (self.session, self.hop):
                self.session, self.hop = session, hop
                rows, cpick, chain = self.rows, self._cpick, self.f_chain
                for r in rows:
                    if r is not None:
                        cpick[r.seq] = self._picked(r)
                self._fpick[:] = bytes(1 if session is None and hop is None else cpick[chain[i]] if chain[i] else 0
                                       for i in range(len(chain)))
            self.query = query
            self._query_gen += 1
            gen = self._query_gen
            seqs = [r.seq for r in self.rows if r is not None]
            nf = len(self.f_where)
            if query is None:
                for s in seqs:
                    self._cmatch[s] = 1
                self._fmatch[:nf] = b"\1" * nf
                self.filtering = None
                self.generation += 1
                return
            self._cmatch[:] = bytes(len(self._cmatch))
            self._fmatch[:nf] = bytes(nf)
            self.filtering = (0, len(seqs) + nf)
            self.generation += 1
        threading.Thread(target=self._refilter, args=(gen, query, seqs, nf), daemon=True,
                         name="mrtr-inspect-ui-filter").start()

    def _refilter(self, gen: int, query: Query, seqs: list[int], nf: int) -> None:
        total = len(seqs) + nf
        for n, s in enumerate(seqs):
            if self._query_gen != gen:
                return
            row = self.rows[s]
            ok = _safe(query.matches, self.chain(s), self.findings_of(s), row.session if row else None)
            with self._lock:
                if self._query_gen != gen:
                    return
                self._cmatch[s] = ok
                if n % 512 == 0:
                    self.filtering = (n, total)
                    self.generation += 1
        for i in range(nf):
            if self._query_gen != gen:
                return
            seq = self.f_chain[i]
            ok = _safe(query.matches_finding, self.finding(i), *self._about(self.row(seq)))
            with self._lock:
                if self._query_gen != gen:
                    return
                self._fmatch[i] = ok
                if i % 512 == 0:
                    self.filtering = (len(seqs) + i, total)
                    self.generation += 1
        with self._lock:
            if self._query_gen == gen:
                self.filtering = None
                self.generation += 1

    def _picked(self, row: Row) -> bool:
        return (self.session is None or row.session == self.session) and (self.hop is None or row.hop == self.hop)

    def visible(self) -> array:
        """The chain numbers to list, in order (rebuilt only after a change)."""
        with self._lock:
            gen = self.generation
            if self._visible is not None and self._visible[0] == gen:
                return self._visible[1]
            a, b = bytes(self._cmatch), bytes(self._cpick)
        out = _positions(a, b)  # without the lock: the analysis goes on meanwhile
        self._visible = (gen, out)
        return out

    def visible_findings(self) -> array:
        with self._lock:
            gen = self.generation
            if self._visible_findings is not None and self._visible_findings[0] == gen:
                return self._visible_findings[1]
            a, b = bytes(self._fmatch), bytes(self._fpick)
        out = _positions(a, b)
        self._visible_findings = (gen, out)
        return out

    def close(self) -> None:
        self._query_gen += 1
        for r in self.readers:
            r.close()
        self._chains.close()
        self._findings.close()


def _positions(a: bytes, b: bytes) -> array:
    """Where both `a` and `b` (bytes of 0 and 1) hold 1, in order (in C: 100,000 in a few ms)."""
    n = min(len(a), len(b))
    both = (int.from_bytes(a[:n], "little") & int.from_bytes(b[:n], "little")).to_bytes(n, "little")
    return array("i", compress(range(n), both))


def _safe(fn: Callable[..., bool], *args: Any) -> int:
    """A filter's verdict; one that fails on a chain (a bug) does not stop the view: no match."""
    try:
        return 1 if fn(*args) else 0
    except Exception:  # noqa: BLE001
        return 0


class Feeder:
    """The analysis thread: reads the recordings (to their end, or on and on with `follow`), feeds
    the core, hands the outputs to the store. A session id met again in a later input is analysed
    apart, as `ID~N` (adapters/offline.py: the same rule as `check`)."""

    def __init__(self, store: Store, config: Config | None = None, follow: bool = False) -> None:
        self.store = store
        self.config = config or Config()
        self.follow = follow
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="mrtr-inspect-ui-analysis")

    def open(self) -> None:
        """Open the recordings (UnreadableRecording for one that cannot be), before the view starts."""
        limit = self.config.max_message_bytes
        self.store.readers = [Follower(p, limit) for p in self.store.inputs]

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        store = self.store
        try:
            analysis = Analysis(self.config)
            live = False
            aliases = _Aliases(len(store.readers))
            while not self.stop.is_set():
                got = 0
                for n, reader in enumerate(store.readers):
                    for off, size, item in reader.poll():
                        item = aliases.item(n, item)
                        outs = analysis.feed_line(*item) if type(item) is tuple else analysis.feed(item)
                        if outs:
                            store.ingest(outs, (n, off, size), live)
                        got += 1
                        if got % 2048 == 0:
                            store.flush()
                            if self.stop.is_set():
                                return
                store.flush()
                if not self.follow:
                    store.ingest(analysis.close())
                    break
                if not live:  # read to the end: the chains still open get their rows, and come live
                    live = True
                    store.open_chains(analysis.open_chains)
                    store.status = "following"
                if not got:
                    self.stop.wait(POLL_SECONDS)
            for n, reader in enumerate(store.readers):
                store.notes.extend(reader.notes.lines(store.inputs[n]))
            store.flush()
            if store.status == "reading":
                store.status = "done"
        except BaseException as e:  # noqa: BLE001 - the view says it; the thread must not die silently
            self.error = e
            store.status = f"failed: {type(e).__name__}: {e}"
        finally:
            store.generation += 1


class _Aliases:
    """`frames_of`'s renaming (adapters/offline.py) as the inputs are polled: a session id an
    earlier input used is `ID~N` in input N (from 1)."""

    def __init__(self, inputs: int) -> None:
        self.seen: list[set[str]] = [set() for _ in range(inputs)]
        self.renamed: list[dict[str, str]] = [{} for _ in range(inputs)]

    def item(self, n: int, item: Any) -> Any:
        sid = item[1] if type(item) is tuple else getattr(item, "session", None)
        if sid is None or not n:
            if sid is not None:
                self.seen[0].add(sid)
            return item
        here = self.seen[n]
        if sid not in here:
            here.add(sid)
            if any(sid in s for s in self.seen[:n]):
                self.renamed[n][sid] = f"{sid}~{n + 1}"
        alias = self.renamed[n].get(sid)
        if alias is None:
            return item
        if type(item) is tuple:
            return (item[0], alias) + item[2:]
        return dataclasses.replace(item, session=alias)


def wait_done(store: Store, feeder: Feeder, timeout: float = 60.0) -> None:
    """For tests and benches: until the analysis read everything (`follow`: up to the end)."""
    end = time.monotonic() + timeout
    while store.status == "reading" and feeder.thread.is_alive() and time.monotonic() < end:
        time.sleep(0.01)
