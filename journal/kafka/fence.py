"""Where "now" is in a journal's partition: the offset below which a read must see everything.

`HighWatermarks` (the default) asks the partition's leader for its high watermark
(ListOffsets, latest). Appends are produced with acks=all, so every acknowledged append lies
below it: a read that asks after an append was acknowledged sees it. Concurrent reads share
requests: one request serves every read that was waiting when it was sent, and a request that
was already on its way when a read arrived never serves that read. The fence has its own
consumer, so it never queues behind a long poll. A read writes nothing.

The fence is never below the process's `FenceFloor` (journal/kafka/writer.py): the end of
what it saw acknowledged or fenced before in that partition. The broker refuses to answer
while a new leader's high watermark lags (KIP-207: LEADER_NOT_AVAILABLE to aiokafka's
ListOffsets v1-3, which aiokafka retries), so the floor is the process's own guarantee, not a
trust in that: reads of one process never go back, and see its acknowledged writes. A floor
above the answer is counted (`kafka_journal_fence_floor_raised_total`): the read then waits,
bounded, for the records below it as for any other.

`Marks` produces a Mark to the journal's partition and takes its offset, as kafka-journal
does; it costs a record per read and is there for deployments that want that behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.core.model import JournalKey
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.driver_errors import KafkaError, core_error
from journal.kafka.writer import FenceFloor, JournalWriter
from journal.metrics import METRICS
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)


class Fence(Protocol):
    async def fence(self, key: JournalKey, partition: int) -> int:
        """An offset every record acknowledged before this call lies below."""
        ...

    async def close(self) -> None: ...


class HighWatermarks:
    def __init__(
        self, topic: str, consumer: AIOKafkaConsumer, floor: FenceFloor | None = None
    ) -> None:
        """`floor`: the process's (its writer's), so that reads fence above its acks."""
        self._topic = topic
        self._consumer = consumer
        self._floor = FenceFloor() if floor is None else floor
        self._waiting: dict[int, list[asyncio.Future[int]]] = {}
        self._sender: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls, topic: str, kafka: KafkaAccess, floor: FenceFloor | None = None
    ) -> HighWatermarks:
        return cls(topic, await start_consumer(kafka), floor)

    async def fence(self, key: JournalKey, partition: int) -> int:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(partition, []).append(future)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return await future

    async def _send(self) -> None:
        """Ask for every waiting partition at once, until nobody waits."""
        while self._waiting:
            waiting, self._waiting = self._waiting, {}
            tps = [TopicPartition(self._topic, p) for p in waiting]
            # as of the request: what is acknowledged while it is on its way is not the
            # waiting reads' to see, nor is an answer below it a lagging one
            floors = {p: self._floor.of(p) for p in waiting}
            try:
                ends = await self._consumer.end_offsets(tps)
            except KafkaError as error:  # end_offsets retried what was retriable already
                failure = core_error(error, f"no high watermark for {self._topic}")
                for futures in waiting.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(failure)
                continue
            for tp, end in ends.items():
                fence = max(end, floors[tp.partition])
                if fence > end:
                    METRICS.counter("kafka_journal_fence_floor_raised_total").inc()
                    log.warning(
                        "%s: Kafka answered a high watermark of %d, below %d that this process "
                        "saw acknowledged or read before asking: the fence is %d",
                        tp,
                        end,
                        fence,
                        fence,
                    )
                self._floor.raise_to(tp.partition, fence)
                for future in waiting[tp.partition]:
                    if not future.done():
                        future.set_result(fence)

    async def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        await stop_consumer(self._consumer)


class Marks:
    def __init__(self, writer: JournalWriter, origin: str | None) -> None:
        self._writer = writer
        self._origin = origin

    async def fence(self, key: JournalKey, partition: int) -> int:
        position = await self._writer.mark(key, uuid.uuid4().hex, origin=self._origin)
        return position.offset

    async def close(self) -> None:
        return None
