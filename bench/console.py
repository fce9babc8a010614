"""The console (`/ui`) in a real browser: how long the overview takes to show a worker's
partitions, and how long an acknowledged append takes to appear in the live tail.

`console_section` is `kafka-journal bench`'s "Console" section; the console's tests (tests/ui)
run `bench_console` small against their worker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from playwright.async_api import Page, async_playwright
from yarl import URL

from bench.common import Row, Section, percentile, unique
from devtools.browser import VIEWPORT, launch

METHOD = (
    "Headless Chromium (Debian's) on the same machine as the worker. Overview: {loads} times, "
    "a fresh page opens /ui, the token is entered, until the partitions' rows show (the "
    "first GET /status answered and drawn). Live tail: once the tail follows a fresh prefix "
    "(GET /events as server-sent events), {appends} one-event appends one after the other, "
    "each timed from its acknowledgement (ack=verified) to its row in the page, as "
    "Playwright sees it (its polling adds a few ms)."
)


@dataclass(frozen=True, slots=True)
class ConsoleTimings:
    overview_s: tuple[float, ...]
    tail_delay_s: tuple[float, ...]

    def summary(self) -> dict[str, float]:
        """p50 and p99 of each, in seconds."""
        return {
            "overview_p50_s": percentile(self.overview_s, 50),
            "overview_p99_s": percentile(self.overview_s, 99),
            "tail_delay_p50_s": percentile(self.tail_delay_s, 50),
            "tail_delay_p99_s": percentile(self.tail_delay_s, 99),
        }


async def bench_console(
    url: URL,
    token: str,
    writer: Mapping[str, str],
    *,
    loads: int = 10,
    appends: int = 20,
) -> ConsoleTimings:
    """`token` is the operator's (journal:admin and journal:read); `writer`, the headers the
    appends are made with."""
    async with async_playwright() as playwright:
        browser = await launch(playwright)
        try:
            overview = []
            for _ in range(loads):
                context = await browser.new_context(viewport=VIEWPORT)
                page = await context.new_page()
                started = time.perf_counter()
                await _open(page, url, token)
                await page.wait_for_selector("#partitions tbody tr[data-partition]")
                overview.append(time.perf_counter() - started)
                await context.close()
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await _open(page, url, token)
            delays = await _tail_delays(page, url, writer, appends)
            await context.close()
        finally:
            await browser.close()
    return ConsoleTimings(tuple(overview), tuple(delays))


async def _open(page: Page, url: URL, token: str) -> None:
    await page.goto(str(url / "ui"))
    await page.fill("#token", token)
    await page.click("#token-form button[type=submit]")


async def _tail_delays(
    page: Page, url: URL, writer: Mapping[str, str], appends: int
) -> list[float]:
    journal_id = unique("console_bench")
    await page.evaluate("() => { location.hash = '#/tail' }")
    await page.fill("#tail-prefix", journal_id)
    await page.click("#tail-start")
    # the answer starts with its first item: on a quiet topic, a heartbeat after 5 s
    await page.wait_for_selector("#tail-state:text('live')", timeout=30_000)
    delays = []
    async with aiohttp.ClientSession(headers=dict(writer)) as session:
        for n in range(1, appends + 1):
            body = {"events": [{"seqNr": n, "payload": {"n": n}}]}
            path = url / "journals" / journal_id / "events"
            async with session.post(path, json=body) as answer:
                assert answer.status == 200, await answer.text()
            acknowledged = time.perf_counter()
            await page.wait_for_selector(f"#tail-events tbody tr[data-seq-nr='{n}']")
            delays.append(time.perf_counter() - acknowledged)
    return delays


async def console_section(url: URL, loads: int = 10, appends: int = 50) -> Section:
    """The bench's section: overview load and live tail delay, p50/p99 (no HTTP security on
    the bench's worker: any token is let through)."""
    timings = await bench_console(url, "bench", {}, loads=loads, appends=appends)
    section = Section("Console", METHOD.format(loads=loads, appends=appends))
    summary = timings.summary()
    for name, key in (("overview load", "overview"), ("live tail delay", "tail_delay")):
        for q in (50, 99):
            value = summary[f"{key}_p{q}_s"] * 1000
            goal, met = ("<= 2000 ms", value <= 2000) if key == "tail_delay" else ("", None)
            section.add(Row(f"{name}: p{q}", value, "ms", None, goal, met))
    section.samples["live tail delay"] = [s * 1000 for s in timings.tail_delay_s]
    return section
