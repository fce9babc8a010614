"""Group commit (journal/kafka/group_commit.py) against a producer that answers as Kafka does:
each batch gets the partition's next offsets, in the order the batches were sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, OutOfOrderSequenceNumber
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata

from journal.errors import KafkaUnavailable
from journal.kafka import producer as producer_module
from journal.kafka.group_commit import GroupCommit, Unacknowledged
from journal.kafka.producer import JournalProducer
from kjconfig.access import KafkaAccess
from tests.support.eventually import eventually


class Builder(BatchBuilder):  # type: ignore[misc]  # aiokafka is untyped
    """aiokafka's batch builder, keeping the values appended: what a fake broker logs."""

    def __init__(self, batch_bytes: int) -> None:
        super().__init__(batch_bytes, 0)  # uncompressed
        self.values: list[bytes] = []

    def append(self, *, timestamp: Any, key: Any, value: Any, headers: Any = ()) -> Any:
        appended = super().append(timestamp=timestamp, key=key, value=value, headers=headers)
        if appended is not None:
            self.values.append(value)
        return appended


class Partitions:
    """An aiokafka producer's batch interface: logs each partition's records, offsets from 0."""

    def __init__(self, batch_bytes: int = 16_384, failing: Exception | None = None) -> None:
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.batches: list[int] = []  # records per batch sent, in order
        self.batch_bytes = batch_bytes
        self.failing = failing
        self.release = asyncio.Event()
        self.release.set()

    def create_batch(self) -> Builder:
        return Builder(self.batch_bytes)

    async def send_batch(self, batch: Builder, topic: str, *, partition: int) -> Any:
        await self.release.wait()
        if self.failing is not None:
            raise self.failing
        base = self._written(topic, partition, batch.values)
        self.batches.append(len(batch.values))
        delivered: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        delivered.set_result(RecordMetadata(topic, partition, None, base, -1, 0, 0))
        return delivered

    async def send_and_wait(
        self, topic: str, value: bytes, *, partition: int, **kwargs: Any
    ) -> RecordMetadata:
        """aiokafka's one record at a time."""
        await self.release.wait()
        if self.failing is not None:
            raise self.failing
        base = self._written(topic, partition, [value])
        return RecordMetadata(topic, partition, None, base, -1, 0, 0)

    def _written(self, topic: str, partition: int, values: list[bytes]) -> int:
        log = self.logs.setdefault((topic, partition), [])
        base = len(log)
        log.extend(values)
        return base


async def _send_all(commit: GroupCommit, values: list[bytes], partition: int = 0) -> list[int]:
    return await asyncio.gather(
        *(commit.send("t", partition, b"k", value, [], 0) for value in values)
    )


async def test_records_given_together_leave_in_one_batch_at_consecutive_offsets() -> None:
    kafka = Partitions()
    commit = GroupCommit(lambda: kafka)
    offsets = await _send_all(commit, [b"%d" % i for i in range(10)])
    assert offsets == list(range(10))
    assert kafka.batches == [10]


async def test_records_given_while_a_batch_is_in_flight_wait_for_the_next_one_in_order() -> None:
    kafka = Partitions()
    kafka.release.clear()
    commit = GroupCommit(lambda: kafka)
    first = asyncio.ensure_future(_send_all(commit, [b"a", b"b"]))
    await asyncio.sleep(0)  # the sender takes the first batch and waits on the broker
    await asyncio.sleep(0)
    second = asyncio.ensure_future(_send_all(commit, [b"c", b"d", b"e"]))
    await asyncio.sleep(0)
    kafka.release.set()
    assert await first == [0, 1]
    assert await second == [2, 3, 4]
    assert kafka.batches == [2, 3]


async def test_a_full_batch_closes_and_the_record_opens_the_next() -> None:
    kafka = Partitions(batch_bytes=300)  # a few 100-byte records a batch
    commit = GroupCommit(lambda: kafka)
    offsets = await _send_all(commit, [bytes(100)] * 7)
    assert offsets == list(range(7))
    assert sum(kafka.batches) == 7 and len(kafka.batches) > 1


async def test_partitions_batch_apart() -> None:
    kafka = Partitions()
    commit = GroupCommit(lambda: kafka)
    zero, one = await asyncio.gather(
        _send_all(commit, [b"a", b"b"], partition=0), _send_all(commit, [b"c"], partition=1)
    )
    assert (zero, one) == ([0, 1], [0])


async def test_a_failed_batch_fails_each_of_its_records() -> None:
    refused = KafkaConnectionError("no broker")
    kafka = Partitions(failing=refused)
    commit = GroupCommit(lambda: kafka)
    results = await asyncio.gather(
        *(commit.send("t", 0, b"k", b"v", [], 0) for _ in range(3)), return_exceptions=True
    )
    assert results == [refused] * 3


async def test_a_cancelled_caller_leaves_its_neighbours_waiting_for_their_batch() -> None:
    kafka = Partitions()
    kafka.release.clear()
    commit = GroupCommit(lambda: kafka)
    cancelled = asyncio.ensure_future(commit.send("t", 0, b"k", b"a", [], 0))
    neighbour = asyncio.ensure_future(commit.send("t", 0, b"k", b"b", [], 0))
    await asyncio.sleep(0)
    cancelled.cancel()
    kafka.release.set()
    assert await neighbour == 1
    assert cancelled.cancelled()
    await commit.flush()


