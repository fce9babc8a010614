"""Metrics on prometheus_client, behind a small typed adapter. Counters and gauges are
prometheus_client's; histograms are our own collector (`_Histogram`) in the same exposition,
because its observation is on every append's and request's path.

`Metrics` owns its own `CollectorRegistry` (never prometheus_client's global one), so a test or
a second app in the same process builds its own and reads only what it caused. `METRICS` is
this process's default: the core counts on it with `METRICS.counter(name, **labels).inc()`,
and a web app renders whichever `Metrics` it was given at `/metrics`.

Every metric is declared once, in `CATALOGUE`: its kind, the HELP text an operator reads, and
a histogram's buckets. A name outside it, or used as another kind, raises ValueError at first
use, which tests catch at once. Names follow Prometheus' conventions, so a sum or a quantile
can be taken across workers: one namespace (`kafka_journal_`), counters end in `_total`,
histograms name their unit, and nothing is a rate or a quantile computed here.

A metric's label names are fixed by its first use (Prometheus requires one label set per
name): a later call with other label names raises ValueError.

Each registry also serves the process' CPU, memory and file descriptors, the garbage
collector's counts, the Python version and `kafka_journal_build_info{version}`.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from journal.version import VERSION

CONTENT_TYPE = CONTENT_TYPE_LATEST
NAMESPACE = "kafka_journal"

# A `_created` gauge beside every counter and histogram doubles the series for a start time
# that `kafka_journal_process_start_time_seconds` already gives.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

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
# Seconds a subscription (GET /events) stays open: from a catch-up that ends at once to a live
# one followed for a day.
SUBSCRIPTION_BUCKETS: tuple[float, ...] = (
    1.0,
    10.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    4 * 3600.0,
    12 * 3600.0,
    24 * 3600.0,
)

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    kind: Kind
    help: str
    buckets: tuple[float, ...] = LATENCY_BUCKETS  # a histogram's


def _counter(help: str) -> MetricSpec:
    return MetricSpec("counter", help)


def _gauge(help: str) -> MetricSpec:
    return MetricSpec("gauge", help)


def _histogram(help: str, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> MetricSpec:
    return MetricSpec("histogram", help, buckets)


_N = NAMESPACE + "_"

CATALOGUE: dict[str, MetricSpec] = {
    # HTTP API (web/)
    _N + "http_requests_total": _counter(
        "HTTP requests answered, by method, route template and status ('aborted': the client "
        "left or the handler failed past every error handler); subscriptions included"
    ),
    _N + "http_request_duration_seconds": _histogram(
        "Time from a request's arrival to its answer's end (a streamed read: its last event), "
        "by method and route; subscriptions (GET /events) are measured apart"
    ),
    _N + "http_subscription_duration_seconds": _histogram(
        "How long subscriptions (GET /events) stayed open, by status; observed when one ends",
        SUBSCRIPTION_BUCKETS,
    ),
    _N + "http_subscriptions_open": _gauge("Subscriptions (GET /events) open now"),
    _N + "http_subscription_lines_total": _counter(
        "Lines (events and heartbeats) sent to subscriptions"
    ),
    _N + "http_appended_events_total": _counter(
        "Events of appends the HTTP API answered 200: accepted by the log's verdict, or with "
        "ack=kafka acknowledged by Kafka before any verdict (a rejected one included)"
    ),
    _N + "http_streamed_events_total": _counter("Events sent in answers to reads"),
    _N + "http_streams_interrupted_total": _counter(
        "Reads and subscriptions whose connection was dropped mid-stream because the server "
        "failed (not because the client left)"
    ),
    _N + "read_duration_seconds": _histogram(
        "Time a read took to its first event (fence, pointer, head): the core's read latency, "
        "without the streaming at the client's pace"
    ),
    # the core (journal/)
    _N + "write_duration_seconds": _histogram(
        "Time from handing an action to the producer to Kafka's acknowledgement, by action"
    ),
    _N + "reads_total": _counter(
        "Reads by how the head was found: 'index' or 'store' on the partition's owner, "
        "'scan_<reason>' when the partition had to be scanned in Kafka; with the store down, "
        "'kafka_only_index' (the journal's runs), 'kafka_only_scan' (a worker whose tables "
        "cannot tell), or 'kafka_only_refused' when Kafka alone could not answer"
    ),
    _N + "read_records_total": _counter(
        "Records reads took from Kafka, their journal's and others' (runs spanning others, "
        "scans): a read through an exact index takes only its journal's"
    ),
    _N + "reads_spilled_total": _counter(
        "Reads whose head was too large to hold and was fetched again in pieces"
    ),
    _N + "truncated_reads_total": _counter(
        "Reads that needed records Kafka no longer keeps and the store never got: the journal "
        "must be repaired"
    ),
    _N + "appends_rejected_total": _counter(
        "Appends the log rejected, by reason ('conflict': the journal was elsewhere, "
        "'duplicate': a repeat)"
    ),
    _N + "conditional_verdicts_total": _counter(
        "Verdicts on conditional appends, by path ('memory': from the followed tail, 'read': "
        "from a fold of the journal)"
    ),
    _N + "conditional_verdict_seconds": _histogram(
        "Time from producing a verified append (or one with expectedSeqNr) to the fold's verdict "
        "on it, as the append waits: the produce's acknowledgement, then the tail's sight of it"
    ),
    _N + "fence_floor_raised_total": _counter(
        "Read fences Kafka answered below what this process saw acknowledged or read in the "
        "partition (a lagging high watermark): the fence was raised to that floor"
    ),
    _N + "table_keys_pruned_total": _counter(
        "Entries a worker deleted from its offset tables, by table, because their records "
        "left Kafka (below the log start) and are replicated"
    ),
    _N + "table_restored_ahead_records_total": _counter(
        "Changelog records a worker restored into its tables itself, by table, ahead of Faust's "
        "recovery (a partition with at least KJ_RESTORE_AHEAD_MIN records to restore)"
    ),
    _N + "table_restored_ahead_seconds_total": _counter(
        "Seconds a worker spent restoring changelog records ahead of Faust's recovery, by table"
    ),
    _N + "index_misses_total": _counter(
        "Look-ups of the journal index that could not answer, by reason; the read then scans "
        "(with the store down, a worker's read its agent is only behind answers 503 instead)"
    ),
    _N + "index_dropped_records_total": _counter(
        "Records the tail index dropped because it held its maximum of journals"
    ),
    _N + "index_forgotten_generations_total": _counter(
        "Generations of the tail index's filter of forgotten journals dropped: from then on a "
        "journal it does not know needs the store (docs/operations.md)"
    ),
    _N + "index_expired_records_total": _counter(
        "Records that expired from Kafka before the tail index saw them"
    ),
    _N + "malformed_records_skipped_total": _counter(
        "Records of the action topic that could not be decoded and were skipped"
    ),
    _N + "producer_replaced_total": _counter(
        "Times the Kafka producer was stuck and replaced by a fresh one"
    ),
    _N + "subscription_whole_folds_total": _counter(
        "Subscriptions that folded a partition from offset 0 because the store was down"
    ),
    _N + "subscription_store_reads_total": _counter(
        "Subscriptions that read events from the store because Kafka no longer had them"
    ),
    _N + "group_commits_total": _counter(
        "Checkpoints a subscription group member committed, by group (one per partition)"
    ),
    _N + "group_rebalances_total": _counter(
        "Partition assignments a subscription group member received, by group"
    ),
    _N + "group_lag_records": _gauge(
        "Records of a partition above a subscription group's checkpoint, by group and "
        "partition (of a grown topic: numbered along its chain of grows, as positions are), "
        "as its member last committed"
    ),
    # replication (agents/, journal/replication/replicate.py)
    _N + "replication_lag_records": _gauge(
        "Records of a partition this worker owns that are not yet replicated to the store"
    ),
    _N + "replication_lag_seconds": _gauge(
        "Age of the oldest record of a partition this worker owns that is not yet "
        "replicated (0 when none; while the agent is behind Kafka, at most the age of the "
        "last record it handled)"
    ),
    _N + "replication_failures_total": _counter(
        "Failed replication attempts of a partition (the store or Kafka failed); retried"
    ),
    _N + "replication_row_reads_total": _counter(
        "Journal rows the replicator read from the store because it had not cached them"
    ),
    _N + "records_expired_unreplicated_total": _counter(
        "Records that expired from Kafka before replication stored them: lost to the store"
    ),
    _N + "quarantined_records_total": _counter(
        "Records replication could not apply, sent to the quarantine topic, by topic"
    ),
    _N + "poison_batches_total": _counter(
        "Record batches of the action topic the consumer could not decode and skipped, by topic"
    ),
    _N + "agent_record_delay_seconds": _histogram(
        "Time from a record's append to the replicating agent seeing it"
    ),
    _N + "expiry_window_loads_total": _counter(
        "Loads of a partition's expiry window (its soonest deadlines), by source: `index` "
        "reads at most the window from the deadlines by time, `scan` every expiring journal "
        "of the partition (only while its deadlines by time are built, after an upgrade)"
    ),
    _N + "journals_expired_total": _counter(
        "Journals purged because their expireAfter passed: Purges produced by their partition's "
        "owner"
    ),
    _N + "agent_offset": _gauge(
        "Last offset of a partition this worker owns that its agent put in the tables"
    ),
    # forwarding (app/forwarding.py)
    _N + "forwarded_requests_total": _counter(
        "Journal requests this worker forwarded to their partition's owner"
    ),
    _N + "forward_failures_total": _counter(
        "Forwards that failed, by kind ('never_reached', 'outcome_unknown', 'stream_broken')"
    ),
    # Faust's consumer and producer (app/faust_metrics.py)
    _N + "faust_commit_duration_seconds": _histogram("Time of the worker's offset commits"),
    _N + "faust_send_duration_seconds": _histogram(
        "Time of the worker's Faust producer sends (table changelogs), to the acknowledgement"
    ),
    # this process
    _N + "build_info": _gauge("Always 1; its label says which version of Kafka Journal runs"),
}


class CountingChild(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class ObservingChild(Protocol):
    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None: ...


class SettingChild(Protocol):
    def set(self, value: float) -> None: ...

    def inc(self, amount: float = 1) -> None: ...

    def dec(self, amount: float = 1) -> None: ...


class _HistogramChild:
    """One series of a `_Histogram`: a count per bucket and the sum, under one lock."""

    __slots__ = ("_bounds", "_counts", "_lock", "_sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self._sum = 0.0
        self._lock = threading.Lock()  # the Cassandra driver's threads may observe too

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        index = bisect_left(self._bounds, amount)  # the first bound >= amount: `le` is <=
        with self._lock:
            self._counts[index] += 1
            self._sum += amount

    def buckets(self) -> tuple[list[tuple[str, float]], float]:
        """The cumulative buckets by `le` and the sum, as the exposition writes them."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for bound, count in zip((*self._bounds, float("inf")), counts, strict=True):
            running += count
            le: str = floatToGoString(bound)  # type: ignore[no-untyped-call]
            cumulative.append((le, float(running)))
        return cumulative, total


