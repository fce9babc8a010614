"""A worker reads its group's committed offsets at an assignment through one kept admin client,
asked once for every partition (real Kafka): the answers a per-partition ask gave, read again
at the next assignment, and still answered after `close` (issue 43). Its catch-ups' consumers
are kept for the next catch-up too."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

from agents import replication
from agents.replication import GroupOffsets, KafkaReplay
from bench.common import unique
from bench.workload import raw_append
from journal.kafka import TopicSpec, ensure_topic, start_consumer
from journal.replication import AlreadyQuarantined, Replicator
from journal.store.memory import MemoryStore
from kjconfig.access import KafkaAccess
from stack import Stack
from tests.support.eventually import answered, eventually

pytestmark = pytest.mark.integration

PARTITIONS = 3


async def _commit(kafka: KafkaAccess, group: str, topic: str, offsets: dict[int, int]) -> None:
    """The group's committed offsets, as Faust's consumer commits them. A fresh Kafka creates
    its offsets topic at the first group's ask, and its coordinator answers with errors, or
    with nothing and no error, until it has loaded: both retried, bounded. No auto-commit: its
    commit at `stop` of the positions it resolved meanwhile (0 on an empty topic) overwrote
    these on a slower machine (CI: `[0, 0, 0] == [5, None, 7]`)."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        wanted = {TopicPartition(topic, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}
        await answered(lambda: consumer.commit(wanted), f"{group}'s commit", (KafkaError,))
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:

        async def visible() -> bool:
            found = await admin.list_consumer_group_offsets(group)
            got = {p: found.get(TopicPartition(topic, p)) for p in offsets}
            return all(at is not None and at.offset == offsets[p] for p, at in got.items())

        await eventually(visible, f"{group}'s commit visible", retry_on=(KafkaError,))
    finally:
        await admin.close()


async def _committed(replay: KafkaReplay) -> list[int | None]:
    async def one(partition: int) -> int | None:
        async with replay.open(partition) as source:
            return await source.committed()

    # the catch-ups of an assignment ask at once
    return list(await asyncio.gather(*(one(p) for p in range(PARTITIONS))))


