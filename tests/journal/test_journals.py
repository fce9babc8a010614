"""The direct client against the real servers: the semantic suite and the reading flow."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from journal.head import JournalTruncated
from journal.journals import Journals
from journal.metrics import METRICS
from journal.model import Event
from journal.replicate import KafkaQuarantine, replicate_to_now
from journal.settings import Settings
from journal.store import cql
from journal.store.cassandra import CassandraStore
from journal.topic import TopicSpec, ensure_topic, quarantine_topic
from tests.journal.journal_contract import JournalContract, events, seq_nrs

pytestmark = pytest.mark.integration


def settings_for(stack: object, topic: str, keyspace: str) -> Settings:
    return Settings(
        kafka_bootstrap=stack.kafka_bootstrap,  # type: ignore[attr-defined]
        cassandra_hosts=",".join(stack.cassandra_hosts),  # type: ignore[attr-defined]
        cassandra_port=stack.cassandra_port,  # type: ignore[attr-defined]
        topic=topic,
        keyspace=keyspace,
        partitions=3,
        segment_size=50,
    )


@dataclass
class Direct:
    """The direct client as a JournalApi; `replicating` says whether settle() replicates."""

    journals: Journals
    producer: AIOKafkaProducer
    settings: Settings
    replicating: bool

    async def append(self, journal_id: str, batch: Sequence[Event]) -> None:
        await self.journals.journal(journal_id).append(batch)

    async def read(
        self, journal_id: str, from_: int = 1, to: int | None = None, limit: int | None = None
    ) -> list[Event]:
        journal = self.journals.journal(journal_id)
        reading = journal.read(from_, to or 2**63 - 1, limit)
        return [r.event async for r in reading]

    async def info(self, journal_id: str) -> tuple[int | None, int | None]:
        info = await self.journals.journal(journal_id).info()
        return info.seq_nr, info.delete_to

    async def delete(self, journal_id: str, to: int) -> int | None:
        return (await self.journals.journal(journal_id).delete(to)).delete_to

    async def purge(self, journal_id: str) -> None:
        await self.journals.journal(journal_id).purge()

    async def settle(self) -> None:
        if self.replicating:
            await self.replicate()

    async def replicate(self) -> dict[int, int]:
        assert isinstance(self.journals.store, CassandraStore)
        return await replicate_to_now(
            self.settings.kafka_bootstrap,
            self.journals.store,
            self.settings.topic,
            KafkaQuarantine(self.producer),
        )


@pytest.fixture(scope="module")
async def keyspace(stack: object) -> AsyncIterator[str]:
    name = f"kj_test_{uuid.uuid4().hex[:10]}"
    yield name


async def direct(stack: object, keyspace: str, replicating: bool) -> AsyncIterator[Direct]:
    settings = settings_for(stack, f"journal-{uuid.uuid4().hex[:8]}", keyspace)
    journals = await Journals.connect(settings)
    await ensure_topic(settings.kafka_bootstrap, TopicSpec(quarantine_topic(settings.topic), 1))
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    await producer.start()
    yield Direct(journals, producer, settings, replicating)
    await producer.stop()
    await journals.close()


class TestNothingReplicated(JournalContract):
    @pytest.fixture(scope="class")
    async def api(self, stack: object, keyspace: str) -> AsyncIterator[Direct]:
        async for api in direct(stack, keyspace, replicating=False):
            yield api


class TestReplicatedBetweenSteps(JournalContract):
    @pytest.fixture(scope="class")
    async def api(self, stack: object, keyspace: str) -> AsyncIterator[Direct]:
        async for api in direct(stack, keyspace, replicating=True):
            yield api


@pytest.fixture
async def api(stack: object, keyspace: str) -> AsyncIterator[Direct]:
    async for one in direct(stack, keyspace, replicating=True):
        yield one


async def test_a_delete_in_the_unreplicated_head_is_honoured(api: Direct) -> None:
    await api.append("j", events(1, 6))
    await api.replicate()
    assert await api.delete("j", 4) == 4  # in Kafka only
    assert seq_nrs(await api.read("j")) == [5, 6]
    assert await api.info("j") == (6, 4)


async def test_a_purge_in_the_unreplicated_head_voids_the_store(api: Direct) -> None:
    await api.append("j", events(1, 6))
    await api.replicate()
    await api.purge("j")
    await api.append("j", events(1, 1))
    assert seq_nrs(await api.read("j")) == [1]
    assert await api.info("j") == (1, None)


async def test_fully_replicated_reads_skip_kafka(api: Direct) -> None:
    await api.append("j", events(1, 3))
    pointers = await api.replicate()
    store = api.journals.store
    assert isinstance(store, CassandraStore)
    # Move every pointer far ahead, as if replication had already passed the coming Mark.
    for partition in range(api.journals.writer.partitions):
        await store.save_pointer(api.settings.topic, partition, max(pointers.values()) + 1000)
    before = METRICS.value("journal_reads_total", path="replicated")
    assert seq_nrs(await api.read("j")) == [1, 2, 3]
    assert METRICS.value("journal_reads_total", path="replicated") == before + 1


async def test_a_malformed_record_is_skipped_by_reads_and_quarantined(api: Direct) -> None:
    await api.append("j", events(1, 2))
    partition = api.journals.writer.partition_of(api.journals.journal("j").key)
    await api.producer.send_and_wait(
        api.settings.topic,
        b"garbage",
        key=b"j",
        partition=partition,
        headers=[("journal.action", b"{not json")],
    )
    await api.append("j", events(3, 3))
    skipped = METRICS.value("journal_malformed_records_skipped_total")
    assert seq_nrs(await api.read("j")) == [1, 2, 3]
    assert METRICS.value("journal_malformed_records_skipped_total") == skipped + 1
    quarantined = METRICS.value("journal_quarantined_records_total", topic=api.settings.topic)
    await api.replicate()
    assert (
        METRICS.value("journal_quarantined_records_total", topic=api.settings.topic)
        == quarantined + 1
    )
    assert seq_nrs(await api.read("j")) == [1, 2, 3]


async def test_records_expired_before_replication_fail_the_read_clearly(api: Direct) -> None:
    await api.append("j", events(1, 2))
    position = await api.journals.journal("j").append(events(3, 3))
    admin = AIOKafkaAdminClient(bootstrap_servers=api.settings.kafka_bootstrap)
    await admin.start()
    try:
        tp = TopicPartition(api.settings.topic, position.partition)
        await admin.delete_records({tp: RecordsToDelete(position.offset + 1)})  # as retention
    finally:
        await admin.close()
    with pytest.raises(JournalTruncated, match="expired before replication"):
        await api.read("j")


async def test_the_keyspace_is_created_with_the_schema(api: Direct) -> None:
    store = api.journals.store
    assert isinstance(store, CassandraStore)
    rows = await cql.execute(store.session, f"SELECT version FROM {store.keyspace}.schema_version")
    assert [r.version for r in rows] == [1]
