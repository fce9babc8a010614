"""The expiry index: deadlines per journal in a table, the soonest of each partition in a bounded
window (tables/expiry.py)."""

from __future__ import annotations

from journal.core.grow import DEADLINE_MARK, deadline_mark
from journal.core.model import ActionRecord, JournalKey, MarkHeader
from journal.metrics import METRICS
from tables.expiry import (
    FOREVER,
    TIMED,
    ExpiryIndex,
    ExpiryWindow,
    deadline_of,
    of_time_key,
    time_key,
)
from tests.support import actions as a
from tests.support.expiry import T0_MS, Table, append


def test_an_appends_deadline_is_its_write_time_plus_its_expire_after() -> None:
    assert deadline_of(append("j", 0, "3 seconds", after_ms=5)) == T0_MS + 5 + 3000
    assert deadline_of(append("j", 0, "1 day")) == T0_MS + 86_400_000
    assert deadline_of(append("j", 0, None)) is None


def test_the_window_answers_the_due_journals_soonest_first() -> None:
    window = ExpiryWindow(10, [(b"c", 30), (b"a", 10), (b"b", 20), (b"d", 40)])
    assert window.due(5) == []
    assert window.due(20) == [b"a", b"b"]
    assert window.due(100) == [b"a", b"b", b"c", b"d"]
    window.set(b"e", 15)
    assert window.due(20) == [b"a", b"e", b"b"]
    window.clear(b"a")
    assert window.due(20) == [b"e", b"b"]


def test_the_table_keeps_the_earliest_candidate_and_an_append_without_one_clears_nothing() -> None:
    table = Table()
    index = ExpiryIndex(table)
    index.record(append("j", 0, "3 seconds"))
    assert index.due(0, T0_MS + 3000) == ["j"]
    # accepted or not (the agent cannot tell): a later candidate does not move it, the purger
    # reads the true deadline when it comes due
    index.record(append("j", 1, "3 seconds", after_ms=2000, seq_nr=2))
    assert index.due(0, T0_MS + 3000) == ["j"]
    index.record(append("j", 2, "1 second", after_ms=1000, seq_nr=3))  # an earlier one does
    assert index.due(0, T0_MS + 2000) == ["j"]
    assert table.partitions[0] == {b"j": T0_MS + 2000}
    # perhaps a rejected rival's: it clears nothing (a real deadline would be lost)
    index.record(append("j", 3, None, after_ms=3000, seq_nr=1))
    assert table.partitions[0] == {b"j": T0_MS + 2000}


def test_what_the_purger_settles_reaches_the_table_with_the_agents_next_record() -> None:
    table = Table()
    index = ExpiryIndex(table)
    for n, journal_id in enumerate("jkl"):
        index.record(append(journal_id, n, "1 second"))
    assert index.due(0, T0_MS + 1000) == ["j", "k", "l"]
    index.checking(0, ["j", "k", "l"])
    index.settle(0, "j", T0_MS + 5000)  # its true deadline is later
    index.settle(0, "k", None)  # its last accepted Append has none
    assert index.due(0, T0_MS + 1000) == ["l"]
    assert table.partitions[0] == {b"j": T0_MS + 1000, b"k": T0_MS + 1000, b"l": T0_MS + 1000}
    index.forget(0)  # settled, not written: read again
    assert index.due(0, T0_MS + 1000) == ["j", "k", "l"]
    index.checking(0, ["j", "k"])
    index.settle(0, "j", T0_MS + 5000)
    index.settle(0, "k", None)
    index.record(a.mark(JournalKey("t", "x"), 3))  # the agent's next record writes them
    assert table.partitions[0] == {b"j": T0_MS + 5000, b"l": T0_MS + 1000}
    assert index.due(0, T0_MS + 5000) == ["l", "j"]  # soonest first


def test_a_candidate_or_purge_handled_while_the_purger_reads_makes_its_answer_stale() -> None:
    table = Table()
    index = ExpiryIndex(table)
    index.record(append("j", 0, "1 second"))
    index.record(append("k", 1, "1 second"))
    index.checking(0, ["j", "k"])
    index.record(append("j", 2, "9 seconds", after_ms=500, seq_nr=2))  # after the fence
    index.record(a.purge(JournalKey("t", "k"), 3))
    assert not index.confirmed(0, "j") and not index.confirmed(0, "k")
    index.settle(0, "j", None)  # as read before the candidate: not taken
    assert index.due(0, T0_MS + 1000) == ["j"]
    index.record(a.mark(JournalKey("t", "x"), 4))
    assert table.partitions[0] == {b"j": T0_MS + 1000}


