"""Stopping an HTTP server without failing a request: readiness first, then the listener, then
the requests in flight, each step bounded.

`Draining.stop_serving(runner)` is the HTTP half of a worker's shutdown (app/worker.py runs it
on SIGTERM before anything else stops):

1. leaving: from now on every request but `/healthz` and `/metrics` (so `/readyz` too) answers
   503 `not_ready` with Retry-After and closes its connection. Nothing of it was done, so the
   client may send it anywhere; a forwarding worker sends it on to another owner
   (app/forwarding.py).
2. the listener closes: a new connection is refused.
3. the requests in flight finish, for at most `drain_s`. A connection kept alive meanwhile stays
   open, so a request sent on it gets the 503 of step 1 rather than a connection closed under it.
4. every connection closes; what still runs (a live subscription, which has no end to wait for
   and so is not waited for, or a request past the deadline) is cancelled.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from web.error_answers import ErrorCode
from web.failures import unavailable
from web.routes import ROUTES

log = logging.getLogger(__name__)

DRAIN_S = 10.0
# what a connection gets to finish writing its answer once the drain ended, before it is cut
_CLOSE_GRACE_S = 1.0
# still answered while leaving: the process is alive, and its metrics show the drain
_STILL_ANSWERED = frozenset({"/healthz", "/metrics"})
_LONG_LIVED = frozenset(route.path for route in ROUTES if route.long_lived)


class Draining:
    """The requests in flight, and whether this process is leaving: see the module's doc."""

    def __init__(self, retry_after_s: int, drain_s: float = DRAIN_S) -> None:
        self._retry_after_s = retry_after_s
        self._drain_s = drain_s
        self._leaving = False
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()

    @property
    def leaving(self) -> bool:
        return self._leaving

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        route = "" if resource is None else resource.canonical
        if self._leaving and route not in _STILL_ANSWERED:
            answer = unavailable(
                ErrorCode.NOT_READY, "this worker is stopping", self._retry_after_s
            ).response()
            answer.force_close()  # the client's next request goes to another worker
            return answer
        if route in _LONG_LIVED:
            return await handler(request)
        self._in_flight += 1
        self._drained.clear()
        try:
            return await handler(request)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()

    async def stop_serving(self, runner: web.BaseRunner) -> None:
        """Steps 1-4 of the module's doc, on `runner`'s sites and connections."""
        self._leaving = True
        for site in runner.sites:
            await site.stop()
        log.info("stopped listening; draining %d requests", self._in_flight)
        try:
            await asyncio.wait_for(self._drained.wait(), self._drain_s)
        except TimeoutError:
            log.warning("%d requests still running after %g s: cut", self._in_flight, self._drain_s)
        server = runner.server
        if server is not None:
            server.pre_shutdown()
            await server.shutdown(_CLOSE_GRACE_S)
        log.info("stopped serving HTTP")
