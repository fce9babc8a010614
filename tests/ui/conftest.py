"""A real headless Chromium (`devtools.browser`) and one worker with HTTP security on,
serving the console, on the dev stack's Kafka and Cassandra. Each test gets a fresh browser
context (no cookies, storage or cache of another test)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from app.http_tokens import minter_of
from devtools.browser import VIEWPORT, launch
from journal.settings import HttpAuthSettings
from tests.support.harness import Harness
from tests.support.workers import WorkerProcess, running_workers, wait_settled
from web.auth import Scope, TokenMinter


@pytest.fixture(scope="module")
def minter(tmp_path_factory: pytest.TempPathFactory) -> tuple[TokenMinter, Path]:
    key_file = tmp_path_factory.mktemp("secrets") / "jwt.key"
    key_file.write_text(secrets.token_hex(32))
    key_file.chmod(0o600)
    return minter_of(HttpAuthSettings(jwt_key_file=key_file)), key_file


def mint(minter: tuple[TokenMinter, Path], *scopes: Scope) -> str:
    return minter[0].mint(scopes, ttl_s=600)


@pytest.fixture(scope="module")
def worker_process(
    connected: Harness,
    minter: tuple[TokenMinter, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WorkerProcess]:
    env = {"KJ_HTTP_SECURITY": "on", "KJ_JWT_KEY_FILE": str(minter[1])}
    with running_workers(connected.settings, tmp_path_factory, count=1, env=env) as (one,):
        yield one


@pytest.fixture(scope="module")
async def worker(worker_process: WorkerProcess, minter: tuple[TokenMinter, Path]) -> WorkerProcess:
    """Ready and holding every partition of the module's topic."""
    admin = {"Authorization": f"Bearer {mint(minter, Scope.ADMIN)}"}
    await wait_settled([worker_process], admin)
    return worker_process


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await launch(playwright)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=VIEWPORT)
    try:
        yield await context.new_page()
    finally:
        await context.close()
