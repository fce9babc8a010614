"""An idempotent producer (acks=all) that replaces itself when aiokafka's gets stuck.

Seen against Kafka 4.3 with aiokafka 0.14: when sends time out during a broker restart, the
idempotent producer's sequence numbers go out of step (OutOfOrderSequenceNumber) and it never
sends again. A fresh producer (a new producer id) is the way out; the failed send is retried
once on it: for `produce`, by the partition's group commit, which sends the failed batch's
records again in their order before anything given later (journal/kafka/group_commit.py), so
a partition's records stay in the order given. That retry may duplicate a record whose
acknowledgement was lost, which the journal tolerates: an Append repeats the same seqNrs
(stores write them once, reads skip repeats) and a Delete repeats the same `to`.

Batches are compressed with lz4, as kafka-journal's producer does: measured here (bench
"Append compression"), it halves a one-event Append of JSON (548 -> 267 bytes) and shrinks a
ten-event one tenfold, for ~5 us of CPU per batch and no append latency that stands out of
the noise (p50 0.26 -> 0.28 ms); Kafka stores and replicates the batch as sent.

The driver's errors stop here: a record the broker refuses for its size is `AppendTooLarge`,
any other Kafka failure `KafkaUnavailable` (the core's hierarchy, journal/errors.py).

An idempotent aiokafka producer never gives up on a batch: with too few in-sync replicas or
no KRaft quorum it retries for ever. So a caller waits `ack_timeout_s` at most
(`KJ_KAFKA_ACK_TIMEOUT_S`, 30 s) and then hears `KafkaUnavailable` (a 503); the record may
still land later, as after any lost acknowledgement.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from journal.errors import KafkaUnavailable
from journal.kafka import DEFAULT_ACK_TIMEOUT_S
from journal.kafka.driver_errors import (
    DENIED_ERRORS,
    STUCK_PRODUCER_ERRORS,
    KafkaError,
    core_error,
    kafka_denied,
)
from journal.kafka.group_commit import GroupCommit, Unacknowledged
from journal.metrics import METRICS
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)

COMPRESSION = "lz4"  # as kafka-journal's producer: about a tenth of the bytes for JSON events
# aiokafka's default (16 KiB) holds five 10-event appends of ~300-byte events: with many
# appends in flight to one partition, batches fill and wait for the previous request. 256 KiB
# takes what 64 in-flight appends of that size send at once; a record larger than a batch still
# goes, in a batch of its own.
MAX_BATCH_BYTES = 256 * 1024

T = TypeVar("T")


class JournalProducer:
    """`produce` (group commit) and `send_and_wait` with acks=all and idempotence, surviving
    a stuck producer."""

    def __init__(
        self, kafka: KafkaAccess, *, ack_timeout_s: float = DEFAULT_ACK_TIMEOUT_S, **options: Any
    ) -> None:
        self._kafka = kafka
        self._ack_timeout_s = ack_timeout_s
        self._options = {
            **kafka.client_options(),
            "acks": "all",
            "enable_idempotence": True,
            "compression_type": COMPRESSION,
            "max_batch_size": MAX_BATCH_BYTES,
            **options,
        }
        self._producer: AIOKafkaProducer | None = None
        self._replacing = asyncio.Lock()
        self._batches = GroupCommit(
            self._current, ack_timeout_s=ack_timeout_s, recover=self._recover
        )

    def _current(self) -> AIOKafkaProducer:
        assert self._producer is not None, "start() first"
        return self._producer

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self._options)
        await self._producer.start()

    async def watch(self, topic: str) -> int:
        """`topic`'s partition count, once its metadata is in; from then on the producer's
        metadata refreshes include it (`partition_count`)."""
        return len(await self._current().partitions_for(topic))

    def partition_count(self, topic: str) -> int | None:
        """`topic`'s partition count in the producer's metadata as it is now (in memory,
        refreshed every `metadata_max_age_ms`); None when it has none (not `watch`ed yet, or
        a producer replaced since)."""
        partitions = self._current().client.cluster.partitions_for_topic(topic)
        return None if partitions is None else len(partitions)

    async def stop(self) -> None:
        if self._producer is not None:
            await self._batches.flush()
            await self._producer.stop()

    async def produce(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes,
        headers: list[tuple[str, bytes]],
        timestamp_ms: int,
    ) -> int:
        """The record's offset once acknowledged: it leaves with the partition's other records
        given while its last batch is in flight (journal/kafka/group_commit.py), which also
        resends it on a fresh producer if this one is stuck."""
        try:
            try:
                # the group commit keeps the ack timeout, one timer per batch
                return await self._batches.send(topic, partition, key, value, headers, timestamp_ms)
            except Unacknowledged as error:
                raise self._unacknowledged() from error
        except KafkaError as error:
            raise self._core_error(topic, error) from error

    async def send_and_wait(self, topic: str, value: bytes | None, **kwargs: Any) -> RecordMetadata:
        producer = self._current()
        try:
            try:
                return await self._delivered(producer, topic, value, **kwargs)
            except STUCK_PRODUCER_ERRORS as error:
                await self._replace_stuck(producer, error)
                return await self._delivered(self._current(), topic, value, **kwargs)
        except KafkaError as error:
            raise self._core_error(topic, error) from error

    async def _delivered(
        self, producer: AIOKafkaProducer, topic: str, value: bytes | None, **kwargs: Any
    ) -> RecordMetadata:
        # shielded: a timeout leaves the send going, aiokafka's future its batch's to answer
        sending = asyncio.ensure_future(producer.send_and_wait(topic, value, **kwargs))
        return await self._acknowledged(asyncio.shield(sending))

    async def _acknowledged(self, delivery: Awaitable[T]) -> T:
        """`delivery`'s result, or `KafkaUnavailable` after `ack_timeout_s`."""
        try:
            async with asyncio.timeout(self._ack_timeout_s):  # no waiter future, as wait_for
                return await delivery
        except TimeoutError as error:
            raise self._unacknowledged() from error

    def _unacknowledged(self) -> KafkaUnavailable:
        return KafkaUnavailable(
            f"Kafka did not acknowledge the record in {self._ack_timeout_s:g} s "
            "(too few in-sync replicas, or no quorum): it may still be written"
        )

    def _core_error(self, topic: str, error: KafkaError) -> Exception:
        """The driver's error as the core's (journal/kafka/driver_errors.py)."""
        return core_error(
            error,
            "Kafka did not take the record",
            kafka=self._kafka,
            right=f"Write on topic {topic}",
        )

    async def _recover(self, used: AIOKafkaProducer, error: Exception) -> bool:
        """The group commit's: whether `used`, on which a batch failed, was stuck and is
        replaced, so the batch is to be sent again."""
        if not isinstance(error, STUCK_PRODUCER_ERRORS):
            return False
        await self._replace_stuck(used, error)
        return True

    async def _replace_stuck(self, stuck: AIOKafkaProducer, error: Exception) -> None:
        """The failed send is retried once on the fresh producer, by the caller."""
        log.warning("the Kafka producer is stuck (%r): replacing it", error)
        METRICS.counter("kafka_journal_producer_replaced_total").inc()
        await self._replace(stuck)

    async def send(self, topic: str, value: bytes | None, **kwargs: Any) -> asyncio.Future[Any]:
        """Queue a record (waits only while the producer's buffer is full); the future of its
        delivery. For many records at once: `send_and_wait` recovers a stuck producer."""
        producer = self._current()
        try:
            delivery: asyncio.Future[Any] = await producer.send(topic, value, **kwargs)
        except DENIED_ERRORS as error:
            raise kafka_denied(self._kafka, f"Write on topic {topic}", error) from error
        return delivery

    async def _replace(self, stuck: AIOKafkaProducer) -> None:
        async with self._replacing:
            replaced_already = self._producer is not stuck  # by a concurrent send
            if not replaced_already:
                fresh = AIOKafkaProducer(**self._options)
                await fresh.start()
                self._producer = fresh
                await stuck.stop()
