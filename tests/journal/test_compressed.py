"""Compressed batches on the action topic, against the real servers.

kafka-journal's producer compresses (lz4 by default), and so may any client sharing the topic:
kafka-journal's reference records and this journal's own, in batches of each codec, read back
through the direct client before and after replication. And a batch this process cannot decode
(its codec made unavailable here, against the real broker): other journals stay readable, the
affected journal's read fails clearly, replication skips it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiokafka.codec
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.actions import record_headers
from journal.codec import ACTION_HEADER, decode_action_header, decode_events, encode_events
from journal.metrics import METRICS
from journal.model import (
    AppendHeader,
    Event,
    Events,
    JsonPayload,
    PayloadType,
    SeqRange,
    TextPayload,
)
from journal.poison import UndecodableBatch
from journal.producer import JournalProducer
from journal.replicate import QUARANTINE_SKIPPED_HEADER
from journal.topic import quarantine_topic
from journal.version import VERSION
from journal.writer import JournalWriter, partition_of
from stack import Stack
from tests.support.harness import Harness, harness, unique

pytestmark = pytest.mark.integration

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


@pytest.fixture(scope="module")
def keyspace() -> str:
    return unique("kj_compressed")


@pytest.fixture
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "compressed") as connected:
        yield connected


def reference_record(vectors: Path, journal_id: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    header_file, value_file, payload_type = REFERENCE[journal_id]
    value = (vectors / value_file).read_bytes()
    header = orjson.loads((vectors / header_file).read_bytes())
    events = decode_events(payload_type, value).events
    header["append"]["range"] = {"from": events[0].seq_nr, "to": events[-1].seq_nr}
    return value, [(ACTION_HEADER, orjson.dumps(header))]


@pytest.mark.parametrize("codec", CODECS)
async def test_compressed_batches_read_back_before_and_after_replication(
    connected: Harness, vectors: Path, codec: str
) -> None:
    settings = connected.settings
    kafka = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, compression_type=codec, linger_ms=20
    )
    await kafka.start()
    try:  # one batch per partition: the records are sent together
        sent = [
            await kafka.send(
                settings.topic,
                value,
                key=journal_id.encode(),
                partition=partition_of(journal_id, settings.partitions),
                headers=headers,
            )
            for journal_id in REFERENCE
            for value, headers in [reference_record(vectors, journal_id)]
        ]
        await asyncio.gather(*sent)
    finally:
        await kafka.stop()
    own = [Event(1, payload=JsonPayload({"codec": codec})), Event(2, payload=TextPayload("t"))]
    producer = JournalProducer(settings.kafka_bootstrap, compression_type=codec)
    await producer.start()
    try:  # this journal's own writer, compressing
        writer = JournalWriter(producer, settings.partitions)
        await writer.append(connected.journals.journal("own").key, Events(tuple(own)))
    finally:
        await producer.stop()

    expected = {
        journal_id: list(decode_events(payload_type, (vectors / value_file).read_bytes()).events)
        for journal_id, (_, value_file, payload_type) in REFERENCE.items()
    } | {"own": own}

    async def read_all() -> dict[str, list[Event]]:
        return {
            journal_id: [r.event async for r in connected.journals.journal(journal_id).read()]
            for journal_id in expected
        }

    assert await read_all() == expected  # from Kafka
    await connected.replicate()
    for journal_id in expected:
        assert (await connected.stored(journal_id))[1] == [e.seq_nr for e in expected[journal_id]]
    assert await read_all() == expected  # from Cassandra


async def test_the_writer_sets_this_journals_version(connected: Harness) -> None:
    journal = connected.journals.journal("versioned")
    position = await journal.append([Event(1)])
    headers = await _record_headers(connected, position.partition, position.offset)
    header = decode_action_header(headers[ACTION_HEADER])
    assert isinstance(header, AppendHeader) and header.version == VERSION != "unknown"


# --- a poison batch ------------------------------------------------------------------------------


def _same_partition(partitions: int, count: int) -> list[str]:
    by_partition: dict[int, list[str]] = {}
    for n in range(1000):
        ids = by_partition.setdefault(partition_of(f"j{n}", partitions), [])
        ids.append(f"j{n}")
        if len(ids) == count:
            return ids
    raise AssertionError("no partition got enough ids")


async def test_a_batch_that_cannot_be_decoded_is_skipped_not_a_stall(
    connected: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = connected.settings
    victim, bystander = _same_partition(settings.partitions, 2)
    partition = partition_of(victim, settings.partitions)
    other = next(
        f"o{n}" for n in range(100) if partition_of(f"o{n}", settings.partitions) != partition
    )
    journals = connected.journals
    await journals.journal(victim).append([Event(1)])
    await journals.journal(bystander).append([Event(1)])
    await journals.journal(other).append([Event(1)])
    # the victim's seqNrs 2..4 in one batch of three records, by a client that compresses
    # with zstd (this journal's own batches are lz4)
    kafka = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, compression_type="zstd", linger_ms=50
    )
    await kafka.start()
    try:
        sent = []
        for seq_nr in (2, 3, 4):
            events = Events((Event(seq_nr),))
            payload_type, value = encode_events(events)
            header = AppendHeader(SeqRange(seq_nr, seq_nr), payload_type)
            sent.append(
                await kafka.send(
                    settings.topic,
                    value,
                    key=victim.encode(),
                    partition=partition,
                    headers=record_headers(header, {}),
                )
            )
        poisoned = [m.offset for m in await asyncio.gather(*sent)]
    finally:
        await kafka.stop()
    await journals.journal(bystander).append([Event(2)])
    # From here this process cannot decode zstd batches, as before the codecs were a dependency.
    monkeypatch.setattr(aiokafka.codec, "has_zstd", lambda: False)
    counted = METRICS.value("journal_poison_batches_total", topic=settings.topic)

    assert [r.seq_nr async for r in journals.journal(other).read()] == [1]
    with pytest.raises(UndecodableBatch, match=f"offset {poisoned[0]}"):
        [r async for r in journals.journal(victim).read()]
    with pytest.raises(UndecodableBatch):  # the same batch: counted once
        await journals.journal(bystander).info()
    assert METRICS.value("journal_poison_batches_total", topic=settings.topic) == counted + 1

    pointers = await asyncio.wait_for(connected.replicate(), 60)
    assert pointers[partition] > poisoned[-1]  # replication went past the batch
    assert (await connected.stored(bystander))[1] == [1, 2]
    assert [r.seq_nr async for r in journals.journal(bystander).read()] == [1, 2]
    assert [r.seq_nr async for r in journals.journal(victim).read()] == [1]  # 2..4 unreadable
    skipped = (await _quarantined(connected))[QUARANTINE_SKIPPED_HEADER].decode()
    assert skipped == f"{partition}:{poisoned[0]}-{poisoned[-1]}"


async def _record_headers(connected: Harness, partition: int, offset: int) -> dict[str, bytes]:
    records = await _read(connected.settings.kafka_bootstrap, connected.settings.topic, partition)
    return next(dict(r.headers) for r in records if r.offset == offset)


async def _quarantined(connected: Harness) -> dict[str, bytes]:
    topic = quarantine_topic(connected.settings.topic)
    records = await _read(connected.settings.kafka_bootstrap, topic, 0)
    assert len(records) == 1, records
    return dict(records[0].headers)


async def _read(bootstrap: str, topic: str, partition: int) -> list[ConsumerRecord[bytes, bytes]]:
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
