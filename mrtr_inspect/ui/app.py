"""`mrtr-inspect ui`: the terminal view of recordings, on textual.

    ┌ filter bar ───────────────────────────────────────────────────────────────┐
    │ chains (or findings): a virtual list          │ the chain opened:         │
    │ c1 wizard  complete  2 rounds  5012 ms …      │ its rounds as a timeline, │
    │ …                                             │ findings, messages, bytes │
    └ footer: the keys ─────────────────────────────────────────────────────────┘

The lists draw only the rows on the screen (textual's line API), from the store's small rows
(ui/store.py); the analysis and the filter run in threads of their own, and the view looks at the
store a few times a second. Nothing from the traffic or a file is ever given to textual as markup:
every text is a rich `Text` (or a plain string in an `Input`), made `printable` first.
"""

from __future__ import annotations

import io
import os
from array import array
from typing import Callable

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from ..core.findings import Severity, plural, spec_url
from ..core.messages import format_id
from ..core.vocabulary import Outcome
from ..outputs.show import chain_tree
from ..outputs.text import SEV_STYLE, printable, printable_lines
from .store import SEVERITY, Feeder, Row, Store

REFRESH_SECONDS = 0.2
OUTCOME_STYLE = {Outcome.COMPLETE: "green", Outcome.ERROR: "red", Outcome.CANCELLED: "yellow", Outcome.ABANDONED: "yellow",
                 Outcome.TASK: "cyan", Outcome.OPEN: "magenta"}
#: (title, width) of the chain list's columns; the tool's takes what is left
COLUMNS = (("chain", 8), ("tool", 0), ("outcome", 10), ("rounds", 7), ("duration", 10), ("waited", 10),
           ("worst finding", 30), ("hop", 8))
RAW_LIMIT = 64 * 1024  # bytes of a message the raw pane shows (the rest is counted)


def _ms(v: float) -> str:
    return f"{v / 1000:.1f} s" if v >= 10_000 else f"{v:.0f} ms"


def _cell(text: str, width: int, style: str = "") -> Text:
    text = text if len(text) < width else text[: max(width - 2, 0)] + "…"
    return Text(text.ljust(width), style=style)


def chain_columns(width: int) -> list[int]:
    fixed = sum(w for _, w in COLUMNS)
    return [w or max(width - fixed, 12) for _, w in COLUMNS]


def chain_cells(row: Row, width: int) -> Text:
    """One row of the chain list (every field `printable` already: store._short)."""
    w = chain_columns(width)
    worst = f"{SEVERITY[row.worst]} {row.worst_rule}" if row.worst else ""
    if row.nfind > 1:
        worst += f" +{row.nfind - 1}"
    return Text.assemble(
        _cell(row.id, w[0], "bold"),
        _cell(row.target or row.method, w[1]),
        _cell(row.outcome, w[2], OUTCOME_STYLE.get(row.outcome, "")),
        _cell(str(row.rounds), w[3]),
        _cell(_ms(row.duration_ms), w[4]),
        _cell(_ms(row.waited_ms) if row.waited_ms else "", w[5], "dim"),
        _cell(worst, w[6], SEV_STYLE.get(SEVERITY.get(row.worst, ""), "")),
        _cell(row.hop, w[7], "cyan"),
    )


def chain_heading(width: int) -> Text:
    return Text.assemble(*(_cell(t, w, "bold underline") for (t, _), w in zip(COLUMNS, chain_columns(width))))


def findings_heading(width: int) -> Text:
    return Text.assemble(*(_cell(t, w, "bold underline") for t, w in (("severity", 9), ("rule", 40), ("chain", 8),
                                                                      ("message", 60))))


class Heading(Static):
    """The heading over the lists, drawn for the width it has when it is drawn: it stands in the same
    column as the lists, so its columns are those of their rows in the same frame (drawn at each tick,
    it could show the width of before a resize until the next tick)."""

    def __init__(self, make: Callable[[int], Text], **kw) -> None:
        super().__init__(**kw)
        self.make = make

    def render(self) -> Text:
        return self.make(self.size.width or 80)


