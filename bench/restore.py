"""A fresh worker's restore of its tables from their changelogs (issue 43), against a bare
consumer reading the same changelogs, in one run.

A worker's tables (the journals' offset runs) live in RocksDB and in compacted changelog
topics; a worker whose data dir is new (a new machine, a lost volume) reads the changelogs of
its partitions before it serves them (Faust's recovery). This measures that read per record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.http_tokens import client_headers
from app.progress import Meter
from bench.common import Row, Section, unique
from bench.environment import settings_for, settle
from bench.read import worker_at
from bench.workload import raw_append
from devtools.workers import WorkerProcess
from journal.kafka import end_offsets, partition_of
from journal.settings import Settings
from journal.store import CassandraStore
from kjconfig.access import KafkaAccess
from tables.store import RESTORED_RECORDS, RESTORED_SECONDS

METHOD = (
    "A fresh {partitions}-partition topic and keyspace; a worker indexes and replicates "
    "{journals:,} one-event Appends of as many journals (each a table entry: the tables' worst "
    "case, one changelog record a journal), then stops. A second worker of the same group, with "
    "a new data dir, starts: time from its process start until its agent handled a record "
    "appended once it answered `/readyz` (Faust runs the agent once the tables are restored from"
    " the changelogs), less the same time of a worker of a group of its own on an empty topic "
    "started just before (Python, Faust, the clients): the restore; when the worker restored "
    "every record itself ahead of Faust's recovery, the seconds it counted doing so (its "
    "metrics) instead. Its rate: the changelogs' records (every table's, to their end offsets) "
    "over the restore. Baseline: a bare aiokafka consumer handed the same changelog partitions "
    "from their beginning to their end (records counted), in the same run, after the workers "
    "stopped."
)
TABLES = ("append-offsets", "deletion-offsets", "journal-expiry")


async def bench_restore(
    base: Settings, journals: int, workdir: Path, partitions: int = 1
) -> Section:
    """The rows; the journals spread over `partitions` (many short changelogs at 32)."""
    settings = settings_for(base, "restore", partitions=partitions)
    app_id = unique("restore")
    first = WorkerProcess(settings, app_id, workdir / "first", loglevel="warning")
    first.start()
    try:
        await first.wait_ready()
        await fill_first_appends(settings.kafka_access(), settings.topic, journals, partitions)
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            await settle(settings, store)  # the agent handled every record
        finally:
            await store.close()
    finally:
        await asyncio.to_thread(first.stop)
    changelogs = [f"{app_id}-{table}-changelog" for table in TABLES]
    ends = {
        TopicPartition(topic, partition): end
        for topic in changelogs
        for partition, end in (
            await end_offsets(settings.kafka_access(), topic, partitions)
        ).items()
    }

    empty = WorkerProcess(
        settings_for(base, "restore_empty", partitions=partitions),
        unique("restore_empty"),
        workdir / "empty",
        loglevel="warning",
    )
    start = await serving_stopped(empty)
    fresh = await serving_stopped(
        WorkerProcess(settings, app_id, workdir / "second", loglevel="warning")
    )
    consumer_s = await read_all(settings.kafka_access(), ends)
    per_table = {
        topic: sum(e for tp, e in ends.items() if tp.topic == topic) for topic in changelogs
    }
    return section_of(
        journals,
        per_table,
        start.seconds,
        fresh.seconds,
        consumer_s,
        fresh.ahead,
        fresh.ahead_s,
        partitions,
    )


async def serving_stopped(worker: WorkerProcess) -> Serving:
    """`to_serving` on partition 0, the worker stopped after."""
    try:
        return await to_serving(worker, 0)
    finally:
        await asyncio.to_thread(worker.stop)


def section_of(
    journals: int,
    ends: dict[str, int],
    start_s: float,
    ready_s: float,
    consumer_s: float,
    ahead: float = 0.0,
    ahead_s: float = 0.0,
    partitions: int = 1,
) -> Section:
    """The rows: the restore is the worker's own, timed by itself, when it restored every
    record ahead of Faust's recovery; else the fresh worker's time to serving less an empty
    one's."""
    section = Section(
        "A fresh worker's restore", METHOD.format(journals=journals, partitions=partitions)
    )
    records = sum(ends.values())
    whole = ahead >= records > 0
    restore_s = max(ahead_s if whole else ready_s - start_s, 1e-3)
    section.add(Row("changelog records restored", records, "records", note=_ends_note(ends)))
    section.add(Row("a worker's start to serving, empty tables", start_s, "s"))
    section.add(Row("a fresh worker's start to serving, the tables restored", ready_s, "s"))
    baseline = records / consumer_s
    rate = records / restore_s
    section.add(Row("records restored ahead of Faust's recovery", ahead, "records"))
    section.add(Row("a bare consumer reading the changelogs", baseline, "records/s"))
    section.add(
        Row(
            "the restore",
            rate,
            "records/s",
            baseline=baseline,
            goal=">= 0.5x the bare consumer",
            met=rate >= 0.5 * baseline,
            # a worker's start-up varies by ~0.5 s: a restore shorter than that is not measured
            note=f"{restore_s:.2f} s"
            + (" (the worker's own timing)" if whole else "")
            + (" (within start-up noise)" if restore_s < 2 and not whole else ""),
        )
    )
    return section


