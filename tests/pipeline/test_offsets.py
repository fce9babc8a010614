"""Which offsets a job reads, and which expired before they reached the store."""

from __future__ import annotations

from pipeline.offsets import Gap, OffsetRange, TopicOffsets, read_ranges

# Partition 0 is whole in Kafka; retention took offsets below 40 of 1 and below 10 of 2.
OFFSETS = TopicOffsets(earliest={0: 0, 1: 40, 2: 10}, end={0: 50, 1: 90, 2: 30})


def test_from_the_pointers_a_pointer_below_the_log_start_is_a_gap() -> None:
    ranges, gaps = read_ranges(OFFSETS, {0: 19, 1: 29, 2: 19}, "pointers")
    assert ranges == [OffsetRange(0, 20, 50), OffsetRange(1, 40, 90), OffsetRange(2, 20, 30)]
    assert gaps == [Gap(1, 30, 39)]


def test_a_partition_without_a_pointer_lost_what_expired() -> None:
    ranges, gaps = read_ranges(OFFSETS, {}, "pointers")
    assert ranges == [OffsetRange(0, 0, 50), OffsetRange(1, 40, 90), OffsetRange(2, 10, 30)]
    assert gaps == [Gap(1, 0, 39), Gap(2, 0, 9)]


def test_from_the_earliest_offsets_the_gaps_are_the_same() -> None:
    ranges, gaps = read_ranges(OFFSETS, {0: 19, 1: 29}, "earliest")
    assert ranges == [OffsetRange(0, 0, 50), OffsetRange(1, 40, 90), OffsetRange(2, 10, 30)]
    assert gaps == [Gap(1, 30, 39), Gap(2, 0, 9)]
