"""Faust's own consumer metrics in the worker's /metrics.

Faust's `Monitor` (a sensor every app has) already counts what its consumer and streams do;
`FaustMonitorCollector` only reads it at scrape time, so it costs nothing per event. Exposed:

- `kafka_journal_faust_events_total`: events the worker's streams took (the replicating
  agent's records);
- `kafka_journal_faust_messages_received_total{topic}`: records the consumer fetched, per topic;
- `kafka_journal_faust_rebalances_total`, `kafka_journal_faust_assigned_partitions{topic,kind=
  "active"|"standby"}`: how often the group rebalanced, and what this worker holds now.

The Monitor's rates and recent latencies are left out: a rate or a median cannot be summed
across workers. `FaustTimings`, a sensor of its own, observes each offset commit and producer
send into histograms instead (`kafka_journal_faust_commit_duration_seconds`,
`kafka_journal_faust_send_duration_seconds`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import faust
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from journal.metrics import NAMESPACE, Metrics

_N = NAMESPACE + "_faust_"


class FaustMonitorCollector(Collector):
    """A prometheus_client collector over `app.monitor` and `app.assignor` (a Faust app)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        monitor = self._app.monitor
        yield CounterMetricFamily(
            _N + "events",
            "Events the worker's Faust streams took (the replicating agent's records)",
            value=monitor.events_total,
        )
        received = CounterMetricFamily(
            _N + "messages_received",
            "Records the worker's Faust consumer fetched, by topic",
            labels=["topic"],
        )
        for topic, count in sorted(monitor.messages_received_by_topic.items()):
            received.add_metric([topic], count)
        yield received
        yield CounterMetricFamily(
            _N + "rebalances",
            "Consumer group rebalances this worker took part in",
            value=monitor.rebalances,
        )
        assigned = GaugeMetricFamily(
            _N + "assigned_partitions",
            "Partitions assigned to this worker now, by topic and kind (active or standby)",
            labels=["topic", "kind"],
        )
        assignor = self._app.assignor
        for kind, partitions in (
            ("active", assignor.assigned_actives()),
            ("standby", assignor.assigned_standbys()),
        ):
            for topic, count in sorted(Counter(tp.topic for tp in partitions).items()):
                assigned.add_metric([topic, kind], count)
        yield assigned


class FaustTimings(faust.Sensor):  # type: ignore[misc]
    """Times Faust's offset commits and producer sends (add it to `app.sensors`)."""

    def __init__(self, metrics: Metrics, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._commits = metrics.histogram(_N + "commit_duration_seconds")
        self._sends = metrics.histogram(_N + "send_duration_seconds")

    def on_commit_initiated(self, consumer: Any) -> float:
        return time.perf_counter()

    def on_commit_completed(self, consumer: Any, state: float) -> None:
        self._commits.observe(time.perf_counter() - state)

    def on_send_initiated(
        self, producer: Any, topic: str, message: Any, keysize: int, valsize: int
    ) -> float:
        return time.perf_counter()

    def on_send_completed(self, producer: Any, state: float, metadata: Any) -> None:
        self._sends.observe(time.perf_counter() - state)
