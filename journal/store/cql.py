"""cassandra-driver bridged to asyncio: queries run on the driver's I/O threads, never the loop.

The driver's `execute_async` returns a ResponseFuture whose callbacks fire on the driver's
threads; each callback hands its result to the loop with `call_soon_threadsafe`. Paging
fetches one page at a time, so a query over a huge partition holds one page in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from cassandra import InvalidRequest, OperationTimedOut, RequestExecutionException, Unauthorized
from cassandra.cluster import NoHostAvailable, ResponseFuture, Session
from cassandra.query import Statement

from journal.errors import StoreAccessDenied, StoreUnavailable

# What the driver raises when Cassandra is down or overloaded, rather than for a bad query.
_UNAVAILABLE = (NoHostAvailable, OperationTimedOut, RequestExecutionException)

Params = Sequence[Any] | dict[str, Any] | None


def _future_of_page(response: ResponseFuture) -> asyncio.Future[list[Any]]:
    """An asyncio future for the page `response` is fetching (call once per page).

    The driver keeps callbacks across pages, so the previous page's are cleared first.
    """
    loop = asyncio.get_running_loop()
    response.clear_callbacks()
    future: asyncio.Future[list[Any]] = loop.create_future()

    def on_rows(rows: list[Any] | None) -> None:
        loop.call_soon_threadsafe(_resolve, future, rows)

    def on_error(error: BaseException) -> None:
        loop.call_soon_threadsafe(_reject, future, error)

    response.add_callbacks(on_rows, on_error)
    return future


def _resolve(future: asyncio.Future[list[Any]], rows: list[Any] | None) -> None:
    if not future.done():
        future.set_result([] if rows is None else list(rows))  # None: a statement with no rows


def _schema_missing(error: BaseException) -> bool:
    """The keyspace or a table is gone (Cassandra lost or was given other data): the store is
    not usable, as when it is down; any other InvalidRequest is a bug of ours, left as it is."""
    text = str(error)
    return isinstance(error, InvalidRequest) and (
        "does not exist" in text or "unconfigured table" in text
    )


def _reject(future: asyncio.Future[list[Any]], error: BaseException) -> None:
    if isinstance(error, Unauthorized):  # its message names the role and the permission
        denied = StoreAccessDenied(f"Cassandra refused: {error}")
        denied.__cause__ = error
        error = denied
    elif isinstance(error, _UNAVAILABLE) or _schema_missing(error):
        unavailable = StoreUnavailable(f"Cassandra: {type(error).__name__}: {error}")
        unavailable.__cause__ = error
        error = unavailable
    if not future.done():
        future.set_exception(error)


async def execute(session: Session, statement: str | Statement, params: Params = None) -> list[Any]:
    """Run one statement and return the rows of its first page (all rows for small results)."""
    return await _future_of_page(session.execute_async(statement, params))


async def stream(
    session: Session, statement: str | Statement, params: Params = None
) -> AsyncIterator[Any]:
    """Yield the rows of a query page by page; the next page is fetched only when needed."""
    response = session.execute_async(statement, params)
    rows = await _future_of_page(response)
    while True:
        for row in rows:
            yield row
        if not response.has_more_pages:
            return
        response.start_fetching_next_page()  # resets the result; the callbacks come after
        rows = await _future_of_page(response)
