"""A store that a process may start without: it connects in the background meanwhile.

A worker serves appends and reads from Kafka alone while Cassandra is down (the reading flow
folds the journal from Kafka; replication waits and catches up), and that must hold for a
worker (re)started during the outage too: until the store is reached, every call raises
`StoreUnavailable`, as calls to a store that went down do, and the callers already know what to
do then. A store that is reached once stays this one; its driver reconnects by itself later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence

from journal.core.fold import JournalWrite
from journal.core.grow import Grow, Phase
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.errors import StoreUnavailable
from journal.store.base import EventualStore, FirstPage, JournalMeta, Snapshot, StoredAppend

log = logging.getLogger(__name__)


class ConnectingStore(EventualStore):
    def __init__(
        self,
        connect: Callable[[], Awaitable[EventualStore]],
        max_snapshot_bytes: int,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._connect = connect
        self._max_snapshot_bytes = max_snapshot_bytes
        self._max_backoff_s = max_backoff_s
        self._store: EventualStore | None = None
        self._connecting: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        connect: Callable[[], Awaitable[EventualStore]],
        max_snapshot_bytes: int,
        max_backoff_s: float = 5.0,
    ) -> ConnectingStore:
        """Connect now if the store answers, else in the background; any failure but
        `StoreUnavailable` (a wrong login, a schema of another version) is raised here."""
        store = cls(connect, max_snapshot_bytes, max_backoff_s)
        try:
            store._store = await connect()
        except StoreUnavailable as error:
            log.warning("the store is unavailable, serving without it meanwhile: %s", error)
            store._connecting = asyncio.create_task(store._keep_connecting())
        return store

    @property
    def connected(self) -> bool:
        return self._store is not None

    async def _keep_connecting(self) -> None:
        backoff = 0.2
        while True:
            await asyncio.sleep(backoff)
            try:
                self._store = await self._connect()
            except StoreUnavailable:
                backoff = min(backoff * 2, self._max_backoff_s)
                continue
            except Exception:  # not an outage: keep the process serving from Kafka, say why
                log.exception("connecting to the store failed; again in %.1fs", self._max_backoff_s)
                backoff = self._max_backoff_s
                continue
            log.info("the store is connected")
            return

    def _reached(self) -> EventualStore:
        if self._store is None:
            raise StoreUnavailable("the store has not been reached since this process started")
        return self._store

    async def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
        if self._store is not None:
            await self._store.close()

    async def recorded_partitions(self, topic: str, partitions: int) -> int | None:
        return await self._reached().recorded_partitions(topic, partitions)

    async def grow(self, topic: str) -> Grow | None:
        return await self._reached().grow(topic)

    async def record_plan(self, topic: str, new_topic: str, partitions: int) -> Grow:
        return await self._reached().record_plan(topic, new_topic, partitions)

    async def record_phase(self, topic: str, phase: Phase) -> None:
        await self._reached().record_phase(topic, phase)

    async def record_low(self, topic: str, partition: int, offset: int) -> None:
        await self._reached().record_low(topic, partition, offset)

    async def record_cut(self, topic: str, partition: int, offset: int) -> None:
        await self._reached().record_cut(topic, partition, offset)

    async def pointer(self, topic: str, partition: int) -> int | None:
        return await self._reached().pointer(topic, partition)

    async def pointers(self, topic: str) -> dict[int, int]:
        return await self._reached().pointers(topic)

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        return await self._reached().meta(key)

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        async for record in self._reached().read(key, meta, from_, to):
            yield record

    async def read_pages(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[list[EventRecord]]:
        async for page in self._reached().read_pages(key, meta, from_, to):
            yield page

    async def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        async for append in self._reached().appends(topic, partition, after, to):
            yield append

    async def append_events(self, append: StoredAppend) -> AsyncIterator[EventRecord]:
        async for record in self._reached().append_events(append):
            yield record

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        return await self._reached().journal_ids(topic, prefix, after, limit)

    async def first_page(self, key: JournalKey, from_: int, to: int) -> FirstPage:
        return await self._reached().first_page(key, from_, to)

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return await self._reached().stored(keys)

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        return await self._reached().apply(writes, stored)

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await self._reached().save_pointer(topic, partition, offset)

    @property
    def max_snapshot_bytes(self) -> int:
        return self._max_snapshot_bytes

    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        await self._reached().put_snapshot(key, snapshot)

    async def latest_snapshot(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        return await self._reached().latest_snapshot(key, max_seq_nr, after, before)

    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        await self._reached().delete_snapshots(key, to, mark)
