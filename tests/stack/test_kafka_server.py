"""The stack's Kafka is a real broker: idempotent produce/consume round-trips, and no
acknowledged record is lost when the broker restarts under a producer."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    UnknownProducerId,
)
from aiokafka.structs import RecordMetadata

from stack import Stack
from tests.support.eventually import WITHIN_S, eventually

pytestmark = pytest.mark.integration

# Errors after which an aiokafka idempotent producer never sends again.
PRODUCER_IS_DEAD = (
    OutOfOrderSequenceNumber,
    ProducerFenced,
    UnknownProducerId,
    InvalidProducerEpoch,
)


async def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"stack-test-{uuid.uuid4().hex[:12]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )
    finally:
        await admin.close()
    return topic


def idempotent_producer(bootstrap: str) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=3_000,  # fail a send within the test's patience, then retry it
        retry_backoff_ms=200,
    )


async def read_topic(
    bootstrap: str, topic: str, partitions: int, within: float = WITHIN_S
) -> list[ConsumerRecord]:
    """Every record in the topic: read each partition from the start up to its end offset."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[ConsumerRecord] = []

        async def drained() -> bool:
            behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if behind:
                for batch in (await consumer.getmany(timeout_ms=1000)).values():
                    records.extend(batch)
            assert not behind, f"read {len(records)} records"
            return True

        await eventually(drained, f"the topic read to {ends}", within_s=within, interval_s=0)
        return records
    finally:
        await consumer.stop()


async def test_idempotent_records_round_trip_with_keys_headers_and_partitions(
    stack: Stack,
) -> None:
    partitions = 4
    topic = await create_topic(stack.kafka_bootstrap, partitions)
    sent: list[tuple[bytes, tuple[tuple[str, bytes], ...], bytes]] = []
    partition_of_key: dict[bytes, set[int]] = defaultdict(set)
    producer = idempotent_producer(stack.kafka_bootstrap)
    await producer.start()
    try:
        for i in range(300):
            key = f"journal-{i % 12}".encode()
            headers = (
                ("journal.action", f'{{"type":"append","seqNr":{i}}}'.encode()),
                ("n", str(i).encode()),
                ("empty", b""),
            )
            value = bytes([i % 256]) * (i % 7) + f"payload-{i}".encode()
            metadata = await producer.send_and_wait(topic, value, key=key, headers=list(headers))
            sent.append((key, headers, value))
            partition_of_key[key].add(metadata.partition)
    finally:
        await producer.stop()

    records = await read_topic(stack.kafka_bootstrap, topic, partitions)

    received = [(r.key, tuple(r.headers), r.value) for r in records]
    assert sorted(received) == sorted(sent)
    assert all(len(p) == 1 for p in partition_of_key.values()), partition_of_key
    assert len({next(iter(p)) for p in partition_of_key.values()}) > 1, "one partition only"
    for record in records:
        assert record.key is not None
        assert {record.partition} == partition_of_key[record.key]
    # Within a key (one partition) the broker keeps the order the producer sent.
    for key in partition_of_key:
        got = [r.value for r in sorted(records, key=lambda r: r.offset) if r.key == key]
        assert got == [value for k, _h, value in sent if k == key]


async def test_every_acknowledged_record_survives_a_broker_restart(stack: Stack) -> None:
    if not stack.kafka.controllable:
        pytest.skip("Kafka is external: this test restarts it")
    partitions = 3
    topic = await create_topic(stack.kafka_bootstrap, partitions)
    acked: dict[bytes, RecordMetadata] = {}
    failed_sends: list[str] = []
    stop = asyncio.Event()

    async def produce() -> None:
        """Send one record at a time and retry a failed send, as a real client would.

        aiokafka 0.14's idempotent sender dies on OutOfOrderSequenceNumber (seen here after
        sends timed out during the restart) and never resets its producer id: every later
        send fails the same way. A real client must then replace the producer.
        """
        producer = idempotent_producer(stack.kafka_bootstrap)
        await producer.start()
        try:
            i = 0
            while not stop.is_set():
                value = f"record-{i}".encode()
                while True:
                    try:
                        acked[value] = await producer.send_and_wait(
                            topic, value, key=f"key-{i % 10}".encode()
                        )
                        break
                    except KafkaError as error:
                        failed_sends.append(type(error).__name__)
                        if isinstance(error, PRODUCER_IS_DEAD):
                            with contextlib.suppress(KafkaError):
                                await producer.stop()
                            producer = idempotent_producer(stack.kafka_bootstrap)
                            await producer.start()
                        await asyncio.sleep(0.2)
                i += 1
        finally:
            await producer.stop()

    async def wait_for_acks(count: int) -> None:
        async def enough() -> bool:
            if producing.done():  # it only ends when told to: fail at once, with its error
                raise RuntimeError(f"the producer ended: {producing.exception()!r}")
            assert len(acked) >= count, f"only {len(acked)} acks, failures {failed_sends}"
            return True

        await eventually(enough, f"{count} records acknowledged", interval_s=0.05)

    producing = asyncio.create_task(produce())
    await wait_for_acks(200)
    pid_before = stack.kafka.pid()
    await asyncio.to_thread(stack.kafka.restart)
    assert stack.kafka.pid() not in (None, pid_before), "the broker did not restart"
    acked_at_restart = len(acked)
    await wait_for_acks(acked_at_restart + 200)
    stop.set()
    await producing

    records = await read_topic(stack.kafka_bootstrap, topic, partitions)
    where: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    for record in records:
        assert record.value is not None
        where[record.value].add((record.partition, record.offset))
    lost = [v for v, md in acked.items() if (md.partition, md.offset) not in where[v]]
    assert not lost, f"{len(lost)} acknowledged records missing, e.g. {lost[:5]}"
    assert len(acked) >= acked_at_restart + 200