async def test_one_kept_admin_answers_every_partition_once_per_assignment(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = stack.settings.kafka_access
    topic, group = unique("group_offsets"), unique("group_offsets_app")
    await ensure_topic(kafka, TopicSpec(topic, PARTITIONS))
    await _commit(kafka, group, topic, {0: 5, 2: 7})  # partition 1: nothing committed
    started: list[AIOKafkaAdminClient] = []
    asked: list[AIOKafkaAdminClient] = []

    class Counted(AIOKafkaAdminClient):  # type: ignore[misc]  # the worker's, counted
        async def start(self) -> None:
            started.append(self)
            await super().start()

        async def list_consumer_group_offsets(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(self)
            return await super().list_consumer_group_offsets(*args, **kwargs)

    monkeypatch.setattr(replication, "AIOKafkaAdminClient", Counted)
    replay = KafkaReplay(kafka, topic, group=group)
    try:
        assert await _committed(replay) == [5, None, 7]
        assert (len(started), len(asked)) == (1, 1)  # not an admin client per partition

        await _commit(kafka, group, topic, {1: 3})
        assert await _committed(replay) == [5, None, 7]  # the same assignment's answer
        replay.assignment()  # the next assignment reads them again, on the kept client
        assert await _committed(replay) == [5, 3, 7]
        assert (len(started), len(asked)) == (1, 2)
    finally:
        await replay.close()
    assert await _committed(replay) == [5, 3, 7]  # asked while stopping: still answered
    assert not [admin for admin in started if not admin._closed]  # none left open


async def test_a_failed_ask_raises_and_the_next_one_starts_afresh(stack: Stack) -> None:
    kafka = stack.settings.kafka_access
    topic, group = unique("group_offsets"), unique("group_offsets_app")
    await ensure_topic(kafka, TopicSpec(topic, PARTITIONS))
    await _commit(kafka, group, topic, {0: 2})
    with socket.socket() as closed:  # bound, never listening: a connection is refused
        closed.bind(("127.0.0.1", 0))
        unreachable = dataclasses.replace(kafka, bootstrap=f"127.0.0.1:{closed.getsockname()[1]}")
        offsets = GroupOffsets(unreachable, group, topic)
        try:
            with pytest.raises(KafkaError):  # raised as before: the catch-up is retried
                await offsets.committed(0)
            assert offsets._admin is None  # nothing kept of it
            offsets._kafka = kafka  # Kafka is back
            assert await offsets.committed(0) == 2
        finally:
            await offsets.close()


async def test_a_catch_ups_consumer_is_kept_for_the_next_unless_it_failed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = stack.settings.kafka_access
    topic = unique("catch_up_consumers")
    await ensure_topic(kafka, TopicSpec(topic, PARTITIONS))
    producer = AIOKafkaProducer(**kafka.client_options())
    await producer.start()
    try:
        for partition, journals in ((0, 2), (1, 3)):
            for n in range(journals):
                value, headers = raw_append(1, 1)
                await producer.send_and_wait(
                    topic,
                    value,
                    key=f"j-{partition}-{n}".encode(),
                    partition=partition,
                    headers=headers,
                )
    finally:
        await producer.stop()
    started: list[AIOKafkaConsumer] = []

    async def counted(kafka: KafkaAccess, **options: Any) -> AIOKafkaConsumer:
        consumer = await start_consumer(kafka, **options)
        started.append(consumer)
        return consumer

    monkeypatch.setattr(replication, "start_consumer", counted)
    store = MemoryStore()
    replicator = Replicator(store, AlreadyQuarantined())
    replay = KafkaReplay(kafka, topic)
    try:
        for partition in (0, 1):  # one after the other, as catch-ups queue for their turn
            async with replay.open(partition) as source:
                await source.replicate(replicator, 0, await source.end())
        # the kept consumer read the second partition's records, and only those, after the first
        assert [await store.pointer(topic, p) for p in (0, 1, 2)] == [1, 2, None]
        assert len(started) == 1
        with pytest.raises(RuntimeError):
            async with replay.open(2):
                raise RuntimeError("the catch-up failed")
        async with replay.open(2) as source:  # the failed one's consumer was not kept
            assert await source.end() == 0
        assert len(started) == 2
    finally:
        await replay.close()
    assert all(consumer._closed for consumer in started)  # none left open


async def test_a_kept_catch_up_consumer_asks_no_metadata_of_every_topic(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up following its partition during a restore is opened every `FOLLOW_S`: its
    kept consumer is paused between, not assigned nothing (aiokafka would then ask Kafka for
    the metadata of every topic of the cluster at each one)."""
    kafka = stack.settings.kafka_access
    topic = unique("follow_metadata")
    await ensure_topic(kafka, TopicSpec(topic, PARTITIONS))
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()

    async def append(n: int) -> None:
        value, headers = raw_append(1, 1)
        await producer.send_and_wait(topic, value, key=b"j%d" % n, partition=0, headers=headers)

    every_topic: list[Any] = []  # metadata requests of every topic (`topics` None)
    send = AIOKafkaConnection.send

    def sent(conn: AIOKafkaConnection, request: Any, *args: Any, **kw: Any) -> Any:
        if type(request).__name__.startswith("MetadataRequest") and request.topics is None:
            every_topic.append(request)
        return send(conn, request, *args, **kw)

    store = MemoryStore()
    replicator = Replicator(store, AlreadyQuarantined())
    replay = KafkaReplay(kafka, topic)
    try:
        await append(0)
        async with replay.open(0) as source:  # the first: a consumer started
            await source.replicate(replicator, 0, await source.end())
        monkeypatch.setattr(AIOKafkaConnection, "send", sent)
        for n in range(1, 6):  # the follow's ticks, each reading what came meanwhile
            await append(n)
            async with replay.open(0) as source:
                await source.replicate(replicator, n, await source.end())
        assert await store.pointer(topic, 0) == 5  # every tick read its record
        assert every_topic == []
    finally:
        await replay.close()
        await producer.stop()
