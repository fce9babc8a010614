"""Every series a worker exports parses as Prometheus text and follows the naming rules
(promtool's, and the project's: one namespace, no rate or quantile computed in the process)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from faust.sensors import Monitor
from faust.types import TP
from prometheus_client.parser import text_string_to_metric_families

from app.faust_metrics import FaustMonitorCollector, FaustTimings
from journal.metrics import CATALOGUE, Metrics

NAME = re.compile(r"kafka_journal_[a-z_]+")
UNITS = ("_seconds", "_bytes")
FORBIDDEN = ("_per_second", "_median", "_milliseconds", "_ms_", "_percent")


class _Assignor:
    def assigned_actives(self) -> set[TP]:
        return {TP("journal", 0)}

    def assigned_standbys(self) -> set[TP]:
        return {TP("journal", 1)}


def _everything() -> Metrics:
    """A registry with every catalogued metric set once, the process' and Faust's."""
    metrics = Metrics()
    for name, spec in CATALOGUE.items():
        if spec.kind == "counter":
            metrics.counter(name, kind="x").inc()
        elif spec.kind == "gauge":
            if name != "kafka_journal_build_info":  # set by Metrics itself, with its label
                metrics.gauge(name, kind="x").set(1)
        elif not name.startswith("kafka_journal_faust_"):  # FaustTimings' own, unlabelled
            metrics.histogram(name, kind="x").observe(0.01)
    monitor = Monitor()
    monitor.messages_received_by_topic["journal"] = 1
    app = SimpleNamespace(monitor=monitor, assignor=_Assignor())
    metrics.registry.register(FaustMonitorCollector(app))
    FaustTimings(metrics)
    return metrics


def test_the_exposition_parses_and_follows_the_naming_rules() -> None:
    families = list(text_string_to_metric_families(_everything().render().decode()))
    names = {family.name for family in families}
    assert {"kafka_journal_http_requests", "kafka_journal_faust_events"} <= names
    assert "kafka_journal_process_cpu_seconds" in names  # the process collector's
    assert "kafka_journal_python_gc_collections" in names
    for family in families:
        name = family.name
        assert NAME.fullmatch(name), name
        assert not any(part in name + "_" for part in FORBIDDEN), name
        assert family.type in ("counter", "gauge", "histogram"), (name, family.type)
        assert family.documentation.strip(), name
        assert family.documentation.lower().rstrip(".") not in (name, name.replace("_", " "))
        samples = {sample.name for sample in family.samples}
        assert samples, name
        for sample in samples:
            assert NAME.fullmatch(sample), sample
        if family.type == "counter":
            # the parser names a counter's family without the suffix its samples carry
            assert samples == {name + "_total"}, (name, samples)
        else:
            assert not name.endswith("_total"), name
        if family.type == "histogram":
            assert name.endswith(UNITS), name
            assert samples == {name + suffix for suffix in ("_bucket", "_count", "_sum")}


def test_the_build_info_names_the_version() -> None:
    families = text_string_to_metric_families(Metrics().render().decode())
    (info,) = [family for family in families if family.name == "kafka_journal_build_info"]
    ((sample),) = info.samples
    assert sample.value == 1 and sample.labels["version"]


def test_a_removed_series_is_no_longer_exported() -> None:
    metrics = Metrics()
    offset = "kafka_journal_agent_offset"
    for partition in ("0", "1"):
        metrics.gauge(offset, partition=partition).set(5)
    metrics.remove(offset, partition="0")
    metrics.remove(offset, partition="7")  # never set: nothing to do
    text = metrics.render().decode()
    assert 'kafka_journal_agent_offset{partition="1"} 5.0' in text
    assert 'partition="0"' not in text
    metrics.gauge(offset, partition="0").set(6)  # set again: there again
    assert metrics.value(offset, partition="0") == 6