def test_a_purge_clears_the_deadline_and_deletes_and_marks_keep_it() -> None:
    table = Table()
    index = ExpiryIndex(table)
    key = JournalKey("t", "j")
    index.record(append("j", 0, "1 second"))
    index.record(a.delete(key, 1, 1))
    index.record(a.mark(key, 2))
    assert index.due(0, T0_MS + 1000) == ["j"]
    index.record(a.purge(key, 3))
    assert index.due(0, T0_MS + 1000) == []
    assert table.partitions[0] == {}


def test_a_deadline_mark_is_a_candidate_as_an_appends_is() -> None:
    """A candidate carried from before a move (docs/growing.md) sets, or moves earlier, the
    journal's candidate as an Append's does; a Mark of another id, even of that look, does not."""
    table = Table()
    index = ExpiryIndex(table)
    key = JournalKey("t", "j")
    index.record(a.record(key, 0, MarkHeader(deadline_mark(T0_MS + 5000))))
    assert table.partitions[0] == {b"j": T0_MS + 5000}
    index.record(a.record(key, 1, MarkHeader(deadline_mark(T0_MS + 9000))))  # later: kept
    index.record(a.record(key, 2, MarkHeader(f"{DEADLINE_MARK}soon")))  # not a deadline
    assert table.partitions[0] == {b"j": T0_MS + 5000}
    index.record(a.record(key, 3, MarkHeader(deadline_mark(T0_MS + 1000))))  # earlier: taken
    assert index.due(0, T0_MS + 1000) == ["j"]


def test_an_append_without_expiry_reads_no_table() -> None:
    table = Table()
    index = ExpiryIndex(table)
    assert index.due(0, T0_MS) == []  # the window is loaded (empty: it holds them all)
    for offset in range(100):
        index.record(append(f"j{offset}", offset, None))
    assert table.reads == 0
    index.forget(0)  # revoked: no window; an Append without one still reads nothing
    index.record(append("j", 100, None))
    assert table.reads == 0


def test_the_window_is_bounded_and_what_it_left_out_is_found_past_its_horizon() -> None:
    table = Table()
    index = ExpiryIndex(table, bound=3)
    assert index.due(0, T0_MS) == []
    for n in range(10):  # deadlines T0 + 1 s ... T0 + 10 s, kept in the table
        index.record(append(f"j{n}", n, f"{n + 1} seconds"))
    window = ExpiryWindow(3, table.entries(0))
    assert len(window) == 3 and window.horizon == T0_MS + 3999
    assert len(table.partitions[0]) == 10
    assert index.due(0, T0_MS + 3000) == ["j0", "j1", "j2"]
    for n in range(3):  # their Purges, as the agent handles them
        index.purged(0, f"j{n}")
        index.record(a.purge(JournalKey("t", f"j{n}"), 10 + n))
    # past the horizon: loaded again from the table, the next three
    assert index.due(0, T0_MS + 6000) == ["j3", "j4", "j5"]


def test_a_window_over_its_bound_drops_its_latest_and_lowers_its_horizon() -> None:
    window = ExpiryWindow(2, [(b"a", 10), (b"b", 20)])
    assert window.holds_all()
    window.set(b"c", 15)  # over the bound: b (20) leaves
    assert len(window) == 2 and window.horizon == 19
    assert window.due(100) == [b"a", b"c"]
    window.set(b"d", 25)  # past the horizon: not held
    assert window.deadline(b"d") is None and len(window) == 2
    window.set(b"a", 12)  # moved within the window
    assert window.due(100) == [b"a", b"c"] and window.deadline(b"a") == 12


def test_the_windows_are_per_partition() -> None:
    table = Table()
    index = ExpiryIndex(table)
    index.record(append("j", 0, "1 second"))
    table.partition = 1
    other = append("k", 0, "1 second")
    index.record(ActionRecord(other.key, 1, 0, other.timestamp, other.header, events=other.events))
    assert index.due(0, T0_MS + 1000) == ["j"]
    assert index.due(1, T0_MS + 1000) == ["k"]


def test_a_journal_being_purged_is_not_due_again_and_its_purge_empties_the_table() -> None:
    table = Table()
    index = ExpiryIndex(table)
    key = JournalKey("t", "j")
    index.record(append("j", 0, "1 second"))
    assert index.due(0, T0_MS + 1000) == ["j"]
    index.purged(0, "j")  # its Purge produced
    assert index.due(0, T0_MS + 1000) == []
    index.record(a.purge(key, 1))  # the agent handles it
    assert table.partitions[0] == {}
    index.record(append("j", 2, None, after_ms=2000))  # a new journal, expiring never
    index.forget(0)  # loaded again (a rebalance): nothing left to purge
    assert index.due(0, FOREVER - 1) == []