@pytest.mark.parametrize(
    ("driver", "core"),
    [(KafkaConnectionError("no broker"), KafkaUnavailable)],
)
async def test_produce_raises_the_cores_errors(driver: Exception, core: type[Exception]) -> None:
    producer = JournalProducer(KafkaAccess("127.0.0.1:1"))
    producer._producer = Partitions(failing=driver)  # the driver seam (aiokafka is untyped)
    with pytest.raises(core) as raised:
        await producer.produce("topic", 0, b"k", b"v", [], 0)
    assert raised.value.__cause__ is driver


class Stuck(Partitions):
    """An idempotent producer out of step with the broker: it fails every send, and stopping it
    takes until `stopped` is set (aiokafka's stop waits for its sender)."""

    def __init__(self) -> None:
        super().__init__(failing=OutOfOrderSequenceNumber())
        self.stopped = asyncio.Event()

    async def stop(self) -> None:
        await self.stopped.wait()


class Fresh(Partitions):
    async def start(self) -> None:
        pass


def _replaced_by(monkeypatch: pytest.MonkeyPatch, fresh: Fresh) -> None:
    """`JournalProducer` makes its replacement with `fresh`."""
    monkeypatch.setattr(producer_module, "AIOKafkaProducer", lambda **options: fresh)


async def test_after_a_stuck_producer_the_waiting_records_go_first_in_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38 item 5: the records of the failed batch are resent on the fresh producer in
    the order given, and a record given meanwhile (while the stuck one stops) goes after them:
    it does not overtake them on the fresh producer."""
    fresh = Fresh()
    _replaced_by(monkeypatch, fresh)
    stuck = Stuck()
    producer = JournalProducer(KafkaAccess("127.0.0.1:1"))
    producer._producer = stuck  # the driver seam (aiokafka is untyped)
    first = [
        asyncio.ensure_future(producer.produce("t", 0, b"k", value, [], 0))
        for value in (b"a", b"b")
    ]

    async def replaced() -> bool:
        return producer._producer is fresh

    await eventually(replaced, "the stuck producer is replaced", within_s=10, interval_s=0.001)
    later = asyncio.ensure_future(producer.produce("t", 0, b"k", b"c", [], 0))

    async def given() -> bool:  # sent already, or waiting in a batch
        state = producer._batches._partitions[("t", 0)]
        waiting = [value for batch in state.waiting for value in batch.builder.values]
        return b"c" in [*fresh.logs.get(("t", 0), []), *waiting]

    await eventually(given, "the later record is given", within_s=10, interval_s=0.001)
    stuck.stopped.set()
    assert await asyncio.gather(*first, later) == [0, 1, 2]
    assert fresh.logs[("t", 0)] == [b"a", b"b", b"c"]


async def test_a_batch_is_sent_once_more_only_after_a_stuck_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh producer stuck as well: the records fail (KafkaUnavailable), not replaced again."""
    fresh = Fresh(failing=OutOfOrderSequenceNumber())
    _replaced_by(monkeypatch, fresh)
    stuck = Stuck()
    stuck.stopped.set()
    producer = JournalProducer(KafkaAccess("127.0.0.1:1"))
    producer._producer = stuck  # the driver seam (aiokafka is untyped)
    with pytest.raises(KafkaUnavailable) as raised:
        await producer.produce("t", 0, b"k", b"a", [], 0)
    assert isinstance(raised.value.__cause__, OutOfOrderSequenceNumber)
    assert producer._current() is fresh


async def test_a_cancelled_caller_leaves_before_its_batch_is_answered() -> None:
    """A timeout around an append must not wait for the broker (up to its request timeout)."""
    kafka = Partitions()
    kafka.release.clear()
    commit = GroupCommit(lambda: kafka)
    cancelled = asyncio.ensure_future(commit.send("t", 0, b"k", b"a", [], 0))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    assert cancelled.cancelled()  # the broker has not answered yet
    kafka.release.set()
    await commit.flush()


async def test_a_record_kafka_does_not_acknowledge_in_time_is_kafka_unavailable() -> None:
    """An idempotent aiokafka producer retries for ever (no quorum, too few in-sync replicas):
    the caller hears KafkaUnavailable after the producer's ack timeout, the batch goes on."""
    kafka = Partitions()
    kafka.release.clear()
    producer = JournalProducer(KafkaAccess("127.0.0.1:1"), ack_timeout_s=0.01)
    producer._producer = kafka  # the driver seam (aiokafka is untyped)
    with pytest.raises(KafkaUnavailable, match="did not acknowledge"):
        await producer.produce("topic", 0, b"k", b"v", [], 0)
    kafka.release.set()
    await producer._batches.flush()
    assert kafka.batches == [1]  # sent all the same


async def test_a_record_queued_behind_an_unacknowledged_batch_times_out_too() -> None:
    """The deadline runs from the batch's opening, not its sending: a record waiting behind a
    batch the broker holds does not wait for ever."""
    kafka = Partitions()
    kafka.release.clear()
    commit = GroupCommit(lambda: kafka, ack_timeout_s=0.01)
    first = asyncio.ensure_future(commit.send("t", 0, b"k", b"a", [], 0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first batch is with the broker
    queued = asyncio.ensure_future(commit.send("t", 0, b"k", b"b", [], 0))
    results = await asyncio.gather(first, queued, return_exceptions=True)
    assert [type(result) for result in results] == [Unacknowledged, Unacknowledged]
    kafka.release.set()
    await commit.flush()
    assert kafka.batches == [1, 1]  # both sent all the same, in order
