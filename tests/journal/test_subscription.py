"""Subscriptions against the real servers: accepted events only, resumable, in log order."""

from __future__ import annotations

import asyncio
import base64
import random
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from journal.client.journals import Journals
from journal.core.model import Ack, Event, JournalKey, JsonPayload
from journal.errors import InvalidValue
from journal.kafka.topic import end_offsets
from journal.metrics import METRICS
from journal.replication.replicate import AlreadyQuarantined, Replicator, replicate_range
from journal.subscriptions.subscription import (
    Heartbeat,
    SubscribedEvent,
    SubscriptionItem,
    SubscriptionPosition,
)
from stack import Stack
from tests.support.eventually import WITHIN_S, eventually
from tests.support.harness import Harness, harness
from tests.support.show import SHOW


def test_a_position_survives_its_encoding() -> None:
    position = SubscriptionPosition.of({0: 17, 2: 0, 5: 123456789, 1: -1})
    assert SubscriptionPosition.parse(position.encode()) == position
    assert position.offset(0) == 17 and position.offset(1) == -1 and position.offset(9) == -1
    assert SubscriptionPosition.parse(SubscriptionPosition().encode()) == SubscriptionPosition()


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "garbage",
    ["%%%", "MTox LDE6Mg", "é", b64("a:b"), b64("1"), b64("1:1,1:2"), b64("-1:1"), b64("1:-2")],
)
def test_anything_else_is_not_a_position(garbage: str) -> None:
    with pytest.raises(InvalidValue, match="not a subscription position"):
        SubscriptionPosition.parse(garbage)


@dataclass
class Written:
    """What the writers did: per journal, the accepted seqNrs and the final deleteTo."""

    accepted: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    delete_to: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def required(self) -> set[tuple[str, int]]:
        """Every accepted event not deleted: a subscription from the start must deliver it."""
        return {
            (j, n) for j, seq_nrs in self.accepted.items() for n in seq_nrs if n > self.delete_to[j]
        }

    def allowed(self) -> set[tuple[str, int]]:
        return {(j, n) for j, seq_nrs in self.accepted.items() for n in seq_nrs}


def event(journal_id: str, seq_nr: int, rejected: bool = False) -> Event:
    tags = frozenset({"even" if seq_nr % 2 == 0 else "odd"})
    return Event(seq_nr, tags, JsonPayload.of({"j": journal_id, "n": seq_nr, "rejected": rejected}))


async def write(h: Harness, written: Written, rounds: int, seed: int) -> None:
    """`SHOW.writers` writers, each over its share of the journals in turn, `rounds` times:
    appends of 1-3 events; now and then a conflicting Append (from seqNr 1 again: rejected by
    the fold) and a Delete."""

    async def step(journal_id: str, rng: random.Random) -> None:
        journal = h.journals.journal(journal_id)
        seq_nrs = written.accepted[journal_id]
        last = seq_nrs[-1] if seq_nrs else 0
        n = rng.randint(1, 3)
        await journal.append([event(journal_id, s) for s in range(last + 1, last + n + 1)])
        seq_nrs.extend(range(last + 1, last + n + 1))
        if rng.random() < 0.3:
            rejected = [event(journal_id, s, rejected=True) for s in (1, 2)]
            await journal.append(rejected, ack=Ack.KAFKA)
        if rng.random() < 0.15 and len(seq_nrs) > 1:
            to = seq_nrs[-1] - 1
            await journal.delete(to)
            written.delete_to[journal_id] = max(written.delete_to[journal_id], to)

    async def writer(first: int) -> None:
        mine = range(first, SHOW.journals, SHOW.writers)
        rngs = {i: random.Random(seed * 100 + i) for i in mine}
        for _ in range(rounds):
            for i in mine:
                await step(f"j{i}", rngs[i])

    await asyncio.gather(*(writer(w) for w in range(SHOW.writers)))


@pytest.fixture
async def h(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "sub", SHOW.partitions) as connected:
        yield connected


