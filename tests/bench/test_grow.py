"""The arithmetic of the grow scenario (bench/grow.py): windows, rates, unavailability."""

from __future__ import annotations

import os

from bench.grow import Appended, cpu_seconds, per_second, unavailability_ms, window

APPENDS = [
    Appended("a", 0.0, 0.010),
    Appended("b", 0.5, 0.520),
    Appended("a", 1.0, 1.900, retried=3),  # waited while its partition moved
    Appended("b", 1.2, 1.230),
    Appended("a", 2.5, 2.510),
]


def test_a_window_holds_the_appends_asked_within_it() -> None:
    assert [a.started for a in window(APPENDS, 1.0, 2.5)] == [1.0, 1.2]
    assert per_second(window(APPENDS, 0.0, 1.0), 1.0) == 2.0


def test_a_journals_unavailability_is_its_longest_append() -> None:
    longest = unavailability_ms(window(APPENDS, 1.0, 3.0))
    assert longest.keys() == {"a", "b"}
    assert round(longest["a"]) == 900 and round(longest["b"]) == 30


def test_cpu_seconds_of_this_process_grow_with_its_work() -> None:
    before = cpu_seconds(os.getpid())
    deadline = before + 0.05
    while cpu_seconds(os.getpid()) < deadline:  # spins until 50 ms of CPU are counted
        sum(range(10_000))
    assert cpu_seconds(os.getpid()) >= deadline