class _Histogram(Collector):
    """A histogram family exposed as prometheus_client's `Histogram` is, observed for a third
    of its CPU: one bisect and one lock per observation, where prometheus_client walks the
    buckets and locks each value it adds to (~0.9 us; every append and request observes)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        buckets: tuple[float, ...],
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._bounds = tuple(bound for bound in buckets if bound != float("inf"))
        self._series: dict[tuple[str, ...], _HistogramChild] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def labels(self, **labels: str) -> _HistogramChild:
        if sorted(labels) != sorted(self._labelnames):
            raise ValueError(
                f"metric {self._name} has the labels {sorted(self._labelnames)}, "
                f"not {sorted(labels)}"
            )
        values = tuple(labels[name] for name in self._labelnames)
        with self._lock:
            child = self._series.get(values)
            if child is None:
                child = self._series[values] = _HistogramChild(self._bounds)
        return child

    def remove(self, *values: str) -> None:
        with self._lock:
            self._series.pop(values, None)

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        with self._lock:
            series = list(self._series.items())
        for values, child in series:
            buckets, total = child.buckets()
            family.add_metric(list(values), buckets, total)
        yield family


_KINDS: dict[Kind, type[MetricWrapperBase] | type[_Histogram]] = {
    "counter": Counter,
    "gauge": Gauge,
    "histogram": _Histogram,
}


class Metrics:
    """The metrics of `CATALOGUE` in one registry, created on first use, and the process'."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._families: dict[str, MetricWrapperBase | _Histogram] = {}
        # children by name and labels: prometheus_client's own `labels()` lookup costs ~5 us,
        # too much for every request and append
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self._lock = threading.Lock()  # the Cassandra driver's threads may count too
        ProcessCollector(namespace=NAMESPACE, registry=self.registry)
        # these two name their series without a namespace option: python_gc_*, python_info
        self.registry.register(_Namespaced(GCCollector(registry=CollectorRegistry())))
        self.registry.register(_Namespaced(PlatformCollector(registry=None)))
        self.gauge(_N + "build_info", version=VERSION).set(1)

    def counter(self, name: str, **labels: str) -> CountingChild:
        child: CountingChild = self._child("counter", name, labels)
        return child

    def histogram(self, name: str, **labels: str) -> ObservingChild:
        """A histogram, in seconds, of the catalogue's buckets."""
        child: ObservingChild = self._child("histogram", name, labels)
        return child

    def gauge(self, name: str, **labels: str) -> SettingChild:
        child: SettingChild = self._child("gauge", name, labels)
        return child

    def remove(self, name: str, **labels: str) -> None:
        """Drop the series of `name` with these labels (if any), as if never set: a gauge of
        a partition this worker no longer owns must not keep reporting its last value."""
        if self._children.pop((name, tuple(labels.items())), None) is not None:
            family = self._families[name]
            family.remove(*(labels[label] for label in sorted(labels)))

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

    def _child(self, kind: Kind, name: str, labels: dict[str, str]) -> Any:
        key = (name, tuple(labels.items()))
        child = self._children.get(key)
        if child is None:
            family = self._family(kind, name, labels)
            # prometheus_client's families without labels are their own child; ours never
            child = family.labels(**labels) if labels or kind == "histogram" else family
            self._children[key] = child
        elif CATALOGUE[name].kind != kind:
            raise _wrong_kind(name, kind)
        return child

    def _family(
        self, kind: Kind, name: str, labels: dict[str, str]
    ) -> MetricWrapperBase | _Histogram:
        spec = CATALOGUE.get(name)
        if spec is None:
            raise ValueError(f"metric {name} is not in journal.metrics.CATALOGUE")
        if spec.kind != kind:
            raise _wrong_kind(name, kind)
        options = {"buckets": spec.buckets} if kind == "histogram" else {}
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = _KINDS[kind](
                    name,
                    spec.help,
                    labelnames=sorted(labels),
                    registry=self.registry,
                    **options,  # type: ignore[arg-type]
                )
                self._families[name] = family
        return family


