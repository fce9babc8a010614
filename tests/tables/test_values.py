from __future__ import annotations

from journal.core.index import OffsetRuns
from tables.values import decode_runs, encode_runs


def test_values_round_trip_and_a_missing_one_is_empty() -> None:
    runs = OffsetRuns().add(3).add(4).add(10).after(3)
    assert decode_runs(encode_runs(runs)) == runs
    assert decode_runs(None) == OffsetRuns()
    assert len(encode_runs(runs)) < 32  # a few numbers, never payloads
