"""Rebuild: replicate the action topic into a keyspace with Spark, by the agents' routine.

Contract: `rebuild` reads each partition's records `[start, end)` (`pipeline.offsets`; `end`
fixed when the job starts) with Spark's Kafka source, puts each Kafka partition whole into one
Spark partition in offset order, and there runs the core's `Replicator.apply` on batches of
consecutive records: parse, set malformed records aside, fold, write Cassandra with
cassandra-driver, advance the pointer. It is the routine the agents run, and the store writes
every cell with `USING TIMESTAMP offset + 1`, so a rebuild gives the very same rows as
replication by the agents, and running it again (or over a live keyspace) changes nothing.

Into a fresh keyspace (`start_from="earliest"`, or "pointers" with no pointers yet) it rebuilds
a lost Cassandra from what Kafka still holds. Malformed records are counted and reported,
never fatal; they are not copied to the quarantine topic again (the first replication did).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pyspark.sql import SparkSession

from journal import JournalKey
from journal.codec import RawRecord
from journal.core import ActionRecord, AppendHeader, JournalWrite
from journal.kafka import check_recorded
from journal.replication import CutRegistry, Replicator
from journal.settings import Settings
from journal.store import CassandraConfig, CassandraStore, JournalMeta, ReplicatedJournal
from pipeline.grown import grown_from
from pipeline.offsets import Gap, StartFrom, read_ranges, topic_offsets
from pipeline.report import Progress, per_second, print_progress, spark_job
from pipeline.source import in_offset_order, raw_record_of, read_actions
from pipeline.tasks import run_with_store

MALFORMED_SAMPLES = 10  # per Spark partition, and in the report


@dataclass(slots=True)
class RebuildCounts:
    """What one Spark task (or, summed, the whole job) replicated."""

    records: int = 0
    malformed: int = 0
    events: int = 0  # events written to the store (a later Delete may have dropped others)
    journal_writes: int = 0
    malformed_samples: list[str] = field(default_factory=list)

    def add(self, other: RebuildCounts) -> None:
        self.records += other.records
        self.malformed += other.malformed
        self.events += other.events
        self.journal_writes += other.journal_writes
        room = MALFORMED_SAMPLES - len(self.malformed_samples)
        self.malformed_samples += other.malformed_samples[: max(0, room)]


@dataclass(frozen=True, slots=True)
class RebuildResult:
    counts: RebuildCounts
    pointers: dict[int, int]
    gaps: list[Gap]
    seconds: float


class _CountingQuarantine:
    """Counts malformed records and keeps the first few reasons; sends nothing anywhere."""

    def __init__(self, counts: RebuildCounts) -> None:
        self._counts = counts

    async def put(self, record: RawRecord, reason: str) -> None:
        self._counts.malformed += 1
        if len(self._counts.malformed_samples) < MALFORMED_SAMPLES:
            where = f"{record.topic}-{record.partition}@{record.offset}"
            self._counts.malformed_samples.append(f"{where}: {reason}")

    async def flush(self) -> None:
        return None  # nothing is sent


class _CountingStore(ReplicatedJournal):
    """The store's write side, counting the journals and events each batch writes."""

    def __init__(self, store: ReplicatedJournal, counts: RebuildCounts) -> None:
        self._store = store
        self._counts = counts

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return await self._store.stored(keys)

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        written = await self._store.apply(writes, stored)
        for write in writes:
            if write.changes_store:
                self._counts.journal_writes += 1
                self._counts.events += sum(_event_count(a) for a in write.appends)
        return written

    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        await self._store.remove(writes, stored)  # an older topic's: not this rebuild's writes

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await self._store.save_pointer(topic, partition, offset)


def _event_count(append: ActionRecord) -> int:
    header = append.header
    assert isinstance(header, AppendHeader)  # JournalWrite.appends holds Appends only
    return header.range.to - header.range.from_ + 1


