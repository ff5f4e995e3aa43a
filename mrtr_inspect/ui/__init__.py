"""The terminal view (`mrtr-inspect ui`, the proxy's `--ui`; docs/ui.md): textual, imported only here."""

from __future__ import annotations

from typing import Callable, Iterable

from ..config import Config

__all__ = ["run_ui", "filter_parser"]


def filter_parser() -> Callable | None:
    """The filter language's parser (text → query; raises FilterError naming the term), or None in a
    version without it."""
    try:
        from ..filter import parse
    except ImportError:
        return None
    return parse


def run_ui(paths: Iterable[str], *, follow: bool = False, filter_text: str = "", config: Config | None = None,
           parse: Callable | None = None, said: list[str] | None = None) -> int:
    """Show the recordings until the user quits (`q`): exit status 0. Raises UnreadableRecording
    (a UserError) for an input that is not a recording, before the screen is taken."""
    from .app import InspectApp
    from .store import Feeder, Store

    store = Store(paths)
    if said is not None:
        store.said = said
    feeder = Feeder(store, config, follow)
    try:
        feeder.open()
        app = InspectApp(store, feeder, parse, filter_text, config)
        code = app.run()
    finally:
        feeder.stop.set()
        if feeder.thread.ident is not None:
            feeder.thread.join(timeout=5)
        store.close()
    return code if isinstance(code, int) else 0
