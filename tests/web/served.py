"""Serving an aiohttp Application on 127.0.0.1 for a test, and talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from yarl import URL


@dataclass
class Served:
    """A running server and a client session pointed at it."""

    url: URL
    session: aiohttp.ClientSession
    app: web.Application

    def at(self, path_and_query: str) -> URL:
        """The URL of an already percent-encoded path, with an optional `?query`."""
        path, _, query = path_and_query.partition("?")
        url = self.url.with_path(path, encoded=True)
        return url.with_query(query) if query else url


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[Served]:
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]  # the port the OS picked for port 0
    session = aiohttp.ClientSession()
    try:
        yield Served(URL(f"http://127.0.0.1:{port}"), session, app)
    finally:
        await session.close()
        await runner.cleanup()
