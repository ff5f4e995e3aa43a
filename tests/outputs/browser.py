"""A real headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: NUL-separated JSON on file descriptors 3 and 4, no extra package), to
load a page and measure what it draws.

    with Browser() as b:
        page = b.open(path)                       # waits for the load to complete
        page.evaluate("document.title")           # what the page's own scripts could not do (CSP)
        page.screenshot(png_path, width=1000)

`chromium_path()` is None when no Chromium can be had (the tests then skip, saying so).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")
DEADLINE = 60.0


def chromium_path() -> str | None:
    env = os.environ.get("MRTR_CHROMIUM")
    for c in ((env,) if env else ()) + CANDIDATES:
        found = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if found:
            return found
    return None


class Browser:
    def __init__(self, width: int = 1100, height: int = 900) -> None:
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("no Chromium: apt-get install chromium")
        self.profile = tempfile.mkdtemp(prefix="mrtr-chromium-")
        to_r, self._to = os.pipe()  # we write, Chromium reads on fd 3
        self._from, from_w = os.pipe()  # Chromium writes on fd 4, we read

        def fds() -> None:  # in the child: the pipes on 3 and 4, whatever numbers they had
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
             "--no-first-run", f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            close_fds=False, preexec_fn=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._n = 0
        self.width, self.height = width, height

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._n += 1
        msg: dict = {"id": self._n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + DEADLINE
        while True:
            while b"\0" in self._buf:
                line, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(line)
                if reply.get("id") == self._n:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer {method}")
            chunk = os.read(self._from, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium went away")
            self._buf += chunk

    def open(self, path: Path) -> "Page":
        url = Path(path).resolve().as_uri()
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.wait(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")
        return page


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def evaluate(self, expression: str):
        r = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expression: str, timeout: float = DEADLINE) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never had {expression}")
            time.sleep(0.02)

    def screenshot(self, path: Path, clip: dict | None = None) -> bytes:
        params: dict = {"format": "png"}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        data = base64.b64decode(self.browser.call("Page.captureScreenshot", params, self.session)["data"])
        Path(path).write_bytes(data)
        return data
