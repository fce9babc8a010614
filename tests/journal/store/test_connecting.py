from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from journal.core.model import JournalKey
from journal.errors import StoreAccessDenied, StoreUnavailable
from journal.store.base import EventualStore, JournalMeta
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


class _Outage(MemoryStore):
    """A store that is down while `down`, counting the reads of rows it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.denied = False  # writes refused a right, as a reader's role is
        self.asked = 0

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        self.asked += 1
        if self.down:
            raise StoreUnavailable("down")
        return await super().meta(key)

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        if self.down:
            raise StoreUnavailable("down")
        if self.denied:
            raise StoreAccessDenied("Cassandra denied MODIFY")
        await super().save_pointer(topic, partition, offset)


async def _started(inner: EventualStore, down_retry_s: float) -> ConnectingStore:
    async def connect() -> EventualStore:
        return inner

    return await ConnectingStore.start(connect, 1024, down_retry_s=down_retry_s)


async def test_once_a_read_found_the_store_down_reads_fail_at_once_until_one_asks_again() -> None:
    # with Cassandra down each read's attempt cost the driver's CPU (issue 43)
    inner = _Outage()
    store = await _started(inner, down_retry_s=0.2)
    key = JournalKey("topic", "id")
    try:
        inner.down = True
        with pytest.raises(StoreUnavailable):
            await store.meta(key)
        for _ in range(5):
            with pytest.raises(StoreUnavailable, match="not asked again"):
                await store.meta(key)
        assert inner.asked == 1  # the store was not asked again
        inner.down = False

        async def asked_again() -> bool:  # after down_retry_s, one read asks: it answers
            try:
                return await store.meta(key) is None
            except StoreUnavailable:
                return False

        await eventually(asked_again, "a read asks the store again", interval_s=0.05)
        assert inner.asked == 2
        assert await store.meta(key) is None and inner.asked == 3  # closed: every read asks
    finally:
        await store.close()


async def test_writes_always_ask_and_one_that_succeeds_closes_the_breaker() -> None:
    inner = _Outage()
    store = await _started(inner, down_retry_s=3600.0)
    key = JournalKey("topic", "id")
    try:
        inner.down = True
        with pytest.raises(StoreUnavailable):
            await store.save_pointer("topic", 0, 1)
        with pytest.raises(StoreUnavailable, match="not asked again"):
            await store.meta(key)
        assert inner.asked == 0
        inner.down = False
        await store.save_pointer("topic", 0, 1)  # replication's write says the store is back
        assert await store.meta(key) is None and inner.asked == 1
    finally:
        await store.close()


async def test_a_right_refused_is_no_outage_the_reads_after_it_ask() -> None:
    # the secured stack's client role may not write: its refused write is not the store down
    # (CI: the next read was refused "not asked again" though the store was up)
    inner = _Outage()
    store = await _started(inner, down_retry_s=3600.0)
    try:
        inner.denied = True
        with pytest.raises(StoreAccessDenied):
            await store.save_pointer("topic", 0, 1)
        assert await store.meta(JournalKey("topic", "id")) is None and inner.asked == 1
    finally:
        await store.close()


async def test_with_no_retry_interval_every_read_asks() -> None:
    inner = _Outage()
    store = await _started(inner, down_retry_s=0.0)
    try:
        inner.down = True
        for _ in range(3):
            with pytest.raises(StoreUnavailable, match="down"):
                await store.meta(JournalKey("topic", "id"))
        assert inner.asked == 3
    finally:
        await store.close()
