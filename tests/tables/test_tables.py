"""The tables' changes wait in memory and are written once per journal per flush."""

from __future__ import annotations

import time

import pytest

from journal.core.index import MAX_RUNS, OffsetRun, OffsetRuns
from journal.core.model import JournalKey
from tables.tables import FLUSH_INTERVAL_S, FLUSH_JOURNALS, FLUSH_RECORDS, JournalTables
from tables.values import decode_runs
from tests.support import actions as a

A, B = JournalKey("t", "a"), JournalKey("t", "b")


class Table(dict[bytes, bytes]):
    """A Faust table as the agent uses it (get, set), counting the writes (changelog records)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        super().__setitem__(key, value)


def tables() -> tuple[JournalTables, Table, Table]:
    append_table, deletion_table = Table(), Table()
    return JournalTables(append_table, deletion_table), append_table, deletion_table


def test_readers_see_changes_at_once_and_the_tables_get_one_write_per_journal() -> None:
    journal_tables, append_table, deletion_table = tables()
    for offset in range(FLUSH_RECORDS - 1):
        journal_tables.record(a.append(A if offset % 2 else B, offset, 1, 1), -1)
    appends, deletions = journal_tables.runs("a", 0)
    expected = OffsetRuns()
    for offset in range(1, FLUSH_RECORDS - 1, 2):
        expected = expected.add(offset)
    assert appends == expected
    assert deletions == OffsetRuns()
    assert append_table.writes == 0  # nothing written yet: below the flush's count and interval

    journal_tables.record(a.delete(A, FLUSH_RECORDS - 1, 1), -1)  # the flush's record
    assert (append_table.writes, deletion_table.writes) == (2, 1)  # a, b; a's Delete
    assert decode_runs(append_table[b"a"]) == appends
    assert journal_tables.runs("a", 0) == (appends, decode_runs(deletion_table[b"a"]))


def test_a_flush_comes_after_the_interval_and_keeps_what_the_store_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    journal_tables, append_table, _ = tables()
    journal_tables.record(a.append(A, 0, 1, 1), -1)
    later = time.monotonic() + FLUSH_INTERVAL_S
    monkeypatch.setattr(time, "monotonic", lambda: later)
    journal_tables.record(a.append(A, 1, 2, 2), 0)  # the store holds offset 0
    assert append_table.writes == 1
    # kept: with the store down, a read fetches the whole journal by its runs
    assert decode_runs(append_table[b"a"]) == OffsetRuns().add(0).add(1)


def test_a_journal_s_runs_stay_bounded_and_its_unreplicated_ones_apart() -> None:
    # a journal whose records interleave with others' for longer than MAX_RUNS records: the
    # runs the store holds merge, those above the store's pointer are fetched alone
    journal_tables, _, _ = tables()
    offsets = range(0, 10 * (MAX_RUNS + 8), 10)
    pointer = offsets[-6]
    for offset in offsets:
        journal_tables.record(a.append(A, offset, 1, 1), pointer)
    appends, _ = journal_tables.runs("a", 0)
    assert len(appends.runs) <= MAX_RUNS and appends.pruned_to == -1
    assert sum(r.count for r in appends.runs) == len(offsets)
    above = [r for r in appends.runs if r.last > pointer]
    assert above == [OffsetRun(o, o, 1) for o in offsets[-5:]]


def test_a_revoked_partition_drops_its_changes_and_readers_fall_back_to_the_table() -> None:
    journal_tables, append_table, _ = tables()
    journal_tables.record(a.append(A, 0, 1, 1), -1)
    journal_tables.forget(0)
    assert journal_tables.runs("a", 0) == (OffsetRuns(), OffsetRuns())
    append_table[b"a"] = b"[-1,5,5,1]"
    assert journal_tables.runs("a", 0)[0].runs[0].first == 5


def test_a_partition_never_reads_another_partitions_changes() -> None:
    journal_tables, _, _ = tables()
    journal_tables.record(a.append(A, 0, 1, 1), -1)
    assert journal_tables.runs("a", 1) == (OffsetRuns(), OffsetRuns())


def test_a_flush_comes_before_faust_s_producer_buffer_would_fill() -> None:
    journal_tables, append_table, _ = tables()
    for n in range(FLUSH_JOURNALS - 1):
        journal_tables.record(a.append(JournalKey("t", f"j{n}"), n, 1, 1), -1)
    assert append_table.writes == 0
    journal_tables.record(a.append(JournalKey("t", "last"), FLUSH_JOURNALS, 1, 1), -1)
    assert append_table.writes == FLUSH_JOURNALS < 100  # Faust pauses the stream past 100 pending
