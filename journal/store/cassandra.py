"""The eventual store on Apache Cassandra: `CassandraStore` composes its parts on one
cassandra-driver session: `cluster.py` connects, `schema.py` creates or checks the tables,
`reads.py` and `id_pages.py` serve the read side, `writes.py` replication's writes,
`chunked_snapshots.py` the snapshots (`statements.py`: their CQL; `rows.py`: row codecs).
`keyspace_access` hands code with tables of its own in the keyspace what it needs of the store,
and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass

from cassandra.cluster import Cluster, Session

from journal.codec.envelope import Opener
from journal.core.fold import JournalWrite
from journal.core.grow import Grow, Phase
from journal.core.listing import Listing, ListingPhase
from journal.core.model import (
    SEQ_NR_MAX,
    EventRecord,
    JournalKey,
)
from journal.store import grow as grow_registry
from journal.store import id_pages
from journal.store import listing as listing_record
from journal.store.base import EventualStore, FirstPage, JournalMeta, Snapshot, StoredAppend
from journal.store.chunked_snapshots import ChunkedSnapshots
from journal.store.cluster import PROTOCOL_VERSION as PROTOCOL_VERSION
from journal.store.cluster import CassandraConfig as CassandraConfig  # the store's, named here
from journal.store.cluster import open_session, write_level
from journal.store.listing import ListingViews
from journal.store.reads import Reads
from journal.store.schema import check_schema, ensure_schema, record_partitions
from journal.store.statements import Statements
from journal.store.writes import Writes


@dataclass(frozen=True, slots=True)
class KeyspaceAccess:
    """The store's keyspace for code with tables of its own there: the driver's session, the
    keyspace, the driver's value of the write consistency (`write_level`: writes are marked
    with it by `statements.idempotent`, as the store's own) and whether this process creates
    schema (`create_schema`: else an administrator created the tables)."""

    session: Session
    keyspace: str
    write_level: int
    create_schema: bool


class CassandraStore(EventualStore):
    """Both sides of the eventual store on one cassandra-driver session."""

    def __init__(self, cluster: Cluster, session: Session, config: CassandraConfig) -> None:
        self._cluster = cluster
        self._session = session
        self._config = config
        self._statements = statements = Statements(session, config.keyspace, write_level(config))
        self._reads = Reads(session, statements, config.segment_size)
        self._listings = ListingViews(session, config.keyspace, config.listing_lease_s)
        self._writes = Writes(
            session,
            statements,
            config.segment_size,
            config.window,
            self._listings,
            config.appends_ttl_s,
        )
        self._snapshots = ChunkedSnapshots(
            session, statements, config.max_snapshot_bytes, config.snapshot_chunk_bytes
        )

    @classmethod
    async def connect(cls, config: CassandraConfig) -> CassandraStore:
        """Connect, create or check the schema, prepare statements. StoreUnavailable when no
        host can be reached, StoreLoginRefused for a wrong login."""
        cluster, session = await open_session(config)
        try:
            if config.create_schema:
                await ensure_schema(session, config.keyspace, config.replication)
            else:
                await check_schema(session, config.keyspace)
            return await asyncio.to_thread(cls, cluster, session, config)  # prepare blocks too
        except BaseException:
            await asyncio.to_thread(cluster.shutdown)
            raise

    @property
    def keyspace_access(self) -> KeyspaceAccess:
        """The session and keyspace for tables that are not the store's, with the store's
        write consistency: the journal's tables are the store's methods' alone."""
        config = self._config
        return KeyspaceAccess(
            self._session, config.keyspace, write_level(config), config.create_schema
        )

    async def close(self) -> None:
        await asyncio.to_thread(self._cluster.shutdown)

    async def recorded_partitions(self, topic: str, partitions: int) -> int | None:
        return await record_partitions(self._session, self._config.keyspace, topic, partitions)

    async def grow(self, topic: str) -> Grow | None:
        return await grow_registry.read_grow(self._session, self._config.keyspace, topic)

    async def predecessors(self) -> dict[str, str]:
        """Each grown topic's old topic, over every grow recorded (`read_predecessors`)."""
        return await grow_registry.read_predecessors(self._session, self._config.keyspace)

    async def record_plan(self, topic: str, new_topic: str, partitions: int) -> Grow:
        keyspace = self._config.keyspace
        return await grow_registry.record_plan(
            self._session, keyspace, topic, new_topic, partitions
        )

    async def record_phase(self, topic: str, phase: Phase) -> None:
        await grow_registry.record_phase(self._session, self._config.keyspace, topic, phase)

    async def record_low(self, topic: str, partition: int, offset: int) -> None:
        keyspace = self._config.keyspace
        await grow_registry.record_partition(
            self._session, keyspace, topic, partition, "low", offset
        )

    async def record_cut(self, topic: str, partition: int, offset: int) -> None:
        keyspace = self._config.keyspace
        await grow_registry.record_partition(
            self._session, keyspace, topic, partition, "cut", offset
        )

    async def deadlines_carried(self, topic: str, app: str, partition: int) -> bool:
        keyspace = self._config.keyspace
        return await grow_registry.read_deadlines_carried(
            self._session, keyspace, topic, app, partition
        )

    async def record_deadlines_carried(self, topic: str, app: str, partition: int) -> None:
        keyspace = self._config.keyspace
        await grow_registry.record_deadlines_carried(self._session, keyspace, topic, app, partition)

    # The listing's generations (`listing.py`): the `schema grow-listing` command's.

    async def listing(self, topic: str) -> Listing:
        """The record of `topic`'s listing, read now (with the copy's progress)."""
        return await listing_record.read_listing(self._session, self._config.keyspace, topic)

    async def record_listing_plan(self, topic: str, listing: Listing, buckets: int) -> Listing:
        keyspace = self._config.keyspace
        return await listing_record.record_plan(self._session, keyspace, topic, listing, buckets)

    async def record_listing_copied(self, topic: str, listing: Listing, bucket: int) -> None:
        keyspace = self._config.keyspace
        await listing_record.record_copied(self._session, keyspace, topic, listing, bucket)

    async def record_listing(self, topic: str, listing: Listing, after: ListingPhase) -> None:
        """Record `listing` if the record's phase is still `after`."""
        keyspace = self._config.keyspace
        await listing_record.record_generations(self._session, keyspace, topic, listing, after)

    async def copy_listing_bucket(self, topic: str, listing: Listing, bucket: int) -> int:
        return await listing_record.copy_bucket(
            self._session, self._statements, topic, listing, bucket, self._config.window
        )

    async def drop_listing_generation(self, topic: str, buckets: int) -> None:
        config = self._config
        await listing_record.drop_generation(
            self._session, config.keyspace, write_level(config), topic, buckets
        )

    # The read side (`reads.py`, `id_pages.py`).

    async def pointer(self, topic: str, partition: int) -> int | None:
        return await self._reads.pointer(topic, partition)

    async def pointers(self, topic: str) -> dict[int, int]:
        return await self._reads.pointers(topic)

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        return await self._reads.meta(key)

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        buckets = (await self._listings.of(topic)).current
        return await id_pages.journal_ids(
            self._session, self._statements, topic, buckets, prefix, after, limit
        )

    def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        return self._reads.read(key, meta, from_, to)

    def read_pages(
        self,
        key: JournalKey,
        meta: JournalMeta,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
        opener: Opener | None = None,
    ) -> AsyncIterator[list[EventRecord]]:
        return self._reads.read_pages(key, meta, from_, to, opener)

    def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        return self._reads.appends(topic, partition, after, to)

    def append_events(
        self, append: StoredAppend, opener: Opener | None = None
    ) -> AsyncIterator[EventRecord]:
        return self._reads.append_events(append, opener)

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        return await self._reads.first_page(key, from_, to, opener)

    def journals_in_token_range(
        self, low: int, high: int
    ) -> AsyncIterator[tuple[JournalKey, JournalMeta]]:
        """Every topic's journals with `low < token(topic, id) <= high` (Murmur3's tokens of
        their partition keys), with their rows, streamed: full scans split into ranges."""
        return self._reads.journals_in_token_range(low, high)

    # The write side (`writes.py`).

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return await self._reads.stored(keys)

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        return await self._writes.apply(writes, stored)

    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        await self._writes.remove(writes, stored)

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await self._writes.save_pointer(topic, partition, offset)

    # Snapshots (`chunked_snapshots.py`).

    @property
    def max_snapshot_bytes(self) -> int:
        return self._snapshots.max_bytes

    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        await self._snapshots.put(key, snapshot)

    async def latest_snapshot(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        return await self._snapshots.latest(key, max_seq_nr, after, before)

    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        await self._snapshots.delete(key, to, mark)
