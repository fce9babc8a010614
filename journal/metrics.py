"""Metrics on prometheus_client, behind a small typed adapter.

`Metrics` owns its own `CollectorRegistry` (never prometheus_client's global one), so a test or
a second app in the same process builds its own and reads only what it caused. `METRICS` is
this process's default: the core counts on it with `METRICS.counter(name, **labels).inc()`,
and a web app renders whichever `Metrics` it was given at `/metrics`.

A metric's label names are fixed by its first use (Prometheus requires one label set per
name): a later call with other label names raises ValueError, which tests catch at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds: from a sub-millisecond local call to a read that waits out a rebalance.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class CountingChild(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class ObservingChild(Protocol):
    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None: ...


class SettingChild(Protocol):
    def set(self, value: float) -> None: ...


_Family = TypeVar("_Family", bound=MetricWrapperBase)


class Metrics:
    """Counters, histograms and gauges of one registry, created on first use."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._families: dict[str, MetricWrapperBase] = {}
        # children by name and labels: prometheus_client's own `labels()` lookup costs ~5 us,
        # too much for every request and append
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self._lock = threading.Lock()  # the Cassandra driver's threads may count too

    def counter(self, name: str, **labels: str) -> CountingChild:
        child: CountingChild = self._child(Counter, name, labels)
        return child

    def histogram(self, name: str, **labels: str) -> ObservingChild:
        """A latency histogram, in seconds (`LATENCY_BUCKETS`)."""
        child: ObservingChild = self._child(Histogram, name, labels, buckets=LATENCY_BUCKETS)
        return child

    def gauge(self, name: str, **labels: str) -> SettingChild:
        child: SettingChild = self._child(Gauge, name, labels)
        return child

    @contextmanager
    def timed(self, name: str, **labels: str) -> Iterator[None]:
        """Observe the seconds the block takes, also when it raises."""
        histogram = self.histogram(name, **labels)
        started = time.perf_counter()
        try:
            yield
        finally:
            histogram.observe(time.perf_counter() - started)

    def value(self, name: str, **labels: str) -> float:
        """A sample's current value (0 if never set): a counter's `..._total`, a gauge, or a
        histogram's `..._count` / `..._sum`."""
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found

    def render(self) -> bytes:
        """The Prometheus text exposition format (`CONTENT_TYPE`)."""
        return generate_latest(self.registry)

    def _child(
        self, kind: type[MetricWrapperBase], name: str, labels: dict[str, str], **options: object
    ) -> Any:
        key = (name, tuple(labels.items()))
        child = self._children.get(key)
        if child is None:
            family = self._family(kind, name, labels, **options)
            child = family.labels(**labels) if labels else family
            self._children[key] = child
        elif not isinstance(self._families[name], kind):
            raise ValueError(f"metric {name} is a {type(self._families[name]).__name__}")
        return child

    def _family(
        self, kind: type[_Family], name: str, labels: dict[str, str], **options: object
    ) -> _Family:
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = kind(
                    name,
                    name.replace("_", " "),
                    labelnames=sorted(labels),
                    registry=self.registry,
                    **options,  # type: ignore[arg-type]
                )
                self._families[name] = family
        if not isinstance(family, kind):
            raise ValueError(f"metric {name} is a {type(family).__name__}, not a {kind.__name__}")
        return family


def set_replication_lag(
    metrics: Metrics, topic: str, partition: int, records: int, seconds: float
) -> None:
    """How far replication is behind on `topic`'s `partition`: the records it has still to
    apply (end offset minus the next offset to replicate), and how long ago the oldest of
    them was written (0 when none); set by the replicating agent as it goes."""
    labels = {"topic": topic, "partition": str(partition)}
    metrics.gauge("journal_replication_lag_records", **labels).set(records)
    metrics.gauge("journal_replication_lag_seconds", **labels).set(seconds)


METRICS = Metrics()
