"""The console (`/ui`) in a real headless Chromium against a real worker with HTTP security
on: what an operator sees and does, through the public API only, with the token they give.

Each test saves a screenshot of its page, under docs/console/ (the README shows them) when
KJ_CONSOLE_SHOTS=docs/console is set, else in a temporary directory: a test run leaves the
checkout as it found it. How fast the tail is lives in the bench (bench/console.py); the tests
wait generously, so a slow machine does not fail them.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from playwright.async_api import Page, Request, expect

from bench.console import bench_console
from devtools.workers import REPO
from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.http_api import journal_path
from tests.support.workers import WorkerProcess
from tests.ui.conftest import mint
from web.auth import Scope, TokenMinter

pytestmark = pytest.mark.integration

SHOTS = (
    REPO / os.environ["KJ_CONSOLE_SHOTS"]
    if os.environ.get("KJ_CONSOLE_SHOTS")
    else Path(tempfile.gettempdir()) / "kafka-journal-console"
)
# from an append's acknowledgement to its row in the live tail: the 2 s is the bench's
# to show (p99 ~0.2 s here); the test only waits that it comes
TAIL_DELAY_S = 15.0
LIVE_WITHIN_MS = 15_000  # a subscription's first heartbeat comes after 5 s without events


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


async def open_console(page: Page, worker: WorkerProcess, token: str, where: str) -> None:
    """The console at `where`, the operator's token entered first (kept in the page only)."""
    await page.goto(str(worker.url / "ui"))
    await page.fill("#token", token)
    await page.click("#token-form button[type=submit]")
    await expect(page.locator("#token-claims")).to_contain_text("scopes: journal:")
    await page.evaluate("where => { location.hash = where }", where)


@pytest.fixture
async def api(
    worker: WorkerProcess, minter: tuple[TokenMinter, Path]
) -> AsyncIterator[aiohttp.ClientSession]:
    """The API as a client program uses it: a token for reading, writing and deleting."""
    token = mint(minter, Scope.READ, Scope.WRITE, Scope.DELETE)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base_url=worker.url, headers=headers) as session:
        yield session


async def append(api: aiohttp.ClientSession, journal_id: str, *events: dict[str, object]) -> None:
    async with api.post(journal_path(journal_id, "/events"), json={"events": events}) as answer:
        assert answer.status == 200, await answer.text()


async def test_the_overview_shows_each_partition_this_worker_owns_with_its_lag(
    page: Page, worker: WorkerProcess, connected: Harness, minter: tuple[TokenMinter, Path]
) -> None:
    await open_console(page, worker, mint(minter, Scope.ADMIN), "#/overview")
    rows = page.locator("#partitions tbody tr[data-partition]")
    await expect(rows).to_have_count(connected.settings.partitions)
    await expect(page.locator("#worker-ready")).to_have_text("yes")
    await expect(page.locator("#worker-version")).to_have_text(re.compile(r"^\d+\.\d+"))
    await expect(rows.first.locator("svg.spark")).to_be_visible()
    await expect(page.locator("#request-rate")).to_contain_text("/s)")
    # the group is this worker alone: it owns every partition
    workers = page.locator("#workers tbody tr[data-url]")
    await expect(workers).to_have_count(1)
    await expect(workers.locator("td").first).to_have_text(f"{worker.url} (this worker)")
    every = ", ".join(str(p) for p in range(connected.settings.partitions))
    await expect(workers.locator("td").nth(1)).to_have_text(every)
    await shot(page, "overview")


async def test_the_overview_needs_admin(
    page: Page, worker: WorkerProcess, minter: tuple[TokenMinter, Path]
) -> None:
    await open_console(page, worker, mint(minter, Scope.READ), "#/overview")
    await expect(page.locator("#message")).to_contain_text("needs the scope journal:admin")
    await expect(page.locator("#partitions tbody tr[data-partition]")).to_have_count(0)