def _wrong_kind(name: str, kind: Kind) -> ValueError:
    declared = CATALOGUE[name].kind.capitalize()
    return ValueError(f"metric {name} is a {declared}, not a {kind.capitalize()}")


class _Namespaced(Collector):
    """Another collector's series, their names in this project's namespace."""

    def __init__(self, collector: Collector) -> None:
        self._collector = collector

    def collect(self) -> Iterator[Metric]:
        for family in self._collector.collect():
            renamed = Metric(_N + family.name, family.documentation, family.type, family.unit)
            renamed.samples = [s._replace(name=_N + s.name) for s in family.samples]
            yield renamed


def replication_lag_labels(topic: str, partition: int) -> dict[str, str]:
    return {"topic": topic, "partition": str(partition)}


def set_replication_lag(
    metrics: Metrics, topic: str, partition: int, records: int, seconds: float
) -> None:
    """How far replication is behind on `topic`'s `partition`: the records it has still to
    apply (end offset minus the next offset to replicate), and how long ago the oldest of
    them was written (0 when none); set by the replicating agent as it goes."""
    labels = replication_lag_labels(topic, partition)
    metrics.gauge(_N + "replication_lag_records", **labels).set(records)
    metrics.gauge(_N + "replication_lag_seconds", **labels).set(seconds)


def forget_replication_lag(metrics: Metrics, topic: str, partition: int) -> None:
    """No lag series for a partition this worker no longer owns (its new owner reports it)."""
    labels = replication_lag_labels(topic, partition)
    metrics.remove(_N + "replication_lag_records", **labels)
    metrics.remove(_N + "replication_lag_seconds", **labels)


METRICS = Metrics()