async def replicate_rows(
    rows: Iterable[Any],
    store: ReplicatedJournal,
    batch_size: int,
    cuts: CutRegistry | None = None,
    moved_from: tuple[str, ...] = (),
) -> RebuildCounts:
    """Replicate rows of `read_actions`, in (partition, offset) order, batch by batch.

    A batch is at most `batch_size` consecutive records of one partition: what the agents
    hand `Replicator.apply`, so the pointer advances after every batch. `cuts`: the grow
    registry (docs/growing.md), so that a partition's records after its cut are not applied
    even where this share of them starts past the Seal. `moved_from`: the topic's predecessors,
    when it is a grow's successor (moved journals take their base from it: `Replicator`).
    """
    counts = RebuildCounts()
    replicator = Replicator(
        _CountingStore(store, counts), _CountingQuarantine(counts), cuts=cuts, moved_from=moved_from
    )
    batch: list[RawRecord] = []
    for row in rows:
        record = raw_record_of(row)
        if batch and (record.partition != batch[-1].partition or len(batch) >= batch_size):
            await replicator.apply(batch)
            batch = []
        batch.append(record)
        counts.records += 1
    if batch:
        await replicator.apply(batch)
    return counts


def _rebuild_task(
    config: CassandraConfig, batch_size: int, moved_from: tuple[str, ...], rows: Iterator[Any]
) -> list[Any]:
    """One Spark partition's share (runs in an executor)."""

    async def work(store: CassandraStore) -> RebuildCounts:
        return await replicate_rows(rows, store, batch_size, cuts=store, moved_from=moved_from)

    return [run_with_store(config, work)]


async def rebuild(
    spark: SparkSession,
    settings: Settings,
    start_from: StartFrom = "pointers",
    batch_size: int = 1000,
    progress: Progress = print_progress,
) -> RebuildResult:
    """Replicate `settings.topic` into `settings.keyspace` (see the module contract)."""
    started = time.monotonic()
    config = settings.cassandra_config()
    store = await CassandraStore.connect(config)  # creates them (security on: the admin did)
    try:
        pointers = await store.pointers(settings.topic)
        offsets = await topic_offsets(settings.kafka_access(), settings.topic)
        # a topic whose partition count changed holds split journals: the audit finds them
        await check_recorded(store, settings.topic, len(offsets.end))
        moved_from = await grown_from(settings, store, progress)
        ranges, gaps = read_ranges(offsets, pointers, start_from)
        total = sum(r.count for r in ranges)
        spans = ", ".join(f"{r.partition}:{r.start}..{r.end - 1}" for r in ranges if r.count)
        progress(
            f"rebuild {settings.topic} -> keyspace {settings.keyspace} (from {start_from}): "
            f"{len(ranges)} partitions, {total} records to read [{spans or 'none'}]"
        )
        for gap in gaps:
            progress(
                f"partition {gap.partition}: offsets {gap.first}..{gap.last} expired from Kafka "
                "before they were replicated: journals they changed are rebuilt only from a "
                "Purge on (see pipeline.offsets)"
            )
        counts = RebuildCounts()
        job_started = time.monotonic()
        if total:
            records = read_actions(spark, settings.kafka_access(), settings.topic, ranges)
            ordered = in_offset_order(records, sum(1 for r in ranges if r.count))
            task = partial(_rebuild_task, config, batch_size, moved_from)
            results = await spark_job(spark, "rebuild", ordered.rdd.mapPartitions(task).collect)
            for result in results:
                counts.add(result)
        seconds = time.monotonic() - started
        progress(
            f"replicated {counts.records} records: {counts.events} events written, "
            f"{counts.journal_writes} journal writes, {counts.malformed} malformed, "
            f"in {seconds:.1f} s, Spark job {time.monotonic() - job_started:.1f} s "
            f"({per_second(counts.events, seconds)} events)"
        )
        for sample in counts.malformed_samples:
            progress(f"malformed: {sample}")
        reached = await store.pointers(settings.topic)
        progress(f"pointers: {dict(sorted(reached.items()))}")
        return RebuildResult(counts, reached, gaps, seconds)
    finally:
        await store.close()
