"""Compressed batches for tests: kafka-journal's reference records, and undecodable batches."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.codec import ACTION_HEADER, decode_events, encode_events
from journal.codec.actions import record_headers
from journal.core.model import AppendHeader, Event, Events, PayloadType, SeqRange
from journal.kafka.topic import quarantine_topic
from journal.kafka.writer import partition_of
from journal.settings import Settings

CODECS = ["gzip", "snappy", "lz4", "zstd"]

# kafka-journal's records: an Append header vector with the range of a record-value vector.
REFERENCE = {
    "kj-json": ("Append-origin-Json-metadata.json", "Payload-json-many.json", PayloadType.JSON),
    "kj-binary": ("Append-None-Binary-none.json", "Payload-binary-many.bin", PayloadType.BINARY),
    "kj-mixed": (
        "Append-origin-Binary-metadata.json",
        "Payload-empty-binary-text-json.bin",
        PayloadType.BINARY,
    ),
}

# Put on a worker's PYTHONPATH: zstd batches are undecodable in that process (its docstring).
ZSTD_UNAVAILABLE = Path(__file__).with_name("zstd_unavailable")


Record = tuple[str, bytes, list[tuple[str, bytes]]]  # journal id, value, headers


async def _produce_together(
    settings: Settings, codec: str, linger_ms: int, records: list[Record]
) -> list[int]:
    """`records` sent to their journals' partitions at once (so batched), compressed with
    `codec`; their offsets."""
    kafka = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, compression_type=codec, linger_ms=linger_ms
    )
    await kafka.start()
    try:
        sent = [
            await kafka.send(
                settings.topic,
                value,
                key=journal_id.encode(),
                partition=partition_of(journal_id, settings.partitions),
                headers=headers,
            )
            for journal_id, value, headers in records
        ]
        return [metadata.offset for metadata in await asyncio.gather(*sent)]
    finally:
        await kafka.stop()


async def produce_reference(
    settings: Settings, vectors: Path, codec: str, suffix: str = ""
) -> dict[str, list[Event]]:
    """kafka-journal's records, one per journal `<name><suffix>`, sent together (so one
    batch per partition) compressed with `codec`; the events each journal then holds."""
    expected: dict[str, list[Event]] = {}
    records: list[Record] = []
    for name, (header_file, value_file, payload_type) in REFERENCE.items():
        value = (vectors / value_file).read_bytes()
        events = list(decode_events(payload_type, value).events)
        header = orjson.loads((vectors / header_file).read_bytes())
        header["append"]["range"] = {"from": events[0].seq_nr, "to": events[-1].seq_nr}
        journal_id = f"{name}{suffix}"
        expected[journal_id] = events
        records.append((journal_id, value, [(ACTION_HEADER, orjson.dumps(header))]))
    await _produce_together(settings, codec, 20, records)
    return expected


async def produce_zstd_batch(settings: Settings, journal_id: str, seq_nrs: range) -> list[int]:
    """Appends of `seq_nrs` (one record each) to `journal_id` in one zstd batch; offsets."""
    records: list[Record] = []
    for seq_nr in seq_nrs:
        payload_type, value = encode_events(Events((Event(seq_nr),)))
        header = AppendHeader(SeqRange(seq_nr, seq_nr), payload_type)
        records.append((journal_id, value, record_headers(header, {})))
    return await _produce_together(settings, "zstd", 50, records)


def ids_in_one_partition(partitions: int, count: int) -> tuple[list[str], str]:
    """`count` journal ids of one partition, and one id of another partition."""
    by_partition: dict[int, list[str]] = {}
    for n in range(1000):
        ids = by_partition.setdefault(partition_of(f"j{n}", partitions), [])
        ids.append(f"j{n}")
        if len(ids) == count:
            partition = partition_of(ids[0], partitions)
            other = next(
                f"o{m}" for m in range(1000) if partition_of(f"o{m}", partitions) != partition
            )
            return ids, other
    raise AssertionError("no partition got enough ids")


async def read_partition(
    bootstrap: str, topic: str, partition: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of a topic's partition, up to its end as of the call."""
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        records: list[ConsumerRecord[bytes, bytes]] = []
        while await consumer.position(tp) < end:
            records += (await consumer.getmany(tp, timeout_ms=1000)).get(tp, [])
        return records
    finally:
        await consumer.stop()


async def quarantined_headers(settings: Settings) -> list[dict[str, bytes]]:
    """The headers of every record set aside from `settings.topic` so far."""
    records = await read_partition(settings.kafka_bootstrap, quarantine_topic(settings.topic), 0)
    return [dict(record.headers) for record in records]