async def take(
    journals: Journals, after: SubscriptionPosition | None, limit: int, **options: object
) -> tuple[list[SubscribedEvent], bool]:
    """Up to `limit` events of a finite subscription, then it is dropped; whether it ended."""
    got: list[SubscribedEvent] = []
    items: AsyncIterator[SubscriptionItem] = journals.subscribe(after, **options)  # type: ignore[arg-type]
    try:
        async for item in items:
            if isinstance(item, Heartbeat):
                continue
            got.append(item)
            if len(got) >= limit:
                return got, False
        return got, True
    finally:
        await items.aclose()  # type: ignore[attr-defined]


def check_order(session: Sequence[SubscribedEvent]) -> None:
    """Within one session, each journal's seqNrs strictly increase (the log's order)."""
    last: dict[str, int] = {}
    for item in session:
        seq_nr = item.record.seq_nr
        assert seq_nr > last.get(item.key.id, 0), f"{item.key.id}: {seq_nr} after {last}"
        last[item.key.id] = seq_nr


async def resumed(
    journals: Journals,
    rng: random.Random,
    between: object = None,
    after: SubscriptionPosition | None = None,
) -> list[SubscribedEvent]:
    """A finite subscription dropped after a few events and resumed from the last position
    received, until it ends; `between` (a coroutine function) runs after the first session."""
    delivered: list[SubscribedEvent] = []
    sessions = 0
    while True:
        session, ended = await take(journals, after, rng.randint(*SHOW.session))
        check_order(session)
        delivered.extend(session)
        sessions += 1
        if session:
            after = session[-1].position
        if sessions == 1 and between is not None:
            await between()  # type: ignore[operator]
        if ended:
            assert sessions > 3, "too few sessions to prove resumption"
            return delivered


def rejected(item: SubscribedEvent) -> bool:
    payload = item.record.event.payload
    assert isinstance(payload, JsonPayload) and isinstance(payload.value, dict)
    return payload.value["rejected"] is True


def check(written: Written, delivered: Sequence[SubscribedEvent]) -> None:
    got = [(d.key.id, d.record.seq_nr) for d in delivered]
    assert not [d for d in delivered if rejected(d)]
    assert written.required() - set(got) == set(), "acknowledged events missing"
    assert set(got) - written.allowed() == set(), "events nobody appended"


@pytest.mark.integration
async def test_a_resumed_subscriber_gets_every_accepted_event_and_no_rejected_one(
    h: Harness,
) -> None:
    """Half the log replicated, half in the tail; after the first session, more is written
    and replication passes part of the tail while the subscriber reads it (rows newer than
    the records it reads), the rest stays in the tail (sessions resume above the pointer)."""
    written = Written()
    await write(h, written, rounds=SHOW.rounds(6, of=16), seed=1)
    await h.replicate()
    await write(h, written, rounds=SHOW.rounds(4, of=16), seed=2)

    async def meanwhile() -> None:
        await write(h, written, rounds=SHOW.rounds(2, of=16), seed=3)
        await h.replicate()
        await write(h, written, rounds=SHOW.rounds(4, of=16), seed=4)

    delivered = await resumed(h.journals, random.Random(5), between=meanwhile)
    check(written, delivered)