class VirtualList(ScrollView, can_focus=True):
    """A list of any length that draws only the rows on the screen: `count()` rows, `line(i, width)`
    the text of row i. A cursor moves over them; Enter opens the row."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "First", show=False),
        Binding("end,G", "jump(-1)", "Last", show=False),
        Binding("enter", "open", "Open"),
    ]
    DEFAULT_CSS = """
    VirtualList { overflow-x: hidden; }
    VirtualList:focus { background-tint: $foreground 3%; }
    """

    class Highlighted(Message):
        def __init__(self, lst: "VirtualList", index: int) -> None:
            super().__init__()
            self.list, self.index = lst, index

    class Opened(Highlighted):
        pass

    def __init__(self, count: Callable[[], int], line: Callable[[int, int], Text], **kw) -> None:
        super().__init__(**kw)
        self.count, self.line = count, line
        self.cursor = 0
        self._n = 0

    def sync(self) -> None:
        """The number of rows may have changed: the scroll area follows, the cursor stays in it."""
        n = self.count()
        self._n = n
        self.virtual_size = Size(self.size.width, n)
        if self.cursor >= n:
            self.cursor = max(n - 1, 0)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        i = round(self.scroll_y) + y
        width = self.size.width
        if i >= self._n:
            return Strip.blank(width, self.rich_style)
        try:
            text = self.line(i, width)
        except IndexError:  # the rows changed under us; the next sync redraws
            return Strip.blank(width, self.rich_style)
        if i == self.cursor:
            text.stylize(Style(reverse=True) if self.has_focus else Style(underline=True))
        segments = list(text.render(self.app.console))
        return Strip(segments).adjust_cell_length(width, self.rich_style)

    def _show_cursor(self) -> None:
        h = max(self.size.height, 1)
        if self.cursor < self.scroll_y:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= self.scroll_y + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False)
        self.refresh()
        if self._n:
            self.post_message(self.Highlighted(self, self.cursor))

    def action_move(self, delta: int) -> None:
        self.cursor = min(max(self.cursor + delta, 0), max(self._n - 1, 0))
        self._show_cursor()

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.size.height - 1, 1))

    def action_jump(self, where: int) -> None:
        self.cursor = 0 if where == 0 else max(self._n - 1, 0)
        self._show_cursor()

    def action_open(self) -> None:
        if self._n:
            self.post_message(self.Opened(self, self.cursor))

    def on_click(self, event) -> None:
        i = round(self.scroll_y) + event.y
        if 0 <= i < self._n:
            self.cursor = i
            self._show_cursor()
            self.post_message(self.Opened(self, i))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


class FilterBar(Input):
    """The filter expression; its keys in the footer while it has the focus."""

    BINDINGS = [Binding("enter", "submit", "Apply the filter"), Binding("escape", "leave", "Back to the list")]

    def action_leave(self) -> None:
        self.app.action_back()


class Picker(ModalScreen[str | None]):
    """Choose a session or a hop (or all of them): returns the name, "" for all, None when cancelled."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    DEFAULT_CSS = """
    Picker { align: center middle; }
    Picker > Vertical { width: 70%; height: 60%; border: round $accent; background: $surface; }
    """

    def __init__(self, title: str, names: dict[str, int], noun: str) -> None:
        super().__init__()
        self.title_text, self.names, self.noun = title, names, noun

    def compose(self) -> ComposeResult:
        options = [Option(Text(f"all {self.noun}s"), id="all")]
        self._keys = list(self.names)
        options += [Option(Text(f"{name}  ({plural(n, 'chain')})"), id=f"k{i}") for i, (name, n) in
                    enumerate(self.names.items())]
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield OptionList(*options)

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        oid = event.option.id or "all"
        self.dismiss("" if oid == "all" else self._keys[int(oid[1:])])


class Ask(ModalScreen[str | None]):
    """One line asked of the user (where to export): the text, or None when cancelled."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    DEFAULT_CSS = """
    Ask { align: center middle; }
    Ask > Vertical { width: 80%; height: auto; border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, prompt: str, value: str) -> None:
        super().__init__()
        self.prompt, self.value = prompt, value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.prompt))
            yield Input(value=self.value, id="ask")

    @on(Input.Submitted)
    def done(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class InspectApp(App[int]):
    """The view of a `Store` that a `Feeder` fills. `parse`: the filter language's parser (text →
    query; raises with a one-line message), None when there is none."""

    TITLE = "mrtr-inspect"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #top { height: 1; }
    #filter { height: 3; }
    #main { height: 1fr; }
    #left { width: 3fr; }
    #heading { height: 1; }
    #chains, #findings { height: 1fr; }
    #right { width: 2fr; min-width: 50; border-left: solid $accent; }
    #detail { height: 2fr; }
    #messages { height: 1fr; max-height: 12; }
    #raw { height: 1fr; border-top: solid $accent; }
    .hidden { display: none; }
    """
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("f", "toggle_findings", "Findings/chains"),
        Binding("s", "pick_session", "Session"),
        Binding("h", "pick_hop", "Hop"),
        Binding("r", "raw", "Raw bytes"),
        Binding("x", "export('fixture')", "Export fixture"),
        Binding("m", "export('mermaid')", "Export Mermaid"),
        Binding("escape", "back", "Back", show=False),
        Binding("tab", "focus_next", "Next pane", show=False),
        Binding("q", "quit_view", "Quit"),
        Binding("ctrl+c", "quit_view", "Quit", show=False, priority=True),
    ]

    def __init__(self, store: Store, feeder: Feeder | None = None, parse: Callable | None = None,
                 filter_text: str = "", export_config=None) -> None:
        super().__init__()
        self.store, self.feeder, self.parse = store, feeder, parse
        self.filter_text = filter_text
        self.export_config = export_config
        self.opened: int | None = None  # the chain in the detail pane
        self.showing_findings = False
        self._seen_generation = -1
        self._problem = ""  # the filter's complaint
        self._messages: list[tuple[int, str]] = []
        self._rows_view = self._findings_view = array("i")
        self._said = 0

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="top")
        yield FilterBar(value=self.filter_text, placeholder="filter: tool:NAME severity:error id:17 rounds>1 … "
                    "(Enter applies, Esc leaves)", id="filter")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Heading(lambda width: findings_heading(width) if self.showing_findings else chain_heading(width),
                              id="heading")
                yield VirtualList(self._chain_count, self._chain_line, id="chains")
                yield VirtualList(self._finding_count, self._finding_line, id="findings", classes="hidden")
            with Vertical(id="right"):
                with VerticalScroll(id="detail"):
                    yield Static(Text("Enter opens the chain under the cursor.", style="dim"), id="tree")
                yield OptionList(id="messages")
                with VerticalScroll(id="raw"):
                    yield Static(Text(""), id="rawtext")
        yield Footer()

    def on_mount(self) -> None:
        if self.filter_text:
            self._apply_filter(self.filter_text)
        if self.feeder is not None and not self.feeder.thread.is_alive() and self.feeder.thread.ident is None:
            self.feeder.start()
        self.set_interval(REFRESH_SECONDS, self._tick)
        self._tick()
        self.query_one("#chains").focus()

    # -- the store, a few times a second ----------------------------------------------------------
    def _tick(self) -> None:
        store = self.store
        if store.generation == self._seen_generation and len(store.said) == self._said:
            return
        self._said = len(store.said)
        # what the lists show until the next tick (the list not on the screen is left as it was)
        if self.showing_findings:
            self._findings_view = store.visible_findings()
        else:
            self._rows_view = store.visible()
        self._seen_generation = store.generation
        self.query_one("#chains", VirtualList).sync()
        self.query_one("#findings", VirtualList).sync()
        self.query_one("#heading", Heading).refresh()
        self.query_one("#top", Static).update(self._status())
        if self.opened is not None and (row := store.row(self.opened)) is not None and row.live is not None:
            self._open(self.opened)  # an open chain moves on (--follow)

    def _status(self) -> Text:
        s = self.store
        shown = len(self._findings_view if self.showing_findings else self._rows_view)
        t = Text()
        t.append("mrtr-inspect ", style="bold")
        t.append(printable(", ".join(os.path.basename(p) for p in s.inputs)), style="cyan")
        t.append(f"  {plural(s.count, 'chain')}, {plural(s.messages, 'message')}, ")
        t.append(plural(s.severity[Severity.ERROR], 'error'), style="red" if s.severity[Severity.ERROR] else "")
        t.append(f", {plural(s.severity[Severity.WARNING], 'warning')}, {plural(s.severity[Severity.INFO], 'info')}")
        what = "findings" if self.showing_findings else "chains"
        t.append(f"  showing {shown} {what}")
        if s.session is not None:
            t.append(printable(f"  session {s.session}"), style="yellow")
        if s.hop is not None:
            t.append(printable(f"  hop {s.hop}"), style="yellow")
        if s.filtering is not None:
            t.append(f"  filtering {s.filtering[0]}/{s.filtering[1]}…", style="yellow")
        t.append(f"  [{s.status}]" if s.status != "done" else "", style="dim" if not s.status.startswith("failed")
                 else "red")
        if self._problem:
            t.append("  " + printable(self._problem), style="bold red")
        if s.said:
            t.append("  " + printable(s.said[-1].rstrip("\n").removeprefix("mrtr-inspect: ")), style="dim")
        return t

    # -- the lists --------------------------------------------------------------------------------
    def _chain_count(self) -> int:
        return len(self._rows_view)

    def _chain_line(self, i: int, width: int) -> Text:
        row = self.store.rows[self._rows_view[i]]
        assert row is not None
        return chain_cells(row, width)

    def _finding_count(self) -> int:
        return len(self._findings_view)

    def _finding_line(self, i: int, width: int) -> Text:
        s = self.store
        k = self._findings_view[i]
        sev = SEVERITY.get(s.f_rank[k], "?")
        chain = f"c{s.f_chain[k]}" if s.f_chain[k] else "-"
        message = printable(s.finding(k).get("message"))
        return Text.assemble(_cell(sev, 9, SEV_STYLE.get(sev, "")), _cell(s.f_rule[k], 40, "bold"),
                             _cell(chain, 8), Text(message[:width]))

    @on(VirtualList.Highlighted)
    def highlighted(self, event: VirtualList.Highlighted) -> None:
        pass  # the detail follows Enter, not every step of the cursor (100,000 rows scroll fast)

    @on(VirtualList.Opened)
    def opened_row(self, event: VirtualList.Opened) -> None:
        s = self.store
        if event.list.id == "chains":
            seq = self._rows_view[event.index]
        else:
            k = self._findings_view[event.index]
            seq = s.f_chain[k]
            if not seq or s.row(seq) is None:
                self._show_finding(k)
                return
        self._open(seq)

    def _open(self, seq: int) -> None:
        """The chain in the detail pane: its rounds as a timeline (questions, answers, requestState
        digests), its findings with their spec links, and its messages, whose bytes `r` shows."""
        s = self.store
        self.opened = seq
        c = s.chain(seq)
        findings = s.findings_of(seq)
        parts: list = [chain_tree(c)]
        if (row := s.row(seq)) is not None:
            parts.append(Text(printable(f"session {row.session}" + (f", hop {row.hop}" if row.hop else "")
                                        + f", peer {c.get('peer')}, era {c.get('era')}"), style="dim"))
        if findings:
            parts.append(Text("\nfindings", style="bold"))
            parts += [self._finding_text(f) for f in findings]
        else:
            parts.append(Text("\nno findings", style="dim"))
        self.query_one("#tree", Static).update(Group(*parts))
        self._messages = _messages_of(c)
        ol = self.query_one("#messages", OptionList)
        ol.clear_options()
        ol.add_options([Option(Text(printable(f"#{m}  {role}")), id=f"m{m}") for m, role in self._messages])
        self.query_one("#rawtext", Static).update(Text("r (or Enter on a message) shows its raw bytes", style="dim"))

    @staticmethod
    def _finding_text(f: dict) -> Text:
        sev = f.get("severity", "")
        t = Text()
        t.append(f"{sev:<8}", style=SEV_STYLE.get(sev, ""))
        t.append(printable(f.get("rule")), style="bold")
        msgs = f.get("messages") or []
        if msgs:
            t.append(" [" + ",".join(f"#{m}" for m in msgs) + "]", style="dim")
        t.append(" " + printable(f.get("message")))
        url = spec_url(f.get("spec"))
        if url:
            t.append("\n        ")
            t.append(printable(url), style=Style(underline=True, link=url if url.isascii() else None))
        return t

    def _show_finding(self, k: int) -> None:
        self.opened = None
        self.query_one("#tree", Static).update(self._finding_text(self.store.finding(k)))
        self.query_one("#messages", OptionList).clear_options()
        self._messages = []

    @on(OptionList.OptionSelected, "#messages")
    def message_chosen(self, event: OptionList.OptionSelected) -> None:
        self._show_raw(int((event.option.id or "m0")[1:]))

    @on(OptionList.OptionHighlighted, "#messages")
    def message_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_raw(int((event.option.id or "m0")[1:]))

    def _show_raw(self, index: int) -> None:
        got = self.store.raw(index)
        out = self.query_one("#rawtext", Static)
        if got is None:
            out.update(Text(f"message #{index}: its record is not known", style="dim"))
            return
        what, data = got
        body = data[:RAW_LIMIT].decode("utf-8", "backslashreplace")
        t = Text()
        t.append(printable(f"message #{index}: {what}, {plural(len(data), 'byte')}"), style="bold")
        t.append("\n" + printable_lines(body))
        if len(data) > RAW_LIMIT:
            t.append(f"\n… {len(data) - RAW_LIMIT} more bytes", style="dim")
        out.update(t)

    # -- actions ----------------------------------------------------------------------------------
    def action_filter(self) -> None:
        bar = self.query_one("#filter", FilterBar)
        bar.focus()
        bar.select_all()  # what is typed replaces the expression; an arrow key keeps it

    @on(Input.Submitted, "#filter")
    def filter_submitted(self, event: Input.Submitted) -> None:
        self._apply_filter(event.value)
        self._current_list().focus()

    def _apply_filter(self, text: str) -> None:
        s = self.store
        self._problem = ""
        query = None
        if text.strip():
            if self.parse is None:
                self._problem = "the filter language is not available in this version"
            else:
                try:
                    query = self.parse(text)
                except Exception as e:  # noqa: BLE001 - FilterError: one line, naming the term
                    self._problem = str(e).splitlines()[0] if str(e) else type(e).__name__
                    self._seen_generation = -1
                    self._tick()
                    return
        self.filter_text = text
        s.set_query(query, s.session, s.hop)
        self._tick()

    def _current_list(self) -> VirtualList:
        return self.query_one("#findings" if self.showing_findings else "#chains", VirtualList)

    def action_toggle_findings(self) -> None:
        self.showing_findings = not self.showing_findings
        self.query_one("#chains").set_class(self.showing_findings, "hidden")
        self.query_one("#findings").set_class(not self.showing_findings, "hidden")
        self._seen_generation = -1
        self._tick()
        self._current_list().focus()

    def action_back(self) -> None:
        self._current_list().focus()

    def _pick(self, what: str) -> None:
        s = self.store
        names = dict(s.sessions if what == "session" else s.hop_names)
        if not names:
            self.notify(f"no {what}s named in these recordings" if what == "hop" else "no sessions yet",
                        markup=False)
            return

        def chosen(name: str | None) -> None:
            if name is None:
                return
            value = name or None
            s.set_query(s.query, value if what == "session" else s.session, value if what == "hop" else s.hop)
            self._tick()

        self.push_screen(Picker(f"Show the chains of one {what}", names, what), chosen)

    def action_pick_session(self) -> None:
        self._pick("session")

    def action_pick_hop(self) -> None:
        self._pick("hop")

    def action_raw(self) -> None:
        if self._messages:
            ol = self.query_one("#messages", OptionList)
            ol.focus()
            if ol.highlighted is None:
                ol.highlighted = 0
            self._show_raw(self._messages[ol.highlighted or 0][0])

    def action_export(self, to: str) -> None:
        if self.opened is None:
            self.notify("open a chain first (Enter)", markup=False)
            return
        seq = self.opened
        default = f"c{seq}.jsonl" if to == "fixture" else f"c{seq}.md"

        def chosen(path: str | None) -> None:
            if path:
                self._export(to, seq, path)

        self.push_screen(Ask(f"Export chain c{seq} as a {to} to:", default), chosen)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, to: str, seq: int, path: str) -> None:
        from .export import export_chain

        try:
            lines = export_chain(self.store, seq, to, path, self.export_config)
        except Exception as e:  # noqa: BLE001 - UserError: its one-line reason
            self.call_from_thread(self.notify, printable(str(e)), severity="error", markup=False)
            return
        self.call_from_thread(self.notify, printable("; ".join(lines)), markup=False)

    def action_quit_view(self) -> None:
        self.exit(0)


def _messages_of(c: dict) -> list[tuple[int, str]]:
    """The chain's messages in order, each with its part in it."""
    out: list[tuple[int, str]] = []
    rounds = {r["message"]: r for r in c.get("round_details") or ()}
    for e in c.get("timeline") or ():
        n = e.get("retries_round")
        out.append((e["message"], f"→ {'retry of round ' + str(n) if n else 'request'} id {format_id(e['id'])}"))
        rm = e.get("response_message")
        if rm is not None:
            what = f"input_required, round {rounds[rm]['round']}" if rm in rounds else str(e.get("response"))
            out.append((rm, f"← {what}"))
    for r in c.get("round_details") or ():
        if "server_request" in r:
            out.append((r["message"], f"← server asks, round {r['round']}"))
            if r.get("response_message") is not None:
                out.append((r["response_message"], f"→ the client's answer, round {r['round']}"))
    return sorted(out)


def screen_text(app: App) -> str:
    """The screen as plain text (the snapshot tests' form of it)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      color_system=None, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True))
    return "\n".join(line.rstrip() for line in console.export_text(styles=False).splitlines())
