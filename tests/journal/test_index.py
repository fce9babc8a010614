"""OffsetRuns: where one journal's records are, bounded however many there are."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from journal.core.index import MAX_RUNS, MERGED_RUNS, GrowingRuns, OffsetRun, OffsetRuns


def runs_of(*offsets: int) -> OffsetRuns:
    runs = OffsetRuns()
    for offset in offsets:
        runs = runs.add(offset)
    return runs


def test_neighbouring_offsets_form_one_exact_run() -> None:
    runs = runs_of(3, 4, 5, 9)
    assert runs.runs == (OffsetRun(3, 5, 3), OffsetRun(9, 9, 1))
    assert all(r.exact for r in runs.runs)
    assert runs_of(3, 4, 4, 2).runs == (OffsetRun(3, 4, 2),)  # replays change nothing


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=300, unique=True))
def test_past_the_bound_runs_merge_and_still_hold_every_offset(offsets: list[int]) -> None:
    offsets.sort()
    runs = runs_of(*offsets)
    assert len(runs.runs) <= MAX_RUNS
    assert sum(r.count for r in runs.runs) == len(offsets)
    for offset in offsets:
        assert any(r.first <= offset <= r.last for r in runs.runs)
    assert OffsetRuns.decode(runs.encode()) == runs


@given(st.lists(st.integers(0, 10_000), min_size=2, max_size=300, unique=True))
@example([*range(0, 320, 10), 312])  # the newest gap the smallest, as the runs merge
def test_the_newest_record_keeps_a_run_of_its_own(offsets: list[int]) -> None:
    # a conditional append's verdict counts the journal's records between its last verdict
    # (the previous record) and its own: a run spanning both would hide that count
    offsets.sort()
    *earlier, newest = offsets
    runs = runs_of(*offsets)
    if newest == earlier[-1] + 1:
        assert runs.runs[-1].last == newest and runs.runs[-1].exact
    else:
        assert runs.runs[-1] == OffsetRun(newest, newest, 1)
        assert runs.runs[-2].last == earlier[-1]


def test_pruning_drops_whole_runs_at_or_below_the_pointer_and_remembers_it() -> None:
    runs = runs_of(1, 2, 5, 8, 9)
    assert runs.after(0) is runs  # nothing to drop: pruned_to stays
    left = runs.after(5)
    assert left.runs == (OffsetRun(8, 9, 2),) and left.pruned_to == 5
    # the journal has nothing in 6..7: readers need the store up to its last dropped record
    assert runs.after(7) == left
    straddling = runs_of(4, 5, 6).after(5)
    assert straddling.runs == (OffsetRun(4, 6, 3),)  # kept whole: readers skip what they have


def _closest_pair_one_at_a_time(runs: list[OffsetRun], keep: int) -> list[OffsetRun]:
    """The merging rule as first written: the closest neighbours (the newest run apart), one
    pair at a time."""
    while len(runs) > keep:
        gaps = [runs[i + 1].first - runs[i].last for i in range(len(runs) - 2)]
        i = gaps.index(min(gaps))
        runs[i : i + 2] = [
            OffsetRun(runs[i].first, runs[i + 1].last, runs[i].count + runs[i + 1].count)
        ]
    return runs


@given(st.lists(st.integers(1, 50), min_size=MAX_RUNS + 1, max_size=MAX_RUNS + 1))
def test_runs_past_the_bound_merge_down_at_once_as_closest_pairs_would(steps: list[int]) -> None:
    # MAX_RUNS + 1 records, none next to another: the last one's run is one too many
    offsets = [sum(steps[: n + 1]) + 2 * n for n in range(len(steps))]
    full = OffsetRuns(tuple(OffsetRun(o, o, 1) for o in offsets[:-1]))
    singles = [OffsetRun(o, o, 1) for o in offsets]
    assert list(full.add(offsets[-1]).runs) == _closest_pair_one_at_a_time(singles, MERGED_RUNS)


@given(
    st.lists(st.integers(0, 3_000), min_size=1, max_size=400),
    st.lists(st.integers(-1, 3_000), max_size=4),
)
def test_growing_runs_are_the_runs_a_reader_is_given(
    offsets: list[int], pointers: list[int]
) -> None:
    # the tail index grows them in place; a reader and the tables see the same OffsetRuns
    frozen, growing = OffsetRuns(), GrowingRuns.empty(-1)
    cuts = sorted(pointers)
    for n, offset in enumerate(sorted(offsets)):
        frozen = frozen.add(offset)
        growing.add(offset)
        if cuts and n % 50 == 49:
            pointer = cuts.pop(0)
            frozen = frozen.after(pointer)
            left = growing.after(pointer)
            assert (left is None) == (not frozen.runs)
            growing = left or GrowingRuns(frozen.encode())
        assert growing.frozen() == frozen


@given(st.lists(st.integers(1, 50), min_size=MAX_RUNS + 1, max_size=3 * MAX_RUNS), st.data())
def test_runs_the_store_holds_merge_before_those_above_its_pointer(
    steps: list[int], data: st.DataObject
) -> None:
    # a read with the store fetches only runs above its pointer: those stay as exact as the
    # bound allows, whatever the gaps below it
    offsets = [sum(steps[: n + 1]) + 2 * n for n in range(len(steps))]
    # at most MERGED_RUNS - 1 records above it: the bound leaves them a run each
    pointer = data.draw(st.sampled_from(offsets[len(offsets) - MERGED_RUNS :]))
    runs, growing = OffsetRuns(), GrowingRuns.empty(-1)
    for offset in offsets:
        runs = runs.add(offset, pointer)
        growing.add(offset, pointer)
    assert growing.frozen() == runs and growing.last == offsets[-1]
    assert len(runs.runs) <= MAX_RUNS
    assert sum(r.count for r in runs.runs) == len(offsets)
    above = [r for r in runs.runs if r.last > pointer]
    assert all(r.exact for r in above)
    assert [r.first for r in above] == [o for o in offsets if o > pointer]