# --- the deadlines by time (issue 43: a window's load reads only the window) -----------------


def test_time_keys_sort_as_deadline_then_journal_and_below_the_mark() -> None:
    entries = [
        (0, b"z"),
        (255, b"a"),
        (256, b""),
        (256, b"a"),
        (256, b"ab"),
        (256, b"b"),
        (T0_MS, b"j"),
        (T0_MS + 1, b"\xff\xff"),
        (2**42, b"k"),
        (2**56 - 1, b"x"),
    ]
    keys = [time_key(key, at) for at, key in reversed(entries)]
    assert [of_time_key(raw)[::-1] for raw in sorted(keys)] == entries
    assert all(raw < TIMED for raw in keys)
    # past the range: clamped (2 million years; no Append's expireAfter gets there)
    assert of_time_key(time_key(b"j", -5)) == (b"j", 0)
    assert of_time_key(time_key(b"j", FOREVER)) == (b"j", 2**56 - 1)


def expiring(index: ExpiryIndex, count: int) -> None:
    """`count` journals j0, j1, ... expiring 1 s, 2 s, ... after T0, in partition 0."""
    for n in range(count):
        index.record(append(f"j{n}", n, f"{n + 1} seconds"))


def test_a_window_load_reads_at_most_the_window_of_the_deadlines_by_time() -> None:
    table = Table()
    index = ExpiryIndex(table, bound=3)
    expiring(index, 50)
    index.forget(0)  # as after a rebalance: loaded again
    by_id, by_time = table.by_id.read, table.by_time.read
    loads = METRICS.value("kafka_journal_expiry_window_loads_total", source="index")
    assert index.due(0, T0_MS + 3000) == ["j0", "j1", "j2"]
    assert table.by_id.read == by_id  # no scan of the deadlines by id
    # the mark (first looked at since the assignment), the window and the first one past it
    assert table.by_time.read - by_time == 1 + 3 + 1
    assert METRICS.value("kafka_journal_expiry_window_loads_total", source="index") == loads + 1
    for n in range(3):  # their Purges, as the agent handles them
        index.purged(0, f"j{n}")
        index.record(a.purge(JournalKey("t", f"j{n}"), 50 + n))
    by_time = table.by_time.read
    assert index.due(0, T0_MS + 6000) == ["j3", "j4", "j5"]  # past the horizon: loaded again
    assert table.by_id.read == by_id
    assert table.by_time.read - by_time == 3 + 1


def test_a_load_takes_what_was_settled_and_not_written_over_the_time_entries() -> None:
    table = Table()
    index = ExpiryIndex(table, bound=2)
    expiring(index, 4)  # j0..j3 at 1..4 s
    assert index.due(0, T0_MS + 1000) == ["j0"]
    index.checking(0, ["j0"])
    index.settle(0, "j0", T0_MS + 9000)  # its true deadline: later (the tables: not yet)
    # past the window's horizon: loaded again, j0's stale time entry (1 s) skipped
    assert index.due(0, T0_MS + 5000) == ["j1", "j2"]
    assert index.due(0, T0_MS + 3000) == ["j1", "j2"]
    assert table.times(0)[0] == (T0_MS + 1000, b"j0")  # written with the agent's next record
    index.record(a.mark(JournalKey("t", "x"), 9))
    assert table.times(0) == [(T0_MS + n * 1000, f"j{n - 1}".encode()) for n in (2, 3, 4)] + [
        (T0_MS + 9000, b"j0")
    ]


def test_the_deadlines_by_time_follow_every_move_clear_purge_and_settlement() -> None:
    table = Table()
    index = ExpiryIndex(table)
    key = JournalKey("t", "j")
    index.record(append("j", 0, "3 seconds"))
    assert table.times(0) == [(T0_MS + 3000, b"j")]
    index.record(append("j", 1, "1 second", after_ms=1000, seq_nr=2))  # an earlier candidate
    assert table.times(0) == [(T0_MS + 2000, b"j")]
    index.record(append("j", 2, "9 seconds", after_ms=1000, seq_nr=3))  # a later one: kept
    assert table.times(0) == [(T0_MS + 2000, b"j")]
    assert index.due(0, T0_MS + 2000) == ["j"]
    index.checking(0, ["j"])
    index.settle(0, "j", T0_MS + 10_000)  # the true deadline
    index.record(a.mark(key, 3))  # written with the agent's next record
    assert table.times(0) == [(T0_MS + 10_000, b"j")]
    assert index.due(0, T0_MS + 10_000) == ["j"]
    index.checking(0, ["j"])
    index.settle(0, "j", None)  # none after all
    index.record(a.mark(key, 4))
    assert table.times(0) == []
    index.record(append("j", 5, "1 second", after_ms=2000, seq_nr=4))
    index.record(a.delete(key, 6, 4))  # Deletes keep it
    assert table.times(0) == [(T0_MS + 3000, b"j")]
    index.record(a.purge(key, 7))
    assert table.times(0) == [] and table.partitions[0] == {}  # in step, checked


