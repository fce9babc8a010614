"""The tail index following a changing set of partitions (a worker's, for its verdicts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from journal.client.journals import Journal
from journal.core.index import Indexed, NotIndexed
from journal.kafka.tail import TailConfig, TailIndex
from journal.store.memory import MemoryStore
from stack import Stack
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique

pytestmark = pytest.mark.integration


@pytest.fixture
async def connected(stack: Stack) -> AsyncIterator[Harness]:
    async with harness(stack, unique("kj_tail"), "tail", partitions=2) as h:
        yield h


def journal_in(h: Harness, partition: int) -> Journal:
    for n in range(1000):
        journal = h.journals.journal(f"j{n}")
        if h.journals.writer.partition_of(journal.key) == partition:
            return journal
    raise AssertionError(f"no journal id found for partition {partition}")


async def test_follows_the_partitions_it_is_given_and_starts_new_ones_at_the_pointer(
    connected: Harness,
) -> None:
    h = connected
    a, b = journal_in(h, 0), journal_in(h, 1)
    first_a = await a.append(events(1, 1))
    await b.append(events(1, 1))
    pointers = await h.replicate()  # b's first record is in the store: not indexed later
    second_b = await b.append(events(2, 2))
    config = TailConfig(h.settings.kafka_access(), wait_s=60)
    tail = await TailIndex.start(h.settings.topic, [0], h.store, config)
    try:
        found = await tail.lookup(a.key, 0, first_a.offset + 1)
        assert isinstance(found, Indexed) and found.runs == ()  # replicated: pruned from start
        assert await tail.lookup(b.key, 1, second_b.offset + 1) == NotIndexed("unfollowed")

        # a lookup waiting for partition 0 is answered at once when it stops being followed
        waiting = asyncio.create_task(tail.lookup(a.key, 0, first_a.offset + 1_000))
        await asyncio.sleep(0)  # let it start waiting (it does not finish by itself: wait_s=60)
        assert not waiting.done()
        tail.follow([1])
        assert await asyncio.wait_for(waiting, 10) == NotIndexed("unfollowed")

        found = await tail.lookup(b.key, 1, second_b.offset + 1)
        assert isinstance(found, Indexed)
        assert [(r.first, r.last) for r in found.runs] == [(second_b.offset, second_b.offset)]
        assert found.needs >= pointers[1]  # started at the store's pointer, not the log start
        assert await tail.lookup(a.key, 0, first_a.offset + 1) == NotIndexed("unfollowed")

        # following one more keeps where the other was, and indexes what comes next in both
        tail.follow([0, 1])
        second_a = await a.append(events(2, 2))
        third_b = await b.append(events(3, 3))
        found_a = await tail.lookup(a.key, 0, second_a.offset + 1)
        found_b = await tail.lookup(b.key, 1, third_b.offset + 1)
        assert isinstance(found_a, Indexed) and isinstance(found_b, Indexed)
        assert [r.last for r in found_a.runs] == [second_a.offset]
        assert [(r.first, r.last) for r in found_b.runs] == [(second_b.offset, third_b.offset)]
    finally:
        await tail.close()


async def test_from_offset_0_a_journal_it_never_dropped_is_whole_one_it_pruned_is_not(
    connected: Harness,
) -> None:
    # what lets a direct client read a new journal from Kafka alone when Cassandra is down
    h = connected
    old, new = _two_journals_in(h, 0)
    # pruning as past its memory bound: replicated runs go at once
    config = TailConfig(h.settings.kafka_access(), wait_s=60, prune_interval_s=0.1, kept_journals=0)
    tail = await TailIndex.start(h.settings.topic, [0, 1], h.store, config)
    try:
        first = await old.append(events(1, 1))
        pointers = await h.replicate()
        await eventually(lambda: _true(tail.covered(0) >= pointers[0]), "the tail pruned")
        appended = await new.append(events(1, 2))
        found = await tail.lookup(new.key, 0, appended.offset + 1)
        assert isinstance(found, Indexed) and found.complete
        assert [(r.first, r.last) for r in found.runs] == [(appended.offset, appended.offset)]
        again = await old.append(events(2, 2))
        found = await tail.lookup(old.key, 0, again.offset + 1)
        assert isinstance(found, Indexed) and not found.complete  # seqNr 1 is in the store only
        assert found.needs >= first.offset
    finally:
        await tail.close()


async def test_past_max_journals_a_journal_it_dropped_waits_for_replication(
    connected: Harness,
) -> None:
    # the store's pointers set by hand (a memory store): replication behind the dropped record
    h, store = connected, MemoryStore()
    topic = h.settings.topic
    a, b = _two_journals_in(h, 0)
    config = TailConfig(
        h.settings.kafka_access(), max_journals=1, wait_s=60, prune_interval_s=0.1, kept_journals=0
    )
    tail = await TailIndex.start(topic, [0], store, config)
    try:
        first_a = await a.append(events(1, 1))
        dropped = await b.append(events(1, 1))  # a holds the one place: b's record is dropped
        assert await tail.lookup(b.key, 0, dropped.offset + 1) == NotIndexed("overflow")
        await store.save_pointer(topic, 0, first_a.offset)  # a's runs go: room for b again
        await eventually(lambda: _true(tail.covered(0) >= first_a.offset), "the tail pruned")
        second = await b.append(events(2, 2))
        # b's seqNr 1 is neither indexed nor stored: no answer but a miss
        assert await tail.lookup(b.key, 0, second.offset + 1) == NotIndexed("overflow")
        await store.save_pointer(topic, 0, dropped.offset)
        await eventually(lambda: _true(tail.covered(0) >= dropped.offset), "the tail pruned")
        found = await tail.lookup(b.key, 0, second.offset + 1)
        assert isinstance(found, Indexed) and not found.complete  # seqNr 1 is the store's
        assert [(r.first, r.last) for r in found.runs] == [(second.offset, second.offset)]
        assert found.needs >= dropped.offset
    finally:
        await tail.close()


async def test_it_keeps_what_replication_covered_until_a_partition_holds_too_many_journals(
    connected: Harness,
) -> None:
    # with the store down, a journal with replicated history is read by its runs, not a scan
    h = connected
    old, new = _two_journals_in(h, 0)
    config = TailConfig(h.settings.kafka_access(), wait_s=60, prune_interval_s=0.1, kept_journals=1)
    tail = await TailIndex.start(h.settings.topic, [0], h.store, config)
    try:
        first = await old.append(events(1, 1))
        pointers = await h.replicate()
        await eventually(lambda: _true(tail.covered(0) >= pointers[0]), "the tail pruned")
        again = await old.append(events(2, 2))
        found = await tail.lookup(old.key, 0, again.offset + 1)
        assert isinstance(found, Indexed) and found.complete  # one journal: kept whole
        assert (found.runs[0].first, found.runs[-1].last) == (first.offset, again.offset)
        assert sum(r.count for r in found.runs) == 2
        await new.append(events(1, 1))  # two journals: past the bound at the next pointer
        pointers = await h.replicate()
        await eventually(lambda: _true(tail.covered(0) >= pointers[0]), "the tail pruned")
        third = await old.append(events(3, 3))
        found = await tail.lookup(old.key, 0, third.offset + 1)
        assert isinstance(found, Indexed) and not found.complete  # its history went first
        assert [(r.first, r.last) for r in found.runs] == [(third.offset, third.offset)]
        assert found.needs >= again.offset
    finally:
        await tail.close()


def _two_journals_in(h: Harness, partition: int) -> tuple[Journal, Journal]:
    first = journal_in(h, partition)
    for n in range(1000):
        other = h.journals.journal(f"other-{n}")
        if h.journals.writer.partition_of(other.key) == partition:
            return first, other
    raise AssertionError(f"no second journal id found for partition {partition}")


async def _true(value: bool) -> bool:
    return value
