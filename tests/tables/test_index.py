"""The worker's table index: what a read is told, with the store up and down."""

from __future__ import annotations

from journal.core.index import BEHIND, Indexed, NotIndexed, OffsetRun
from journal.core.model import JournalKey
from tables.index import TableIndex
from tables.partitions import OwnedPartitions
from tables.tables import JournalTables
from tests.support import actions as a

A, B = JournalKey("t", "a"), JournalKey("t", "b")


def index_of(count: int, replicated: int, floor: int = -1) -> TableIndex:
    """`count` records of a and b in turn in partition 0, all handled by the agent."""
    tables, owned = JournalTables({}, {}), OwnedPartitions()
    owned.assign(0)
    for offset in range(count):
        tables.record(a.append(A if offset % 2 == 0 else B, offset, offset + 1, offset + 1), -1)
        owned.advance(0, offset)
    owned.set_replicated(0, replicated)
    owned.set_floor(0, floor)
    return TableIndex(tables, owned, wait_s=1.0)


async def test_a_replicated_journal_keeps_its_runs_and_they_hold_all_of_it() -> None:
    # with the store down, the reading flow fetches these runs: a's records only
    found = await index_of(6, replicated=5).lookup(A, 0, fence=6)
    assert found == Indexed((OffsetRun(0, 0, 1), OffsetRun(2, 2, 1), OffsetRun(4, 4, 1)), -1, True)


async def test_a_partition_the_agent_has_not_reached_is_answered_by_the_store_s_pointer() -> None:
    index = index_of(4, replicated=9)  # the assignment's catch-up went past the agent
    assert await index.lookup(A, 0, fence=10) == Indexed((), 9)


async def test_below_the_partition_s_floor_the_tables_are_not_whole() -> None:
    # a new owner's floor: records up to 3 may be missing from the tables
    found = await index_of(6, replicated=5, floor=3).lookup(A, 0, fence=6)
    assert isinstance(found, Indexed) and found.needs == 3 and not found.complete


async def test_a_miss_says_behind_only_while_the_agent_publishes_the_partition() -> None:
    # with the store down a worker refuses a read its agent is only behind, and scans one
    # whose tables wait for the store (journal/client/reading.py)
    tables, owned = JournalTables({}, {}), OwnedPartitions()
    owned.assign(0)
    index = TableIndex(tables, owned, wait_s=0.01)
    assert await index.lookup(A, 0, fence=5) == NotIndexed("unpublished")  # nothing yet
    owned.advance(0, 1)
    assert await index.lookup(A, 0, fence=5) == NotIndexed(BEHIND)
    owned.held(0)  # handled a record the store must first hold the gap before
    assert await index.lookup(A, 0, fence=5) == NotIndexed("unpublished")


async def test_a_journal_pruned_from_the_tables_is_not_read_as_whole_without_the_store() -> None:
    # C's records left Kafka and its entry was pruned: the tables lack it, so they must not
    # claim to hold all of it (an empty journal, with the store down)
    owned = OwnedPartitions()
    owned.assign(0)
    owned.advance(0, 5)
    owned.set_replicated(0, 5)
    index = TableIndex(JournalTables({}, {}), owned, wait_s=1.0)
    C = JournalKey("t", "c")
    assert await index.lookup(C, 0, fence=6) == Indexed((), -1, True)  # never written: whole
    owned.raise_floor(0, 3)  # what pruning dropped reached offset 3
    assert await index.lookup(C, 0, fence=6) == Indexed((), 3, False)
