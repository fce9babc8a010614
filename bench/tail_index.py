"""How fast the direct client's tail index follows a topic: records/s indexed, keys only.

The index (`journal.kafka.tail.TailIndex`) is what lets a direct client read a journal's own records
when the store is behind or down; a read waits (bounded) for it to reach its fence, so an
index slower than the topic grows turns reads into scans. Baseline: an aiokafka consumer of
the same partitions that only counts the records it is handed (the floor any Python consumer
pays), in the same run.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.common import Row, Section, median, spread, unique
from bench.workload import raw_append
from journal import JournalKey
from journal.kafka import TailConfig, TailIndex, TopicSpec, end_offsets, ensure_topic
from journal.settings import Settings
from journal.store import CassandraStore

METHOD = (
    "{records:,} one-event Append records of {journals:,} journals, interleaved (record n "
    "belongs to journal n mod {journals:,}: every record starts a new run of its journal, the "
    "index's worst case), on a fresh topic of {partitions} partitions and a fresh keyspace "
    "(no store pointers: the index starts at offset 0). Timed from `TailIndex.start` until it "
    "has indexed every partition to its end; baseline: a consumer assigned the same partitions "
    "that only counts records. {repetitions} repetitions of each, alternating; medians."
)


async def _pile(settings: Settings, records: int, journals: int) -> None:
    producer = AIOKafkaProducer(
        **settings.kafka_access().client_options(), acks="all", linger_ms=20
    )
    await producer.start()
    try:
        value, headers = raw_append(1, 1)
        pending = []
        for n in range(records):
            key = f"tail-{n % journals}".encode()
            pending.append(await producer.send(settings.topic, value, key=key, headers=headers))
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def _consume_all(settings: Settings, ends: dict[int, int]) -> float:
    """Seconds a bare consumer takes to be handed every record up to `ends`."""
    started = time.perf_counter()
    consumer = AIOKafkaConsumer(
        **settings.kafka_access().client_options(), group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic, p) for p in ends]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        left = sum(ends.values())
        while left > 0:
            for messages in (await consumer.getmany(timeout_ms=200)).values():
                left -= len(messages)
    finally:
        await consumer.stop()
    return time.perf_counter() - started


async def _index_all(settings: Settings, store: CassandraStore, ends: dict[int, int]) -> float:
    """Seconds a tail index takes from its start until it has indexed every record."""
    config = TailConfig(settings.kafka_access(), wait_s=600.0)
    started = time.perf_counter()
    index = await TailIndex.start(settings.topic, ends, store, config)
    try:
        key = JournalKey("tail-0", settings.topic)
        for partition, end in ends.items():  # lookup waits until the index reached `end`
            await index.lookup(key, partition, end)
    finally:
        await index.close()
    return time.perf_counter() - started


async def bench_tail_index(
    base: Settings, records: int, journals: int = 1000, repetitions: int = 3
) -> Section:
    settings = base.replace(topic=unique("bench_tail"), keyspace=unique("bench_tail"))
    section = Section(
        "Tail index",
        METHOD.format(
            records=records,
            journals=journals,
            partitions=settings.partitions,
            repetitions=repetitions,
        ),
    )
    await ensure_topic(settings.kafka_access(), TopicSpec(settings.topic, settings.partitions))
    await _pile(settings, records, journals)
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        raw: list[float] = []
        indexed: list[float] = []
        for _ in range(repetitions):
            raw.append(records / await _consume_all(settings, ends))
            indexed.append(records / await _index_all(settings, store, ends))
    finally:
        await store.close()
    raw_rate, index_rate = median(raw), median(indexed)
    section.throughputs = {"consumer that counts": raw_rate, "tail index": index_rate}
    section.add(Row("consumer that only counts", raw_rate, "records/s", spread=spread(raw)))
    section.add(
        Row("tail index, keys only", index_rate, "records/s", raw_rate, spread=spread(indexed))
    )
    return section
