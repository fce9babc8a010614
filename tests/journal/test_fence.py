"""The high-watermark fence never goes below its process's floor (invariant 2): what the
process's writer saw acknowledged, and the fences its reads took before. Kafka is a stand-in
here that answers a lagging high watermark on demand (a new leader whose high watermark has
not caught up, which the broker is meant to refuse: the floor does not trust that)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import cast

from aiokafka import TopicPartition

from journal.core.model import Event, Events, JournalKey, JsonPayload
from journal.kafka.fence import HighWatermarks
from journal.kafka.producer import JournalProducer
from journal.kafka.writer import FenceFloor, JournalWriter
from journal.metrics import METRICS

TOPIC = "t"
KEY = JournalKey(TOPIC, "a")


class _Answers:
    """A consumer's `end_offsets` that answers the ends it is given, per partition, in turn."""

    def __init__(self, ends: Mapping[int, Sequence[int]]) -> None:
        self._ends = {p: list(answers) for p, answers in ends.items()}
        self.gate = asyncio.Event()  # answers wait while it is clear (a request on its way)
        self.gate.set()
        self.asked = asyncio.Event()

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        self.asked.set()
        answer = {tp: self._ends[tp.partition].pop(0) for tp in tps}
        await self.gate.wait()
        return answer

    async def stop(self) -> None:
        return None


class _Acks:
    """A producer that acknowledges each record at the next offset of its partition."""

    def __init__(self, first: int) -> None:
        self._next: dict[int, int] = {}
        self._first = first

    async def produce(
        self, topic: str, partition: int, key: bytes, value: bytes, *rest: object
    ) -> int:
        offset = self._next.get(partition, self._first)
        self._next[partition] = offset + 1
        return offset


def _raised() -> float:
    return METRICS.registry.get_sample_value("kafka_journal_fence_floor_raised_total") or 0.0


async def test_a_fence_is_never_below_what_the_processs_writer_saw_acknowledged() -> None:
    writer = JournalWriter(cast(JournalProducer, _Acks(first=172)), partitions=1)
    position = await writer.append(KEY, Events((Event(1, payload=JsonPayload.of(1)),)))
    assert position.offset == 172
    # the partition's leader changed: the new one answers its lagging high watermark
    fence = HighWatermarks(TOPIC, _Answers({0: [170, 175]}), writer.fence_floor)
    before = _raised()
    assert await fence.fence(KEY, 0) == 173  # the acknowledged record lies below it
    assert _raised() == before + 1
    assert await fence.fence(KEY, 0) == 175  # Kafka's answer once it caught up
    assert _raised() == before + 1


async def test_the_fences_of_a_partition_never_go_back() -> None:
    floor = FenceFloor()
    fence = HighWatermarks(TOPIC, _Answers({0: [10, 7, 12], 1: [3]}), floor)
    assert [await fence.fence(KEY, 0) for _ in range(3)] == [10, 10, 12]
    assert await fence.fence(KEY, 1) == 3  # a floor is per partition
    assert (floor.of(0), floor.of(1), floor.of(2)) == (12, 3, 0)


async def test_an_ack_while_the_request_is_on_its_way_is_the_next_requests() -> None:
    # the broker answered as of before the ack: right for the reads that were waiting, and
    # no lagging answer (not counted); a read that starts after the ack asks again
    writer = JournalWriter(cast(JournalProducer, _Acks(first=8)), partitions=1)
    kafka = _Answers({0: [8, 9]})
    fence = HighWatermarks(TOPIC, kafka, writer.fence_floor)
    before = _raised()
    kafka.gate.clear()
    waiting = asyncio.create_task(fence.fence(KEY, 0))
    await kafka.asked.wait()
    await writer.append(KEY, Events((Event(1, payload=JsonPayload.of(1)),)))  # offset 8
    later = asyncio.create_task(fence.fence(KEY, 0))
    kafka.gate.set()
    assert (await waiting, await later) == (8, 9)
    assert _raised() == before
