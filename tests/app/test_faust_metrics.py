"""Faust's Monitor and its commits and sends as Prometheus samples (app/faust_metrics.py), on
registries of the test's own."""

from __future__ import annotations

from types import SimpleNamespace

from faust.sensors import Monitor
from faust.types import TP
from prometheus_client import CollectorRegistry

from app.faust_metrics import FaustMonitorCollector, FaustTimings
from journal.metrics import Metrics


class Assignment:
    def __init__(self, actives: set[TP], standbys: set[TP]) -> None:
        self._actives, self._standbys = actives, standbys

    def assigned_actives(self) -> set[TP]:
        return self._actives

    def assigned_standbys(self) -> set[TP]:
        return self._standbys


def _registry(monitor: Monitor, assignment: Assignment) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FaustMonitorCollector(SimpleNamespace(monitor=monitor, assignor=assignment)))
    return registry


def test_the_monitor_and_the_assignment_become_samples() -> None:
    monitor = Monitor()
    monitor.events_total, monitor.events_s, monitor.rebalances = 42, 7, 3
    monitor.messages_received_by_topic.update(
        {"journal": 40, "journal-append-offsets-changelog": 2}
    )
    assignment = Assignment(
        {TP("journal", 0), TP("journal", 1), TP("changelog", 0)}, {TP("changelog", 1)}
    )
    registry = _registry(monitor, assignment)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("kafka_journal_faust_events_total") == 42
    assert value("kafka_journal_faust_rebalances_total") == 3
    assert value("kafka_journal_faust_messages_received_total", topic="journal") == 40
    assert value("kafka_journal_faust_assigned_partitions", topic="journal", kind="active") == 2
    assert value("kafka_journal_faust_assigned_partitions", topic="changelog", kind="active") == 1
    assert value("kafka_journal_faust_assigned_partitions", topic="changelog", kind="standby") == 1
    assert value("kafka_journal_faust_assigned_partitions", topic="journal", kind="standby") is None


def test_no_rate_or_median_of_the_monitor_is_exported() -> None:
    """They cannot be summed across workers: commits and sends are histograms instead."""
    monitor = Monitor()
    monitor.events_runtime.extend([0.001, 0.003, 0.002])
    monitor.on_commit_completed(None, monitor.time())  # the consumer is not looked at
    registry = _registry(monitor, Assignment(set(), set()))
    assert registry.get_sample_value("kafka_journal_faust_events_total") == 0
    names = {metric.name for metric in registry.collect()}
    assert not [name for name in names if "median" in name or "per_second" in name], names


def test_commits_and_sends_are_timed_into_histograms() -> None:
    metrics = Metrics()
    timings = FaustTimings(metrics)
    timings.on_commit_completed(None, timings.on_commit_initiated(None))
    for _ in range(2):
        sent = timings.on_send_initiated(None, "changelog", None, 1, 1)
        timings.on_send_completed(None, sent, None)
    assert metrics.value("kafka_journal_faust_commit_duration_seconds_count") == 1
    assert metrics.value("kafka_journal_faust_send_duration_seconds_count") == 2
    assert metrics.value("kafka_journal_faust_send_duration_seconds_bucket", le="+Inf") == 2
