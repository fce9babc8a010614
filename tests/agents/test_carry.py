"""Deadlines set before a move, carried into the grown topic (agents/carry.py) on the real
servers: from the old workers' expiry changelog and from the old topic's records after their
committed offset up to the cut, each to the grown partition its journal is in, once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agents.carry import DeadlineCarry, Predecessor
from app.grow import grow_topic
from journal.client.journals import Journals
from journal.codec.actions import parse
from journal.core import deadline_of_mark
from journal.core.grow import Phase
from journal.core.model import Event, MarkHeader, PayloadMetadata, TextPayload
from journal.kafka import JournalProducer, JournalWriter, TopicSpec, ensure_topic, partition_of
from journal.kafka.consumers import raw_record, start_consumer, stop_consumer
from journal.kafka.topic import end_offsets
from journal.store.cassandra import CassandraStore
from stack import Stack
from tables.expiry import EXPIRY_TABLE
from tables.store import changelog_of
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration

OLD_PARTITIONS, NEW_PARTITIONS = 2, 4


@pytest.fixture(scope="module")
async def store(stack: Stack, keyspace: str) -> AsyncIterator[CassandraStore]:
    connected = await CassandraStore.connect(settings_for(stack, "x", keyspace).cassandra_config())
    yield connected
    await connected.close()


async def carried_marks(
    consumer: AIOKafkaConsumer, topic: str, partitions: int
) -> dict[int, list[tuple[str, int]]]:
    """Per partition of `topic`, the deadline Marks in it: (journal, candidate)."""
    ends = await end_offsets_of(consumer, topic, partitions)
    found: dict[int, list[tuple[str, int]]] = {p: [] for p in range(partitions)}
    for partition, end in ends.items():
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        while await consumer.position(tp) < end:
            for message in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, []):
                action = parse(raw_record(message))
                if action is not None and isinstance(action.header, MarkHeader):
                    at = deadline_of_mark(action.header.id)
                    if at is not None:
                        found[partition].append((action.key.id, at))
    return found


async def end_offsets_of(consumer: AIOKafkaConsumer, topic: str, partitions: int) -> dict[int, int]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends: dict[TopicPartition, int] = await consumer.end_offsets(tps)
    return {tp.partition: end for tp, end in ends.items()}


async def test_the_candidates_set_before_a_move_are_carried_to_where_their_journals_are(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """The old workers' changelog holds candidates of records before their committed offset
    (one superseded, one journal only a tombstone); records after it up to the cut set more
    (one Append without expireAfter sets none). Each grown partition gets a Mark per candidate
    of its own journals, from both sources, none of another partition's; the store records each
    partition carried, and a second carry does nothing."""
    settings = settings_for(stack, unique("journal_carry"), keyspace, OLD_PARTITIONS)
    kafka = settings.kafka_access()
    old_app = unique("carryapp")
    now_ms = int(time.time() * 1000)
    in_changelog = {f"c{n}": now_ms + 1000 * n for n in range(8)}
    async with await Journals.connect(settings, store=store) as journals:
        for journal_id in in_changelog:  # the journals exist in OLD (their records: before c)
            await journals.journal(journal_id).append([Event(1, payload=TextPayload("x"))])
        committed = await end_offsets(kafka, settings.topic, OLD_PARTITIONS)
        soon = PayloadMetadata(expire_after="1 hour")
        tail = [f"t{n}" for n in range(6)]
        for journal_id in tail:  # after the committed offset: in no changelog
            await journals.journal(journal_id).append(
                [Event(1, payload=TextPayload("x"))], metadata=soon
            )
        await journals.journal("plain").append([Event(1, payload=TextPayload("x"))])
        grow = await grow_topic(settings, store, NEW_PARTITIONS, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE

    # what the old workers' tables held, as Faust writes it: key the id, value the deadline
    changelog = changelog_of(old_app, EXPIRY_TABLE)
    await ensure_topic(kafka, TopicSpec(changelog, OLD_PARTITIONS, 1, compacted=True))
    producer = AIOKafkaProducer(**kafka.client_options())
    await producer.start()
    try:
        for journal_id, at in in_changelog.items():
            partition = partition_of(journal_id, OLD_PARTITIONS)
            value = str(at).encode()
            await producer.send_and_wait(changelog, value, journal_id.encode(), partition)
        superseded = "c0"  # settled later: both records still there, uncompacted
        later = str(in_changelog[superseded] + 5000).encode()
        partition = partition_of(superseded, OLD_PARTITIONS)
        await producer.send_and_wait(changelog, later, superseded.encode(), partition)
        partition = partition_of("gone", OLD_PARTITIONS)  # cleared: a tombstone only
        await producer.send_and_wait(changelog, None, b"gone", partition)
    finally:
        await producer.stop()
    group = AIOKafkaConsumer(group_id=old_app, enable_auto_commit=False, **kafka.client_options())
    await group.start()
    try:
        offsets = {TopicPartition(settings.topic, p): c for p, c in committed.items()}
        group.assign(list(offsets))
        await group.commit(offsets)
    finally:
        await group.stop()

    journal_producer = JournalProducer(kafka)
    await journal_producer.start()
    try:
        writer = JournalWriter(journal_producer, NEW_PARTITIONS)
        carry = DeadlineCarry(kafka, store, writer, grow.new_topic, NEW_PARTITIONS, "newapp")
        predecessor = Predecessor(settings.topic, OLD_PARTITIONS, old_app, dict(grow.cut))
        sent = [await carry.carry(q, [predecessor]) for q in range(NEW_PARTITIONS)]
        again = [await carry.carry(q, [predecessor]) for q in range(NEW_PARTITIONS)]
    finally:
        await journal_producer.stop()

    consumer = await start_consumer(kafka)
    try:
        marks = await carried_marks(consumer, grow.new_topic, NEW_PARTITIONS)
    finally:
        await stop_consumer(consumer)
    assert again == [None] * NEW_PARTITIONS  # recorded: not carried twice
    assert sent == [len(marks[q]) for q in range(NEW_PARTITIONS)]
    for q, found in marks.items():
        assert all(partition_of(journal_id, NEW_PARTITIONS) == q for journal_id, _ in found)
    carried: dict[str, list[int]] = {}
    for found in marks.values():
        for journal_id, at in found:
            carried.setdefault(journal_id, []).append(at)
    assert set(carried) == set(in_changelog) | set(tail)  # not "gone", not "plain"
    for journal_id, at in in_changelog.items():
        expected = [at, at + 5000] if journal_id == superseded else [at]
        assert sorted(carried[journal_id]) == expected
    for journal_id in tail:  # its record's time + 1 hour
        (at,) = carried[journal_id]
        assert now_ms + 3_600_000 <= at <= int(time.time() * 1000) + 3_600_000
    for q in range(NEW_PARTITIONS):
        assert await store.deadlines_carried(grow.new_topic, "newapp", q)
        assert not await store.deadlines_carried(grow.new_topic, "another app", q)
