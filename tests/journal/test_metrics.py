"""The metrics adapter over prometheus_client, and the write latency the writer records."""

from __future__ import annotations

import pytest

from journal.core.model import Event, Events, JournalKey, JsonPayload
from journal.kafka.producer import JournalProducer
from journal.kafka.topic import TopicSpec, ensure_topic
from journal.kafka.writer import JournalWriter
from journal.metrics import Metrics, set_replication_lag
from kjconfig.access import KafkaAccess
from stack import Stack
from tests.support.harness import unique


def test_counters_are_labelled_and_registries_are_separate() -> None:
    mine, other = Metrics(), Metrics()
    mine.counter("kafka_journal_reads_total", path="replicated").inc()
    mine.counter("kafka_journal_reads_total", path="replicated").inc(2)
    mine.counter("kafka_journal_reads_total", path="kafka_only").inc()
    assert mine.value("kafka_journal_reads_total", path="replicated") == 3
    assert mine.value("kafka_journal_reads_total", path="kafka_only") == 1
    assert other.value("kafka_journal_reads_total", path="replicated") == 0
    assert b'kafka_journal_reads_total{path="replicated"} 3.0' in mine.render()
    assert b"kafka_journal_reads_total" not in other.render()


def test_a_metric_keeps_its_label_names_and_its_kind() -> None:
    metrics = Metrics()
    metrics.counter("kafka_journal_reads_total", source="tables").inc()
    with pytest.raises(ValueError):
        metrics.counter("kafka_journal_reads_total", origin="tables")
    with pytest.raises(ValueError, match="is a Counter"):
        metrics.gauge("kafka_journal_reads_total", source="tables")


def test_histograms_time_blocks_also_when_they_raise() -> None:
    metrics = Metrics()
    with metrics.timed("kafka_journal_read_duration_seconds"):
        pass
    with pytest.raises(RuntimeError), metrics.timed("kafka_journal_read_duration_seconds"):
        raise RuntimeError("the read failed")
    assert metrics.value("kafka_journal_read_duration_seconds_count") == 2
    assert metrics.value("kafka_journal_read_duration_seconds_bucket", le="+Inf") == 2


def test_a_histogram_counts_an_observation_in_each_bucket_at_or_above_it() -> None:
    metrics = Metrics()
    name = "kafka_journal_write_duration_seconds"
    histogram = metrics.histogram(name, action="append")
    for seconds in (0.001, 0.0011, 0.003, 1000.0):  # 0.001 is a bound: counted in its bucket
        histogram.observe(seconds)
    assert metrics.value(f"{name}_bucket", action="append", le="0.0005") == 0
    assert metrics.value(f"{name}_bucket", action="append", le="0.001") == 1
    assert metrics.value(f"{name}_bucket", action="append", le="0.005") == 3
    assert metrics.value(f"{name}_bucket", action="append", le="+Inf") == 4
    assert metrics.value(f"{name}_count", action="append") == 4
    assert metrics.value(f"{name}_sum", action="append") == pytest.approx(1000.0051)
    assert b'kafka_journal_write_duration_seconds_bucket{action="append",le="0.001"} 1.0' in (
        metrics.render()
    )
    with pytest.raises(ValueError, match="labels"):
        metrics.histogram(name, kind="append")


def test_replication_lag_is_a_gauge_per_partition() -> None:
    metrics = Metrics()
    set_replication_lag(metrics, "journal", 0, 12, 1.5)
    set_replication_lag(metrics, "journal", 1, 3, 0.25)
    set_replication_lag(metrics, "journal", 0, 5, 0.5)
    lag = "kafka_journal_replication_lag_records"
    assert metrics.value(lag, topic="journal", partition="0") == 5
    assert metrics.value(lag, topic="journal", partition="1") == 3
    seconds = "kafka_journal_replication_lag_seconds"
    assert metrics.value(seconds, topic="journal", partition="0") == 0.5
    assert metrics.value(seconds, topic="journal", partition="1") == 0.25


@pytest.mark.integration
async def test_the_writer_times_acknowledged_writes_per_action(stack: Stack) -> None:
    topic = unique("journal_metrics")
    await ensure_topic(KafkaAccess(stack.kafka_bootstrap), TopicSpec(topic, 1))
    producer = JournalProducer(KafkaAccess(stack.kafka_bootstrap))
    await producer.start()
    metrics = Metrics()
    try:
        writer = JournalWriter(producer, 1, metrics=metrics)
        key = JournalKey(topic, "j")
        await writer.append(key, Events((Event(1, payload=JsonPayload.of(1)),)))
        await writer.delete(key, 1)
    finally:
        await producer.stop()
    written = "kafka_journal_write_duration_seconds_count"
    assert metrics.value(written, action="append") == 1
    assert metrics.value(written, action="delete") == 1
    assert metrics.value(written, action="purge") == 0
