"""Replication lag per partition, from the outside: Kafka's end offsets against the store's
pointers, and the age of the oldest record not replicated yet (`kafka-journal lag`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.driver_errors import POISON_ERRORS
from journal.kafka.topic import end_offsets, partition_count
from journal.store.base import EventualJournal
from kjconfig.access import KafkaAccess

_FETCH_TIMEOUT_MS = 2000


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """`records`: end offset - pointer - 1; `oldest_s`: how long ago the first record after
    the pointer was written (None when nothing lags, or it could not be fetched)."""

    partition: int
    end: int
    pointer: int  # -1: nothing replicated
    records: int
    oldest_s: float | None


async def replication_lag(
    kafka: KafkaAccess, store: EventualJournal, topic: str
) -> list[PartitionLag]:
    ends = await end_offsets(kafka, topic, await partition_count(kafka, topic))
    pointers = await store.pointers(topic)
    consumer = await start_consumer(kafka, fetch_max_wait_ms=20)
    try:
        lags = []
        for partition, end in sorted(ends.items()):
            pointer = pointers.get(partition, -1)
            records = max(end - pointer - 1, 0)
            oldest = await _oldest_age(consumer, topic, partition, pointer + 1) if records else None
            lags.append(PartitionLag(partition, end, pointer, records, oldest))
        return lags
    finally:
        await stop_consumer(consumer)


async def _oldest_age(
    consumer: AIOKafkaConsumer, topic: str, partition: int, offset: int
) -> float | None:
    """The age of the record at `offset` (or the first after it that Kafka still has)."""
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    try:
        fetched = await consumer.getmany(tp, timeout_ms=_FETCH_TIMEOUT_MS, max_records=1)
    except POISON_ERRORS:
        return None  # an undecodable batch: its age is unknown, its lag still counts
    records = fetched.get(tp, [])
    return max(time.time() - records[0].timestamp / 1000, 0.0) if records else None


def format_lag(topic: str, lags: list[PartitionLag]) -> str:
    lines = [f"topic {topic}", "partition  end offset  pointer  lag (records)  oldest unreplicated"]
    for lag in lags:
        oldest = "-" if lag.oldest_s is None else f"{lag.oldest_s:.1f} s ago"
        lines.append(
            f"{lag.partition:>9}  {lag.end:>10}  {lag.pointer:>7}  {lag.records:>13}  {oldest}"
        )
    lines.append(f"total lag: {sum(lag.records for lag in lags)} records")
    return "\n".join(lines)


def lag_json(topic: str, lags: list[PartitionLag]) -> str:
    """`format_lag`'s numbers as one JSON object (`kafka-journal lag --json`): `lagSeconds` is
    the age of the oldest unreplicated record, null when nothing lags or it is unknown."""
    partitions = [
        {
            "partition": lag.partition,
            "endOffset": lag.end,
            "pointer": lag.pointer,
            "lagRecords": lag.records,
            "lagSeconds": lag.oldest_s,
        }
        for lag in lags
    ]
    total = sum(lag.records for lag in lags)
    return orjson.dumps({"topic": topic, "partitions": partitions, "lagRecords": total}).decode()
