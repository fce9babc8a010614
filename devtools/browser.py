"""Debian's Chromium, headless, through Playwright: for the console's tests and its bench.

Playwright's own browser downloads are never used (`playwright install` is never run): the
browser is /usr/bin/chromium, which `make browser` installs.
"""

from __future__ import annotations

from collections.abc import Sequence

from playwright.async_api import Browser, Playwright, ViewportSize

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = ViewportSize(width=1280, height=800)  # a laptop's screen


async def launch(playwright: Playwright, extra: Sequence[str] = ()) -> Browser:
    """Chromium with a fresh profile of its own (Playwright makes one per launch); `extra`:
    more flags (the TLS test's trusted key)."""
    return await playwright.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, *extra])
