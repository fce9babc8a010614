from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from journal.core.model import JournalKey
from journal.errors import StoreUnavailable
from journal.store.base import EventualStore
from journal.store.connecting import ConnectingStore
from journal.store.memory import MemoryStore
from tests.journal.store.contract import SNAPSHOT_LIMIT, EventualStoreContract
from tests.support.eventually import eventually


class TestConnectingStore(EventualStoreContract):
    """Once connected it is the store it reached, whole."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[ConnectingStore]:
        inner = MemoryStore(max_snapshot_bytes=SNAPSHOT_LIMIT)

        async def connect() -> EventualStore:
            return inner

        store = await ConnectingStore.start(connect, SNAPSHOT_LIMIT)
        yield store
        await store.close()


async def test_a_store_down_at_the_start_is_unavailable_until_reached() -> None:
    inner = MemoryStore()
    down = 3
    attempts = 0

    async def connect() -> EventualStore:
        nonlocal attempts
        attempts += 1
        if attempts <= down:
            raise StoreUnavailable("down")
        return inner

    store = await ConnectingStore.start(connect, 1024, max_backoff_s=0.01)
    key = JournalKey("topic", "id")
    with pytest.raises(StoreUnavailable):
        await store.meta(key)
    with pytest.raises(StoreUnavailable):
        [r async for r in store.appends("topic", 0, -1, 10)]

    async def connected() -> bool:  # soon: the backoff is capped at 10 ms
        return store.connected

    await eventually(connected, "the store connects", interval_s=0.01)
    assert attempts == down + 1
    assert await store.meta(key) is None and await store.pointers("topic") == {}
    await store.close()


async def test_a_failure_other_than_an_outage_is_raised_at_the_start() -> None:
    async def connect() -> EventualStore:
        raise PermissionError("wrong login")

    with pytest.raises(PermissionError):
        await ConnectingStore.start(connect, 1024)
