"""The direct client: `Journals` (one per process) hands out `Journal`s (one per id).

The reading flow (design.md), for every read and every look at a journal's state:
1. Produce Mark(id) to the journal's partition; meanwhile read the partition's replicated
   pointer and then the journal's metadata from the store (pointer first: the head read from
   Kafka then covers everything the metadata may not).
2. If the pointer has reached the Mark, Kafka holds nothing newer: the store answers alone.
3. Otherwise read the head (the journal's records between pointer and Mark) from Kafka,
   once, keeping only this journal's records.
4. Apply the head's Purge and Deletes, then stream the store's events above deleteTo, then
   the head's events above the last seqNr the store gave.
Nothing is returned before step 3 is complete, so a Delete not yet replicated is honoured.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from journal.head import Head, HeadReader, HeadSource, KafkaReadConfig
from journal.metrics import METRICS
from journal.model import (
    SEQ_NR_MAX,
    Event,
    EventRecord,
    Events,
    HeaderMetadata,
    JournalKey,
    PayloadMetadata,
    Position,
    check_seq_nr,
)
from journal.producer import JournalProducer
from journal.settings import Settings
from journal.store.base import EventualJournal, EventualStore, JournalMeta, StoreUnavailable
from journal.store.cassandra import CassandraStore
from journal.topic import ensure_topic
from journal.writer import JournalWriter


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """A journal's state as of the read: last seqNr and deleteTo (None when there is none)."""

    seq_nr: int | None
    delete_to: int | None


@dataclass(frozen=True, slots=True)
class Deleted:
    """The answer to a delete: the new deleteTo and where the Delete landed (None: no-op)."""

    delete_to: int | None
    position: Position | None


@dataclass(slots=True)
class _Snapshot:
    """The store's metadata and the Kafka head of one journal, taken at one Mark."""

    partition: int
    meta: JournalMeta | None
    head: Head

    @property
    def info(self) -> JournalInfo:
        head, meta = self.head, self.meta
        base_seq_nr = None if head.purged or meta is None else meta.seq_nr
        base_delete_to = None if head.purged or meta is None else meta.delete_to
        seq_nr = head.seq_nr or base_seq_nr
        delete_tos = [d for d in (base_delete_to, head.delete_to) if d is not None]
        delete_to = max(delete_tos) if delete_tos else None
        if delete_to is not None and seq_nr is not None:
            delete_to = min(delete_to, seq_nr)
        return JournalInfo(seq_nr, delete_to)


_SPILL_FETCH = 16  # Appends fetched again at a time, when a head outgrew its budget


class Journals:
    """Appends and reads journals of one topic, through Kafka and the eventual store."""

    def __init__(
        self,
        topic: str,
        writer: JournalWriter,
        store: EventualJournal,
        heads: HeadSource,
        origin: str | None = None,
    ) -> None:
        self.topic = topic
        self.writer = writer
        self.store = store
        self.heads = heads
        self.origin = origin
        self._on_close: list[Callable[[], Awaitable[None]]] = [heads.close]
        #: the store's write side when this client owns a whole store (`connect`)
        self.replicated_store: EventualStore | None = None

    @classmethod
    async def connect(
        cls,
        settings: Settings,
        origin: str | None = None,
        *,
        store: EventualStore | None = None,
        heads: HeadSource | None = None,
    ) -> Journals:
        """Connect to Kafka and Cassandra from `settings`, creating topic and schema if needed.

        `store` replaces the Cassandra store of `settings`, `heads` the Kafka scan (a worker
        passes its tables); both are closed with the rest.
        """
        partitions = await ensure_topic(settings.kafka_bootstrap, settings.topic_spec())
        producer = JournalProducer(
            settings.kafka_bootstrap,
            linger_ms=0,
            max_request_size=max(settings.max_record_bytes + 1024, 1_048_576),
        )
        await producer.start()
        try:
            store = store or await CassandraStore.connect(settings.cassandra_config())
        except BaseException:
            await producer.stop()
            raise
        journals = cls(
            settings.topic,
            JournalWriter(producer, partitions, settings.max_record_bytes),
            store,
            heads or HeadReader(KafkaReadConfig(bootstrap=settings.kafka_bootstrap)),
            origin,
        )
        journals._on_close += [producer.stop, store.close]
        journals.replicated_store = store
        return journals

    async def close(self) -> None:
        """Close what `connect` opened."""
        for close in self._on_close:
            await close()

    def journal(self, journal_id: str) -> Journal:
        return Journal(self, JournalKey(self.topic, journal_id))

    async def _snapshot(self, key: JournalKey) -> _Snapshot:
        partition = self.writer.partition_of(key)
        mark = asyncio.create_task(self.writer.mark(key, uuid.uuid4().hex, origin=self.origin))
        try:
            pointer = await self.store.pointer(key.topic, partition)
            meta = await self.store.meta(key)
        except StoreUnavailable as error:
            return await self._snapshot_without_store(key, partition, await mark, error)
        except BaseException:
            mark.cancel()
            raise
        position = await mark
        if pointer is not None and pointer >= position.offset:
            METRICS.counter("journal_reads_total", path="replicated").inc()
            return _Snapshot(partition, meta, Head())
        METRICS.counter("journal_reads_total", path="kafka_head").inc()
        head = await self.heads.read(key, partition, pointer, position.offset)
        if head.after is not None and head.after != pointer:
            meta = await self.store.meta(key)  # the head continues a newer pointer: catch up
        return _Snapshot(partition, meta, head)

    async def _snapshot_without_store(
        self, key: JournalKey, partition: int, mark: Position, error: StoreUnavailable
    ) -> _Snapshot:
        """Kafka alone, when it still holds the whole journal (invariant 5)."""
        head = await self.heads.read_whole(key, partition, mark.offset)
        if head is None:
            raise StoreUnavailable(f"{error}; Kafka alone no longer holds all of {key}") from error
        METRICS.counter("journal_reads_total", path="kafka_only").inc()
        return _Snapshot(partition, None, head)


