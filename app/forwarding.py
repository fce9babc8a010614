"""Any worker accepts any journal request and forwards it to the owner of the key's partition.

Why forward at all, when every worker reads correctly? The owner answers a read from its
tables after its agent passes the Mark; any other worker must scan the partition in Kafka.

Faust's `table_route` is not used: it drops request bodies and buffers answers. This proxy
streams both ways (an append's body, a read's NDJSON) and marks what it forwarded, so a
request is forwarded at most once; when the owner is unknown (a rebalance) or unreachable,
the request is served here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from journal.metrics import METRICS
from journal.writer import partition_of
from tables.partitions import OwnedPartitions
from web.app import DEFAULT_RETRY_AFTER_S
from web.errors import ApiError, ErrorCode
from web.failures import unavailable
from web.views import journal_id_of

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Journal-Forwarded"
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
    )
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Owners:
    """Which worker owns which partition, from the Faust assignor's table metadata."""

    def __init__(
        self, app: Any, owned: OwnedPartitions, table: str, partitions: int, own_url: str
    ) -> None:
        self._app = app
        self._owned = owned
        self._table = table
        self._partitions = partitions
        self._own = URL(own_url)

    def owner_of(self, journal_id: str) -> URL | None:
        """The owner's base URL, or None when it is this worker or not known."""
        partition = partition_of(journal_id, self._partitions)
        if self._owned.owns(partition):
            return None
        try:
            hosts = self._app.router.table_metadata(self._table)
        except KeyError:
            return None
        for url, topics in hosts.items():
            if any(partition in partitions for partitions in topics.values()):
                owner = URL(url)
                return None if _same(owner, self._own) else owner
        return None


def _same(a: URL, b: URL) -> bool:
    return (a.host, a.port) == (b.host, b.port)


class Forwarder:
    def __init__(self, owners: Owners) -> None:
        self._owners = owners
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if "id" not in request.match_info or FORWARDED_HEADER in request.headers:
            return await handler(request)
        try:
            journal_id = journal_id_of(request)
        except ApiError:
            return await handler(request)  # it answers the 400
        owner = self._owners.owner_of(journal_id)
        if owner is None:
            return await handler(request)
        try:
            return await self._forward(request, owner)
        except aiohttp.ClientError as error:
            if request.method == "GET" and not isinstance(error, aiohttp.ClientConnectionError):
                raise
            if request.method != "GET":
                # the owner may have applied it: never risk doing it twice; the client learns
                # the outcome by retrying (with its Idempotency-Key) or reading
                raise unavailable(
                    ErrorCode.OUTCOME_UNKNOWN,
                    f"the owner {owner} did not answer ({type(error).__name__}): the request "
                    "may or may not have taken effect",
                    DEFAULT_RETRY_AFTER_S,
                ) from error
            log.warning("owner %s unreachable (%r): serving %s here", owner, error, request.path)
            return await handler(request)

    async def _forward(self, request: web.Request, owner: URL) -> web.StreamResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers[FORWARDED_HEADER] = "1"
        target = owner.with_path(request.raw_path.split("?")[0], encoded=True).with_query(
            request.query_string
        )
        METRICS.counter("journal_forwarded_requests_total").inc()
        body = request.content if request.can_read_body else None
        async with self._session.request(
            request.method, target, headers=headers, data=body, allow_redirects=False
        ) as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for name, value in answer.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
