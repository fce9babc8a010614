"""Invariants 5 and 9 at the size a test affords: with Cassandra down and other journals'
records piled into the partitions, reads on a worker and on the direct client stay exact,
and new journals are read through the index (their own records), never by a scan. Then
Cassandra comes back, replication catches up, and every read is still the same.

How the read's cost stays flat as the pile grows is measured in `kafka-journal bench`
("Reads with Cassandra down", 20,000 against 1,000,000 records); here: exactness and path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer

from journal.client.journals import Journals
from journal.codec import encode_events
from journal.codec.actions import record_headers
from journal.core.index import Indexed
from journal.core.model import AppendHeader, Event, Events, SeqRange
from journal.kafka import end_offsets
from journal.metrics import METRICS
from stack import Stack
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import Harness
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import WorkerProcess, running_workers, wait_replicated

pytestmark = pytest.mark.integration

PILE = 20_000
OTHERS = 1_000


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_workers(connected.settings, tmp_path_factory, 1) as [process]:
        yield process


async def pile(bootstrap: str, topic: str, count: int) -> None:
    """`count` one-event Appends of `OTHERS` other journals, each continuing its journal."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sends = []
        for n in range(count):
            value, headers = append_record(n // OTHERS + 1)
            key = f"other-{n % OTHERS}".encode()
            sends.append(await producer.send(topic, value, key=key, headers=headers))
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def append_record(seq_nr: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The value and headers the writer produces for an Append of one event."""
    payload_type, value = encode_events(Events((Event(seq_nr),)))
    header = AppendHeader(SeqRange(seq_nr, seq_nr), payload_type)
    return value, record_headers(header, {})


async def metric(worker: WorkerProcess, session: aiohttp.ClientSession, name: str) -> float:
    async with session.get(f"{worker.url}/metrics") as answer:
        text = await answer.text()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


async def agent_offsets(worker: WorkerProcess, session: aiohttp.ClientSession) -> dict[int, int]:
    """The offset the worker's agent handled, by partition (its /metrics)."""
    async with session.get(f"{worker.url}/metrics") as answer:
        text = await answer.text()
    prefix = 'kafka_journal_agent_offset{partition="'
    return {
        int(line[len(prefix) :].partition('"')[0]): int(float(line.split()[-1]))
        for line in text.splitlines()
        if line.startswith(prefix)
    }


async def test_reads_stay_exact_and_indexed_with_cassandra_down_under_a_pile(
    connected: Harness, worker: WorkerProcess, stack: Stack
) -> None:
    settings, direct = connected.settings, connected.journals
    await worker.wait_ready()
    async with client_session(settings) as session:
        http = HttpJournals(session, [worker.url], connected.settle)
        await http.append("old", events(1, 5))
        await wait_replicated(settings, direct.store)
        stack.cassandra.stop()
        try:
            await pile(settings.kafka_bootstrap, settings.topic, PILE)
            await http.append("new-http", events(1, 10))
            await direct.journal("new-direct").append(events(1, 10))
            await http.append("old", events(6, 8))
            assert await http.delete("old", 3) == 3

            index_path = 'kafka_journal_reads_total{path="kafka_only_index"}'
            # the agent indexes the pile while the store is down (issue 43: it must not wait
            # for the store), to the partitions' ends
            ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)

            async def agent_at_the_ends() -> bool:
                offsets = await agent_offsets(worker, session)
                return all(offsets.get(p, -1) >= end - 1 for p, end in ends.items() if end)

            await eventually(agent_at_the_ends, "the agent indexed the pile, Cassandra down")
            before = await metric(worker, session, index_path)
            assert await http.read("old") == events(4, 8)  # replicated history, by its runs
            assert await metric(worker, session, index_path) == before + 1
            before += 1

            async def worker_read_through_its_tables() -> bool:
                assert await http.read("new-http") == events(1, 10)  # exact on every path
                return await metric(worker, session, index_path) > before

            # its tables reach new-http once the agent has handled the pile
            await eventually(worker_read_through_its_tables, "the worker read new-http indexed")
            assert await http.read("new-direct") == events(1, 10)
            assert await http.read("old") == events(4, 8)  # replicated history: Kafka from 0

            # the direct client's tail follows the pile on its own: the read below asserts
            # its path, so wait until the index holds new-http whole (it never pruned it)
            await eventually(lambda: indexed_whole(direct, "new-http"), "direct index caught up")
            direct_before = METRICS.value("kafka_journal_reads_total", path="kafka_only_index")
            assert [r.event async for r in direct.journal("new-http").read()] == events(1, 10)
            assert [r.event async for r in direct.journal("old").read()] == events(4, 8)
            assert (
                METRICS.value("kafka_journal_reads_total", path="kafka_only_index") > direct_before
            )
        finally:
            stack.cassandra.start()
        await wait_replicated(settings, direct.store, timeout_s=240)
        for api_read in (http.read, _direct_reader(connected)):
            assert await api_read("new-http") == events(1, 10)
            assert await api_read("new-direct") == events(1, 10)
            assert await api_read("old") == events(4, 8)


async def indexed_whole(journals: Journals, journal_id: str) -> bool:
    """Whether the client's index holds all of the journal up to its partition's end."""
    key = journals.journal(journal_id).key
    partition = journals.writer.partition_of(key)
    found = await journals.index.lookup(key, partition, await journals.fence.fence(key, partition))
    return isinstance(found, Indexed) and found.complete


def _direct_reader(connected: Harness) -> Callable[[str], Awaitable[list[Event]]]:
    async def read(journal_id: str) -> list[Event]:
        return [r.event async for r in connected.journals.journal(journal_id).read()]

    return read
