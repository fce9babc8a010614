"""The sizes of the issue's Show tests for subscriptions.

By default the smallest sizes that prove their properties (the test suite's). With
`KJ_SHOW_SCALE=full` the issue's: 200 journals on 8 partitions written by 8 writers, about
20,000 events, a subscriber dropped and resumed tens of times. Run them so with, e.g.:
`KJ_SHOW_SCALE=full pytest tests/journal/test_subscription.py tests/app/test_worker.py -k
"subscri or purged"`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_SCALE = os.environ.get("KJ_SHOW_SCALE", "small")
if _SCALE not in ("small", "full"):
    raise ValueError(f"KJ_SHOW_SCALE must be small or full, not {_SCALE!r}")
FULL = _SCALE == "full"


@dataclass(frozen=True)
class ShowSizes:
    journals: int
    partitions: int
    writers: int  # each writes its share of the journals, one after the other
    session: tuple[int, int]  # a subscriber's session: between these many events, then dropped

    def rounds(self, small: int, of: int) -> int:
        """A test's `small` rounds of writing, of `of` rounds in that test at the small size,
        scaled at full size so that the test's rounds write ~20,000 events (2 per round and
        journal)."""
        return small if not FULL else max(1, round(small * 50 / of))


SHOW = (
    ShowSizes(journals=200, partitions=8, writers=8, session=(400, 1200))
    if FULL
    else ShowSizes(journals=9, partitions=3, writers=9, session=(5, 40))
)
