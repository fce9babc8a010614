"""How a worker process sets CPython's garbage collector, measured on replication and subscriptions.

- What the imports allocated (a large heap that lives as long as the process) is frozen, out
  of the collector's reach: each full collection would walk all of it again, and a
  subscription, which allocates a few objects per event, sets off many of them (about 40% of
  its CPU time; `kafka-journal bench --subscription-only`).
- Young collections run every `GC_THRESHOLDS[0]` objects, and full ones a tenth as often as by
  default. Replication keeps a batch's objects alive (a thousand records' events, rows and
  payloads) across many young collections of CPython's defaults (700, 10, 10), so they reached
  the oldest generation, which was then collected again and again, walking each batch in
  flight: 22 full collections in a 1-event backlog's 8 s, 1.6 s of the worker's CPU. With
  these thresholds, 2; the backlog went from 4,989 to 7,286 events/s (193 to 122 us of CPU
  per record), 10-event appends from 19,267 to 21,607 events/s.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLDS = (50_000, 20, 100)


def tune_garbage_collector() -> None:
    """For the rest of the process: call once, after the imports."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@contextmanager
def worker_garbage_collector() -> Iterator[None]:
    """The worker's settings for a while, then the previous thresholds, with nothing frozen
    (for benchmarks, in a process that froze nothing itself)."""
    thresholds = gc.get_threshold()
    tune_garbage_collector()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
