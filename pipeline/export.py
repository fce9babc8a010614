"""Export: the journals of the eventual store to Parquet, for analytics.

Contract: `export` scans the `journals` table in token ranges (`pipeline.scan`), one Spark
task per range, and reads each journal's events through the store's `read`, the path a journal
read takes (above deleteTo, up to the last seqNr), so the files hold exactly the events the
journal API returns once replication has caught up. One row per event, columns as `SCHEMA`,
written under `out` partitioned by `topic` and `date` (the event's UTC day, `YYYY-MM-DD`).
`event_record_of` turns a row back into the `EventRecord` a read returns. An existing `out`
is refused unless `overwrite`.

Encrypted journals (docs/erasure.md) are exported as the store holds them: their payloads are
envelopes (binary, ciphertext), which no one opens once the journal is erased. `plaintext`
opens them with the deployment's key-encryption key (each task reads the journals' data keys)
and warns that the files then hold personal data in clear; an erased (or erasing) journal's
events are left out and the journals counted (`ExportResult.erased`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
from msgspec.structs import replace
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from journal import (
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    PayloadMetadata,
    TextPayload,
)
from journal.client import data_keys_of
from journal.codec import APPEND_REF, is_append_envelope
from journal.errors import JournalErased
from journal.settings import Settings
from journal.store import CassandraConfig, CassandraStore
from pipeline.report import Progress, per_second, print_progress, spark_job
from pipeline.scan import journal_metas, token_ranges
from pipeline.tasks import stream_with_store

SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("id", StringType(), False),
        StructField("seq_nr", LongType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("payload_type", StringType(), True),  # json | text | binary | null
        StructField("payload_json", StringType(), True),  # the JSON payload as JSON text
        StructField("payload_text", StringType(), True),
        StructField("payload_binary", BinaryType(), True),
        StructField("expire_after", StringType(), True),
        StructField("metadata", StringType(), True),  # the Append's metadata as JSON text
        StructField("headers", MapType(StringType(), StringType(), False), False),
        StructField("date", StringType(), False),
    ]
)
PARTITION_COLUMNS = ("topic", "date")


@dataclass(frozen=True, slots=True)
class ExportResult:
    rows: int
    files: int
    seconds: float
    erased: int = 0  # a plaintext export's journals left out as erased


class PlaintextRefused(ValueError):
    """A plaintext export asked of a process without the key-encryption key."""


PLAINTEXT_WARNING = (
    "WARNING: a plaintext export holds the journals' payloads, personal data, in clear: an "
    "erasure cannot reach it; keep it as the data itself and delete it when done"
)


_REF = BinaryPayload(APPEND_REF)


def export_row(key: JournalKey, record: EventRecord) -> tuple[Any, ...]:
    """One Parquet row (in `SCHEMA` order) of an event as a read returns it."""
    payload = record.event.payload
    kind = json = text = data = None
    match payload:
        case JsonPayload(raw):
            kind, json = "json", raw.decode()
        case TextPayload(value):
            kind, text = "text", value
        case BinaryPayload(value):
            kind, data = "binary", value
    metadata = record.metadata
    timestamp = record.timestamp.astimezone(UTC)
    return (
        key.topic,
        key.id,
        record.seq_nr,
        record.partition,
        record.offset,
        timestamp,
        sorted(record.event.tags),
        kind,
        json,
        text,
        data,
        metadata.expire_after,
        None if metadata.data is None else orjson.dumps(metadata.data).decode(),
        dict(record.headers),
        timestamp.date().isoformat(),
    )


def event_record_of(row: Any) -> EventRecord:
    """The EventRecord of an exported row (a Row read back by Spark, or a `SCHEMA` tuple)."""
    match row["payload_type"]:
        case "json":
            payload: JsonPayload | TextPayload | BinaryPayload | None = JsonPayload.of(
                orjson.loads(row["payload_json"])
            )
        case "text":
            payload = TextPayload(row["payload_text"])
        case "binary":
            payload = BinaryPayload(bytes(row["payload_binary"]))
        case _:
            payload = None
    timestamp: datetime = row["timestamp"]
    metadata = row["metadata"]
    return EventRecord(
        event=Event(row["seq_nr"], frozenset(row["tags"]), payload),
        # Spark hands back naive datetimes in the local time zone
        timestamp=timestamp.astimezone(UTC),
        partition=row["partition"],
        offset=row["offset"],
        metadata=PayloadMetadata(
            row["expire_after"], None if metadata is None else orjson.loads(metadata)
        ),
        headers=dict(row["headers"] or {}),
    )


async def export_rows(
    store: CassandraStore,
    low: int,
    high: int,
    topic: str | None,
    keys: Any = None,  # journal.store.keys.DataKeys
    erased: Callable[[JournalKey], None] = lambda key: None,
) -> AsyncGenerator[tuple[Any, ...], None]:
    """The rows of every event of the journals in token range `(low, high]`; with `keys`,
    their payloads opened, and an erased journal's left out (`erased` is told). A grown
    topic's journals open with their chain's first topic's keys (`key_identity`): the keys
    learn the chains from the registry first."""
    if keys is not None:
        for new_topic, old_topic in (await store.predecessors()).items():
            keys.follow(old_topic, new_topic)
    async for key, meta in journal_metas(store, low, high, topic):
        data_key = None
        if keys is not None:
            try:
                data_key = await keys.for_read(key)
            except JournalErased:
                erased(key)
                continue
        if data_key is None:
            async for record in _referenced(store.read(key, meta)):
                yield export_row(key, record)
            continue
        # opened as the store decodes its rows, as a read is (each event built once)
        async for page in store.read_pages(key, meta, opener=data_key.opener):
            for record in page:
                yield export_row(key, record)


async def _referenced(records: AsyncIterator[EventRecord]) -> AsyncIterator[EventRecord]:
    """A journal's records as an export writes them: an Append's envelope (docs/erasure.md)
    on its first exported event, the 4-byte reference on the others (decoding gave them all
    the envelope), so an Append's ciphertext is written once; an import regroups them by
    Append (`pipeline.restore`), and decoding its value gives them the envelope again."""
    envelope: bytes | None = None
    async for record in records:
        payload = record.event.payload
        if type(payload) is BinaryPayload and is_append_envelope(payload.value):
            if payload.value is envelope:
                record = replace(record, event=replace(record.event, payload=_REF))
            else:
                envelope = payload.value
        yield record


def _export_task(
    config: CassandraConfig,
    topic: str | None,
    plaintext: Settings | None,
    erased: Any,  # a Spark accumulator
    ranges: Iterator[tuple[int, int]],
) -> Iterator[tuple[Any, ...]]:
    """The rows of one Spark partition's token ranges (runs in an executor)."""
    for low, high in ranges:
        rows = partial(
            _rows_of, low=low, high=high, topic=topic, plaintext=plaintext, erased=erased
        )
        yield from stream_with_store(config, rows)


