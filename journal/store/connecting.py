"""A store that a process may start without: it connects in the background meanwhile.

A worker serves appends and reads from Kafka alone while Cassandra is down (the reading flow
folds the journal from Kafka; replication waits and catches up), and that must hold for a
worker (re)started during the outage too: until the store is reached, every call raises
`StoreUnavailable`, as calls to a store that went down do, and the callers already know what to
do then. A store that is reached once stays this one; its driver reconnects by itself later.

A store known to be down is not asked again at once (a breaker): once a call found it
unavailable, reads raise `StoreUnavailable` without asking it for `down_retry_s`, then one read
asks again (the others still fail at once), and any answer closes the breaker. With Cassandra
down, every read tried the store's row first, and the driver's failing attempts took ~23% of a
worker's CPU, taken from the agent indexing a backlog (issue 43). Writes always ask: they are
replication's, which retries with backoff of its own, and whose success says the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import TypeVar

from journal.codec.envelope import Opener
from journal.core.fold import JournalWrite
from journal.core.grow import Grow, Phase
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.errors import StoreAccessDenied, StoreUnavailable
from journal.store.base import EventualStore, FirstPage, JournalMeta, Snapshot, StoredAppend
from journal.store.cassandra import CassandraStore, KeyspaceAccess
from journal.store.topology import DEFAULT_DOWN_RETRY_S

log = logging.getLogger(__name__)

T = TypeVar("T")


class ConnectingStore(EventualStore):
    def __init__(
        self,
        connect: Callable[[], Awaitable[EventualStore]],
        max_snapshot_bytes: int,
        max_backoff_s: float = 5.0,
        down_retry_s: float = DEFAULT_DOWN_RETRY_S,
    ) -> None:
        self._connect = connect
        self._max_snapshot_bytes = max_snapshot_bytes
        self._max_backoff_s = max_backoff_s
        self._down_retry_s = down_retry_s
        self._store: EventualStore | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._down_until = 0.0  # monotonic: reads fail at once before it (0: the store is up)

    @classmethod
    async def start(
        cls,
        connect: Callable[[], Awaitable[EventualStore]],
        max_snapshot_bytes: int,
        max_backoff_s: float = 5.0,
        down_retry_s: float = DEFAULT_DOWN_RETRY_S,
    ) -> ConnectingStore:
        """Connect now if the store answers, else in the background; any failure but
        `StoreUnavailable` (a wrong login, a schema of another version) is raised here."""
        store = cls(connect, max_snapshot_bytes, max_backoff_s, down_retry_s)
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

    @property
    def keyspace_access(self) -> KeyspaceAccess:
        """The reached store's (`CassandraStore.keyspace_access`); StoreUnavailable before."""
        store = self._reached()
        if not isinstance(store, CassandraStore):
            raise TypeError("keyspace_access is a Cassandra store's")
        return store.keyspace_access

    def _reading(self) -> EventualStore:
        """The store for a read, unless it is known down (the breaker: see the module)."""
        store = self._reached()
        if self._down_until:
            now = time.monotonic()
            if now < self._down_until:
                raise StoreUnavailable(
                    f"the store failed less than {self._down_retry_s:g} s ago; not asked "
                    f"again for {self._down_until - now:.2f} s"
                )
            self._down_until = now + self._down_retry_s  # this read asks; the others wait
        return store

    def _failed(self) -> None:
        self._down_until = time.monotonic() + self._down_retry_s

    async def _read(self, call: Callable[[EventualStore], Awaitable[T]]) -> T:
        store = self._reading()
        try:
            answer = await call(store)
        except StoreAccessDenied:
            raise  # a right this principal lacks, for this statement: the store is up
        except StoreUnavailable:
            self._failed()
            raise
        self._down_until = 0.0
        return answer

    async def _write(self, call: Callable[[EventualStore], Awaitable[T]]) -> T:
        store = self._reached()
        try:
            answer = await call(store)
        except StoreAccessDenied:
            raise  # e.g. a reader's role may not write: its reads still go to the store
        except StoreUnavailable:
            self._failed()
            raise
        self._down_until = 0.0
        return answer

    async def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
        if self._store is not None:
            await self._store.close()

    async def recorded_partitions(self, topic: str, partitions: int) -> int | None:
        return await self._read(lambda store: store.recorded_partitions(topic, partitions))

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

    async def deadlines_carried(self, topic: str, app: str, partition: int) -> bool:
        return await self._reached().deadlines_carried(topic, app, partition)

    async def record_deadlines_carried(self, topic: str, app: str, partition: int) -> None:
        await self._reached().record_deadlines_carried(topic, app, partition)

    async def pointer(self, topic: str, partition: int) -> int | None:
        return await self._read(lambda store: store.pointer(topic, partition))

    async def pointers(self, topic: str) -> dict[int, int]:
        return await self._read(lambda store: store.pointers(topic))

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        return await self._read(lambda store: store.meta(key))

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        async for page in self.read_pages(key, meta, from_, to):
            for record in page:
                yield record

    async def read_pages(
        self,
        key: JournalKey,
        meta: JournalMeta,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
        opener: Opener | None = None,
    ) -> AsyncIterator[list[EventRecord]]:
        pages = self._reading().read_pages(key, meta, from_, to, opener)
        try:
            async for page in pages:
                yield page
        except StoreUnavailable:
            self._failed()
            raise

    async def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        async for append in self._reached().appends(topic, partition, after, to):
            yield append

    async def append_events(
        self, append: StoredAppend, opener: Opener | None = None
    ) -> AsyncIterator[EventRecord]:
        async for record in self._reached().append_events(append, opener):
            yield record

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        return await self._read(lambda store: store.journal_ids(topic, prefix, after, limit))

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        return await self._read(lambda store: store.first_page(key, from_, to, opener))

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return await self._read(lambda store: store.stored(keys))

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        return await self._write(lambda store: store.apply(writes, stored))

    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        await self._write(lambda store: store.remove(writes, stored))

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await self._write(lambda store: store.save_pointer(topic, partition, offset))

    @property
    def max_snapshot_bytes(self) -> int:
        return self._max_snapshot_bytes

    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        await self._reached().put_snapshot(key, snapshot)

    async def latest_snapshot(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        return await self._read(lambda store: store.latest_snapshot(key, max_seq_nr, after, before))

    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        await self._reached().delete_snapshots(key, to, mark)