def test_a_partition_without_deadlines_is_marked_at_its_first_record() -> None:
    table = Table()
    index = ExpiryIndex(table)
    assert index.due(0, T0_MS) == []  # looked at before any record: none to build
    assert TIMED not in table.by_time.partitions.get(0, {})  # written with a record
    index.record(append("j", 0, None))
    assert TIMED in table.by_time.partitions[0]
    table.partition = 1
    other = append("k", 0, "1 second")
    index.record(ActionRecord(other.key, 1, 0, other.timestamp, other.header, events=other.events))
    assert table.by_time.partitions[1] == {TIMED: b"1", time_key(b"k", T0_MS + 1000): b"1"}


def written_before_the_times(table: Table, count: int) -> None:
    """An upgrade: deadlines j0, j1, ... at 1 s, 2 s, ... after T0 in partition 0's table by id,
    as a worker without the time table wrote them; none by time."""
    for n in range(count):
        table.by_id.partitions.setdefault(0, {})[f"j{n}".encode()] = b"%d" % (
            T0_MS + 1000 + n * 1000
        )


def test_an_upgraded_partition_is_scanned_until_built_a_bounded_step_at_a_time() -> None:
    table, now = Table(), [0.0]
    index = ExpiryIndex(table, bound=2, build_step=3, build_interval_s=1.0, clock=lambda: now[0])
    written_before_the_times(table, 10)
    scans = METRICS.value("kafka_journal_expiry_window_loads_total", source="scan")
    assert index.due(0, T0_MS + 2000) == ["j0", "j1"]  # the old deadlines: found by a scan
    assert METRICS.value("kafka_journal_expiry_window_loads_total", source="scan") == scans + 1
    assert table.by_id.read == 1 + 10 and table.times(0) == []  # is it empty?, the scan
    key = JournalKey("t", "j8")
    index.record(a.mark(key, 10))  # a step: the first 3 journals in id order
    assert table.times(0) == [(T0_MS + 1000 * n, f"j{n - 1}".encode()) for n in (1, 2, 3)]
    index.record(a.mark(key, 11))  # within the interval: no step
    assert len(table.times(0)) == 3
    # meanwhile the agent keeps what it changes in step: j8 (not built yet) moves, j0 goes
    index.record(append("j8", 12, "1 second", after_ms=500))
    index.record(a.purge(JournalKey("t", "j0"), 13))
    assert (T0_MS + 1500, b"j8") in table.times(0) and (T0_MS + 1000, b"j0") not in table.times(0)
    for offset in range(14, 17):  # three more steps: j3..j5, j6..j8, j9 and the mark
        now[0] += 1.0
        index.record(a.mark(key, offset))
    assert TIMED in table.by_time.partitions[0]
    assert len(table.times(0)) == 9 and table.partitions[0]  # in step, checked
    index.forget(0)
    by_id, loads = (
        table.by_id.read,
        METRICS.value("kafka_journal_expiry_window_loads_total", source="index"),
    )
    assert index.due(0, T0_MS + 2000) == ["j8", "j1"]
    assert table.by_id.read == by_id  # no scan any more
    assert METRICS.value("kafka_journal_expiry_window_loads_total", source="index") == loads + 1


def test_an_upgraded_partition_is_built_again_from_the_start_after_a_rebalance() -> None:
    table = Table()
    index = ExpiryIndex(table, bound=2, build_step=2, build_interval_s=0.0)
    written_before_the_times(table, 5)
    assert index.due(0, T0_MS) == []
    index.record(a.mark(JournalKey("t", "x"), 0))  # j0, j1
    index.forget(0)  # revoked, then assigned again: looked at again, not marked
    assert index.due(0, T0_MS + 1000) == ["j0"]
    for offset in range(1, 4):  # j0, j1 again (there: not written), j2, j3, then j4 and the mark
        index.record(a.mark(JournalKey("t", "x"), offset))
    assert TIMED in table.by_time.partitions[0] and len(table.times(0)) == 5
    assert table.partitions[0]  # in step, checked
