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
import pytest

from journal.codec import ACTION_HEADER, decode_action_header
from journal.core.model import AppendHeader, Event, Events, JsonPayload, TextPayload
from journal.errors import UndecodableBatch
from journal.kafka.poison import QUARANTINE_SKIPPED_HEADER
from journal.kafka.producer import JournalProducer
from journal.kafka.writer import JournalWriter, partition_of
from journal.metrics import METRICS
from journal.version import VERSION
from stack import Stack
from tests.support.compressed import (
    CODECS,
    ids_in_one_partition,
    produce_reference,
    produce_zstd_batch,
    quarantined_headers,
    read_partition,
)
from tests.support.eventually import WITHIN_S, answered
from tests.support.harness import Harness, harness

pytestmark = pytest.mark.integration


@pytest.fixture
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "compressed") as connected:
        yield connected


@pytest.mark.parametrize("codec", CODECS)
async def test_compressed_batches_read_back_before_and_after_replication(
    connected: Harness, vectors: Path, codec: str
) -> None:
    settings = connected.settings
    expected = await produce_reference(settings, vectors, codec)
    own = [Event(1, payload=JsonPayload.of({"codec": codec})), Event(2, payload=TextPayload("t"))]
    producer = JournalProducer(settings.kafka_access(), compression_type=codec)
    await producer.start()
    try:  # this journal's own writer, compressing
        writer = JournalWriter(producer, settings.partitions)
        await writer.append(connected.journals.journal("own").key, Events(tuple(own)))
    finally:
        await producer.stop()
    expected["own"] = own

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


async def test_a_batch_that_cannot_be_decoded_is_skipped_not_a_stall(
    connected: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = connected.settings
    (victim, bystander), other = ids_in_one_partition(settings.partitions, 2)
    partition = partition_of(victim, settings.partitions)
    journals = connected.journals
    await journals.journal(victim).append([Event(1)])
    await journals.journal(bystander).append([Event(1)])
    await journals.journal(other).append([Event(1)])
    # the victim's seqNrs 2..4 in one zstd batch (this journal's own batches are lz4)
    poisoned = await produce_zstd_batch(settings, victim, range(2, 5))
    await journals.journal(bystander).append([Event(2)])
    # read once while the codec is there: the tail index has the partition past the batch
    assert [r.seq_nr async for r in journals.journal(bystander).read()] == [1, 2]
    # From here this process cannot decode zstd batches, as before the codecs were a dependency.
    monkeypatch.setattr(aiokafka.codec, "has_zstd", lambda: False)
    counted = METRICS.value("kafka_journal_poison_batches_total", topic=settings.topic)

    assert [r.seq_nr async for r in journals.journal(other).read()] == [1]
    with pytest.raises(UndecodableBatch, match=f"offset {poisoned[0]}"):
        [r async for r in journals.journal(victim).read()]
    with pytest.raises(UndecodableBatch):  # the same batch: counted once
        await journals.journal(victim).info()
    # a journal of the same partition is read from its own records: the batch is not touched
    assert [r.seq_nr async for r in journals.journal(bystander).read()] == [1, 2]
    assert METRICS.value("kafka_journal_poison_batches_total", topic=settings.topic) == counted + 1

    pointers = await asyncio.wait_for(connected.replicate(), WITHIN_S)
    assert pointers[partition] > poisoned[-1]  # replication went past the batch
    assert (await connected.stored(bystander))[1] == [1, 2]
    assert [r.seq_nr async for r in journals.journal(bystander).read()] == [1, 2]
    assert await _victim_once_the_index_is_past_the_batch(connected, victim) == [1]  # 2..4 lost
    skipped = (await _quarantined(connected))[QUARANTINE_SKIPPED_HEADER].decode()
    assert skipped == f"{partition}:{poisoned[0]}-{poisoned[-1]}"


async def _victim_once_the_index_is_past_the_batch(connected: Harness, victim: str) -> list[int]:
    """The victim's read, once the tail index has pruned what replication went past (it does
    so every second); until then the read still meets the batch and says so."""

    async def read() -> list[int]:
        return [r.seq_nr async for r in connected.journals.journal(victim).read()]

    return await answered(read, "the victim's read past the skipped batch", (UndecodableBatch,))


async def _record_headers(connected: Harness, partition: int, offset: int) -> dict[str, bytes]:
    settings = connected.settings
    records = await read_partition(settings.kafka_bootstrap, settings.topic, partition)
    return next(dict(r.headers) for r in records if r.offset == offset)


async def _quarantined(connected: Harness) -> dict[str, bytes]:
    (headers,) = await quarantined_headers(connected.settings)
    return headers
