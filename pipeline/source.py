"""The action topic as a Spark DataFrame, and its rows back as the core's `RawRecord`s.

Contract: `read_actions` gives one row per Kafka record of the given offset ranges with the
columns of `COLUMNS` (timestamps as epoch milliseconds, exactly what Kafka holds, so the store
gets the same `timestamp` cells as from the agents). `in_offset_order` puts each Kafka
partition's rows into one Spark partition, in offset order: the order replication needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from journal.codec import RawRecord
from kjconfig.access import KafkaAccess
from pipeline.offsets import OffsetRange, spark_kafka_options

COLUMNS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")


def read_actions(
    spark: SparkSession, kafka: KafkaAccess, topic: str, ranges: Sequence[OffsetRange]
) -> DataFrame:
    """The records of `ranges` of `topic` (a batch read of Spark's Kafka source)."""
    reader = spark.read.format("kafka").option("includeHeaders", "true")
    for name, value in (kafka.spark_options() | spark_kafka_options(topic, ranges)).items():
        reader = reader.option(name, value)
    return reader.load().select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "key",
        "value",
        "headers",
    )


def in_offset_order(records: DataFrame, partitions: int) -> DataFrame:
    """Each Kafka partition whole in one of `partitions` Spark partitions, in offset order."""
    return records.repartition(max(1, partitions), "partition").sortWithinPartitions(
        "partition", "offset"
    )


def raw_record_of(row: Any) -> RawRecord:
    """The RawRecord of a row of `read_actions` (a pyspark Row, or a tuple in COLUMNS order)."""
    topic, partition, offset, timestamp_ms, key, value, headers = row
    return RawRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp_ms=timestamp_ms,
        key=None if key is None else bytes(key),
        value=None if value is None else bytes(value),
        headers=[(name, b"" if data is None else bytes(data)) for name, data in headers or ()],
    )
