"""What a read by runs fetches (journal/kafka/records.py `spans`): runs close together are
read through in one range, one seek; far apart, each its own."""

from __future__ import annotations

from journal.core.index import OffsetRun
from journal.kafka.records import spans

INTERLEAVED = [OffsetRun(n, n, 1) for n in range(100, 200, 16)]  # one run a record, among others'


def test_runs_close_together_are_one_range() -> None:
    assert spans(INTERLEAVED, after=-1, until=10_000, gap=512) == [(100, 197)]


def test_runs_farther_apart_than_the_gap_are_read_apart() -> None:
    runs = [OffsetRun(10, 12, 3), OffsetRun(600, 601, 2), OffsetRun(700, 700, 1)]
    assert spans(runs, after=-1, until=10_000, gap=512) == [(10, 13), (600, 701)]
    assert spans(runs, after=-1, until=10_000, gap=0) == [(10, 13), (600, 602), (700, 701)]


def test_what_lies_at_or_below_after_or_from_until_on_is_not_read() -> None:
    runs = [OffsetRun(10, 20, 5), OffsetRun(30, 40, 5), OffsetRun(50, 60, 5)]
    assert spans(runs, after=15, until=35, gap=0) == [(16, 21), (30, 35)]
    assert spans(runs, after=60, until=100, gap=512) == []


def test_overlapping_runs_are_read_once() -> None:
    runs = [OffsetRun(10, 30, 4), OffsetRun(20, 25, 2), OffsetRun(28, 40, 3)]
    assert spans(runs, after=-1, until=100, gap=0) == [(10, 41)]
