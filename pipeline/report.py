"""Progress lines of the pipeline's jobs: one line per stage, with counts.

Contract: a job takes a `Progress` (any callable taking one line; `jars.Progress`)
and calls it at each stage. The default writes `[pipeline] <line>` to stderr and flushes, so
a job's report on stdout stays parseable. A Spark job in flight shows its tasks done, rate and
ETA on stderr (`spark_job`, app/progress.py's meter).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

from app.progress import Meter
from jars import Progress, no_progress

__all__ = ["Progress", "no_progress", "per_second", "print_progress", "spark_job"]

T = TypeVar("T")
_POLL_S = 0.5


def print_progress(line: str) -> None:
    print(f"[pipeline] {line}", file=sys.stderr, flush=True)


def per_second(count: int, seconds: float) -> str:
    """`count` over `seconds` as a rate for a progress line, e.g. '1234/s'."""
    return f"{count / seconds:.0f}/s" if seconds > 0 else "-"


async def spark_job(spark: SparkSession, label: str, action: Callable[[], T]) -> T:
    """`action()` (a Spark action: collect, a write) in a thread, its stages' tasks metered
    meanwhile."""
    tracker = spark.sparkContext.statusTracker()
    meter = Meter(f"[pipeline] {label}", 0, "Spark tasks")
    stages: dict[int, tuple[int, int]] = {}  # stage id: (tasks, completed), finished ones kept
    running = asyncio.ensure_future(asyncio.to_thread(action))
    try:
        while not running.done():
            await asyncio.wait([running], timeout=_POLL_S)
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    stages[stage_id] = (info.numTasks, info.numCompletedTasks)
            if stages:
                total = sum(tasks for tasks, _done in stages.values())
                meter.update(sum(done for _tasks, done in stages.values()), total)
        result = running.result()
    finally:
        running.cancel()  # a failed wait: the thread runs on, its result unread
    total = sum(tasks for tasks, _done in stages.values())
    meter.update(total, total)  # finished: every stage's tasks are done
    meter.close()
    return result