def _ends_note(ends: dict[str, int]) -> str:
    """Records per table: `<app id>-<table>-changelog` named by its table."""
    tables = [next(t for t in TABLES if topic.endswith(f"-{t}-changelog")) for topic in ends]
    return ", ".join(f"{table} {end:,}" for table, end in zip(tables, ends.values(), strict=True))


@dataclass(frozen=True, slots=True)
class Serving:
    """A worker's start, until its agent handled a record appended once it was ready."""

    seconds: float  # from its process start
    ahead: float  # records it restored ahead of Faust's recovery (its metrics)
    ahead_s: float  # the seconds it counted doing so
    rss_kib: int  # its resident memory then


async def to_serving(worker: WorkerProcess, partition: int) -> Serving:
    """Start the worker and time it until its agent handled a record appended to `partition`
    once it was ready (Faust runs the agent only after the partition's tables are restored);
    it is left running."""
    started = time.monotonic()
    worker.start()
    await worker.wait_ready(timeout_s=1800)
    settings = worker.settings
    offset = await _append_one(settings.kafka_access(), settings.topic, partition)
    async with aiohttp.ClientSession(headers=client_headers(settings)) as http:
        await worker_at(worker, http, offset + 1, poll_s=0.1, partition=partition)
        serving_s = time.monotonic() - started
        async with http.get(f"{worker.url}/metrics") as answer:
            text = await answer.text()
    return Serving(
        serving_s,
        _total(text, RESTORED_RECORDS),
        _total(text, RESTORED_SECONDS),
        worker.memory_kib()["VmRSS"],
    )


def _total(metrics: str, name: str) -> float:
    """A counter's value summed over its labels, from a /metrics text."""
    return sum(
        float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name + "{")
    )


async def _append_one(kafka: KafkaAccess, topic: str, partition: int) -> int:
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()
    try:
        value, headers = raw_append(1, 1)
        sent = await producer.send_and_wait(
            topic, value, key=unique("probe").encode(), partition=partition, headers=headers
        )
        return int(sent.offset)
    finally:
        await producer.stop()


async def fill_first_appends(
    kafka: KafkaAccess,
    topic: str,
    journals: int,
    partitions: int,
    first: int = 0,
    appends: int = 1,
) -> None:
    """`appends` one-event Appends (seqNrs 1..appends) for each of `journals` journals
    (`j-<first>` on), each in its key's partition, pipelined (not through the client: a setup
    of seconds, not minutes)."""
    producer = AIOKafkaProducer(
        **kafka.client_options(), acks="all", linger_ms=5, max_batch_size=512 * 1024
    )
    await producer.start()
    meter = Meter("journals' appends", journals * appends)
    try:
        chunk = 5000
        for seq_nr in range(1, appends + 1):
            value, headers = raw_append(seq_nr, 1)
            for start in range(first, first + journals, chunk):
                ids = [f"j-{n}" for n in range(start, min(first + journals, start + chunk))]
                sends = [
                    await producer.send(
                        topic,
                        value,
                        key=journal_id.encode(),
                        partition=partition_of(journal_id, partitions),
                        headers=headers,
                    )
                    for journal_id in ids
                ]
                await asyncio.gather(*sends)
                meter.advance(len(sends))
    finally:
        meter.close()
        await producer.stop()


async def read_all(kafka: KafkaAccess, ends: Mapping[TopicPartition, int]) -> float:
    """Seconds a bare consumer takes to be handed every changelog partition's records up to
    its end."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [tp for tp, end in ends.items() if end > 0]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        started = time.perf_counter()
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            await consumer.getmany(*tps, timeout_ms=200)
        return time.perf_counter() - started
    finally:
        await consumer.stop()
