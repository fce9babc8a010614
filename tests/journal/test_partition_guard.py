"""The partition count guard (journal/kafka/guard.py) against the real servers: a topic created
through the project, its count recorded, then partitions added behind the project's back with
Kafka's admin client (as `kafka-topics --alter` does)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

from journal.client.journals import Journals
from journal.core.model import Ack, Event, TextPayload
from journal.errors import PartitionCountChanged
from journal.kafka.topic import partition_count
from journal.kafka.writer import partition_of
from journal.settings import Settings
from journal.store import cql
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration

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


def one_event(seq_nr: int = 1) -> list[Event]:
    return [Event(seq_nr, payload=TextPayload("x"))]


async def test_a_running_client_refuses_once_partitions_are_added(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:
        await journals.journal("before").append(one_event(), ack=Ack.KAFKA)
        await alter_behind_the_back(settings, ALTERED)
        appended = ["before"]

        async def refused() -> PartitionCountChanged | None:
            journal_id = f"during-{len(appended)}"  # many ids: some map elsewhere under 4
            try:
                await journals.journal(journal_id).append(one_event(), ack=Ack.KAFKA)
            except PartitionCountChanged as error:
                return error
            appended.append(journal_id)
            return None

        error = await eventually(refused, "an append refused", within_s=30, interval_s=0.05)
        assert (error.live, error.recorded) == (ALTERED, RECORDED)
        assert f"has {ALTERED} partitions, the journal recorded {RECORDED}" in str(error)
        with pytest.raises(PartitionCountChanged):  # reads are refused too
            await journals.journal("before").info()
        with pytest.raises(PartitionCountChanged):
            await journals.journal("before").append(one_event(2))  # a verified one
        assert journals.writer.guard is not None and journals.writer.guard.refusal is not None
    found = await records_by_partition(settings, ALTERED)
    assert_nothing_misplaced(found)
    assert sorted(key for keys in found.values() for key in keys) == sorted(appended)


async def test_a_client_started_after_the_change_refuses_at_start(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:  # creates and records the topic
        await journals.journal("before").append(one_event(), ack=Ack.KAFKA)
    await alter_behind_the_back(settings, ALTERED)
    with pytest.raises(PartitionCountChanged) as refused:
        await Journals.connect(settings)
    assert (refused.value.live, refused.value.recorded) == (ALTERED, RECORDED)
    assert_nothing_misplaced(await records_by_partition(settings, ALTERED))


async def test_a_keyspace_without_the_record_gets_it_at_the_first_start(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        select = f"SELECT partitions FROM {keyspace}.topic_partitions WHERE topic = %s"
        assert not await cql.execute(store.session_for_tests, select, (settings.topic,))
        async with await Journals.connect(settings, store=store):
            pass
        rows = await cql.execute(store.session_for_tests, select, (settings.topic,))
        assert [row.partitions for row in rows] == [RECORDED]
        # a later process with another count in its settings keeps the recorded one
        assert await store.recorded_partitions(settings.topic, ALTERED) == RECORDED
    finally:
        await store.close()
