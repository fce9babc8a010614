"""The order in which a stopping server stops serving (web/draining.py), on a real aiohttp
server in this process (no Kafka, no Cassandra): readiness false at once, then no new
connection, the request in flight answered in full, and only then is it done."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import orjson
import pytest
from aiohttp import web
from yarl import URL

from journal.metrics import Metrics
from tests.support.eventually import eventually
from tests.support.fake_backend import FakeBackend
from web.app import add_routes
from web.draining import Draining

RETRY_AFTER_S = 3


@dataclass
class Slow:
    """A route whose requests wait until released."""

    entered: asyncio.Event
    release: asyncio.Event

    async def handler(self, request: web.Request) -> web.Response:
        self.entered.set()
        await self.release.wait()
        return web.json_response({"slow": "done"})


@dataclass
class Server:
    url: URL
    runner: web.AppRunner
    draining: Draining
    slow: Slow


@asynccontextmanager
async def server(drain_s: float = 30.0) -> AsyncIterator[Server]:
    app = web.Application()
    add_routes(app, FakeBackend(), retry_after_s=RETRY_AFTER_S, metrics=Metrics())
    draining = Draining(RETRY_AFTER_S, drain_s=drain_s)
    app.middlewares.append(draining.middleware)
    slow = Slow(asyncio.Event(), asyncio.Event())
    app.router.add_get("/slow", slow.handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(URL(f"http://127.0.0.1:{port}"), runner, draining, slow)
    finally:
        slow.release.set()
        await runner.cleanup()


async def status(session: aiohttp.ClientSession, url: URL) -> tuple[int, str | None, str]:
    async with session.get(url) as got:
        body = await got.read()
        code = orjson.loads(body)["error"]["code"] if got.status >= 400 else ""
        return got.status, got.headers.get("Retry-After"), code


async def refused(url: URL) -> bool:
    """Whether a new connection to `url` is refused."""
    async with aiohttp.ClientSession() as fresh:
        try:
            async with fresh.get(url / "healthz"):
                return False
        except aiohttp.ClientConnectorError:
            return True


async def test_stopping_turns_readiness_off_closes_the_listener_then_drains() -> None:
    async with (
        server() as served,
        aiohttp.ClientSession() as probe,
        aiohttp.ClientSession() as client,
        aiohttp.ClientSession() as busy,
    ):
        for kept in (probe, client):  # connections kept alive from before
            assert await status(kept, served.url / "healthz") == (200, None, "")
        in_flight = asyncio.create_task(status(busy, served.url / "slow"))
        await served.slow.entered.wait()

        stopping = asyncio.create_task(served.draining.stop_serving(served.runner))
        # readiness off, and any request but liveness and metrics refused (nothing of it done),
        # on a connection that then closes
        assert await status(probe, served.url / "healthz") == (200, None, "")
        assert await status(probe, served.url / "readyz") == (503, "3", "not_ready")
        assert await status(client, served.url / "journals/j") == (503, "3", "not_ready")
        await eventually(lambda: refused(served.url), "the listener closed")
        assert not stopping.done()  # the request in flight holds it

        served.slow.release.set()
        assert await in_flight == (200, None, "")  # answered in full, not cut
        await asyncio.wait_for(stopping, 10)
        assert await refused(served.url)


async def test_a_request_past_the_drain_deadline_is_cut() -> None:
    async with server(drain_s=0.2) as served, aiohttp.ClientSession() as busy:
        in_flight = asyncio.create_task(status(busy, served.url / "slow"))
        await served.slow.entered.wait()
        await asyncio.wait_for(served.draining.stop_serving(served.runner), 10)
        with pytest.raises(aiohttp.ClientError):
            await in_flight


async def test_a_live_subscription_is_not_waited_for() -> None:
    async with (
        server() as served,
        aiohttp.ClientSession() as subscriber,
        subscriber.get(served.url / "events", params={"live": "true"}) as live,
    ):
        assert live.status == 200
        await live.content.readline()  # its first line: the subscription runs
        await asyncio.wait_for(served.draining.stop_serving(served.runner), 10)
