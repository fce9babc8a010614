"""A worker's tables ask their changelogs' end offsets through one kept consumer (real Kafka):
the same answers as a consumer per ask, for topics made after it started too, and after
`close` still an answer. Their short changelogs are restored through it too, every partition
in one pass, ahead of Faust's recovery, into databases opened when the app started, not in
the rebalance (issue 43)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

import tables.store
from bench.common import unique
from journal.kafka import TopicSpec, end_offsets, ensure_topic
from kjconfig.access import KafkaAccess
from stack import Stack
from tables.store import SharedChangelogEnds, add_index_table, partition_items

pytestmark = pytest.mark.integration


async def _topic_with(kafka: KafkaAccess, records: dict[int, int]) -> str:
    """A fresh topic of 2 partitions holding `records` records in each partition named."""
    topic = unique("changelog_ends")
    await ensure_topic(kafka, TopicSpec(topic, 2))
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()
    try:
        for partition, count in records.items():
            for _ in range(count):
                await producer.send_and_wait(topic, b"v", key=b"k", partition=partition)
    finally:
        await producer.stop()
    return topic


async def test_one_kept_consumer_answers_every_table_as_a_consumer_per_ask(stack: Stack) -> None:
    kafka = stack.settings.kafka_access
    ends = SharedChangelogEnds(kafka)
    try:
        first = await _topic_with(kafka, {0: 3, 1: 1})
        assert await ends(first, 2) == {0: 3, 1: 1} == await end_offsets(kafka, first, 2)
        consumer = ends._consumer
        assert consumer is not None
        # a topic made after the consumer started (a table's changelog created later)
        later = await _topic_with(kafka, {1: 2})
        assert await ends(later, 2) == {0: 0, 1: 2}
        assert ends._consumer is consumer  # kept: not one started per ask
    finally:
        await ends.close()
    assert ends._consumer is None
    assert await ends(first, 2) == {0: 3, 1: 1}  # asked while stopping: still answered


# a table's changelog as a worker writes it: (partition, key, value or None: a tombstone)
CHANGELOG = [
    (0, b"a", b"runs-a1"),
    (0, b"b", b"runs-b"),
    (0, b"a", b"runs-a2"),
    (1, b"c", b"runs-c"),
    (1, b"c", None),  # c's entry pruned
    (1, b"d", b"runs-d"),
]


async def test_short_changelogs_are_restored_through_the_kept_consumer_in_one_pass(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = stack.settings.kafka_access
    ends = SharedChangelogEnds(kafka)
    app = faust.App(unique("restore_ahead"), datadir=str(tmp_path), store="rocksdb://")
    table = add_index_table(app, kafka, 3, "offsets", "test", ends=ends)  # default settings
    topic = table.changelog_topic.get_topic_name()
    await ensure_topic(kafka, TopicSpec(topic, 3))
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()
    try:
        for partition, key, value in CHANGELOG:
            await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()
    store = table.data
    opened: list[int] = []
    open_db = store._open_for_partition

    def counted(partition: int) -> Any:
        opened.append(partition)
        return open_db(partition)

    monkeypatch.setattr(store, "_open_for_partition", counted)
    await store.on_start()  # the app starting, before the worker joins its group
    assert sorted(opened) == [0, 1, 2]  # every partition's database, at start
    tps = {TP(topic, p) for p in range(3)}
    try:
        await store.on_rebalance(tps, set(), tps, 0)
        assert sorted(opened) == [0, 1, 2]  # none opened in the rebalance: the pause
        consumer = ends._consumer
        assert consumer is not None  # the kept one read them, and was left fetching nothing
        assert consumer.assignment() == set()

        # what Faust's recovery would hold: each key's last value, tombstones removed
        held = {p: sorted(partition_items(store, p)) for p in range(3)}
        assert held == {0: [(b"a", b"runs-a2"), (b"b", b"runs-b")], 1: [(b"d", b"runs-d")], 2: []}
        persisted = [store.persisted_offset(TP(topic, p)) for p in range(3)]
        assert persisted == [2, 2, None]  # each partition's last record: Faust reads on after it
    finally:
        await ends.close()


async def test_a_restore_stopped_early_leaves_no_consumer_fetching(stack: Stack) -> None:
    kafka = stack.settings.kafka_access
    ends = SharedChangelogEnds(kafka)
    try:
        topic = await _topic_with(kafka, {0: 3, 1: 2})
        kept = await ends._started()
        # a reader that fails after its first batch (a RocksDB write, say) stops the read
        async with contextlib.aclosing(ends.read(topic, {0: (0, 3), 1: (0, 2)})) as batches:
            async for _ in batches:
                break
        assert ends._consumer is None  # dropped, and stopped: not left fetching those
        assert kept._closed
        assert await ends(topic, 2) == {0: 3, 1: 2}  # the next ask starts a new one
    finally:
        await ends.close()


async def test_a_restore_ahead_gives_the_event_loop_a_turn_every_step_of_a_batch(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetched batch is put in its write with a turn of the loop every `_RESTORE_STEP`
    records: a task beside the restore (the catch-ups serving the partitions handed over)
    goes on while a large batch is written, and the batch is still one write, its offset
    persisted after it."""
    step, records = 10, 60
    monkeypatch.setattr(tables.store, "_RESTORE_STEP", step)
    kafka = stack.settings.kafka_access
    app = faust.App(unique("restore_turns"), datadir=str(tmp_path), store="rocksdb://")
    table = add_index_table(app, kafka, 1, "offsets", "test", ends=SharedChangelogEnds(kafka))
    store = table.data
    await store.on_start()
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    batch = [(b"k%d" % n, b"v%d" % n, n) for n in range(records)]
    turns: list[int | None] = []  # the persisted offset at each turn of the task beside
    written = False

    async def beside() -> None:
        while not written:
            turns.append(store.persisted_offset(tp))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(beside())
    await asyncio.sleep(0)  # it has started
    try:
        await store._write(tp, batch)
    finally:
        written = True
        await watcher
    during = [offset for offset in turns[1:] if offset is None]
    assert len(during) >= records // step, f"{len(during)} turns while {records} were put"
    assert store.persisted_offset(tp) == records - 1  # persisted once, after the write
    assert sorted(partition_items(store, 0)) == sorted((k, v) for k, v, _ in batch)
