"""The tables' values: folding actions, bounds, idempotent replays, encoding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from journal.model import JournalKey
from tables.values import MAX_ENTRIES, HeadCache, HeadEntry, Watermark
from tests.support import actions as a

KEY = JournalKey("t", "j")


def test_watermark_follows_appends_deletes_and_purges() -> None:
    mark = Watermark()
    for action in [a.append(KEY, 0, 1, 3), a.delete(KEY, 1, 2), a.delete(KEY, 2, 1)]:
        mark = mark.apply(action)
    assert (mark.seq_nr, mark.delete_to, mark.purge, mark.offset) == (3, 2, None, 2)
    mark = mark.apply(a.purge(KEY, 3))
    assert (mark.seq_nr, mark.delete_to, mark.purge) == (None, None, 3)


def test_replayed_actions_change_nothing() -> None:
    actions = [a.append(KEY, 0, 1, 3), a.delete(KEY, 1, 2), a.append(KEY, 2, 4, 4)]
    mark, head = Watermark(), HeadCache()
    for action in actions:
        mark, head = mark.apply(action), head.apply(action, replicated=-1)
    for action in actions:
        assert mark.apply(action) == mark
        assert head.apply(action, replicated=-1) == head


def test_head_cache_prunes_what_is_replicated() -> None:
    head = HeadCache().apply(a.append(KEY, 0, 1, 1), -1).apply(a.append(KEY, 5, 2, 2), -1)
    assert head.pending(None) == (HeadEntry(0, 1, 1), HeadEntry(5, 2, 2))
    assert head.pending(0) == (HeadEntry(5, 2, 2),)
    head = head.apply(a.append(KEY, 9, 3, 3), replicated=5)
    assert head.entries == (HeadEntry(9, 3, 3),)
    assert head.pruned_to == 5  # a reader with an older pointer must refresh it


def test_head_cache_is_bounded_and_then_says_it_cannot_tell() -> None:
    head = HeadCache()
    for n in range(MAX_ENTRIES + 5):
        head = head.apply(a.append(KEY, n, n + 1, n + 1), replicated=-1)
    assert len(head.entries) == MAX_ENTRIES and head.overflow
    assert head.pending(None) is None
    assert head.pending(head.entries[0].offset) is not None  # dropped ones are replicated
    head = head.apply(a.mark(KEY, 1000), replicated=999)
    assert head == HeadCache(1000, (), False, pruned_to=999)


def test_a_purge_empties_the_head_cache() -> None:
    head = HeadCache().apply(a.append(KEY, 0, 1, 1), -1).apply(a.purge(KEY, 1), -1)
    assert head.entries == () and not head.overflow


@given(
    st.integers(-1, 10**12),
    st.lists(st.tuples(st.integers(0, 10**12), st.integers(1, 10**6)), max_size=5),
    st.booleans(),
    st.integers(-1, 10**12),
)
def test_head_cache_round_trips(
    offset: int, raw: list[tuple[int, int]], overflow: bool, pruned_to: int
) -> None:
    head = HeadCache(offset, tuple(HeadEntry(o, s, s + 1) for o, s in raw), overflow, pruned_to)
    assert HeadCache.decode(head.encode()) == head


@given(
    st.integers(-1, 10**12),
    st.none() | st.integers(1, 2**63 - 1),
    st.none() | st.integers(1, 2**63 - 1),
    st.none() | st.integers(0, 10**12),
)
def test_watermark_round_trips(
    offset: int, seq_nr: int | None, delete_to: int | None, purge: int | None
) -> None:
    mark = Watermark(offset, seq_nr, delete_to, purge)
    assert Watermark.decode(mark.encode()) == mark
    assert Watermark.decode(None) == Watermark()
