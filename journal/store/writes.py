"""Replication's writes on Cassandra: a batch's folded writes planned as mutations per
Cassandra partition (`Writes`: events, deletions, the `appends` and `journals` rows), packed
into unlogged batches (`Packer`) and run a window at a time."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.cluster import Session
from cassandra.query import BatchStatement, PreparedStatement, Statement

from journal.core.fold import JournalWrite, Removal
from journal.core.listing import listing_bucket
from journal.core.model import ActionRecord, AppendHeader, JournalKey
from journal.store import cql
from journal.store.base import JournalMeta, base_after
from journal.store.cluster import ROWS_AS_TUPLES
from journal.store.cql import Params
from journal.store.listing import ListingViews
from journal.store.rows import record_row
from journal.store.schema import APPEND_BUCKET
from journal.store.statements import Statements
from journal.store.topology import DEFAULT_APPENDS_TTL_S

# a single-partition unlogged batch (one segment of one journal) is split past this many
# record bytes, to keep each mutation far below Cassandra's limit
_BATCH_BYTES = 1_000_000
# partitions per multi-partition unlogged batch: Cassandra's warning threshold for them
# (unlogged_batch_across_partitions_warn_threshold)
_PARTITIONS_PER_BATCH = 10
# estimated bytes of a multi-partition batch: below batch_size_warn_threshold (5 KiB; such
# batches fail past batch_size_fail_threshold, 50 KiB); `_ROW_BYTES` per row beside payloads
# (4,000 estimated was 5,319 bytes to Cassandra: its warning)
_SHARED_BATCH_BYTES = 3_000
_ROW_BYTES = 150
_APPENDS_PER_BATCH = 200  # rows of the `appends` table per unlogged batch (one partition)


Mutation = tuple[PreparedStatement, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Partition:
    """Mutations of one Cassandra partition (`partitions` > 1: a few tiny ones counted as
    one group), with their estimated size in bytes."""

    mutations: list[Mutation]
    weight: int
    partitions: int = 1

    @classmethod
    def of(cls, statement: PreparedStatement, values: tuple[Any, ...]) -> Partition:
        return cls([(statement, values)], _ROW_BYTES)


class Packer:
    """Packs partitions' mutations into unlogged batches: small ones share a batch (at most
    `_PARTITIONS_PER_BATCH` partitions, `_SHARED_BATCH_BYTES`), a large one goes alone.
    Batches come from `new_batch` (`Statements.batch`: idempotent, at the write level)."""

    def __init__(self, new_batch: Callable[[], BatchStatement]) -> None:
        self._new_batch = new_batch
        self._batch = new_batch()
        self._partitions = 0
        self._weight = 0

    def requests(self, groups: Iterable[Partition]) -> Iterator[tuple[Statement, Params]]:
        for group in groups:
            if group.weight > _SHARED_BATCH_BYTES:
                yield _batch_of(self._new_batch(), group.mutations), None
                continue
            if (
                self._partitions + group.partitions > _PARTITIONS_PER_BATCH
                or self._weight + group.weight > _SHARED_BATCH_BYTES
            ):
                yield from self._flush()
            for statement, values in group.mutations:
                self._batch.add(statement, values)
            self._partitions += group.partitions
            self._weight += group.weight
        yield from self._flush()

    def _flush(self) -> Iterator[tuple[Statement, Params]]:
        if self._partitions:
            yield self._batch, None
        self._batch = self._new_batch()
        self._partitions = self._weight = 0


def _batch_of(batch: BatchStatement, mutations: Sequence[Mutation]) -> BatchStatement:
    for statement, values in mutations:
        batch.add(statement, values)
    return batch


class Writes:
    """The write side on one session: `segment_size` for new journals (and purged ones),
    `window` requests of a batch in flight.

    `apply` writes each journal's events of a segment (a single Cassandra partition) together,
    with what a Purge or Delete removed and the `appends` rows; then the rows of the `journals`
    table, once per journal, each with its `journal_ids` change when the batch made the journal
    exist or purged it. A request costs the client far more CPU than a row does, so small
    partitions' mutations share an unlogged batch (`Packer`: a few partitions and a few KiB,
    under Cassandra's warning thresholds for multi-partition batches); a large one goes alone
    (single-partition batches have no size threshold). Every cell is stamped with its action's
    offset + 1 (`schema.py`), so the requests of one journal need no order among them, and a
    replay cannot overwrite newer cells. Replication reads the rows it folds onto (`stored`)
    only for journals it has not written lately (`journal.replication.replicate`), and for a
    Delete or Purge the offsets of the stored events it removes (`remove_appends`), first.
    """

    def __init__(
        self,
        session: Session,
        statements: Statements,
        segment_size: int,
        window: int,
        listings: ListingViews,
        appends_ttl_s: int = DEFAULT_APPENDS_TTL_S,
    ) -> None:
        self._session = session
        self._listings = listings
        self._statements = statements
        self._segment_size = segment_size
        self._window = window
        self._appends_ttl_s = appends_ttl_s

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        changed = [write for write in writes if write.changes_store]
        rows = {write.key: self.row_after(write, stored.get(write.key)) for write in changed}
        # the `appends` rows a Delete or Purge removes, before its events go: they are found
        # by the events, so a replay after a crash in between finds them again
        removing = [(write, stored.get(write.key)) for write in changed if write.removal]
        if removing:
            await cql.in_window(self.remove_appends, removing, self._window)
        mutations = itertools.chain(
            (m for write in changed for m in self.mutations(write, stored.get(write.key))),
            self.appends_mutations(changed, rows),
        )
        await cql.execute_in_window(
            self._session, Packer(self._statements.batch).requests(mutations), self._window
        )
        # the rows once every journal's events are durable (a reader trusts a row's seqNr); the
        # listing's generations read now, just before the ids are written (their lease)
        generations = {
            topic: (await self._listings.of(topic)).written
            for topic in {write.key.topic for write in changed if _lists(write)}
        }
        rows_mutations = (
            self.row_mutations(write, rows[write.key], generations.get(write.key.topic, ()))
            for write in changed
        )
        await cql.execute_in_window(
            self._session, Packer(self._statements.batch).requests(rows_mutations), self._window
        )
        return rows

    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        """`apply`'s removals alone: the `appends` rows first, then the events' deletions,
        each stamped as the write's Delete or Purge; no row, no listing."""
        removing = [(write, stored.get(write.key)) for write in writes if write.removal]
        if removing:
            await cql.in_window(self.remove_appends, removing, self._window)
        mutations = (m for write in writes for m in self.mutations(write, stored.get(write.key)))
        await cql.execute_in_window(
            self._session, Packer(self._statements.batch).requests(mutations), self._window
        )

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        """The pointer, in `pointers2` and in version 2's `pointers` (schema.py: version 2
        processes of a rolling upgrade read only that one)."""
        batch = self._statements.batch()
        values = (topic, partition, offset, offset + 1)
        batch.add(self._statements.save_pointer, values)
        batch.add(self._statements.save_legacy_pointer, values)
        await cql.execute(self._session, batch)

    def sizes(self, write: JournalWrite, stored: JournalMeta | None) -> tuple[int, int]:
        """The journal's segment size before the batch, and after it (a Purge starts anew)."""
        before = (stored.segment_size if stored is not None else None) or self._segment_size
        return before, self._segment_size if write.purge is not None else before

    def row_after(self, write: JournalWrite, stored: JournalMeta | None) -> JournalMeta:
        after = write.after
        return JournalMeta(
            write.partition,
            after.offset,
            after.seq_nr or None,
            after.delete_to or None,
            self.sizes(write, stored)[1],
            self.records_from(write, stored),
            base_after(write, stored),
        )

    @staticmethod
    def records_from(write: JournalWrite, stored: JournalMeta | None) -> int:
        """From which seqNr the journal's events are in `event_records` after the batch: a
        journal of version 3 keeps its stored row's (`rows.meta_of`: the seqNr after its last,
        so the batch's Appends go there), a new or purged one has all of them there."""
        return 1 if stored is None or write.purge is not None else stored.records_from

    def mutations(self, write: JournalWrite, stored: JournalMeta | None) -> Iterator[Partition]:
        """One journal's event and deletion mutations, in no particular order: their `USING
        TIMESTAMP`s, from offsets, order their effects."""
        key, before = write.key, write.before
        size_before, size = self.sizes(write, stored)
        # below it, the journal's events are version 3's rows (`events`), deleted there
        legacy_below = 1 if stored is None else stored.records_from
        if write.purge is not None:
            # the journal's snapshots put before the Purge; never later ones (their Marks)
            stamp = write.purge + 1
            yield Partition.of(self._statements.purge_snapshots, (stamp, key.topic, key.id))
            yield Partition.of(self._statements.purge_snapshot_chunks, (stamp, key.topic, key.id))
        if write.purge is not None and before.seq_nr > 0:
            last, purge = before.seq_nr, write.purge
            yield from self.segment_deletes(key, size_before, 0, last, None, purge)
            if legacy_below > 1:
                legacy_last = min(last, legacy_below - 1)
                yield from self.segment_deletes(
                    key, size_before, 0, legacy_last, None, purge, legacy=True
                )
        yield from self.record_partitions(key, size, write.appends)
        if write.delete is not None:
            first = 0 if write.purge is not None else before.delete_to + 1
            delete = write.delete
            yield from self.segment_deletes(key, size, first, delete.to, delete.to, delete.offset)
            if write.purge is None and first < legacy_below:
                legacy_last = min(delete.to, legacy_below - 1)
                yield from self.segment_deletes(
                    key, size, first, legacy_last, delete.to, delete.offset, legacy=True
                )

    def row_mutations(
        self, write: JournalWrite, row: JournalMeta, generations: tuple[int, ...]
    ) -> Partition:
        """The journal's row and, where it came to exist or was purged, its id in its bucket
        of each of the listing's `generations` (two while it grows): a few partitions, counted
        as one group (rows are tiny)."""
        statements = self._statements
        key, stamp = write.key, row.offset + 1
        values = (key.topic, key.id, row.partition, row.offset, row.seq_nr, row.delete_to)
        meta = (*values, row.segment_size, row.records_from, row.base, stamp)
        mutations: list[Mutation] = [(statements.save_meta, meta)]
        if _lists(write):
            listed = write.after.exists
            for buckets in generations:
                id_row = (key.topic, listing_bucket(key.id, buckets), key.id)
                if listed:
                    mutations.append((statements.list_id, (*id_row, stamp)))
                else:
                    mutations.append((statements.unlist_id, (stamp, *id_row)))
        return Partition(mutations, len(mutations) * _ROW_BYTES, len(mutations))

    def appends_mutations(
        self, writes: Sequence[JournalWrite], rows: Mapping[JournalKey, JournalMeta]
    ) -> Iterator[Partition]:
        """The batch's stored Appends, for subscriptions, per bucket (one Cassandra partition),
        written with the events, so before the rows."""
        by_bucket: dict[tuple[str, int, int], list[tuple[Any, ...]]] = {}
        for write in writes:
            size = rows[write.key].segment_size
            for append in write.appends:
                assert isinstance(append.header, AppendHeader)
                seq = append.header.range
                bucket = (write.key.topic, write.partition, append.offset // APPEND_BUCKET)
                by_bucket.setdefault(bucket, []).append(
                    (*bucket, append.offset, write.key.id, seq.from_, seq.to, size)
                )
        insert, ttl = self._statements.insert_append, self._appends_ttl_s
        for values in by_bucket.values():
            values.sort(key=lambda row: row[3])
            for start in range(0, len(values), _APPENDS_PER_BATCH):
                chunk = values[start : start + _APPENDS_PER_BATCH]
                yield Partition(
                    [(insert, (*row, row[3] + 1, ttl)) for row in chunk], len(chunk) * _ROW_BYTES
                )

    async def remove_appends(self, removing: tuple[JournalWrite, JournalMeta | None]) -> None:
        """Delete the `appends` rows of the stored Appends `write` removes wholly
        (`JournalWrite.removal`), found by their events' offsets, read a page at a time (an
        Append's events are consecutive and share its offset) and deleted page by page: a
        Purge of a long journal holds a page, never the journal. Stamped with the removing
        action's offset + 1: a replay of a removed Append is shadowed, a later Append of the
        journal (another offset, another row) is not."""
        write, stored = removing
        removal = write.removal
        if removal is None:
            return
        size = self.sizes(write, stored)[0]
        pending: int | None = None  # the last offset read: its Append may go on
        async for offsets in self._stored_offsets(write, stored, size, removal):
            found: list[int] = []
            for offset in offsets:
                if offset != pending:
                    if pending is not None:
                        found.append(pending)
                    pending = offset
            await self._delete_appends(write, removal.offset + 1, found)
        if pending is not None and not removal.spares_last:
            await self._delete_appends(write, removal.offset + 1, [pending])

    async def _stored_offsets(
        self, write: JournalWrite, stored: JournalMeta | None, size: int, removal: Removal
    ) -> AsyncIterator[list[int]]:
        """The offsets of the stored events `removal.first`..`removal.last`, in seqNr order, a
        page at a time: from version 3's `events` below the journal's `records_from`, one per
        event, then one per `event_records` row (an Append)."""
        key, first, last = write.key, removal.first, removal.last
        legacy_below = 1 if stored is None else stored.records_from
        for segment in range(first // size, min(last, legacy_below - 1) // size + 1):
            if first >= legacy_below:
                break
            values = (key.topic, key.id, segment, first, min(last, legacy_below - 1))
            pages = cql.stream_pages(
                self._session, self._statements.event_offsets, values, ROWS_AS_TUPLES
            )
            async for rows in pages:
                yield [offset for (offset,) in rows]
        first = max(first, legacy_below)
        if first > last:
            return
        # rows lie in the segment of their last seqNr (`Reads.read_pages`)
        for segment in range(first // size, max(last, write.before.seq_nr) // size + 1):
            pages = cql.stream_pages(
                self._session,
                self._statements.record_offsets,
                (key.topic, key.id, segment, first),
                ROWS_AS_TUPLES,
            )
            async for rows in pages:
                offsets = [offset for row_first, _, offset in rows if row_first <= last]
                yield offsets
                if rows and (rows[-1][1] >= last or rows[-1][0] > last):
                    return

    async def _delete_appends(self, write: JournalWrite, stamp: int, offsets: list[int]) -> None:
        by_bucket: dict[int, list[int]] = {}
        for offset in offsets:
            by_bucket.setdefault(offset // APPEND_BUCKET, []).append(offset)
        delete = self._statements.delete_append
        topic, partition = write.key.topic, write.partition
        partitions = (
            Partition(
                [(delete, (stamp, topic, partition, bucket, o)) for o in chunk],
                len(chunk) * _ROW_BYTES,
            )
            for bucket, in_bucket in by_bucket.items()
            for chunk in (
                in_bucket[i : i + _APPENDS_PER_BATCH]
                for i in range(0, len(in_bucket), _APPENDS_PER_BATCH)
            )
        )
        for request in Packer(self._statements.batch).requests(partitions):
            await cql.execute(self._session, *request)

    def record_partitions(
        self, key: JournalKey, size: int, appends: Sequence[ActionRecord]
    ) -> list[Partition]:
        """The `event_records` rows of `appends` (one per Append, its value as Kafka holds it:
        no event is encoded again), per segment (one Cassandra partition), split only past
        `_BATCH_BYTES`; each row stamped with its Append's offset + 1."""
        partitions: list[Partition] = []
        rows: list[Mutation] = []
        segment, weight = -1, 0
        insert = self._statements.insert_record
        for append in appends:
            header = append.header
            assert isinstance(header, AppendHeader)
            last = header.range.to
            if rows and (last // size != segment or weight > _BATCH_BYTES):
                partitions.append(Partition(rows, weight))
                rows, weight = [], 0
            segment = last // size
            weight += len(append.value) + _ROW_BYTES
            rows.append((insert, record_row(key, size, append, append.offset + 1)))
        if rows:
            partitions.append(Partition(rows, weight))
        return partitions

    def segment_deletes(
        self,
        key: JournalKey,
        size: int,
        first: int,
        last: int,
        to: int | None,
        offset: int,
        *,
        legacy: bool = False,
    ) -> Iterator[Partition]:
        """Delete the segments holding seqNrs first..last: whole ones, or rows up to `to`. A
        segment wholly at or below `to` goes whole too: a read of a partition meets its
        deletion first and skips the older SSTables, where a range deletion would have it walk
        every row it shadows until compaction. In `event_records` (a row in the segment of its
        last seqNr: the rows up to `to` are those whose last is, so a row holding `to` + 1
        stays, sliced by reads), or `legacy`, version 3's `events`."""
        stamp = offset + 1
        statements = self._statements
        whole, rows = (
            (statements.delete_segment, statements.delete_rows)
            if legacy
            else (statements.delete_record_segment, statements.delete_record_rows)
        )
        for segment in range(first // size, last // size + 1):
            if to is None or (segment + 1) * size - 1 <= to:
                yield Partition.of(whole, (stamp, key.topic, key.id, segment))
            else:
                yield Partition.of(rows, (stamp, key.topic, key.id, segment, to))


def _lists(write: JournalWrite) -> bool:
    """Whether the write changes the listing: its journal came to exist, or was purged; or it
    is a moved journal's first row in a grown topic (folded onto its state in the old topic,
    `rebased`: no offset here yet), which this topic's listing has not listed."""
    before = write.before
    return write.after.exists != before.exists or (before.offset < 0 and before.exists)