@pytest.mark.integration
async def test_events_beyond_retention_come_from_the_store_in_the_same_order(
    h: Harness,
) -> None:
    written = Written()
    await write(h, written, rounds=SHOW.rounds(5, of=8), seed=4)
    await h.replicate()
    ends = await end_offsets(h.settings.kafka_access(), h.settings.topic, h.settings.partitions)
    admin = AIOKafkaAdminClient(bootstrap_servers=h.settings.kafka_bootstrap)
    await admin.start()
    try:  # as retention would: partition 0 entirely, partition 1 half
        gone = {TopicPartition(h.settings.topic, 0): RecordsToDelete(ends[0])}
        gone[TopicPartition(h.settings.topic, 1)] = RecordsToDelete(ends[1] // 2)
        await admin.delete_records(gone)
    finally:
        await admin.close()
    await write(h, written, rounds=SHOW.rounds(3, of=8), seed=5)  # and a tail above it
    delivered = await resumed(h.journals, random.Random(6))
    check(written, delivered)
    stored_from_0 = [d for d in delivered if d.record.partition == 0]
    assert stored_from_0, "partition 0's events must come from the store"


async def expire_all(h: Harness) -> dict[int, int]:
    """Delete every record of the topic, as retention would; the end offsets."""
    ends = await end_offsets(h.settings.kafka_access(), h.settings.topic, h.settings.partitions)
    admin = AIOKafkaAdminClient(bootstrap_servers=h.settings.kafka_bootstrap)
    await admin.start()
    try:
        tps = {TopicPartition(h.settings.topic, p): RecordsToDelete(e) for p, e in ends.items()}
        await admin.delete_records(tps)
    finally:
        await admin.close()
    return ends


@pytest.mark.integration
async def test_beyond_retention_a_purged_journal_s_events_never_come_back(h: Harness) -> None:
    """The `appends` rows of the Appends a Purge removed go with it, and the events the
    journal got after the Purge carry other offsets (their own rows): a subscriber from the
    store gets the journal's new events only."""
    purged, kept = h.journals.journal("purged"), h.journals.journal("kept")
    both = [event("purged", 1, rejected=True), event("purged", 2, rejected=True)]
    await purged.append(both, ack=Ack.KAFKA)
    await purged.append([event("purged", 3, rejected=True)], ack=Ack.KAFKA)
    await kept.append([event("kept", 1)])
    await h.replicate()  # the Appends stored, then the Purge in another batch
    await purged.purge()
    await purged.append([event("purged", 1), event("purged", 2)])  # anew from seqNr 1
    await purged.delete(1)
    ends = await h.replicate()
    await expire_all(h)
    delivered, ended = await take(h.journals, None, 100)
    assert ended
    assert not [d for d in delivered if rejected(d)], "a purged event came back"
    got = sorted((d.key.id, d.record.seq_nr) for d in delivered)
    assert got == [("kept", 1), ("purged", 2)]  # 1: deleted after the Purge
    partition = (await h.stored("purged"))[0]
    assert partition is not None
    listed = h.store.appends(h.settings.topic, partition.partition, -1, ends[partition.partition])
    purged_rows = [a async for a in listed if a.key.id == "purged"]
    # two Appends before the Purge (their rows removed with it), one after (in part deleted)
    assert [a.first for a in purged_rows] == [1]


async def appends_rows(h: Harness, ends: dict[int, int]) -> set[tuple[str, int, int]]:
    """Every `appends` row of the topic: (journal, partition, offset)."""
    rows: set[tuple[str, int, int]] = set()
    for partition, end in ends.items():
        stored = h.store.appends(h.settings.topic, partition, -1, end)
        rows |= {(a.key.id, partition, a.offset) async for a in stored}
    return rows


async def replay(h: Harness, ends: dict[int, int]) -> None:
    """Replicate every partition again from offset 0, with a replicator that kept no rows."""
    consumer = AIOKafkaConsumer(
        **h.settings.kafka_access().client_options(), group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        replicator = Replicator(h.store, AlreadyQuarantined())
        for partition, end in ends.items():
            tp = TopicPartition(h.settings.topic, partition)
            await replicate_range(consumer, replicator, tp, 0, end)
    finally:
        await consumer.stop()


@pytest.mark.integration
async def test_a_delete_or_purge_removes_its_appends_rows_and_subscribers_get_the_rest(
    h: Harness,
) -> None:
    """The `appends` bound (docs/operations.md): replication applying a Delete or Purge
    removes the rows of the Appends whose events it removes, and only those; a subscriber
    then skips those Appends from Kafka as from the store, and a replay changes nothing."""
    deleted, purged = h.journals.journal("deleted"), h.journals.journal("purged")
    await deleted.append([event("deleted", 1), event("deleted", 2)])
    await deleted.append([event("deleted", 3), event("deleted", 4)])
    await purged.append([event("purged", 1)])
    await h.journals.journal("kept").append([event("kept", 1)])
    stored = await appends_rows(h, await h.replicate())  # stored, then removed later
    await deleted.delete(3)  # 1..2 wholly, 3..4 in part
    await purged.purge()
    ends = await h.replicate()
    rows = await appends_rows(h, ends)
    first_of_deleted = min((r for r in stored if r[0] == "deleted"), key=lambda r: r[2])
    assert rows == {r for r in stored if r[0] != "purged" and r != first_of_deleted}
    delivered, ended = await take(h.journals, None, 100)  # from Kafka: Appends as they came
    assert ended
    assert sorted((d.key.id, d.record.seq_nr) for d in delivered) == [
        ("deleted", 3),
        ("deleted", 4),
        ("kept", 1),
    ]
    await replay(h, ends)
    assert await appends_rows(h, ends) == rows
    await expire_all(h)
    delivered, ended = await take(h.journals, None, 100)  # from the store: what it holds
    assert ended
    assert sorted((d.key.id, d.record.seq_nr) for d in delivered) == [("deleted", 4), ("kept", 1)]


@pytest.mark.integration
async def test_tags_filter_and_a_live_subscriber_sees_appends_and_heartbeats(
    h: Harness,
) -> None:
    journal = h.journals.journal("live")
    await journal.append([event("live", 1), event("live", 2)])
    start, ended = await take(h.journals, None, 10, tags=["even"])
    assert ended and [(d.key.id, d.record.seq_nr) for d in start] == [("live", 2)]
    items = h.journals.subscribe(start[-1].position, live=True, heartbeat_s=0.2)
    try:
        first = await asyncio.wait_for(anext(items), WITHIN_S)
        assert isinstance(first, Heartbeat)  # nothing new: it says it is alive
        await journal.append([event("live", 3)])

        async def an_event() -> SubscribedEvent:
            item = await asyncio.wait_for(anext(items), WITHIN_S)
            assert isinstance(item, SubscribedEvent), item  # heartbeats until the append
            return item

        item = await eventually(an_event, "the live subscriber gets the append", interval_s=0)
        assert (item.key, item.record.seq_nr) == (JournalKey(h.settings.topic, "live"), 3)
    finally:
        await items.aclose()  # type: ignore[attr-defined]


@pytest.mark.integration
async def test_after_the_end_position_only_later_appends_come(h: Harness) -> None:
    await h.journals.journal("before").append([event("before", 1), event("before", 2)])
    end = await h.journals.end_position()
    await h.journals.journal("after").append([event("after", 1)])
    got, ended = await take(h.journals, end, 10)
    assert ended and [(d.key.id, d.record.seq_nr) for d in got] == [("after", 1)]
    from_start, _ = await take(h.journals, None, 10)
    assert {d.key.id for d in from_start} == {"before", "after"}  # the log holds both


@pytest.mark.integration
async def test_with_the_store_down_a_resumed_subscriber_folds_from_offset_0(
    h: Harness, stack: Stack
) -> None:
    """Kafka holds the whole topic (it still starts at offset 0): the fold needs no store."""
    written = Written()
    await write(h, written, rounds=SHOW.rounds(5, of=10), seed=7)
    await h.replicate()
    await write(h, written, rounds=SHOW.rounds(5, of=10), seed=8)
    before, _ = await take(h.journals, None, 10)
    folds = METRICS.value("kafka_journal_subscription_whole_folds_total")
    stack.cassandra.stop()
    try:
        delivered = await resumed(h.journals, random.Random(9), after=before[-1].position)
    finally:
        stack.cassandra.start()
    check(written, before + delivered)
    assert METRICS.value("kafka_journal_subscription_whole_folds_total") > folds
