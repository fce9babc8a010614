"""A direct client on a fresh topic and keyspace of the test stack, with a replicate() button."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from journal.client.journals import Journals
from journal.kafka.producer import JournalProducer
from journal.kafka.topic import TopicSpec, end_offsets, ensure_topic, quarantine_topic
from journal.replication.replicate import AlreadyQuarantined, KafkaQuarantine, replicate_to_now
from journal.replication.successor import SuccessorReplication
from journal.settings import Settings
from journal.store.base import EventualStore, JournalMeta
from journal.store.cassandra import CassandraStore
from stack import Stack


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def settings_for(stack: Stack, topic: str, keyspace: str, partitions: int = 3) -> Settings:
    return Settings(
        kafka_bootstrap=stack.kafka_bootstrap,
        cassandra_hosts=",".join(stack.cassandra_hosts),
        cassandra_port=stack.cassandra_port,
        topic=topic,
        keyspace=keyspace,
        partitions=partitions,
        segment_size=50,
    )


@dataclass
class Harness:
    journals: Journals
    store: CassandraStore  # the store's write side too: replication's
    producer: JournalProducer
    settings: Settings

    async def stored(self, journal_id: str) -> tuple[JournalMeta | None, list[int]]:
        """What the store holds of a journal: its metadata and its events' seqNrs."""
        key = self.journals.journal(journal_id).key
        meta = await self.journals.store.meta(key)
        if meta is None:
            return None, []
        return meta, [r.seq_nr async for r in self.journals.store.read(key, meta)]

    async def settle(self) -> None:
        """`replicate`, as the semantic suite's settle()."""
        await self.replicate()

    async def replicate(self) -> dict[int, int]:
        """Replicate the topic up to now with the core's routine; the pointers reached."""
        return await replicate_to_now(
            self.settings.kafka_access(),
            self.store,
            self.settings.topic,
            KafkaQuarantine(self.producer),
        )


async def replicate_now(settings: Settings, store: EventualStore) -> dict[int, int]:
    """`Harness.replicate` without a harness: with a producer of its own for the quarantine."""
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    try:
        quarantine = KafkaQuarantine(producer)
        return await replicate_to_now(settings.kafka_access(), store, settings.topic, quarantine)
    finally:
        await producer.stop()


@asynccontextmanager
async def harness(
    stack: Stack, keyspace: str, topic_prefix: str, partitions: int = 3
) -> AsyncIterator[Harness]:
    settings = settings_for(stack, unique(topic_prefix), keyspace, partitions)
    store = await CassandraStore.connect(settings.cassandra_config())
    journals = await Journals.connect(settings, store=store)
    await ensure_topic(settings.kafka_access(), TopicSpec(quarantine_topic(settings.topic), 1))
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    try:
        yield Harness(journals, store, producer, settings)
    finally:
        await producer.stop()
        await journals.close()
        await store.close()


async def expire_all(settings: Settings, topic: str, partitions: int) -> None:
    """Every record of `topic` gone, as retention would do it."""
    ends = await end_offsets(settings.kafka_access(), topic, partitions)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        gone = {TopicPartition(topic, p): RecordsToDelete(end) for p, end in ends.items() if end}
        await admin.delete_records(gone)
    finally:
        await admin.close()


async def replicate_grown(
    settings: Settings, store: EventualStore, partitions: int, passes: int
) -> list[int]:
    """`replicate_now` of the first topic (of `partitions`), then `passes` passes of its grown
    topics' replication as a worker owning every partition runs it: the records of each."""
    await replicate_now(settings, store)
    successors = SuccessorReplication(
        settings.kafka_access(), store, AlreadyQuarantined(), settings.topic, partitions, _every
    )
    try:
        return [await successors.step() for _ in range(passes)]
    finally:
        await successors.close()


def _every(partition: int) -> bool:
    return True
