"""Invariants 5 and 9 for journals with replicated history: with the store out of reach and
other journals' records piled into the partition, a worker and the direct client read such a
journal by fetching its own records (their indexes keep the runs replication covered), never
by a scan of the pile; a direct client whose index never held them answers StoreUnavailable
at once, saying why.

The store is cut off from the reader alone, by a TCP forwarder the reader reaches Cassandra
through (tests/support/forwarder.py), after replication put the history into Cassandra: the
shared stack's Cassandra stays up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer

from journal.client.journals import Journals
from journal.codec import encode_events
from journal.codec.actions import record_headers
from journal.core.model import AppendHeader, Event, Events, JournalKey, SeqRange
from journal.errors import StoreUnavailable
from journal.kafka.topic import end_offsets
from journal.metrics import METRICS
from journal.settings import Settings
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.forwarder import Forwarder
from tests.support.harness import Harness, replicate_now, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import metric, running_workers, wait_replicated

pytestmark = pytest.mark.integration

PILE = 5_000  # other journals' records after the history: a scan would take them all
RECORDS = "kafka_journal_read_records_total"
INDEXED = 'kafka_journal_reads_total{path="kafka_only_index"}'


@pytest.fixture
def forwarder(connected: Harness) -> Iterator[Forwarder]:
    settings = connected.settings
    with Forwarder(settings.cassandra_host_list[0], settings.cassandra_port) as one:
        yield one


def through(settings: Settings, forwarder: Forwarder, **changes: object) -> Settings:
    return settings.model_copy(update={"cassandra_port": forwarder.port, **changes})


async def pile(settings: Settings, partition: int, count: int) -> None:
    """`count` one-event Appends of 100 other journals into `partition`, each continuing its
    journal, as the writer produces them."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        sends = []
        for n in range(count):
            seq_nr = n // 100 + 1
            payload_type, value = encode_events(Events((Event(seq_nr),)))
            headers = record_headers(AppendHeader(SeqRange(seq_nr, seq_nr), payload_type), {})
            key = f"other-{n % 100}".encode()
            sends.append(
                await producer.send(
                    settings.topic, value, key=key, partition=partition, headers=headers
                )
            )
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def partition_of(journals: Journals, journal_id: str) -> int:
    return journals.writer.partition_of(JournalKey(journals.topic, journal_id))


async def test_a_worker_reads_a_replicated_journal_by_its_own_records_without_its_store(
    connected: Harness, forwarder: Forwarder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = through(connected.settings, forwarder)
    with running_workers(settings, tmp_path_factory, 1) as [worker]:
        await worker.wait_ready()
        async with client_session(settings) as session:
            http = HttpJournals(session, [worker.url])
            await http.append("history", events(1, 3))
            await wait_replicated(connected.settings, connected.store)  # in Cassandra
            # the journal's value is written again once the pointer passed its first record
            await http.append("history", events(4, 5))
            await wait_replicated(connected.settings, connected.store)
            forwarder.cut()
            partition = partition_of(connected.journals, "history")
            await pile(settings, partition, PILE)
            end = (await end_offsets(settings.kafka_access(), settings.topic, 3))[partition]
            offset = f'kafka_journal_agent_offset{{partition="{partition}"}}'

            async def handled() -> bool:  # else the read would wait for the agent, or scan
                return await metric(worker, offset) >= end - 1

            await eventually(handled, "the worker's agent handled the pile")
            records, indexed = await metric(worker, RECORDS), await metric(worker, INDEXED)
            assert await http.read("history") == events(1, 5)
            assert await metric(worker, INDEXED) == indexed + 1
            assert await metric(worker, RECORDS) == records + 2  # its two Appends, nothing else


async def test_the_direct_client_reads_a_replicated_journal_by_its_own_records_or_refuses(
    connected: Harness, forwarder: Forwarder
) -> None:
    """A client whose tail index followed the partition from offset 0 kept the history's runs
    after replication covered them; one that started at the store's pointer never held them:
    it refuses at once, reading nothing."""
    topic = unique("cut")  # a fresh topic: the first client's tail index starts at offset 0
    real = connected.settings.model_copy(update={"topic": topic})
    followed = await Journals.connect(through(real, forwarder))
    try:
        journal = followed.journal("history")
        await journal.append(events(1, 3))
        await journal.append(events(4, 5))
        pointers = await replicate_now(real, connected.store)  # in Cassandra
        partition = partition_of(followed, "history")

        async def pruned() -> bool:  # the tail index reads the pointers every second
            return followed.index.covered(partition) >= pointers[partition]

        await eventually(pruned, "the tail index learnt the store's pointer")
        late = await Journals.connect(through(real, forwarder))
        try:
            # its tail index follows the partition from this first look on, at the pointer
            assert (await late.journal("history").info()).seq_nr == 5
            forwarder.cut()
            await pile(real, partition, PILE)
            records = METRICS.value(RECORDS)
            indexed = METRICS.value("kafka_journal_reads_total", path="kafka_only_index")
            assert [r.event async for r in journal.read()] == events(1, 5)
            assert METRICS.value("kafka_journal_reads_total", path="kafka_only_index") == (
                indexed + 1
            )
            assert METRICS.value(RECORDS) == records + 2  # its two Appends, nothing else

            with pytest.raises(StoreUnavailable, match="does not scan partition"):
                [r async for r in late.journal("history").read()]
            assert METRICS.value(RECORDS) == records + 2
        finally:
            await late.close()
    finally:
        await followed.close()
