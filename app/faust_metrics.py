"""Faust's own consumer metrics in the worker's /metrics, read from its Monitor when scraped.

Faust's `Monitor` (a sensor every app has) already counts what its consumer and streams do;
this collector only reads it at scrape time, so it costs nothing per event. Exposed:

- `faust_events_total`, `faust_events_per_second`: events the worker's streams took (the
  replicating agent's records), total and over Faust's last one-second sample;
- `faust_event_runtime_median_seconds`: the median time an event spent in its agent;
- `faust_messages_received_total{topic}`: records the consumer fetched, per topic;
- `faust_commit_latency_median_seconds`, `faust_send_latency_median_seconds`: of the last
  offset commits and producer sends Faust kept (30 and 100);
- `faust_rebalances_total`, `faust_assigned_partitions{topic,kind="active"|"standby"}`: how
  often the group rebalanced, and what this worker holds now.

A median over no samples yet is left out rather than reported as 0.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class FaustMonitorCollector(Collector):
    """A prometheus_client collector over `app.monitor` and `app.assignor` (a Faust app)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        monitor = self._app.monitor
        yield CounterMetricFamily(
            "faust_events", "events the worker's streams took", value=monitor.events_total
        )
        yield GaugeMetricFamily(
            "faust_events_per_second",
            "events the worker's streams took in Faust's last one-second sample",
            value=monitor.events_s,
        )
        received = CounterMetricFamily(
            "faust_messages_received", "records Faust's consumer fetched", labels=["topic"]
        )
        for topic, count in sorted(monitor.messages_received_by_topic.items()):
            received.add_metric([topic], count)
        yield received
        yield from _median(
            "faust_event_runtime_median_seconds",
            "median time an event spent in its agent (Faust's recent events)",
            monitor.events_runtime,
        )
        yield from _median(
            "faust_commit_latency_median_seconds",
            "median time of Faust's recent offset commits",
            monitor.commit_latency,
        )
        yield from _median(
            "faust_send_latency_median_seconds",
            "median time of Faust's recent producer sends",
            monitor.send_latency,
        )
        yield CounterMetricFamily(
            "faust_rebalances", "rebalances this worker took part in", value=monitor.rebalances
        )
        assigned = GaugeMetricFamily(
            "faust_assigned_partitions",
            "partitions assigned to this worker now, by topic and kind",
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


def _median(name: str, documentation: str, samples: Iterable[float]) -> Iterator[Metric]:
    values = list(samples)
    if values:
        yield GaugeMetricFamily(name, documentation, value=statistics.median(values))
