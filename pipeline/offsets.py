"""Which offsets of the action topic a job reads, decided on the driver before Spark runs.

Contract: a job reads, per partition, the fixed range `[start, end)` that `OffsetRange` names,
`end` being the partition's end when the job started, so its result (and the pointers it
reaches) does not depend on what is appended meanwhile. `start` comes from the earliest
offset Kafka still holds or from the store's pointers (`pointer + 1`). Records below the
earliest offset that the store's pointer has not covered (all of them, for a partition it has
no pointer of) expired before they were replicated: `Gap` says which. Under the conflict rule
a rebuild cannot recover the journals they changed: their later Appends do not continue what
the store holds, so only a Purge held in Kafka starts such a journal again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.kafka import partition_count
from kjconfig.access import KafkaAccess

StartFrom = Literal["pointers", "earliest"]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets `start` (inclusive) to `end` (exclusive) of one partition."""

    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    """The earliest offset Kafka holds and the end offset, per partition."""

    earliest: Mapping[int, int]
    end: Mapping[int, int]

    @property
    def partitions(self) -> list[int]:
        return sorted(self.end)


@dataclass(frozen=True, slots=True)
class Gap:
    """Offsets `first..last` of `partition` expired from Kafka before being replicated."""

    partition: int
    first: int
    last: int


async def topic_offsets(kafka: KafkaAccess, topic: str) -> TopicOffsets:
    """Ask Kafka for the earliest and end offsets of every partition of `topic`."""
    partitions = await partition_count(kafka, topic)
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        earliest = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return TopicOffsets(
        {tp.partition: o for tp, o in earliest.items()}, {tp.partition: o for tp, o in end.items()}
    )


def read_ranges(
    offsets: TopicOffsets, pointers: Mapping[int, int], start_from: StartFrom
) -> tuple[list[OffsetRange], list[Gap]]:
    """From the earliest offsets, or after each pointer (earliest where there is none)."""
    ranges, gaps = [], []
    for partition in offsets.partitions:
        earliest, end = offsets.earliest[partition], offsets.end[partition]
        pointer = pointers.get(partition, -1)
        start = max(earliest, pointer + 1) if start_from == "pointers" else earliest
        if pointer + 1 < earliest:
            gaps.append(Gap(partition, pointer + 1, earliest - 1))
        ranges.append(OffsetRange(partition, start, max(start, end)))
    return ranges, gaps


def replicated_ranges(offsets: TopicOffsets, pointers: Mapping[int, int]) -> list[OffsetRange]:
    """What Kafka still holds of what replication has applied: earliest up to the pointer."""
    return [
        OffsetRange(p, offsets.earliest[p], max(offsets.earliest[p], min(pointers[p] + 1, end)))
        for p, end in sorted(offsets.end.items())
        if p in pointers
    ]


def spark_kafka_options(topic: str, ranges: Sequence[OffsetRange]) -> dict[str, str]:
    """Options of Spark's Kafka source reading exactly `ranges` (the non-empty ones)."""
    wanted = [r for r in ranges if r.count > 0]
    return {
        "assign": json.dumps({topic: [r.partition for r in wanted]}),
        "startingOffsets": json.dumps({topic: {str(r.partition): r.start for r in wanted}}),
        "endingOffsets": json.dumps({topic: {str(r.partition): r.end for r in wanted}}),
    }
