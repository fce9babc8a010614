"""Poison batches under Faust (agents/poison.py): the consumer goes past an undecodable batch,
hands over the records before it and tells the agent what it skipped (invariant 7).

`_past_poison` is driven with `Partitions`, a stand-in for the two aiokafka consumers it
moves (the worker's and the probe): partitions in memory whose fetches fail over a poison
batch the way aiokafka's do."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.errors import UnsupportedCodecError
from aiokafka.structs import ConsumerRecord, TopicPartition

from agents.poison import SkippedBatches, _past_poison
from journal.kafka.poison import Poison, Skipped

TOPIC = "poisoned"


@dataclass(slots=True)
class Partitions:
    """Records at offsets 0..end-1 per partition; a fetch that reaches an offset of `poison`
    fails, as aiokafka's does on a batch it cannot decode (and returns none of its records);
    the first fetch of a `slow` partition gets nothing in time."""

    ends: dict[TopicPartition, int]
    poison: dict[TopicPartition, range] = field(default_factory=dict)
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    slow: set[TopicPartition] = field(default_factory=set)
    assigned: list[TopicPartition] = field(default_factory=list)

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = list(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in tps}

    async def getmany(
        self, tp: TopicPartition, timeout_ms: int, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        if tp in self.slow:
            self.slow.discard(tp)
            return {}
        start = self.positions[tp]
        stop = self.ends[tp] if max_records is None else min(start + max_records, self.ends[tp])
        if any(offset in self.poison.get(tp, range(0)) for offset in range(start, stop)):
            raise UnsupportedCodecError("zstd")
        self.positions[tp] = stop
        return {tp: [_record(tp, offset) for offset in range(start, stop)]} if stop > start else {}


def _record(tp: TopicPartition, offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, b"k", b"v", None, 1, 1, [])


def offsets(records: list[ConsumerRecord[bytes, bytes]]) -> list[int]:
    return [record.offset for record in records]


async def test_a_failed_fetch_hands_over_what_lies_before_the_batch_and_moves_past_it() -> None:
    poisoned, clean, idle, late = (TopicPartition(TOPIC, p) for p in range(4))
    ends = {poisoned: 10, clean: 5, idle: 4, late: 6}
    before = {poisoned: 0, clean: 2, idle: 4, late: 1}
    # the failed fetch had drained (and dropped) records of `clean` and `late`
    consumer = Partitions(ends, positions={poisoned: 0, clean: 5, idle: 4, late: 3})
    probe = Partitions(ends, poison={poisoned: range(3, 6)}, slow={late})
    skipped = SkippedBatches()

    handed = await _past_poison(consumer, probe, before, skipped)

    assert {tp: offsets(records) for tp, records in handed.items()} == {
        poisoned: [0, 1, 2],
        clean: [2, 3, 4],
    }
    # the worker's consumer goes on past what it was handed, and past the batch; where the
    # probe got nothing, it fetches again what the failed fetch dropped
    assert consumer.positions == {poisoned: 6, clean: 5, idle: 4, late: 1}
    [batch] = skipped.take()
    assert batch == Skipped(batch.poison, 6)
    assert (batch.poison.topic, batch.poison.partition, batch.poison.start) == (TOPIC, 0, 3)


async def test_a_batch_at_the_position_is_skipped_with_nothing_handed_over() -> None:
    tp = TopicPartition(TOPIC, 7)
    consumer = Partitions({tp: 8}, positions={tp: 4})
    probe = Partitions({tp: 8}, poison={tp: range(4, 8)})
    skipped = SkippedBatches()

    handed = await _past_poison(consumer, probe, {tp: 4}, skipped)

    assert handed == {}
    assert consumer.positions == {tp: 8}  # the batch ran to the end
    [batch] = skipped.take()
    assert (batch.poison.start, batch.after) == (4, 8)


def test_skipped_batches_are_taken_once_in_the_order_they_came() -> None:
    skipped = SkippedBatches()
    first = Skipped(Poison(TOPIC, 0, 3, "e"), 6)
    second = Skipped(Poison(TOPIC, 1, 0, "e"), 2)
    skipped.put(first)
    skipped.put(second)
    assert skipped.take() == [first, second]
    assert skipped.take() == []
