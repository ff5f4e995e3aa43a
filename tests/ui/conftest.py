"""The view driven by textual's pilot (`App.run_test`), and its screens compared with snapshots.

A snapshot is the screen as plain text (ui.app.screen_text) in tests/ui/snapshots/NAME.txt; with
MRTR_UPDATE_SNAPSHOTS=1 the tests write them anew instead of comparing (then review the diff)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from mrtr_inspect.ui import filter_parser
from mrtr_inspect.ui.app import InspectApp, screen_text
from mrtr_inspect.ui.store import Feeder, Store, wait_done

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZE = (160, 40)


class Session:
    """An app under the pilot, with the store it shows."""

    def __init__(self, app: InspectApp, pilot, store: Store, feeder: Feeder) -> None:
        self.app, self.pilot, self.store, self.feeder = app, pilot, store, feeder

    @property
    def screen(self) -> str:
        return screen_text(self.app)

    async def settle(self) -> None:
        """Until the view shows what the store holds (the store's generation, the filter's end)."""
        for _ in range(200):
            await self.pilot.pause(0.05)
            if self.store.filtering is None and self.app._seen_generation == self.store.generation:
                await self.pilot.pause(0.05)
                return
        raise AssertionError("the view did not catch up with the store")

    async def until(self, what: Callable[[], bool], timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not what():
            if time.monotonic() > end:
                raise AssertionError(f"not reached in {timeout} s; the screen:\n{self.screen}")
            await self.pilot.pause(0.05)

    async def type(self, text: str) -> None:
        await self.pilot.press(*["space" if c == " " else c for c in text])


def drive(paths: list[Path], steps: Callable[[Session], Awaitable[None]], follow: bool = False,
          filter_text: str = "", size: tuple[int, int] = SIZE) -> InspectApp:
    """Run the view on `paths` under the pilot, do `steps`, return the app (its return_value: the
    exit status)."""

    async def main() -> InspectApp:
        store = Store([str(p) for p in paths])
        feeder = Feeder(store, follow=follow)
        feeder.open()
        app = InspectApp(store, feeder, filter_parser(), filter_text)
        try:
            async with app.run_test(size=size) as pilot:
                wait_done(store, feeder)
                s = Session(app, pilot, store, feeder)
                await s.settle()
                await steps(s)
        finally:
            feeder.stop.set()
            feeder.thread.join(timeout=5)
            store.close()
        return app

    return asyncio.run(main())


def snapshot(name: str, text: str) -> None:
    """Compare the screen with tests/ui/snapshots/NAME.txt (or write it: MRTR_UPDATE_SNAPSHOTS=1)."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("MRTR_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        if not os.environ.get("MRTR_UPDATE_SNAPSHOTS") and os.environ.get("CI"):
            pytest.fail(f"no snapshot {path.name}: run with MRTR_UPDATE_SNAPSHOTS=1 and commit it")
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8").rstrip("\n")
    assert text == expected, f"the screen differs from {path.name} (MRTR_UPDATE_SNAPSHOTS=1 rewrites it):\n{text}"


def detail(app: InspectApp) -> str:
    """The detail pane's whole text (not only what fits on the screen), unwrapped."""
    import io

    from rich.console import Console

    console = Console(width=400, file=io.StringIO(), record=True, color_system=None)
    console.print(app.query_one("#tree").content)
    return console.export_text(styles=False)