async def test_a_journal_found_by_prefix_shows_its_pointer_and_events(
    page: Page, worker: WorkerProcess, api: aiohttp.ClientSession, minter: tuple[TokenMinter, Path]
) -> None:
    prefix = unique("console")
    journal_id = f"{prefix}-orders"
    await append(
        api,
        journal_id,
        {"seqNr": 1, "payload": {"order": 7, "lines": [{"sku": "a", "n": 2}]}, "tags": ["order"]},
        {"seqNr": 2, "payloadText": "shipped to Alice", "tags": ["ship", "order"]},
        {"seqNr": 3, "payloadBinary": base64.b64encode(b"\x00\x01\xff").decode()},
    )
    await append(api, f"{prefix}-other", {"seqNr": 1, "payload": None})
    await open_console(page, worker, mint(minter, Scope.READ), "#/journals")
    # by keyboard: type the prefix, Enter searches, Enter on a focused link opens it
    await page.focus("#prefix")
    await page.keyboard.type(prefix)
    await page.keyboard.press("Enter")
    links = page.locator("#journal-list a")
    await expect(links).to_have_text([f"{prefix}-orders", f"{prefix}-other"])
    await shot(page, "journals")

    await links.first.focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#journal-seq-nr")).to_have_text("3")
    await expect(page.locator("#journal-delete-to")).to_have_text("none")
    await expect(page.locator("#journal-snapshot")).to_have_text("none")
    rows = page.locator("#events tbody tr")
    await expect(rows).to_have_count(3)
    payloads = rows.locator("pre")
    await expect(payloads.nth(0)).to_contain_text('"order": 7,\n  "lines": [')  # pretty-printed
    await expect(payloads.nth(1)).to_have_text("shipped to Alice")
    await expect(payloads.nth(2)).to_have_text("3 bytes: 00 01 ff")
    await expect(rows.nth(1).locator("td").nth(2)).to_have_text("order, ship")
    await expect(rows.nth(0).locator("td").nth(1)).to_contain_text("Z")  # an ISO timestamp
    await shot(page, "journal")


async def test_the_live_tail_shows_an_append_and_resumes_without_loss_or_repeat(
    page: Page, worker: WorkerProcess, api: aiohttp.ClientSession, minter: tuple[TokenMinter, Path]
) -> None:
    prefix = unique("tail")
    journal_id = f"{prefix}-j"
    subscriptions: list[Request] = []
    page.on("request", lambda r: subscriptions.append(r) if "/events?" in r.url else None)
    # appended before the tail starts: a live tail starts at the end, so never shows it
    await append(api, f"{prefix}-before", {"seqNr": 1, "payload": {"n": 0}})
    await open_console(page, worker, mint(minter, Scope.READ), "#/tail")
    await page.fill("#tail-prefix", prefix)
    await page.click("#tail-start")
    # the answer starts with the first item: an event or, on a quiet topic, a heartbeat (5 s)
    await expect(page.locator("#tail-state")).to_have_text("live", timeout=LIVE_WITHIN_MS)
    rows = page.locator("#tail-events tbody tr")

    def seq_nr(n: int) -> str:
        return f"#tail-events tbody tr[data-seq-nr='{n}']"

    await append(api, journal_id, {"seqNr": 1, "payload": {"n": 1}, "tags": ["t"]})
    acknowledged = time.monotonic()
    await page.wait_for_selector(seq_nr(1), timeout=TAIL_DELAY_S * 1000)
    assert time.monotonic() - acknowledged < TAIL_DELAY_S

    # the connection drops (as a network would drop it); events appended meanwhile
    await page.evaluate("window.dropTail()")
    for n in (2, 3):
        await append(api, journal_id, {"seqNr": n, "payload": {"n": n}})
    await page.wait_for_selector(seq_nr(3))
    await expect(page.locator("#tail-state")).to_have_text("live", timeout=LIVE_WITHIN_MS)

    # paused: the position stays; resumed: what came meanwhile, once
    await page.click("#tail-pause")
    await expect(page.locator("#tail-state")).to_have_text("paused")
    await append(api, journal_id, {"seqNr": 4, "payload": {"n": 4}})
    await page.click("#tail-pause")
    await page.wait_for_selector(seq_nr(4))
    await expect(rows).to_have_count(4)
    shown = [await row.get_attribute("data-seq-nr") for row in await rows.all()]
    assert shown == ["4", "3", "2", "1"]  # newest first, each once
    await expect(page.locator("#tail-count")).to_have_text("4")

    # each reconnection asked for what follows the last position the page had, by header
    assert len(subscriptions) >= 3
    assert "last-event-id" not in subscriptions[0].headers
    assert "after=end" in subscriptions[0].url
    assert all(r.headers.get("last-event-id") for r in subscriptions[1:])
    for request in subscriptions:
        assert "authorization" in request.headers and "token" not in request.url.lower()
    await shot(page, "tail")