def _rows_of(
    store: CassandraStore,
    *,
    low: int,
    high: int,
    topic: str | None,
    plaintext: Settings | None,
    erased: Any,
) -> AsyncGenerator[tuple[Any, ...], None]:
    keys = None if plaintext is None else data_keys_of(plaintext, store)
    return export_rows(store, low, high, topic, keys, lambda key: erased.add(1))


async def export(
    spark: SparkSession,
    settings: Settings,
    out: str,
    *,
    all_topics: bool = False,
    overwrite: bool = False,
    tasks: int = 8,
    plaintext: bool = False,
    progress: Progress = print_progress,
) -> ExportResult:
    """Export the journals of `settings.topic` (or all) in `settings.keyspace` to `out`;
    `plaintext`: with their payloads opened (module docstring; PlaintextRefused without a KEK)."""
    if plaintext:
        if settings.keks() is None:
            raise PlaintextRefused(
                "a plaintext export opens payloads with the key-encryption key: set KJ_KEK_FILE "
                "or KJ_KEK (docs/erasure.md)"
            )
        progress(PLAINTEXT_WARNING)
    started = time.monotonic()
    config = settings.cassandra_config()
    store = await CassandraStore.connect(config)  # checks the keyspace and its schema version
    await store.close()
    topic = None if all_topics else settings.topic
    progress(
        f"export {'all topics' if topic is None else topic} of keyspace {settings.keyspace} "
        f"to {out}: {tasks} token ranges"
    )
    ranges = token_ranges(tasks)
    erased = spark.sparkContext.accumulator(0)
    rows = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(
        partial(_export_task, config, topic, settings if plaintext else None, erased)
    )
    frame = spark.createDataFrame(rows, SCHEMA)
    writer = frame.write.mode("overwrite" if overwrite else "errorifexists")
    await spark_job(spark, "export", partial(writer.partitionBy(*PARTITION_COLUMNS).parquet, out))
    written = spark.read.schema(SCHEMA).parquet(out)
    count = await asyncio.to_thread(written.count)
    files = len(await asyncio.to_thread(written.inputFiles))
    seconds = time.monotonic() - started
    left_out = f", {erased.value} erased journals left out" if plaintext else ""
    progress(
        f"exported {count} events in {files} files in {seconds:.1f} s "
        f"({per_second(count, seconds)}){left_out}"
    )
    return ExportResult(count, files, seconds, erased.value)
