"""Make the screenshots of docs/ui.md: the view driven by textual's pilot over the tests' sample
recording (tests/ui/recordings.py), saved as SVG by textual, then as PNG (the README shows those)
by cairosvg when it is installed, else by headless Chromium when it is on PATH.

    python docs/ui_screenshots.py            # writes docs/ui-*.svg and docs/ui-*.png
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mrtr_inspect.filter import parse  # noqa: E402
from mrtr_inspect.ui.app import InspectApp  # noqa: E402
from mrtr_inspect.ui.store import Feeder, Store, wait_done  # noqa: E402
from tests.ui.recordings import sample  # noqa: E402

SIZE = (160, 42)


async def shoot(rec: Path, out: Path) -> list[Path]:
    store = Store([str(rec)])
    feeder = Feeder(store)
    feeder.open()
    app = InspectApp(store, feeder, parse)
    shots: list[Path] = []

    async def save(name: str) -> None:
        await pilot.pause(0.5)
        path = out / f"ui-{name}.svg"
        path.write_text(app.export_screenshot(title="mrtr-inspect ui"), encoding="utf-8")
        shots.append(path)

    async with app.run_test(size=SIZE) as pilot:
        wait_done(store, feeder)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await save("chain")
        await pilot.press("slash", *"severity:error", "enter")
        await pilot.pause(0.5)
        await pilot.press("enter", "r", "down", "down")
        await save("raw")
        await pilot.press("slash", *"rule:*", "enter")
        await pilot.pause(0.5)
        await pilot.press("f")
        await save("findings")
        await pilot.press("q")
    store.close()
    return shots


def to_png(svg: Path) -> Path:
    png = svg.with_suffix(".png")
    try:
        import cairosvg
    except ImportError:
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if browser is None:
            raise SystemExit("no PNG: install cairosvg (pip) or chromium (apt)") from None
        subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", f"--screenshot={png}",
                        "--window-size=1900,1100", svg.as_uri()], check=True, capture_output=True)
    else:
        cairosvg.svg2png(url=str(svg), write_to=str(png), output_width=1600)
    return png


def main() -> None:
    out = ROOT / "docs"
    with tempfile.TemporaryDirectory() as tmp:
        rec = sample(Path(tmp) / "sample.jsonl")
        shots = asyncio.run(shoot(rec, out))
    for svg in shots:
        print(to_png(svg))


if __name__ == "__main__":
    main()
