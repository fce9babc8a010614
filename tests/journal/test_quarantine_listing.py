"""`GET /quarantine`'s reading of the quarantine against the real servers: bounded to the
newest `limit` records, without their values (issue 38)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

import journal.replication.quarantine as quarantine
from journal.codec.actions import RawRecord
from journal.kafka.consumers import raw_record
from journal.kafka.topic import quarantine_topic
from journal.replication.quarantine import QUARANTINE_REPLAYED_HEADER
from journal.replication.replicate import QUARANTINE_ORIGIN_HEADER, QUARANTINE_REASON_HEADER
from stack import Stack
from tests.support.harness import Harness, harness, unique
from web.backend import newest_quarantined

pytestmark = pytest.mark.integration

RECORDS = 20


@pytest.fixture
async def h(stack: Stack) -> AsyncIterator[Harness]:
    async with harness(stack, unique("kj_quarantine_listing"), "quarantine_listing", 1) as one:
        yield one


async def test_the_listing_reads_only_the_newest_records_and_no_values(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = h.settings.kafka_access()
    producer = AIOKafkaProducer(**kafka.client_options())
    await producer.start()
    try:
        for n in range(RECORDS):  # quarantine offsets 0..19, then a marker of 18 at 20
            await producer.send_and_wait(
                quarantine_topic(h.settings.topic),
                b"x" * 1000,
                key=f"j-{n}".encode(),
                headers=[
                    (QUARANTINE_REASON_HEADER, f"reason {n}".encode()),
                    (QUARANTINE_ORIGIN_HEADER, f"0:{n}".encode()),
                ],
            )
        await producer.send_and_wait(
            quarantine_topic(h.settings.topic),
            b"",
            headers=[(QUARANTINE_REPLAYED_HEADER, b"0:18")],
        )
    finally:
        await producer.stop()
    read = 0

    def counted(message: ConsumerRecord[bytes, bytes]) -> RawRecord:
        nonlocal read
        read += 1
        return raw_record(message)

    monkeypatch.setattr(quarantine, "raw_record", counted)  # counted, the real read still runs
    page = await newest_quarantined(h.journals, 3)
    assert read == 3, "the listing read more of the quarantine than its limit"
    assert page.total == RECORDS + 1  # the marker included
    assert [(one.offset, one.replayed) for one in page.records] == [(19, False), (18, True)]
    assert all(one.value is None for one in page.records), "values read for the listing"
    # the command line's listing still reads everything, values included
    everything = await quarantine.list_quarantine(kafka, h.settings.topic)
    assert len(everything) == RECORDS and everything[0].value == b"x" * 1000
