"""The keys of a partition's records in an offset range, read keys-only with one assigned
consumer: where listing finds the ids of journals the store may not reflect yet
(journal/client/listing.py)."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.errors import KafkaUnavailable
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.driver_errors import KafkaError, core_error
from journal.kafka.poison import fetch_for_read
from kjconfig.access import KafkaAccess


class PartitionKeys:
    """Keys of a partition's records in an offset range, read with one assigned consumer."""

    def __init__(self, kafka: KafkaAccess, topic: str, timeout_s: float) -> None:
        self._kafka = kafka
        self._topic = topic
        self._timeout_s = timeout_s
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()  # one scan at a time: they share the consumer

    async def ends(self, partitions: int) -> dict[int, int]:
        """Every partition's high watermark."""
        tps = [TopicPartition(self._topic, p) for p in range(partitions)]
        async with self._lock:
            consumer = await self._started()
            try:
                ends = await consumer.end_offsets(tps)
            except KafkaError as error:
                raise core_error(error, f"no high watermarks of {self._topic}") from error
        return {tp.partition: end for tp, end in ends.items()}

    async def ids(self, partition: int, after: int, until: int) -> set[str]:
        """The UTF-8 keys of the partition's records in (after, until), from the log start
        if it is past `after`. UndecodableBatch when a batch there cannot be decoded."""
        tp = TopicPartition(self._topic, partition)
        keys: set[bytes] = set()
        async with self._lock:
            consumer = await self._started()
            consumer.assign([tp])
            try:
                start = max(after + 1, (await consumer.beginning_offsets([tp]))[tp])
                consumer.seek(tp, start)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self._timeout_s
                while await consumer.position(tp) < until:
                    if loop.time() > deadline:
                        raise KafkaUnavailable(f"{tp} did not deliver up to {until} in time")
                    records = await fetch_for_read(consumer, tp, timeout_ms=200, until=until)
                    keys.update(r.key for r in records if r.key is not None and r.offset < until)
            except KafkaError as error:
                raise core_error(error, str(tp)) from error
            finally:
                consumer.assign([])  # idle, it sends no long polls
        return {key.decode("utf-8", "replace") for key in keys}

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            self._consumer = await start_consumer(self._kafka, fetch_max_wait_ms=20)
        return self._consumer

    async def close(self) -> None:
        if self._consumer is not None:
            await stop_consumer(self._consumer)
            self._consumer = None
