"""The headless browser the dashboard tests drive: Debian's Chromium through Playwright
(which never downloads a browser), allowed to reach 127.0.0.1 only. The fixtures that use it
are in conftest.py (``chromium``, ``page``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from playwright.async_api import Dialog, Page, Route

CHROMIUM = os.environ.get("WORKLY_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# As on this machine's probe: no sandbox as root, and no background traffic to Google's hosts.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]  # fmt: skip


async def _loopback_only(route: Route) -> None:
    if urlsplit(route.request.url).hostname == "127.0.0.1":
        await route.continue_()
    else:
        await route.abort()


@asynccontextmanager
async def headless_tab(chromium: str) -> AsyncIterator[tuple[Page, list[str]]]:
    """A tab whose every request off 127.0.0.1 is aborted, and the messages of every dialog a
    page opened (a script that ran would), each dismissed."""
    from playwright.async_api import async_playwright

    dialogs: list[str] = []

    async def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        context = await browser.new_context()
        await context.route("**/*", _loopback_only)
        tab = await context.new_page()
        tab.set_default_timeout(10_000)
        tab.on("dialog", dismiss)
        try:
            yield tab, dialogs
        finally:
            await browser.close()
