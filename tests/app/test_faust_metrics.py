"""Faust's Monitor as Prometheus samples (app/faust_metrics.py), on a registry of the test's own."""

from __future__ import annotations

from types import SimpleNamespace

from faust.sensors import Monitor
from faust.types import TP
from prometheus_client import CollectorRegistry

from app.faust_metrics import FaustMonitorCollector


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
    monitor.events_runtime.extend([0.001, 0.003, 0.002])
    started = monitor.time()
    monitor.on_commit_completed(None, started)  # the consumer is not looked at
    assignment = Assignment(
        {TP("journal", 0), TP("journal", 1), TP("changelog", 0)}, {TP("changelog", 1)}
    )
    registry = _registry(monitor, assignment)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("faust_events_total") == 42
    assert value("faust_events_per_second") == 7
    assert value("faust_rebalances_total") == 3
    assert value("faust_messages_received_total", topic="journal") == 40
    assert value("faust_event_runtime_median_seconds") == 0.002
    commit = value("faust_commit_latency_median_seconds")
    assert commit is not None and 0 <= commit < 1
    assert value("faust_assigned_partitions", topic="journal", kind="active") == 2
    assert value("faust_assigned_partitions", topic="changelog", kind="active") == 1
    assert value("faust_assigned_partitions", topic="changelog", kind="standby") == 1
    assert value("faust_assigned_partitions", topic="journal", kind="standby") is None


def test_a_median_without_samples_is_left_out_not_zero() -> None:
    registry = _registry(Monitor(), Assignment(set(), set()))
    assert registry.get_sample_value("faust_events_total") == 0
    assert registry.get_sample_value("faust_commit_latency_median_seconds") is None
    assert registry.get_sample_value("faust_send_latency_median_seconds") is None
