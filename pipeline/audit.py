"""Audit: compare what Kafka still holds with what Cassandra says was replicated.

Contract: `audit` snapshots the partitions' pointers first, then reads with Spark's Kafka
source every record Kafka still holds up to each pointer, groups them by journal (in offset order,
within the journal's partition) and runs `pipeline.audit_check.JournalAudit` on each group
inside the executors, against the store (cassandra-driver): the fold of replication itself,
exact where Kafka holds the journal from its start or from a Purge, partial (counted) where
retention took its start (see `audit_check`). It checks, on the driver,
that no pointer is past Kafka's end and that no records expired before being replicated.
It also looks at every record Kafka holds, replicated or not, for a journal found on two
partitions (`two_partitions`): a partition count changed behind the project's back and a
process that did not guard it (journal/kafka/guard.py) wrote there; its history is split.
The result counts what was checked and keeps the first differences per journal; `ok` is
False on any difference. Malformed records are counted, never fatal (replication set them
aside too). Records above a pointer are not replicated yet: the audit reports the lag only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from journal.codec import MalformedRecord, parse_checked
from journal.settings import Settings
from journal.store import CassandraConfig, CassandraStore, EventualJournal
from pipeline.audit_check import Difference, JournalAudit
from pipeline.grown import grown_from
from pipeline.offsets import TopicOffsets, read_ranges, replicated_ranges, topic_offsets
from pipeline.report import Progress, print_progress
from pipeline.source import raw_record_of, read_actions
from pipeline.tasks import run_with_store

MAX_DIFFERENCES = 200  # kept per Spark task, and in the result


@dataclass(slots=True)
class AuditCounts:
    records: int = 0
    malformed: int = 0
    journals: int = 0
    journals_skipped: int = 0  # changed by replication while the audit ran
    journals_partial: int = 0  # history before Kafka's log start, no Purge held
    events_checked: int = 0
    differences: int = 0

    def add(self, other: AuditCounts) -> None:
        self.records += other.records
        self.malformed += other.malformed
        self.journals += other.journals
        self.journals_skipped += other.journals_skipped
        self.journals_partial += other.journals_partial
        self.events_checked += other.events_checked
        self.differences += other.differences


@dataclass(slots=True)
class AuditResult:
    counts: AuditCounts = field(default_factory=AuditCounts)
    differences: list[Difference] = field(default_factory=list)  # the first MAX_DIFFERENCES
    unreplicated: int = 0  # records above the pointers: replication's lag, not a difference
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.counts.differences == 0

    def add(self, counts: AuditCounts, differences: Iterable[Difference]) -> None:
        self.counts.add(counts)
        room = MAX_DIFFERENCES - len(self.differences)
        self.differences += list(differences)[: max(0, room)]

    def lines(self, journals_shown: int = 20) -> list[str]:
        """The report: counts, then the first differences per journal."""
        c = self.counts
        verdict = "OK" if self.ok else f"{c.differences} DIFFERENCES"
        lines = [
            f"audit: {verdict}: {c.records} records, {c.journals} journals, "
            f"{c.events_checked} events checked, {c.malformed} malformed, "
            f"{c.journals_skipped} journals skipped (changed meanwhile), "
            f"{c.journals_partial} journals checked partially (their start expired), "
            f"{self.unreplicated} records not replicated yet, in {self.seconds:.1f} s"
        ]
        by_journal = groupby(self.differences, key=lambda d: d.journal)
        for shown, (journal, differences) in enumerate(by_journal):
            if shown == journals_shown:
                lines.append("  ...")
                break
            lines.append(f"  {journal}:")
            lines += [f"    {d.kind}: {d.detail}" for d in differences]
        return lines


async def audit_rows(
    rows: Iterable[Any],
    store: EventualJournal,
    pointers: Mapping[int, int],
    complete: frozenset[int],
    cuts: Mapping[int, int] | None = None,
    moved_from: tuple[str, ...] = (),
    grown_into: tuple[str, ...] = (),
) -> tuple[AuditCounts, list[Difference]]:
    """Audit rows of `read_actions` sorted by partition, key, offset; `cuts`: the partitions'
    cuts by a grow (the registry's); `moved_from`: the topic's predecessors, nearest first,
    when it is a grow's successor; `grown_into`: the topics grown from it, nearest first
    (`JournalAudit.start`)."""
    counts = AuditCounts()
    differences: list[Difference] = []
    for (partition, _), group in groupby(rows, key=lambda row: (row.partition, row.key)):
        journal: JournalAudit | None = None
        for row in group:
            counts.records += 1
            try:
                action = parse_checked(raw_record_of(row))
            except MalformedRecord:
                counts.malformed += 1
                continue
            if action is None:
                continue  # an action type this version does not know
            if journal is None:
                journal = await JournalAudit.start(
                    store,
                    action.key,
                    partition,
                    pointers[partition],
                    partition in complete,
                    (cuts or {}).get(partition),
                    moved_from,
                    grown_into,
                )
            await journal.add(action)
        if journal is None:
            continue
        found = await journal.finish()
        counts.journals += 1
        counts.journals_skipped += journal.skipped
        counts.journals_partial += not journal.skipped and not journal.exact
        counts.events_checked += journal.events_checked
        counts.differences += journal.difference_count
        differences += found[: max(0, MAX_DIFFERENCES - len(differences))]
    return counts, differences


def _audit_task(
    config: CassandraConfig,
    pointers: dict[int, int],
    complete: frozenset[int],
    cuts: dict[int, int],
    moved_from: tuple[str, ...],
    grown_into: tuple[str, ...],
    rows: Iterator[Any],
) -> list[Any]:
    """One Spark partition's share (runs in an executor)."""

    async def work(store: CassandraStore) -> tuple[AuditCounts, list[Difference]]:
        return await audit_rows(rows, store, pointers, complete, cuts, moved_from, grown_into)

    return [run_with_store(config, work)]


def pointer_differences(
    topic: str, offsets: TopicOffsets, pointers: Mapping[int, int]
) -> list[Difference]:
    """Pointers past Kafka's end, of unknown partitions, or behind what Kafka still holds."""
    differences = []
    for partition, pointer in sorted(pointers.items()):
        where = f"{topic}-{partition}"
        end = offsets.end.get(partition)
        if end is None:
            differences.append(Difference(where, "pointer", "a pointer of no Kafka partition"))
        elif pointer >= end:
            detail = f"pointer {pointer} is past Kafka's last offset {end - 1}"
            differences.append(Difference(where, "pointer", detail))
        elif pointer + 1 < offsets.earliest[partition]:
            detail = (
                f"offsets {pointer + 1}..{offsets.earliest[partition] - 1} expired from Kafka "
                "before they were replicated"
            )
            differences.append(Difference(where, "pointer", detail))
    return differences


def journals_on_two_partitions(records: DataFrame, topic: str) -> list[Difference]:
    """The first MAX_DIFFERENCES journals (by id) of `records` (`read_actions`' rows) found on
    more than one partition."""
    split = (
        records.where(F.col("key").isNotNull())
        .groupBy("key")
        .agg(F.sort_array(F.collect_set("partition")).alias("partitions"))
        .where(F.size("partitions") > 1)
        .orderBy("key")
        .limit(MAX_DIFFERENCES)
        .collect()
    )
    return [
        Difference(
            f"{topic}:{bytes(row.key).decode('utf-8', 'replace')}",
            "two_partitions",
            f"records on partitions {', '.join(map(str, row.partitions))}: its history is "
            "split (see 'The partition count changed' in docs/operations.md)",
        )
        for row in split
    ]


async def audit(
    spark: SparkSession, settings: Settings, progress: Progress = print_progress
) -> AuditResult:
    """Audit `settings.keyspace` against `settings.topic` (see the module contract)."""
    started = time.monotonic()
    config = settings.cassandra_config()
    result = AuditResult()
    store = await CassandraStore.connect(config)
    try:
        pointers = await store.pointers(settings.topic)  # first: the records come after
        # a cut below a pointer is recorded before the pointer passed it (docs/growing.md)
        grow = await store.grow(settings.topic)
        moved_from = await grown_from(settings, store, progress)  # its bases, once final
        # where its moved journals went: a Delete or Purge there removed events here too
        grown_into: list[str] = []
        later = grow
        while later is not None:
            grown_into.append(later.new_topic)
            later = await store.grow(later.new_topic)
    finally:
        await store.close()
    offsets = await topic_offsets(settings.kafka_access(), settings.topic)
    ranges = replicated_ranges(offsets, pointers)
    total = sum(r.count for r in ranges)
    result.unreplicated = sum(
        end - max(pointers.get(p, -1) + 1, offsets.earliest[p]) for p, end in offsets.end.items()
    )
    progress(
        f"audit {settings.topic} against keyspace {settings.keyspace}: "
        f"{len(offsets.end)} partitions, {len(pointers)} pointers, "
        f"{total} replicated records still in Kafka"
    )
    pointer_found = pointer_differences(settings.topic, offsets, pointers)
    result.add(AuditCounts(differences=len(pointer_found)), pointer_found)
    held, _ = read_ranges(offsets, {}, "earliest")  # every record Kafka holds
    if any(r.count for r in held):
        everything = read_actions(spark, settings.kafka_access(), settings.topic, held)
        split = await asyncio.to_thread(journals_on_two_partitions, everything, settings.topic)
        result.add(AuditCounts(differences=len(split)), split)
    if total:
        complete = frozenset(p for p, earliest in offsets.earliest.items() if earliest == 0)
        records = read_actions(spark, settings.kafka_access(), settings.topic, ranges)
        by_journal = records.repartition(
            max(1, sum(1 for r in ranges if r.count)), "partition"
        ).sortWithinPartitions("partition", "key", "offset")
        cuts = {} if grow is None else dict(grow.cut)
        task = partial(
            _audit_task, config, dict(pointers), complete, cuts, moved_from, tuple(grown_into)
        )
        for counts, differences in await asyncio.to_thread(
            by_journal.rdd.mapPartitions(task).collect
        ):
            result.add(counts, differences)
    result.seconds = time.monotonic() - started
    progress(
        f"checked {result.counts.records} records of {result.counts.journals} journals: "
        f"{result.counts.events_checked} events, {result.counts.malformed} malformed, "
        f"{result.counts.differences} differences in {result.seconds:.1f} s"
    )
    return result
