"""The partition-cost scenario's arithmetic (its measurements run in `kafka-journal bench`)."""

from __future__ import annotations

import pytest

from bench.partitions import PartitionCosts, one_id_per_partition, section_of, slope
from journal.kafka import partition_of


def test_the_slope_is_the_least_squares_cost_of_one_more_partition() -> None:
    assert slope([8, 32, 64], [100.0, 124.0, 156.0]) == pytest.approx(1.0)
    assert slope([8, 64], [2.0, 2.0]) == 0.0
    with pytest.raises(ValueError, match="two distinct"):
        slope([8, 8], [1.0, 2.0])


def test_one_id_lands_in_each_partition() -> None:
    ids = one_id_per_partition("j", 16)
    assert [partition_of(i, 16) for i in ids] == list(range(16))


def test_the_section_gives_each_count_and_the_per_partition_cost_in_ms_or_mib() -> None:
    costs = [
        PartitionCosts(8, 2.0, 100.0, 3.0, 1.0, 80.0),
        PartitionCosts(24, 2.8, 132.0, 4.6, 1.4, 88.0),
    ]
    rows = {row.name: (row.value, row.unit) for row in section_of(costs).rows}
    assert rows["a worker's start to ready, 24 partitions"] == (2.8, "s")
    assert rows["a worker's start to ready: one more partition"] == pytest.approx((50.0, "ms"))
    assert rows["a worker's memory at ready: one more partition"] == pytest.approx((2.0, "MiB"))
    assert rows["a second worker's start to both ready: one more partition"] == pytest.approx(
        (100.0, "ms")
    )
    assert rows["a direct client's memory: one more partition"] == pytest.approx((0.5, "MiB"))
