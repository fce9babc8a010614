"""The Replicator's write path: rows kept instead of read, malformed records in bulk."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Collection, Mapping, Sequence

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from journal.codec.actions import RawRecord
from journal.core.fold import JournalWrite
from journal.core.model import ActionRecord, JournalKey
from journal.kafka.topic import end_offsets, quarantine_topic
from journal.metrics import METRICS
from journal.replication.replicate import (
    AlreadyQuarantined,
    KafkaQuarantine,
    Replicator,
    replicate_to_now,
    wait_replicated,
)
from journal.store.base import JournalMeta
from journal.store.memory import MemoryStore
from stack import Stack
from tests.support import actions as a
from tests.support.harness import Harness, harness

A, B, C = (JournalKey("t", name) for name in "abc")


class CountingStore(MemoryStore):
    """Remembers which rows replication read; fails the writes while `failing`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[set[JournalKey]] = []
        self.failing = False

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        self.reads.append(set(keys))
        return await super().stored(keys)

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        if self.failing:
            raise ConnectionError("the store is down")
        return await super().apply(writes, stored)


async def store(replicator: Replicator, batch: list[ActionRecord]) -> None:
    last = batch[-1]
    await replicator.store(batch, RawRecord("t", 0, last.offset, 0, None, None, []))


async def test_a_journal_written_lately_is_not_read_again() -> None:
    counting = CountingStore()
    replicator = Replicator(counting, AlreadyQuarantined())
    await store(replicator, [a.append(A, 0, 1, 2), a.append(B, 1, 1, 1)])
    await store(replicator, [a.append(A, 2, 3, 3), a.append(C, 3, 1, 1), a.delete(B, 4, 1)])
    assert counting.reads == [{A, B}, {C}]
    meta = await counting.meta(A)
    assert meta is not None and meta.seq_nr == 3


async def test_rows_are_read_again_after_a_failed_write_or_a_revoke() -> None:
    counting = CountingStore()
    replicator = Replicator(counting, AlreadyQuarantined())
    await store(replicator, [a.append(A, 0, 1, 2)])
    counting.failing = True
    with pytest.raises(ConnectionError):
        await store(replicator, [a.append(A, 1, 3, 3)])
    counting.failing = False
    await store(replicator, [a.append(A, 1, 3, 3)])
    replicator.forget(0)
    await store(replicator, [a.append(A, 2, 4, 4)])
    assert counting.reads == [{A}, {A}, {A}]
    meta = await counting.meta(A)
    assert meta is not None and meta.seq_nr == 4


@pytest.fixture
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "journal_replicate") as one:
        yield one


class AdvancingStore(MemoryStore):
    """A replication that advances partition 0's pointer to `to` after its first read, then
    stops short of the end."""

    def __init__(self, at: int, to: int) -> None:
        super().__init__()
        self.to, self.read_once = to, False
        self._pointers[("t", 0)] = at

    async def pointers(self, topic: str) -> dict[int, int]:
        if self.read_once:
            await self.save_pointer(topic, 0, self.to)
        self.read_once = True
        return await super().pointers(topic)


async def test_a_wait_that_times_out_says_whether_replication_advanced_meanwhile() -> None:
    # a slow replication and a stalled one both run out of time: the error tells them apart
    # (a bench's 50,000 journals on a loaded host were reported "stuck" while advancing)
    stalled = AdvancingStore(at=4, to=4)
    with pytest.raises(TimeoutError, match=r"5 of 10 records stored, none during the wait;"):
        await wait_replicated(stalled, "t", {0: 8, 1: 2}, timeout_s=0.5, poll_s=0.01)
    slow = AdvancingStore(at=4, to=6)
    with pytest.raises(
        TimeoutError, match=r"7 of 10 records stored, 2 of them during the wait, the last \d+ s"
    ):
        await wait_replicated(slow, "t", {0: 8, 1: 2}, timeout_s=0.5, poll_s=0.01)
    done = AdvancingStore(at=4, to=7)
    await done.save_pointer("t", 1, 1)
    assert await wait_replicated(done, "t", {0: 8, 1: 2}, timeout_s=30) == {0: 7, 1: 1}


@pytest.mark.integration
async def test_a_flood_of_malformed_records_is_quarantined_in_bulk_with_summaries(
    connected: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    settings, producer = connected.settings, connected.producer
    journal = connected.journals.journal("flooded")
    partition = connected.journals.writer.partition_of(journal.key)
    await journal.append([a.event(1)])
    flood = 300
    deliveries = [
        await producer.send(settings.topic, b"no header", key=b"flooded", partition=partition)
        for _ in range(flood)
    ]
    await asyncio.gather(*deliveries)
    await journal.append([a.event(2)])
    store = connected.store
    with caplog.at_level(logging.WARNING, logger="journal.replication.replicate"):
        await replicate_to_now(
            settings.kafka_access(),
            store,
            settings.topic,
            KafkaQuarantine(producer, log_interval_s=0),
        )
    _, seq_nrs = await connected.stored("flooded")
    assert seq_nrs == [1, 2]
    topic = quarantine_topic(settings.topic)
    assert (await end_offsets(settings.kafka_access(), topic, 1))[0] == flood
    summaries = [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()]
    counted = [int(m.group(1)) for s in summaries if (m := re.search(r"quarantined (\d+)", s))]
    assert sum(counted) == flood
    assert len(summaries) < flood // 10, summaries  # one per flushed batch, not per record
    assert all("e.g." in s and "no journal.action header" in s for s in summaries)


@pytest.mark.integration
async def test_records_expired_before_replication_are_counted_and_replication_goes_on(
    connected: Harness,
) -> None:
    """An outage longer than retention: what expired is lost (said loudly), the rest is
    replicated and the pointer reaches the end."""
    settings = connected.settings
    await connected.replicate()
    journal = connected.journals.journal("expiring")
    partition = connected.journals.writer.partition_of(journal.key)
    await journal.append([a.event(1)])
    last = await journal.append([a.event(2)])
    neighbour = next(  # on the same partition, after the records that expire
        f"kept-{i}"
        for i in range(1000)
        if connected.journals.writer.partition_of(JournalKey(settings.topic, f"kept-{i}"))
        == partition
    )
    await connected.journals.journal(neighbour).append([a.event(1)])
    tp = TopicPartition(settings.topic, partition)
    admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
    await admin.start()
    try:
        await admin.delete_records({tp: RecordsToDelete(last.offset + 1)})  # as retention
    finally:
        await admin.close()
    lost = METRICS.value("kafka_journal_records_expired_unreplicated_total")
    pointers = await connected.replicate()
    assert METRICS.value("kafka_journal_records_expired_unreplicated_total") == lost + 2
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    assert pointers[partition] == ends[partition] - 1
    assert (await connected.stored(neighbour))[1] == [1]
    assert (await connected.stored("expiring"))[0] is None  # lost: nothing to store
