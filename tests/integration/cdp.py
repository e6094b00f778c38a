"""A headless Chromium driven over the Chrome DevTools protocol: open, wait, click, screenshot.

Just what the UI test needs, over one websocket (aiohttp, which litellm already brings):
Debian's ``chromium`` package, no driver, no browser download.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The path of an installed Chromium, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium with one page; every method waits for its answer."""

    def __init__(self, executable: str, width: int = 1440, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="tabmem-chromium-")
        self._process = subprocess.Popen(
            [
                executable,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its helper processes share its group: closed together
        )
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        browser_url = self._devtools_url()
        self._loop.run_until_complete(self._connect(browser_url))
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _devtools_url(self) -> str:
        assert self._process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self._process.stderr.readline()
            if found := re.search(r"DevTools listening on (ws://\S+)", line):
                return found.group(1)
            if not line and self._process.poll() is not None:
                break
        raise RuntimeError("Chromium did not start its DevTools endpoint")

    async def _connect(self, browser_url: str) -> None:
        http = browser_url.replace("ws://", "http://").split("/devtools/")[0]
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"{http}/json/list") as answer:
            pages = [t for t in await answer.json(content_type=None) if t["type"] == "page"]
        self._socket = await self._session.ws_connect(
            pages[0]["webSocketDebuggerUrl"], max_msg_size=0
        )

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._socket is not None
        message_id = next(self._ids)
        await self._socket.send_str(
            json.dumps({"id": message_id, "method": method, "params": params})
        )
        while True:
            message = json.loads((await self._socket.receive()).data)
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._loop.run_until_complete(self._call(method, params))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for_location(self, part: str, timeout: float = 20) -> str:
        """The page's address once it holds ``part`` (a click's navigation done), else the
        last one read; an evaluation that meets the navigation half-way is asked again."""
        deadline = time.monotonic() + timeout
        href = ""
        while time.monotonic() < deadline:
            try:
                href = self.evaluate("location.href") or ""
            except RuntimeError as error:
                if "navigated or closed" not in str(error):
                    raise
            if part in href:
                break
            time.sleep(0.2)
        return href

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(self, needle: str, timeout: float = 60) -> str:
        """Wait until the page shows ``needle``; the page's text, or an error with what it shows."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if needle in text:
                return text
            time.sleep(0.5)
        raise AssertionError(f"{needle!r} never appeared; the page shows:\n{self.text()[:3000]}")

    def click_if_present(self, selector: str) -> bool:
        """Click the first visible ``selector`` element, if there is one."""
        script = (
            f"(() => {{ const el = [...document.querySelectorAll({json.dumps(selector)})]"
            ".find(e => e.offsetParent); if (!el) return null;"
            " const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
            " })()"
        )
        found = self.evaluate(script)
        if found is not None:
            self._mouse_click(*found)
        return found is not None

    def _mouse_click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def click_text(self, selector: str, needle: str) -> str:
        """Click, as a mouse does, the first visible ``selector`` element whose text contains
        ``needle``; its text."""
        script = (
            f"(() => {{ const el = [...document.querySelectorAll({json.dumps(selector)})]"
            ".find(e => e.offsetParent && e.innerText"
            f" && e.innerText.includes({json.dumps(needle)}));"
            " if (!el) return null; el.scrollIntoView({block: 'center'});"
            " const r = el.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2, el.innerText]; })()"
        )
        found = self.evaluate(script)
        if found is None:
            raise AssertionError(
                f"no {selector} with {needle!r}; the page shows:\n{self.text()[:3000]}"
            )
        x, y, text = found
        self._mouse_click(x, y)
        return text

    def screenshot(self, path: Path) -> None:
        time.sleep(1.0)  # let the last rendering settle
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if self._socket is not None:
                self._loop.run_until_complete(self._socket.close())
            if self._session is not None:
                self._loop.run_until_complete(self._session.close())
        finally:
            self._loop.close()
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
            # helper processes outliving the browser still wrote to the profile as it was
            # removed ("Directory not empty: 'Default'"): none is left to write
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._profile.cleanup()