async def test_purge_is_refused_with_a_read_token_and_done_with_a_delete_token(
    page: Page, worker: WorkerProcess, api: aiohttp.ClientSession, minter: tuple[TokenMinter, Path]
) -> None:
    journal_id = unique("purged")
    await append(api, journal_id, {"seqNr": 1, "payload": 1}, {"seqNr": 2, "payload": 2})
    where = f"#/journal/{journal_id}"

    await open_console(page, worker, mint(minter, Scope.READ), where)
    await expect(page.locator("#events tbody tr")).to_have_count(2)
    await page.click("#purge")
    await expect(page.locator("#confirm")).to_be_visible()
    await page.click("#confirm-ok")
    await expect(page.locator("#message")).to_contain_text("needs the scope journal:delete")
    await shot(page, "purge-refused")
    async with api.get(journal_path(journal_id)) as answer:
        assert (await answer.json())["seqNr"] == 2

    # cancelled: nothing is sent
    await open_console(page, worker, mint(minter, Scope.READ, Scope.DELETE), where)
    await page.click("#purge")
    await page.keyboard.press("Escape")
    await expect(page.locator("#confirm")).to_be_hidden()
    await expect(page.locator("#journal-seq-nr")).to_have_text("2")

    await page.click("#purge")
    await page.click("#confirm-ok")
    await expect(page.locator("#message")).to_have_text("Purge: done.")
    await expect(page.locator("#journal-seq-nr")).to_have_text("none")
    async with api.get(journal_path(journal_id)) as answer:
        assert (await answer.json())["seqNr"] is None


async def test_the_quarantine_page_shows_the_count_and_the_records(
    page: Page, worker: WorkerProcess, connected: Harness, minter: tuple[TokenMinter, Path]
) -> None:
    admin = mint(minter, Scope.ADMIN)
    await open_console(page, worker, admin, "#/quarantine")
    await expect(page.locator("#quarantine-count")).to_have_text("0")
    await expect(page.locator("#quarantine-total")).to_have_text("0")

    # a malformed Append, which the worker's replication sets aside
    journal_id = unique("malformed")
    key = connected.journals.journal(journal_id).key
    sent = await connected.producer.send_and_wait(
        connected.settings.topic,
        b"\x00garbage",
        key=journal_id.encode(),
        partition=connected.journals.writer.partition_of(key),
        headers=[("journal.action", b'{"append": {"range": {"from": 1, "to": 1}}}')],
    )

    async def quarantined() -> bool:
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as session,
            session.get(worker.url / "quarantine") as answer,
        ):
            return bool((await answer.json())["total"] == 1)

    await eventually(quarantined, "the worker quarantines the malformed record")
    await open_console(page, worker, admin, "#/quarantine")
    rows = page.locator("#quarantined-records tbody tr[data-offset]")
    await expect(rows).to_have_count(1)
    await expect(rows.locator("td").nth(2)).to_have_text(journal_id)
    await expect(rows.locator("td").nth(3)).to_have_text(f"{sent.partition}:{sent.offset}")
    await expect(rows.locator("td").nth(5)).to_have_text("no")
    await expect(page.locator("#quarantine-count")).to_have_text("1")
    await shot(page, "quarantine")


async def test_the_console_bench_measures_the_overview_and_the_tail(
    worker: WorkerProcess, minter: tuple[TokenMinter, Path]
) -> None:
    writer = {"Authorization": f"Bearer {mint(minter, Scope.WRITE)}"}
    operator = mint(minter, Scope.ADMIN, Scope.READ)
    timings = await bench_console(worker.url, operator, writer, loads=3, appends=10)
    summary = timings.summary()
    print("console bench:", {name: round(value, 4) for name, value in summary.items()})
    assert len(timings.overview_s) == 3 and len(timings.tail_delay_s) == 10
    assert all(delay > 0 for delay in timings.tail_delay_s)
