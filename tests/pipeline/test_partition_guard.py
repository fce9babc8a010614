"""The pipeline and a topic whose partition count changed behind the project's back (real
servers, Spark): the audit reports a journal found on two partitions, and a rebuild refuses."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from journal.client.journals import Journals
from journal.core.model import Ack, Event, TextPayload
from journal.errors import PartitionCountChanged
from journal.kafka.producer import JournalProducer
from journal.kafka.writer import partition_of
from pipeline.audit import audit
from pipeline.rebuild import rebuild
from stack import Stack
from tests.support.partitions import (
    ALTERED,
    RECORDED,
    alter_behind_the_back,
    guarded_settings,
)

pytestmark = pytest.mark.integration


async def test_the_audit_finds_a_journal_on_two_partitions_and_a_rebuild_refuses(
    stack: Stack, keyspace: str, spark: SparkSession
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:  # creates and records the topic
        for journal_id in ("whole", "split"):
            event = Event(1, payload=TextPayload("x"))
            await journals.journal(journal_id).append([event], ack=Ack.KAFKA)
    await alter_behind_the_back(settings, ALTERED)
    # what an unguarded process mapping with the new count would write: "split" elsewhere
    elsewhere = next(p for p in range(ALTERED) if p != partition_of("split", RECORDED))
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic, b"", key=b"split", partition=elsewhere)
    finally:
        await producer.stop()

    result = await audit(spark, settings, progress=lambda line: None)
    found = {(d.journal, d.kind) for d in result.differences}
    assert (f"{settings.topic}:split", "two_partitions") in found
    assert not any(journal.endswith(":whole") for journal, _ in found)
    assert not result.ok
    with pytest.raises(PartitionCountChanged):
        await rebuild(spark, settings, progress=lambda line: None)
