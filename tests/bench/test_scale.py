"""The scale scenario's arithmetic (its measurements run in `kafka-journal bench --scale-only`):
the client's bound and phases, memory per unit, the flatness verdict, the section's rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.common import Section
from bench.rebalance import Pause
from bench.replication import Lags
from bench.scale import (
    FLAT_SHARE,
    PARTITIONS,
    Measured,
    client_bound,
    client_flat,
    client_phases,
    per_unit_bytes,
    scale_section,
)


def test_the_journals_are_five_times_the_clients_bound_over_every_partition() -> None:
    assert client_bound(1_000_000) == 6250  # 1,000,000 / (5 x 32)
    assert client_phases(1_000_000) == [200_000, 400_000, 1_000_000]  # 1x, 2x, 5x
    assert client_phases(20_000) == [4000, 8000, 20_000]
    assert client_bound(10) == 1  # never a bound of 0
    assert client_phases(10, partitions=2) == [2, 4, 10]


def test_memory_per_unit_is_the_growth_above_an_empty_process() -> None:
    assert per_unit_bytes(200_000, 100_000, 1_000_000) == pytest.approx(102.4)  # KiB to B
    assert per_unit_bytes(100_000, 110_000, 1000) < 0  # a smaller process shows as such
    assert per_unit_bytes(1, 0, 0) == 1024  # no units: per one, not a division by zero


def test_the_client_is_flat_when_5x_the_bound_costs_under_a_tenth_more_than_2x() -> None:
    # 2x and 5x both past the bound: what the first journal past it allocates (the filter of
    # forgotten journals) is in both
    growth, flat = client_flat(100_000, [200_000, 205_000, 210_000])
    assert growth == pytest.approx(0.05)  # 5,000 KiB of the 100,000 that 1x cost
    assert flat
    growth, flat = client_flat(100_000, [200_000, 300_000, 600_000])  # grows with journals
    assert growth == pytest.approx(3.0)
    assert not flat
    at_the_share = 205_000 + int(FLAT_SHARE * 100_000)
    assert not client_flat(100_000, [200_000, 205_000, at_the_share])[1]


def _lags(*ms: float) -> Lags:
    return Lags(list(ms), 1000.0, 0)


def test_the_section_reports_each_unit_and_holds_the_goals() -> None:
    restore = Section("A fresh worker's restore", "")
    measured = Measured(
        journals=1_000_000,
        bound=6250,
        client_idle_kib=100 * 1024,
        client_kib=[200 * 1024, 202 * 1024, 205 * 1024],
        empty_worker_s=3.0,
        empty_worker_kib=150 * 1024,
        indexed_kib=250 * 1024,
        indexing_s=120.0,
        restore=restore,
        restored_kib=180 * 1024,
        pause=Pause(_lags(100, 900), _lags(200, 4500), 6.0),
    )
    rows = {row.name: row for row in scale_section(measured, 1000, 30).rows}
    held = rows["a direct client: a journal held by its tail index"]
    assert held.value == pytest.approx(100 * 2**20 / (6250 * PARTITIONS))  # ~524 B
    assert rows["a direct client: a partition followed at its bound"].value == pytest.approx(
        100 / PARTITIONS
    )
    flat = rows["a direct client's growth from 2x to 5x its bound"]
    assert flat.value == pytest.approx(3.0)  # 3 MiB more at 5x than at 2x; 1x cost 100
    assert flat.met is True
    assert rows["a worker: a journal indexed"].value == pytest.approx(100 * 2**20 / 1e6)
    assert rows["a worker: a partition"].value == pytest.approx(100 / PARTITIONS)
    pause = rows["the pause: the longest lag with the join"]
    assert pause.value == pytest.approx(4.5)
    assert pause.baseline == pytest.approx(0.9)
    assert pause.met is True
    longer = replace(measured, pause=Pause(_lags(900), _lags(5100), 6.0))
    assert scale_section(longer, 1000, 30).rows[-1].met is False
