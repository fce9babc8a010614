"""Import: an export (`pipeline.export`, Parquet) restored into an EMPTY keyspace.

Contract: `restore` refuses a keyspace that holds a journal or a pointer of the topic
(`KeyspaceNotEmpty`): it never merges into what replication wrote. It reads the export (the
topic's rows, or every topic's with `all_topics`), puts each journal's rows into one Spark
partition in seqNr order, and there writes each journal through the store's own write path
(`ReplicatedJournal.apply`, the one replication uses): its events, at their original partition,
offset and timestamp, one stored Append per original record, and its row (last seqNr, deleteTo
the seqNr before the first exported event, offset of its last event). Then, on the driver, each
partition's pointer becomes the highest offset imported, so replication goes on from there:
what Kafka still holds past it (later Appends, Deletes, Purges) is folded onto the restored
journals as usual. `pipeline import` audits the keyspace afterwards (`pipeline.audit`).

What an export cannot restore: it holds the events a read returns, so a journal whose events
were all deleted is not in it, and comes back as unknown (the audit names it where Kafka still
holds it); snapshots are not exported.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from typing import Any

from pyspark.sql import SparkSession

from journal import EventRecord, JournalKey
from journal.core import (
    ActionRecord,
    AppendHeader,
    JournalState,
    JournalWrite,
    PayloadType,
    SeqRange,
)
from journal.errors import JournalError
from journal.settings import Settings
from journal.store import CassandraConfig, CassandraStore
from journal.version import VERSION
from pipeline.export import SCHEMA, event_record_of
from pipeline.report import Progress, per_second, print_progress, spark_job
from pipeline.scan import TOKEN_MAX, TOKEN_MIN
from pipeline.tasks import run_with_store

_JOURNALS_PER_WRITE = 100  # journals per store write (one `apply`)


class KeyspaceNotEmpty(JournalError):
    """The import's keyspace already holds journals or pointers: restore into an empty one."""


@dataclass(slots=True)
class ImportCounts:
    journals: int = 0
    events: int = 0
    ends: dict[tuple[str, int], int] = field(default_factory=dict)  # highest offset imported

    def add(self, other: ImportCounts) -> None:
        self.journals += other.journals
        self.events += other.events
        for where, offset in other.ends.items():
            self.ends[where] = max(offset, self.ends.get(where, -1))


@dataclass(frozen=True, slots=True)
class ImportResult:
    counts: ImportCounts
    seconds: float


def journal_write(key: JournalKey, records: list[EventRecord]) -> JournalWrite:
    """What replication would have stored of a journal whose readable events are `records`
    (in seqNr order, consecutive): a new journal, deleted up to the first one's seqNr - 1."""
    appends = []
    for _where, group in groupby(records, key=lambda record: (record.partition, record.offset)):
        events = tuple(group)
        first, last = events[0], events[-1]
        header = AppendHeader(
            SeqRange(first.seq_nr, last.seq_nr), PayloadType.JSON, version=VERSION
        )
        appends.append(
            ActionRecord(
                key,
                first.partition,
                first.offset,
                first.timestamp,
                header,
                headers=first.headers,
                events=events,
            )
        )
    after = JournalState(records[-1].offset, records[-1].seq_nr, records[0].seq_nr - 1)
    return JournalWrite(key, records[0].partition, JournalState(), after, appends=tuple(appends))


async def import_journals(store: CassandraStore, rows: Iterable[Any]) -> ImportCounts:
    """Write the journals of `rows` (grouped by journal, each in seqNr order)."""
    counts = ImportCounts()
    writes: list[JournalWrite] = []
    for (topic, journal_id), journal_rows in groupby(
        rows, key=lambda row: (row["topic"], row["id"])
    ):
        records = [event_record_of(row) for row in journal_rows]
        writes.append(journal_write(JournalKey(topic, journal_id), records))
        counts.journals += 1
        counts.events += len(records)
        for record in records:
            where = (topic, record.partition)
            counts.ends[where] = max(record.offset, counts.ends.get(where, -1))
        if len(writes) >= _JOURNALS_PER_WRITE:
            await store.apply(writes, {})
            writes = []
    if writes:
        await store.apply(writes, {})
    return counts


def _import_task(config: CassandraConfig, rows: Iterator[Any]) -> Iterator[ImportCounts]:
    """One Spark partition's journals (runs in an executor)."""
    yield run_with_store(config, lambda store: import_journals(store, rows))


async def refuse_non_empty(store: CassandraStore, topic: str, keyspace: str) -> None:
    """KeyspaceNotEmpty unless the keyspace holds no journal and no pointer of `topic`."""
    async for key, _meta in store.journals_in_token_range(TOKEN_MIN, TOKEN_MAX):
        raise KeyspaceNotEmpty(
            f"keyspace {keyspace} holds journals ({key.topic}:{key.id}, ...): import into an "
            "empty keyspace"
        )
    if await store.pointers(topic):
        raise KeyspaceNotEmpty(f"keyspace {keyspace} holds pointers of topic {topic}")


async def restore(
    spark: SparkSession,
    settings: Settings,
    source: str,
    *,
    all_topics: bool = False,
    tasks: int = 8,
    progress: Progress = print_progress,
) -> ImportResult:
    """Import the export under `source` into `settings.keyspace`, which must be empty."""
    started = time.monotonic()
    config = settings.cassandra_config()
    store = await CassandraStore.connect(config)  # creates the keyspace where it may
    try:
        await refuse_non_empty(store, settings.topic, settings.keyspace)
        frame = spark.read.schema(SCHEMA).parquet(source)
        if not all_topics:
            frame = frame.where(frame["topic"] == settings.topic)
        progress(f"import {source} into keyspace {settings.keyspace}: {tasks} tasks")
        ordered = frame.repartition(tasks, "topic", "id").sortWithinPartitions(
            "topic", "id", "seq_nr"
        )
        imported = ordered.rdd.mapPartitions(partial(_import_task, config))
        counts = ImportCounts()
        for task_counts in await spark_job(spark, "import", imported.collect):
            counts.add(task_counts)
        # after every journal's rows: replication resumes past the records imported
        for (topic, partition), offset in sorted(counts.ends.items()):
            await store.save_pointer(topic, partition, offset)
    finally:
        await store.close()
    seconds = time.monotonic() - started
    progress(
        f"imported {counts.events} events of {counts.journals} journals in {seconds:.1f} s "
        f"({per_second(counts.events, seconds)})"
    )
    return ImportResult(counts, seconds)
