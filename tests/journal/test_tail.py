"""The tail index following a changing set of partitions (a worker's, for its verdicts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from journal.client.journals import Journal
from journal.core.index import Indexed, NotIndexed
from journal.kafka.tail import TailConfig, TailIndex
from stack import Stack
from tests.journal.journal_contract import events
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
