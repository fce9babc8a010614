"""A topic whose partitions are added behind the project's back, and what its records look
like then: for the tests of the partition count guard (journal/kafka/guard.py)."""

from __future__ import annotations

from collections import defaultdict

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

from journal.kafka.topic import partition_count
from journal.kafka.writer import partition_of
from journal.settings import Settings
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique

RECORDED = 2
ALTERED = 4


def guarded_settings(stack: Stack, keyspace: str) -> Settings:
    # a short metadata age: a running process sees the alter within a second or so
    settings = settings_for(stack, unique("guard"), keyspace, RECORDED)
    return settings.model_copy(update={"kafka_metadata_max_age_s": 0.5})


async def alter_behind_the_back(settings: Settings, total: int) -> None:
    """`kafka-topics --alter --partitions total`: Kafka's admin, not the project."""
    admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
    await admin.start()
    try:
        await admin.create_partitions({settings.topic: NewPartitions(total_count=total)})
    finally:
        await admin.close()
    await eventually(
        lambda: _has_partitions(settings, total), f"{settings.topic} has {total} partitions"
    )


async def _has_partitions(settings: Settings, total: int) -> bool:
    return await partition_count(settings.kafka_access(), settings.topic) == total


async def records_by_partition(settings: Settings, partitions: int) -> dict[int, list[str]]:
    """The keys of every record of the topic, by partition."""
    consumer = AIOKafkaConsumer(**settings.kafka_access().client_options(), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        found: dict[int, list[str]] = defaultdict(list)

        async def read_to_end() -> bool:
            batches = await consumer.getmany(*tps, timeout_ms=200)
            for tp, records in batches.items():
                found[tp.partition] += [r.key.decode() for r in records if r.key is not None]
            return all([await consumer.position(tp) >= ends[tp] for tp in tps])

        await eventually(read_to_end, "the topic read to its end", within_s=60)
        return found
    finally:
        await consumer.stop()


def assert_nothing_misplaced(found: dict[int, list[str]]) -> None:
    """No record beyond the recorded partitions; each key on its partition under RECORDED."""
    assert all(not found[p] for p in range(RECORDED, ALTERED)), dict(found)
    misplaced = {
        (key, p) for p, keys in found.items() for key in keys if partition_of(key, RECORDED) != p
    }
    assert not misplaced
