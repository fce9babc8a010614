"""The restore scenario's arithmetic (its measurements run in `kafka-journal bench`)."""

from __future__ import annotations

import pytest

from bench.restore import section_of


def test_the_restore_is_the_time_to_serving_beyond_an_empty_worker_s() -> None:
    ends = {"a-append-offsets-changelog": 90_000, "a-deletion-offsets-changelog": 10_000}
    rows = {row.name: row for row in section_of(100_000, ends, 4.0, 14.0, 0.5).rows}
    assert rows["changelog records restored"].value == 100_000
    assert (
        rows["changelog records restored"].note == "append-offsets 90,000, deletion-offsets 10,000"
    )
    restore = rows["the restore"]
    assert restore.value == pytest.approx(10_000.0)  # 100,000 records in 14 - 4 s
    assert restore.baseline == pytest.approx(200_000.0)
    assert restore.met is False
    assert section_of(100_000, ends, 4.0, 4.5, 0.5).rows[-1].met is True  # 1x the consumer
    # restored whole ahead of Faust: the worker's own timing
    ahead = section_of(100_000, ends, 4.0, 3.5, 0.5, ahead=100_000, ahead_s=0.25).rows[-1]
    assert ahead.value == pytest.approx(400_000.0)
    assert ahead.note == "0.25 s (the worker's own timing)"
