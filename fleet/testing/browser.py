"""A real browser for tests: the system's headless Chromium, driven through chromedriver's
WebDriver HTTP API (W3C WebDriver) with httpx, so no browser-automation package is needed.

`find_chromium()` says where Chromium and chromedriver are, or why a test cannot have them
(`make test` installs Debian's `chromium` and `chromium-driver` when it can). Each `Browser`
gets a fresh profile directory and the flags that keep Chromium from reaching the network on its
own (no component updates, no sync, no background networking).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fleet.sandbox.process import free_ports
from fleet.testing.kube import wait_until

#: Chromium's flags: headless, no sandbox (CI runs as root), nothing fetched in the background.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)
#: Where Debian puts them (chromedriver is also linked into /usr/bin).
_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome")
_DRIVERS = ("chromedriver", "/usr/lib/chromium/chromedriver")


@dataclass(frozen=True)
class Chromium:
    browser: str
    driver: str


def find_chromium() -> Chromium | str:
    """Chromium and its chromedriver, or why they cannot be used (a sentence for a skip)."""
    browser = next((p for p in map(shutil.which, _CHROMIUMS) if p), None)
    driver = next((p for p in map(shutil.which, _DRIVERS) if p), None)
    if browser and driver:
        return Chromium(browser, driver)
    missing = " and ".join(
        what for what, path in (("chromium", browser), ("chromedriver", driver)) if not path
    )
    return (
        f"no {missing} on PATH: install Debian's `chromium` and `chromium-driver` "
        "(`make test` does, as root with apt-get)"
    )


class Browser:
    """One headless Chromium session."""

    def __init__(
        self, chromium: Chromium, profile: Path, log: Path, size: tuple[int, int] = (1280, 900)
    ) -> None:
        port = free_ports(1)[0]
        self._log = log.open("ab")
        self._driver = subprocess.Popen(
            [chromium.driver, f"--port={port}", "--allowed-ips=127.0.0.1"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self._http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0)
        try:
            wait_until(self._driver_ready, timeout=30, what="chromedriver answering")
            args = [
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
            ]
            session = self._call(
                "POST",
                "/session",
                {
                    "capabilities": {
                        "alwaysMatch": {
                            "browserName": "chrome",
                            "goog:chromeOptions": {"binary": chromium.browser, "args": args},
                        }
                    }
                },
            )
        except BaseException:
            self.close()
            raise
        self._session = f"/session/{session['sessionId']}"

    def _driver_ready(self) -> bool:
        try:
            return bool(self._http.get("/status").json()["value"]["ready"])
        except (httpx.HTTPError, ValueError, KeyError):
            return False

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self._http.request(method, path, json=body if body is not None else None)
        value = response.json().get("value")
        if response.status_code >= 400:
            error = value.get("error") if isinstance(value, dict) else value
            message = value.get("message") if isinstance(value, dict) else ""
            raise RuntimeError(f"WebDriver {method} {path}: {error}: {message}")
        return value

    def open(self, url: str) -> None:
        self._call("POST", f"{self._session}/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """The value of a function body run in the page (`return ...`)."""
        return self._call("POST", f"{self._session}/execute/sync", {"script": script, "args": args})

    def wait(self, script: str, what: str, *args: Any, timeout: float = 120.0) -> Any:
        """Until the script returns something truthy (the page updates itself; this only
        looks)."""
        return wait_until(lambda: self.run(script, *args), timeout=timeout, what=what)

    def screenshot(self, path: Path, *, full_page: bool = True, colours: int = 128) -> Path:
        """A PNG of the page (the whole height when `full_page`), made small: quantized to a
        palette when Pillow is there."""
        if full_page:
            height = int(self.run("return document.documentElement.scrollHeight"))
            rect = self._call("GET", f"{self._session}/window/rect")
            self._call(
                "POST",
                f"{self._session}/window/rect",
                {"width": rect["width"], "height": min(max(height + 120, 600), 4000)},
            )
            time.sleep(0.3)  # a resize repaints asynchronously; nothing is asserted on it
        png = base64.b64decode(self._call("GET", f"{self._session}/screenshot"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        with contextlib.suppress(ImportError):
            from PIL import Image

            with Image.open(path) as image:
                small = image.convert("RGB").quantize(colors=colours)
                small.save(path, optimize=True)
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if getattr(self, "_session", None):
                self._call("DELETE", self._session)
        self._http.close()
        self._driver.terminate()
        try:
            self._driver.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._driver.kill()
            self._driver.wait()
        self._log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
