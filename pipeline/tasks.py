"""Running the core's asyncio code inside a Spark task, with its own Cassandra store.

Contract: each function runs in one Spark task (a Python worker process): it opens a fresh
event loop and a `CassandraStore` on `config` (the driver has created the schema already),
and closes both before it returns, or, for `stream_with_store`, once the iterator is
exhausted or closed. Nothing is shared between tasks, so a task can run on any executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import TypeVar

from journal.store import CassandraConfig, CassandraStore

T = TypeVar("T")


def run_with_store(config: CassandraConfig, work: Callable[[CassandraStore], Awaitable[T]]) -> T:
    """`work(store)` to completion on a fresh loop; the store is closed afterwards."""

    async def main() -> T:
        store = await CassandraStore.connect(config)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def stream_with_store(
    config: CassandraConfig, produce: Callable[[CassandraStore], AsyncGenerator[T, None]]
) -> Iterator[T]:
    """The items of `produce(store)`, one at a time: never more than one item in hand."""
    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(CassandraStore.connect(config))
        try:
            items = produce(store)
            try:
                while True:
                    try:
                        item = loop.run_until_complete(anext(items))
                    except StopAsyncIteration:
                        return
                    yield item
            finally:
                loop.run_until_complete(items.aclose())
        finally:
            loop.run_until_complete(store.close())
    finally:
        loop.close()
