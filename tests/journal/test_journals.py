"""The direct client against the real servers: the semantic suite and the reading flow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from journal.client.journals import Journals
from journal.codec import Opener
from journal.core.fold import JournalState
from journal.core.index import IndexAnswer, Indexed, NotIndexed, OffsetRun
from journal.core.model import SEQ_NR_MAX, Ack, Event, JournalKey, TextPayload
from journal.errors import AppendTooLarge, JournalTruncated, StoreUnavailable
from journal.kafka.records import KafkaReadConfig, KafkaRecords
from journal.kafka.tail import TailConfig, TailIndex
from journal.metrics import METRICS
from journal.store import cql
from journal.store.base import EventualJournal, FirstPage, JournalMeta
from journal.store.cassandra import CassandraStore
from journal.store.schema import SCHEMA_VERSION
from stack import Stack
from tests.journal.journal_contract import JournalContract, events, seq_nrs
from tests.support.eventually import answered, eventually
from tests.support.harness import Harness, harness, unique
from tests.support.raw_store import keyspace_of, session_of
from tests.support.stores import DelegatingJournal

pytestmark = pytest.mark.integration


@dataclass
class Direct:
    """The direct client as a JournalApi; `replicating` says whether settle() replicates."""

    harness: Harness
    replicating: bool

    @property
    def journals(self) -> Journals:
        return self.harness.journals

    async def append(self, journal_id: str, batch: Sequence[Event]) -> None:
        await self.journals.journal(journal_id).append(batch, ack=Ack.KAFKA)

    async def read(
        self, journal_id: str, from_: int = 1, to: int | None = None, limit: int | None = None
    ) -> list[Event]:
        journal = self.journals.journal(journal_id)
        reading = journal.read(from_, to or SEQ_NR_MAX, limit)
        return [r.event async for r in reading]

    async def info(self, journal_id: str) -> tuple[int | None, int | None]:
        info = await self.journals.journal(journal_id).info()
        return info.seq_nr, info.delete_to

    async def delete(self, journal_id: str, to: int) -> int | None:
        return (await self.journals.journal(journal_id).delete(to)).delete_to

    async def purge(self, journal_id: str) -> None:
        await self.journals.journal(journal_id).purge()

    async def settle(self) -> None:
        if self.replicating:
            await self.harness.replicate()


async def direct(stack: Stack, keyspace: str, replicating: bool) -> AsyncIterator[Direct]:
    async with harness(stack, keyspace, "journal") as connected:
        yield Direct(connected, replicating)


class TestDirect(JournalContract):
    @pytest.fixture(scope="class")
    @classmethod
    async def api(cls, stack: Stack, keyspace: str, replicating: bool) -> AsyncIterator[Direct]:
        async for api in direct(stack, keyspace, replicating):
            yield api


@pytest.fixture
async def api(stack: Stack, keyspace: str) -> AsyncIterator[Direct]:
    async for one in direct(stack, keyspace, replicating=True):
        yield one


async def test_a_delete_in_the_unreplicated_head_is_honoured(api: Direct) -> None:
    await api.append("j", events(1, 6))
    await api.harness.replicate()
    assert await api.delete("j", 4) == 4  # in Kafka only
    assert seq_nrs(await api.read("j")) == [5, 6]
    assert await api.info("j") == (6, 4)


async def test_a_delete_answers_what_the_log_made_of_it_however_stale_a_look(
    api: Direct, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: the Delete's effect is the fold's, where it lands, and so is the answer. A
    look at the journal taken before producing (stale here: it misses seqNrs 3..4, as a worker
    that just took the partition over could) decides nothing."""
    await api.append("stale", events(1, 4))
    stale = JournalState(0, 2, 0)

    async def look(key: JournalKey) -> JournalState:
        return stale

    monkeypatch.setattr(api.journals.conditional, "look", look)
    deleted = await api.journals.journal("stale").delete(10)
    assert deleted.delete_to == 4
    assert deleted.position is not None
    assert await api.read("stale") == []
    assert (await api.journals.journal("stale").delete(3)).position is None  # nothing new
    await api.append("stale", events(5, 5))  # after the Delete in the log: not deleted
    assert seq_nrs(await api.read("stale")) == [5]


async def test_a_purge_in_the_unreplicated_head_voids_the_store(api: Direct) -> None:
    await api.append("j", events(1, 6))
    await api.harness.replicate()
    await api.purge("j")
    await api.append("j", events(1, 1))
    assert seq_nrs(await api.read("j")) == [1]
    assert await api.info("j") == (1, None)


def read_paths() -> dict[str, float]:
    return {p: METRICS.value("kafka_journal_reads_total", path=p) for p in ("store", "index")}


