"""At scale, the tables alone (issue 43): many journals' table entries written straight into a
worker group's changelogs, as the worker's tables write them, then a fresh worker restores them
(its restore against a bare consumer of the same changelogs, its memory once serving), with
no action records and no store behind them: the journals' writing and replication, minutes
a million at the scale scenario's rates (bench/scale.py), are left out, so that sizes the
scale scenario cannot reach on one machine (10,000,000) measure the restore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from aiokafka import AIOKafkaProducer

from app.progress import Meter
from bench.common import Row, Section, unique
from bench.environment import settings_for
from bench.restore import read_all, section_of, serving_stopped
from bench.scale import PARTITIONS, changelog_ends, changelogs_first, empty_worker, per_unit_bytes
from devtools.workers import DEFAULT_MEMBERSHIP, WorkerProcess
from journal.core import OffsetRuns
from journal.kafka import TopicSpec, ensure_topic, partition_of
from journal.settings import Settings
from kjconfig.access import KafkaAccess
from tables.tables import APPENDS_TABLE
from tables.values import encode_runs

METHOD = (
    "A fresh {partitions}-partition topic, left empty, and a worker group of its own whose "
    "four table changelogs are created first (compacted); {journals:,} journals' "
    "`append-offsets` entries written straight into its changelog by a batched producer, the "
    "shape the worker's tables write for a journal of one Append in retention (key: the id's "
    "bytes, in its partition; value: its one offset run, the offsets of each partition counted "
    "from 0), and no other table's (such a journal has no deletion nor deadline). A worker of "
    "a group of its own on an empty topic, then a fresh worker of that group (a new data dir), "
    "each timed from its process start until its agent handled a record appended once it "
    "answered `/readyz`: bench/restore.py's measures, the fresh worker's RSS then. Last, a bare "
    "consumer reads the changelogs (the restore's baseline), the workers stopped."
)
CHUNK = 50_000  # journals a step of the writing: a step's entries are held in memory at once


def append_entries(
    journals: int, partitions: int, chunk: int = CHUNK
) -> Iterator[dict[int, list[tuple[bytes, bytes]]]]:
    """The `append-offsets` entries of journals `j-0` .. `j-<journals - 1>`, `chunk` of them
    at a time, by partition: each journal's key in its partition, as though each had one
    Append there, in id order (the journals bench/restore.py's `fill_first_appends` writes)."""
    offsets = [0] * partitions
    for start in range(0, journals, chunk):
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for n in range(start, min(journals, start + chunk)):
            journal_id = f"j-{n}"
            partition = partition_of(journal_id, partitions)
            runs = OffsetRuns().add(offsets[partition])
            offsets[partition] += 1
            entry = (journal_id.encode("utf-8"), encode_runs(runs))
            by_partition.setdefault(partition, []).append(entry)
        yield by_partition


async def write_entries(kafka: KafkaAccess, changelog: str, journals: int) -> None:
    """`append_entries` produced to `changelog` in whole batches (a record's send is most of
    the cost of a million), a bounded number in flight."""
    producer = AIOKafkaProducer(
        **kafka.client_options(), acks="all", linger_ms=5, max_batch_size=1024 * 1024
    )
    await producer.start()
    meter = Meter("table entries", journals)
    try:
        in_flight: list[asyncio.Future[object]] = []
        for by_partition in append_entries(journals, PARTITIONS):
            sent = []
            for partition, entries in by_partition.items():
                batch = producer.create_batch()
                for key, value in entries:
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        sent.append(
                            await producer.send_batch(batch, changelog, partition=partition)
                        )
                        batch = producer.create_batch()
                        batch.append(key=key, value=value, timestamp=None)
                sent.append(await producer.send_batch(batch, changelog, partition=partition))
            # a chunk's batches in flight while the next chunk is made, at most two chunks
            await asyncio.gather(*in_flight)
            in_flight = sent
            meter.advance(sum(len(entries) for entries in by_partition.values()))
        await asyncio.gather(*in_flight)
    finally:
        meter.close()
        await producer.stop()


async def bench_scale_tables(base: Settings, journals: int, workdir: Path) -> Section:
    settings = settings_for(base, "scale_tables", partitions=PARTITIONS)
    kafka = settings.kafka_access()
    await ensure_topic(kafka, TopicSpec(settings.topic, PARTITIONS))
    app_id = unique("scale_tables")
    await changelogs_first(kafka, app_id, PARTITIONS)
    await write_entries(kafka, f"{app_id}-{APPENDS_TABLE}-changelog", journals)
    changelogs, ends = await changelog_ends(kafka, app_id)
    empty = await empty_worker(base, "scale_tables_empty", workdir)
    fresh = await serving_stopped(
        WorkerProcess(
            settings, app_id, workdir / "fresh", instance_id=DEFAULT_MEMBERSHIP, loglevel="warning"
        )
    )
    consumer_s = await read_all(kafka, ends)
    per_table = {
        topic: sum(e for tp, e in ends.items() if tp.topic == topic) for topic in changelogs
    }
    restore = section_of(
        journals,
        per_table,
        empty.seconds,
        fresh.seconds,
        consumer_s,
        fresh.ahead,
        fresh.ahead_s,
        PARTITIONS,
    )
    section = Section(
        "At scale: the tables alone",
        METHOD.format(partitions=PARTITIONS, journals=journals),
    )
    section.add(Row("a worker's RSS, empty tables", empty.rss_kib / 1024, "MiB"))
    section.add(Row("a fresh worker's RSS, its tables restored", fresh.rss_kib / 1024, "MiB"))
    section.add(
        Row(
            "a fresh worker: a restored entry",
            per_unit_bytes(fresh.rss_kib, empty.rss_kib, journals),
            "B",
            note="its RSS above the empty worker's",
        )
    )
    section.rows += restore.rows
    return section