class Journal:
    """One journal. Cheap to create; every method is one round of the reading or writing path."""

    def __init__(self, journals: Journals, key: JournalKey) -> None:
        self._journals = journals
        self.key = key

    async def append(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata = PayloadMetadata(),
        header_metadata: HeaderMetadata = HeaderMetadata(),
        headers: Mapping[str, str] | None = None,
    ) -> Position:
        """Append consecutive events atomically; returns once Kafka acknowledged (acks=all)."""
        return await self._journals.writer.append(
            self.key,
            Events(tuple(events), metadata),
            metadata=header_metadata,
            headers=headers,
            origin=self._journals.origin,
        )

    async def info(self) -> JournalInfo:
        """The last seqNr and deleteTo, as a read starting now would see them."""
        snapshot = await self._journals._snapshot(self.key)
        return snapshot.info

    async def read(
        self, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[EventRecord]:
        """Stream the events in [from_, to], at most `limit`, in seqNr order."""
        check_seq_nr(from_, "from")
        check_seq_nr(to, "to")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        snapshot = await self._journals._snapshot(self.key)
        remaining = SEQ_NR_MAX if limit is None else limit
        async for record in self._merged(snapshot, from_, to):
            if remaining <= 0:
                return
            remaining -= 1
            yield record

    async def _merged(self, snapshot: _Snapshot, from_: int, to: int) -> AsyncIterator[EventRecord]:
        head, meta = snapshot.head, snapshot.meta
        delete_to = snapshot.info.delete_to or 0
        last = max(delete_to, from_ - 1)
        if meta is not None and not head.purged:
            store_meta = JournalMeta(
                meta.partition, meta.offset, meta.seq_nr, delete_to, meta.segment_size
            )
            async for record in self._journals.store.read(self.key, store_meta, last + 1, to):
                if record.seq_nr > last:  # a replayed or concurrent row never goes back
                    last = record.seq_nr
                    yield record
        async for record in self._head_events(snapshot):
            if last < record.seq_nr <= to:
                last = record.seq_nr
                yield record

    async def _head_events(self, snapshot: _Snapshot) -> AsyncIterator[EventRecord]:
        """The head's events: those it holds, then those it spilled, fetched a few at a time."""
        for record in snapshot.head.events:
            yield record
        spilled = snapshot.head.spilled
        if spilled:
            METRICS.counter("journal_reads_spilled_total").inc()
        for start in range(0, len(spilled), _SPILL_FETCH):
            offsets = spilled[start : start + _SPILL_FETCH]
            fetched = await self._journals.heads.read_at(self.key, snapshot.partition, offsets)
            for record in fetched.events:
                yield record

    async def delete(self, to: int) -> Deleted:
        """Delete events up to min(to, last seqNr); a no-op when nothing new would go."""
        check_seq_nr(to, "to")
        info = await self.info()
        if info.seq_nr is None:
            return Deleted(info.delete_to, None)
        target = min(to, info.seq_nr)
        if info.delete_to is not None and target <= info.delete_to:
            return Deleted(info.delete_to, None)
        position = await self._journals.writer.delete(
            self.key, target, origin=self._journals.origin
        )
        return Deleted(target, position)

    async def purge(self) -> Position:
        """Remove the whole journal; a later append may start at seqNr 1 again."""
        return await self._journals.writer.purge(self.key, origin=self._journals.origin)