async def test_fully_replicated_reads_skip_kafka(api: Direct) -> None:
    await api.append("j", events(1, 3))
    await api.append("other", events(1, 3))  # same partition or not: it changes nothing
    await api.harness.replicate()
    before = read_paths()
    assert seq_nrs(await api.read("j")) == [1, 2, 3]
    assert await api.info("j") == (3, None)
    assert read_paths() == {"store": before["store"] + 2, "index": before["index"]}
    await api.append("j", events(4, 4))  # now Kafka holds one record the store lacks
    assert seq_nrs(await api.read("j")) == [1, 2, 3, 4]
    assert read_paths() == {"store": before["store"] + 2, "index": before["index"] + 1}


async def test_a_read_writes_nothing(api: Direct) -> None:
    """The default fence is the high watermark: reads and infos produce no record."""
    await api.append("j", events(1, 2))
    ends = await end_offsets(api)
    for _ in range(3):
        assert seq_nrs(await api.read("j")) == [1, 2]
        assert await api.info("j") == (2, None)
    assert await end_offsets(api) == ends


async def end_offsets(api: Direct) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=api.harness.settings.kafka_bootstrap)
    await consumer.start()
    try:
        topic = api.harness.settings.topic
        tps = [TopicPartition(topic, p) for p in range(api.journals.writer.partitions)]
        return {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def test_a_malformed_record_is_skipped_by_reads_and_quarantined(api: Direct) -> None:
    await api.append("j", events(1, 2))
    partition = api.journals.writer.partition_of(api.journals.journal("j").key)
    await api.harness.producer.send_and_wait(
        api.harness.settings.topic,
        b"garbage",
        key=b"j",
        partition=partition,
        headers=[("journal.action", b"{not json")],
    )
    await api.append("j", events(3, 3))
    skipped = METRICS.value("kafka_journal_malformed_records_skipped_total")
    assert seq_nrs(await api.read("j")) == [1, 2, 3]
    assert METRICS.value("kafka_journal_malformed_records_skipped_total") == skipped + 1
    quarantined = METRICS.value(
        "kafka_journal_quarantined_records_total", topic=api.harness.settings.topic
    )
    await api.harness.replicate()
    assert (
        METRICS.value("kafka_journal_quarantined_records_total", topic=api.harness.settings.topic)
        == quarantined + 1
    )
    assert seq_nrs(await api.read("j")) == [1, 2, 3]


async def test_records_expired_before_replication_fail_the_read_clearly(api: Direct) -> None:
    await api.append("j", events(1, 2))
    position = await api.journals.journal("j").append(events(3, 3))
    admin = AIOKafkaAdminClient(bootstrap_servers=api.harness.settings.kafka_bootstrap)
    await admin.start()
    try:
        tp = TopicPartition(api.harness.settings.topic, position.partition)
        await admin.delete_records({tp: RecordsToDelete(position.offset + 1)})  # as retention
    finally:
        await admin.close()
    with pytest.raises(JournalTruncated, match="expired before replication"):
        await api.read("j")
    client = api.journals  # the same through the fallback scan, with nothing replicated
    scanning = Journals(
        client.topic, client.writer, client.store, NoIndex(), client.fence, client.kafka
    )
    with pytest.raises(JournalTruncated, match="expired before replication"):
        [r async for r in scanning.journal("j").read()]


async def test_a_client_started_after_records_expired_unreplicated_fails_the_read_clearly(
    api: Direct,
) -> None:
    """The tail index starts at the log start, above the store's pointer: it cannot know
    what it never saw, so it answers NotIndexed and the read says JournalTruncated."""
    position = await api.journals.journal("j").append(events(1, 2))
    topic = api.harness.settings.topic
    neighbour = next(
        f"k{i}"
        for i in range(1000)
        if api.journals.writer.partition_of(JournalKey(topic, f"k{i}")) == position.partition
    )
    await api.journals.journal(neighbour).append(events(1, 1))
    admin = AIOKafkaAdminClient(bootstrap_servers=api.harness.settings.kafka_bootstrap)
    await admin.start()
    try:
        tp = TopicPartition(topic, position.partition)
        await admin.delete_records({tp: RecordsToDelete(position.offset + 1)})
    finally:
        await admin.close()
    fresh = await Journals.connect(api.harness.settings)
    try:
        with pytest.raises(JournalTruncated, match="expired before replication"):
            [r async for r in fresh.journal("j").read()]
        with pytest.raises(JournalTruncated):  # the index cannot tell it had none there
            [r async for r in fresh.journal(neighbour).read()]
        await api.harness.replicate()  # what Kafka still holds: the pointer passes the gap
        assert [r.event.seq_nr async for r in fresh.journal(neighbour).read()] == [1]
    finally:
        await fresh.close()


async def test_a_journal_pruned_from_the_tail_index_is_not_whole_when_it_comes_back(
    api: Direct,
) -> None:
    """Replication covered all of j, so the index, past its memory bound (`kept_journals`),
    dropped it; j's next record must not make the index call j's records complete (with
    Cassandra down, a read would then fold j's new records onto an empty journal and reject
    them)."""
    settings = api.harness.settings
    config = TailConfig(settings.kafka_access(), prune_interval_s=0.1, kept_journals=0)
    index = await TailIndex.start(settings.topic, range(3), api.journals.store, config)
    try:
        journal = api.journals.journal("j")
        await journal.append(events(1, 2))
        pointers = await api.harness.replicate()
        partition = api.journals.writer.partition_of(journal.key)

        async def pruned() -> bool:  # the index prunes from the store's pointers
            return index.covered(partition) >= pointers[partition]

        await eventually(pruned, "the tail index prunes to the store's pointer")
        position = await journal.append(events(3, 3))
        found = await index.lookup(journal.key, partition, position.offset + 1)
        assert isinstance(found, Indexed)
        assert [r.first for r in found.runs] == [position.offset]
        assert not found.complete
        assert found.needs >= pointers[partition]
    finally:
        await index.close()


class NoIndex:
    """An index that can never tell: every read scans."""

    def covered(self, partition: int) -> int:
        return -1

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        return NotIndexed("test")

    async def close(self) -> None:
        return None


async def test_the_keyspace_is_created_with_the_schema(api: Direct) -> None:
    store = api.journals.store
    assert isinstance(store, CassandraStore)
    rows = await cql.execute(
        session_of(store), f"SELECT version FROM {keyspace_of(store)}.schema_version"
    )
    assert [r.version for r in rows] == [SCHEMA_VERSION]


def kafka_only_reads() -> float:
    paths = ("kafka_only_index", "kafka_only_scan")
    return sum(METRICS.value("kafka_journal_reads_total", path=p) for p in paths)


async def test_with_cassandra_down_reads_come_from_kafka_alone(api: Direct, stack: Stack) -> None:
    """Invariant 5: the journal is whole in Kafka (a fresh topic), so reads need no store."""
    await api.append("outage", events(1, 3))
    await api.harness.replicate()
    stack.cassandra.stop()
    try:
        await api.append("outage", events(4, 6))
        assert await api.delete("outage", 2) == 2
        before = kafka_only_reads()
        assert seq_nrs(await api.read("outage")) == [3, 4, 5, 6]
        assert kafka_only_reads() == before + 1
        # from Kafka too, or from what the delete's verdict left this process knowing
        assert await api.info("outage") == (6, 2)
        outage = kafka_only_reads()
    finally:
        stack.cassandra.start()
    # the driver reconnects with backoff once Cassandra is back
    await answered(api.harness.replicate, "replication once Cassandra is back", (StoreUnavailable,))
    assert seq_nrs(await api.read("outage")) == [3, 4, 5, 6]
    assert kafka_only_reads() == outage  # the store answers again


async def test_a_client_started_with_cassandra_down_serves_and_connects_once_it_is_back(
    api: Direct, stack: Stack
) -> None:
    """As a worker: the direct client starts without its store, appends and reads from Kafka
    (the topic is fresh, so Kafka holds the whole journal), and reaches the store later."""
    stack.cassandra.stop()
    try:
        offline = await Journals.connect(api.harness.settings)
        try:
            journal = offline.journal("born-offline")
            await journal.append(events(1, 3))
            assert [r.event.seq_nr async for r in journal.read()] == [1, 2, 3]
            stack.cassandra.start()

            async def reached() -> JournalMeta | None:
                await api.harness.replicate()
                return await offline.store.meta(journal.key)  # the client's own store

            # the drivers reconnect with backoff once Cassandra is back
            meta = await answered(reached, "the client reaches Cassandra", (StoreUnavailable,))
            assert meta is not None and meta.seq_nr == 3
            assert (await api.harness.stored("born-offline"))[1] == [1, 2, 3]
            assert [r.event.seq_nr async for r in journal.read()] == [1, 2, 3]
        finally:
            await offline.close()
    finally:
        stack.cassandra.start()  # no-op when it is up


async def test_an_append_too_large_for_the_broker_fails_before_it_is_sent(api: Direct) -> None:
    big = [Event(n, payload=TextPayload("x" * 100_000)) for n in range(1, 12)]  # ~1.1 MB
    with pytest.raises(AppendTooLarge, match="split the events"):
        await api.journals.journal("big").append(big)
    assert await api.read("big") == []


async def test_a_head_over_its_memory_budget_is_fetched_as_it_streams(api: Direct) -> None:
    """Invariant 6 with replication stopped: the head keeps ~2 KB, the rest is re-fetched."""
    client = api.journals
    kafka = KafkaRecords(
        KafkaReadConfig(api.harness.settings.kafka_access(), head_budget_bytes=2000)
    )
    frugal = Journals(client.topic, client.writer, client.store, client.index, client.fence, kafka)
    journal = frugal.journal("long-head")
    for first in range(1, 300, 10):
        await journal.append(events(first, first + 9))  # nothing is replicated
    await journal.delete(50)
    spilled = METRICS.value("kafka_journal_reads_spilled_total")
    assert [r.seq_nr async for r in journal.read()] == list(range(51, 301))
    assert [r.seq_nr async for r in journal.read(from_=120, to=135)] == list(range(120, 136))
    assert METRICS.value("kafka_journal_reads_spilled_total") == spilled + 2
    await kafka.close()


async def test_fetches_and_scans_take_turns_in_a_pool_of_one_consumer(api: Direct) -> None:
    """A fetch by runs and a scan want consumers of different fetch sizes: a pool of one
    swaps its idle consumer for the other kind."""
    kafka = KafkaRecords(KafkaReadConfig(api.harness.settings.kafka_access(), pool_size=1))
    try:
        journal = api.journals.journal("turns")
        first = await journal.append(events(1, 2))
        await api.journals.journal("other").append(events(1, 1))
        second = await journal.append(events(3, 3))
        runs = [
            OffsetRun(first.offset, first.offset, 1),
            OffsetRun(second.offset, second.offset, 1),
        ]
        end = second.offset + 1
        for _ in range(2):
            fetched = kafka.fetch(journal.key, first.partition, runs, -1, end)
            assert [a.offset async for a in fetched] == [first.offset, second.offset]
            scanned = kafka.scan(journal.key, first.partition, None, end)
            assert [a.offset async for a in scanned] == [first.offset, second.offset]
    finally:
        await kafka.close()


class StalePage(DelegatingJournal):
    """The store, except that its first page is one read before replication moved on."""

    def __init__(self, store: EventualJournal, page: FirstPage) -> None:
        super().__init__(store)
        self._page = page

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        return self._page


async def test_a_first_page_older_than_the_row_loses_nothing(api: Direct) -> None:
    """The page is asked before the row: events replicated in between come from `read`."""
    client = api.journals
    key = client.journal("j").key
    await api.append("j", events(1, 3))
    await api.harness.replicate()
    page = await client.store.first_page(key, 1, SEQ_NR_MAX)
    assert [r.seq_nr for r in page.events] == [1, 2, 3]
    await api.append("j", events(4, 6))
    await api.harness.replicate()
    stale = StalePage(client.store, page)
    reader = Journals(client.topic, client.writer, stale, client.index, client.fence, client.kafka)
    assert [r.seq_nr async for r in reader.journal("j").read()] == [1, 2, 3, 4, 5, 6]


async def test_a_first_page_with_a_hole_is_kept_up_to_the_hole(api: Direct) -> None:
    """A page read while an Append's rows were being written may lack one of them: the read
    keeps the page's events up to the hole and reads the rest, from `from_` on."""
    client = api.journals
    key = client.journal("j").key
    await api.append("j", events(1, 6))
    await api.harness.replicate()
    page = await client.store.first_page(key, 1, SEQ_NR_MAX)
    holed = FirstPage(page.segment_size, tuple(r for r in page.events if r.seq_nr != 4))
    stale = StalePage(client.store, holed)
    reader = Journals(client.topic, client.writer, stale, client.index, client.fence, client.kafka)
    assert [r.seq_nr async for r in reader.journal("j").read()] == [1, 2, 3, 4, 5, 6]
    assert [r.seq_nr async for r in reader.journal("j").read(2, 5)] == [2, 3, 4, 5]


async def test_appends_sent_together_answer_the_offsets_kafka_gave_their_records(
    api: Direct,
) -> None:
    """Group commit (journal/kafka/group_commit.py): many appends leave in shared batches; each
    answer must still be its own record's position."""
    ids = [unique("together") for _ in range(60)]
    positions = await asyncio.gather(
        *(api.journals.journal(i).append(events(1, 1 + n % 3)) for n, i in enumerate(ids))
    )
    assert len({(p.partition, p.offset) for p in positions}) == len(ids)
    consumer = AIOKafkaConsumer(bootstrap_servers=api.harness.settings.kafka_bootstrap)
    await consumer.start()
    try:
        topic = api.harness.settings.topic
        for journal_id, position in zip(ids, positions, strict=True):
            tp = TopicPartition(topic, position.partition)
            consumer.assign([tp])
            consumer.seek(tp, position.offset)
            record = (await consumer.getmany(tp, timeout_ms=10_000, max_records=1))[tp][0]
            assert (record.offset, record.key) == (position.offset, journal_id.encode())
    finally:
        await consumer.stop()
