"""cassandra-driver bridged to asyncio: queries run on the driver's I/O threads, never the loop.

The driver's `execute_async` returns a ResponseFuture whose callbacks fire on the driver's
threads; each callback hands its result to the loop with `call_soon_threadsafe`. Paging
fetches one page at a time (or the next one ahead, `stream_pages`), so a query over a huge
partition holds a page or two in memory.

The driver refuses to send while its connection's socket is full (`ConnectionBusy`, given as
NoHostAvailable when every host is busy) rather than queueing: large writes (a snapshot's
chunks) fill it for a moment. Nothing was sent then, so `execute` tries again shortly, for a
bounded time, before calling the store unavailable. `execute_in_window` keeps a bounded
number of requests in flight.

A ResponseFuture holds its timeout timer, which holds the future's own method: a reference
cycle, so each query's future, statement and parameters (a batch's rows) waited for the
cyclic garbage collector, whose young collections in a worker (`app/garbage.py`) then freed
~45,000 objects at once, 30-250 ms with the loop stopped. `_page` drops the timer once the
last page is in: the driver has cancelled it by then, and all of it is freed at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from cassandra import InvalidRequest, OperationTimedOut, RequestExecutionException, Unauthorized
from cassandra.cluster import EXEC_PROFILE_DEFAULT, NoHostAvailable, ResponseFuture, Session
from cassandra.connection import ConnectionBusy, ConnectionException
from cassandra.query import Statement

from journal.errors import StoreAccessDenied, StoreUnavailable

# What the driver raises when Cassandra is down or overloaded, rather than for a bad query; a
# connection's error (`ConnectionShutdown`: a node killed with requests in flight) too.
_UNAVAILABLE = (NoHostAvailable, OperationTimedOut, RequestExecutionException, ConnectionException)

Params = Sequence[Any] | dict[str, Any] | None

_BUSY_RETRY_S = 0.005  # first wait after a busy connection; doubles, up to _BUSY_WAIT_MAX_S
_BUSY_WAIT_MAX_S = 0.2
_BUSY_GIVE_UP_S = 5.0
T = TypeVar("T")


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


async def _page(response: ResponseFuture) -> list[Any]:
    """The page `response` is fetching (`_future_of_page`); after the last page, the future's
    cancelled timer is dropped, breaking its reference cycle (see the module).

    Only once the page is in: the driver cancels the timer before it answers. A caller that
    stops waiting (a cancelled speculative page) leaves the query in flight with its timer
    armed, and the driver must still find it to cancel it: dropped then, the timer fired on a
    query long answered and broke the connection's count of requests in flight."""
    rows = await _future_of_page(response)
    if not response.has_more_pages:
        drop_cancelled_timer(response)
    return rows


def drop_cancelled_timer(response: ResponseFuture) -> None:
    """Break the cycle a finished query's timer makes (see the module).

    Private: cassandra-driver 3.30.1 offers no public way. Its `_timer` is None until
    `_start_timer` makes one, which it does only when it is None (for a new page); the driver
    cancels it, and keeps it, when it answers. tests/test_private_hooks.py checks all of that
    at the pinned version."""
    response._timer = None


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


async def execute(
    session: Session,
    statement: str | Statement,
    params: Params = None,
    profile: object = EXEC_PROFILE_DEFAULT,
    timeout_s: float | None = None,
) -> list[Any]:
    """Run one statement and return the rows of its first page (all rows for small results);
    `profile`: the driver's execution profile (`cluster.ROWS_AS_TUPLES`: rows as tuples);
    `timeout_s`: other than the profile's request timeout (a schema change's)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + _BUSY_GIVE_UP_S
    wait = _BUSY_RETRY_S
    timeout = {} if timeout_s is None else {"timeout": timeout_s}
    while True:
        try:
            response = session.execute_async(
                statement, params, execution_profile=profile, **timeout
            )
            return await _page(response)
        except StoreUnavailable as error:
            if not _only_busy(error.__cause__) or loop.time() + wait > give_up:
                raise
        await asyncio.sleep(wait)
        wait = min(wait * 2, _BUSY_WAIT_MAX_S)


def _only_busy(error: BaseException | None) -> bool:
    """Whether no host took the request because its connection could not send: nothing of
    it went out, so it may be sent again."""
    if not isinstance(error, NoHostAvailable) or not error.errors:
        return False
    return all(isinstance(e, ConnectionBusy) for e in error.errors.values())


async def stream(
    session: Session,
    statement: str | Statement,
    params: Params = None,
    profile: object = EXEC_PROFILE_DEFAULT,
) -> AsyncIterator[Any]:
    """Yield the rows of a query page by page; the next page is fetched only when needed."""
    async for rows in stream_pages(session, statement, params, profile):
        for row in rows:
            yield row


async def stream_pages(
    session: Session,
    statement: str | Statement,
    params: Params = None,
    profile: object = EXEC_PROFILE_DEFAULT,
    ahead: bool = False,
) -> AsyncIterator[list[Any]]:
    """Yield the pages of a query's rows; the next page is fetched only when needed, or with
    `ahead` while this one is consumed (Cassandra reads it meanwhile: two pages held)."""
    response = session.execute_async(statement, params, execution_profile=profile)
    rows = await _page(response)
    while True:
        more = response.has_more_pages  # this page's paging state, before a fetch resets it
        if ahead and more:
            response.clear_callbacks()  # this page's: the next one's come once it is awaited
            response.start_fetching_next_page()
        yield rows
        if not more:
            return
        if not ahead:
            response.start_fetching_next_page()  # resets the result; the callbacks come after
        rows = await _page(response)


async def in_window(run: Callable[[T], Awaitable[None]], items: Iterable[T], window: int) -> None:
    """`run` each of `items` (taken lazily), at most `window` at a time, in lanes that each take
    the next item (not a Semaphore: its acquire scans all its waiters); no more lanes than
    items, so a small batch (one record, at low load) does not pay for the window's tasks."""
    pending = iter(items)
    first = list(itertools.islice(pending, window))
    taken = itertools.chain(first, pending)

    async def lane() -> None:
        for item in taken:  # shared: each goes to the first free lane
            await run(item)

    if len(first) == 1:
        await lane()  # no task at all
    else:
        await asyncio.gather(*(lane() for _ in first))


async def execute_in_window(
    session: Session, requests: Iterable[tuple[Statement, Params]], window: int
) -> None:
    """Run `requests` (built as they are taken), `window` at a time: enough to keep Cassandra
    busy, few enough not to overload the driver's connections."""

    async def run(request: tuple[Statement, Params]) -> None:
        await execute(session, *request)

    await in_window(run, requests, window)
