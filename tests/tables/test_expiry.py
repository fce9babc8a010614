"""The expiry index: deadlines per journal in a table, the soonest of each partition in a bounded
window (tables/expiry.py)."""

from __future__ import annotations

from journal.core.model import ActionRecord, JournalKey
from tables.expiry import FOREVER, ExpiryIndex, ExpiryWindow, deadline_of
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
