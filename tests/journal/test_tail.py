"""The tail index following a changing set of partitions (a worker's, for its verdicts)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import pytest

from journal.client.journals import Journal, Journals
from journal.core.index import Indexed, NotIndexed
from journal.core.model import Ack
from journal.errors import StoreUnavailable
from journal.kafka.tail import TailConfig, TailIndex
from journal.store.memory import MemoryStore
from stack import Stack
from tests.journal.journal_contract import events, seq_nrs
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness

pytestmark = pytest.mark.integration


@pytest.fixture
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "tail", partitions=2) as h:
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


async def test_ten_times_its_bound_of_journals_pass_through_and_every_read_is_exact(
    connected: Harness,
) -> None:
    # bound 50 per partition, 500 journals: past the bound new journals go unindexed (their
    # reads scan) until a prune makes room; the filter of forgotten ones ages (capacity 40)
    h = connected
    config = TailConfig(
        h.settings.kafka_access(),
        max_journals=50,
        forgotten_capacity=40,
        wait_s=60,
        prune_interval_s=0.1,
    )
    tail = await TailIndex.start(h.settings.topic, [0, 1], h.store, config)
    reader = await Journals.connect(h.settings, store=h.store, index=tail)
    ids = [f"bound-{n}" for n in range(500)]
    expected: dict[str, list[int]] = {}
    try:
        for first in range(0, len(ids), 50):
            batch = ids[first : first + 50]
            await asyncio.gather(*(_append(h, j, 1, 2) for j in batch))
            expected.update((j, [1, 2]) for j in batch)
            back = ids[max(first - 100, 0) : max(first - 95, 0)]  # forgotten ones come back
            await asyncio.gather(
                *(_append(h, j, len(expected[j]) + 1, len(expected[j]) + 1) for j in back)
            )
            for j in back:
                expected[j].append(len(expected[j]) + 1)
            pointers = await h.replicate()
            await eventually(functools.partial(_pruned, tail, pointers), "the tail pruned")
            for partition in (0, 1):
                assert len(tail._partitions[partition].journals) <= 50
        assert all(tail._partitions[p].forgotten_to >= 0 for p in (0, 1))  # generations went
        for journal_id, seq in expected.items():
            assert await _read(reader, h.journals.journal(journal_id)) == seq
    finally:
        await reader.close()
        await tail.close()


async def _pruned(tail: TailIndex, pointers: dict[int, int]) -> bool:
    return all(tail.covered(p) >= pointer for p, pointer in pointers.items())


async def _append(h: Harness, journal_id: str, first: int, last: int) -> None:
    await h.journals.journal(journal_id).append(events(first, last), ack=Ack.KAFKA)


async def test_at_its_bound_with_cassandra_down_a_read_is_whole_or_a_prompt_refusal(
    connected: Harness, stack: Stack
) -> None:
    """Past `max_journals`, and once the filter of forgotten journals dropped a generation, a
    read with the store down is the whole journal from Kafka (a journal held since offset 0),
    or StoreUnavailable (a 503): never a journal missing what the store holds."""
    h = connected
    config = TailConfig(
        h.settings.kafka_access(),
        max_journals=4,
        kept_journals=1,
        forgotten_capacity=1,
        wait_s=60,
        prune_interval_s=0.1,
    )
    tail = await TailIndex.start(h.settings.topic, [0], h.store, config)
    reader = await Journals.connect(h.settings, store=h.store, index=tail)
    held, *gone = _journals_in(h, 0, 7)
    try:
        for journal in gone[:3]:  # four journals: the bound
            await _append(h, journal.key.id, 1, 1)
        await _append(h, held.key.id, 1, 2)
        # the prune keeps the last one first seen: three forgotten, a generation each, so
        # gone[0]'s was dropped
        pointers = await h.replicate()
        await eventually(lambda: _true(tail.covered(0) >= pointers[0]), "the tail pruned")
        assert tail._partitions[0].forgotten_to >= 0
        stack.cassandra.stop()
        try:
            await _append(h, held.key.id, 3, 3)
            # held since offset 0 and never forgotten: whole in Kafka
            assert await _read(reader, held) == [1, 2, 3]
            # forgotten (its seqNr 1 is the store's) and back: refused, not read as [2]
            await _append(h, gone[0].key.id, 2, 2)
            with pytest.raises(StoreUnavailable):
                await _read(reader, gone[0])
            # new, but first seen after a generation was dropped: it may be one of those
            await _append(h, gone[3].key.id, 1, 1)
            with pytest.raises(StoreUnavailable):
                await _read(reader, gone[3])
            # past the bound (held, gone[0], gone[3] + this one = 4, the next is not indexed)
            for journal in gone[4:6]:
                await _append(h, journal.key.id, 1, 1)
            with pytest.raises(StoreUnavailable):
                await _read(reader, gone[5])
            assert len(tail._partitions[0].journals) <= 4
        finally:
            stack.cassandra.start()
    finally:
        await reader.close()
        await tail.close()


async def _read(reader: Journals, journal: Journal) -> list[int]:
    return seq_nrs([r.event async for r in reader.journal(journal.key.id).read()])


def _journals_in(h: Harness, partition: int, count: int) -> list[Journal]:
    found = []
    for n in range(10_000):
        journal = h.journals.journal(f"at-bound-{n}")
        if h.journals.writer.partition_of(journal.key) == partition:
            found.append(journal)
            if len(found) == count:
                return found
    raise AssertionError(f"not {count} journal ids found for partition {partition}")


def _two_journals_in(h: Harness, partition: int) -> tuple[Journal, Journal]:
    first = journal_in(h, partition)
    for n in range(1000):
        other = h.journals.journal(f"other-{n}")
        if h.journals.writer.partition_of(other.key) == partition:
            return first, other
    raise AssertionError(f"no second journal id found for partition {partition}")


async def _true(value: bool) -> bool:
    return value
