"""Timing and statistics shared by the scenarios, and the shape of their results."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field


def unique(prefix: str) -> str:
    """A fresh topic / keyspace / journal name, so runs never mix."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank; NaN for no samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float]) -> str:
    """min..max of repetitions, as text."""
    if not values:
        return ""
    return f"{min(values):.4g}..{max(values):.4g}"


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


@dataclass(frozen=True, slots=True)
class Row:
    """One measured number, with its baseline of the same run and the goal it is held to."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    goal: str = ""
    met: bool | None = None
    spread: str = ""  # min..max over repetitions
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline


@dataclass(slots=True)
class Section:
    """The results of one scenario: rows for the table, samples for the plots, notes."""

    title: str
    method: str
    rows: list[Row] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)  # label -> latencies (ms)
    throughputs: dict[str, float] = field(default_factory=dict)  # label -> per second
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    profile: str = ""  # a profiler's text output, when one ran

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


@dataclass(slots=True)
class Timed:
    """Latencies (ms) of a batch of operations and the wall time they took."""

    latencies_ms: list[float]
    wall_s: float

    @property
    def per_second(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s > 0 else float("nan")


async def timed(operation: Callable[[], Awaitable[object]]) -> float:
    """Milliseconds one call of `operation` takes."""
    started = time.perf_counter()
    await operation()
    return (time.perf_counter() - started) * 1000
