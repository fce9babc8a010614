"""The direct client across a grow (journal/client/growing.py, docs/growing.md) on the real
servers: appends (verified, at the end, with Kafka's acknowledgement), a delete and reads go on
while the topic grows from 3 to 6 partitions; every acknowledged append is read back exactly
once, reads never miss an append acknowledged before they started, and a client started after
the grow reads the same."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import TopicPartition
from pydantic import SecretStr

from agents.expiry import Expirer, JournalDeadlines, JournalPurges
from app.grow import grow_topic
from journal.client.journals import Journals
from journal.codec import new_kek_text
from journal.core.grow import Phase
from journal.core.model import (
    Ack,
    Event,
    Events,
    JournalKey,
    NewEvent,
    PayloadMetadata,
    TextPayload,
)
from journal.errors import (
    GrownTopicConfigured,
    JournalErased,
    OutcomeUnknown,
    StoreUnavailable,
    Unavailable,
)
from journal.kafka.consumers import start_consumer
from journal.kafka.topic import end_offsets
from journal.metrics import METRICS
from journal.replication import (
    AlreadyQuarantined,
    Replicator,
    SuccessorReplication,
    replicate_range,
)
from journal.store.base import Snapshot
from journal.store.cassandra import CassandraStore
from journal.store.keys import KeyState
from journal.subscriptions.groups import GroupMember, commit_reset, plan_reset
from journal.subscriptions.subscription import SubscribedEvent, SubscriptionPosition
from stack import Stack
from tables.expiry import ExpiryIndex
from tables.partitions import OwnedPartitions
from tests.support.eventually import answered, eventually
from tests.support.expiry import Table
from tests.support.expiry import append as expiring
from tests.support.harness import (
    expire_all,
    replicate_grown,
    replicate_now,
    settings_for,
    unique,
)
from tests.support.raw_bytes import cassandra_bytes, kafka_bytes

pytestmark = pytest.mark.integration

VERIFIED = [f"v{n}" for n in range(6)]
AT_END = [f"e{n}" for n in range(3)]
KAFKA = [f"k{n}" for n in range(3)]


@pytest.fixture(scope="module")
async def store(stack: Stack, keyspace: str) -> AsyncIterator[CassandraStore]:
    connected = await CassandraStore.connect(settings_for(stack, "x", keyspace).cassandra_config())
    yield connected
    await connected.close()


class Acked:
    """What each journal acknowledged: seqNr -> payload text."""

    def __init__(self) -> None:
        self.events: dict[str, dict[int, str]] = {}

    def add(self, journal_id: str, seq_nr: int, text: str) -> None:
        seen = self.events.setdefault(journal_id, {})
        assert seq_nr not in seen, f"{journal_id}: seqNr {seq_nr} acknowledged twice"
        seen[seq_nr] = text


async def read_texts(journals: Journals, journal_id: str) -> dict[int, str]:
    seq_nrs, texts = [], {}
    async for record in journals.journal(journal_id).read():
        seq_nrs.append(record.seq_nr)
        assert isinstance(record.event.payload, TextPayload)
        texts[record.seq_nr] = record.event.payload.value
    assert seq_nrs == sorted(set(seq_nrs)), f"{journal_id}: {seq_nrs} not increasing, once"
    return texts


async def test_appends_and_reads_go_on_while_the_topic_grows(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    settings = settings_for(stack, unique("journal_growc"), keyspace, 3)
    acked = Acked()
    deleted: list[int | None] = []
    stop = asyncio.Event()
    sealing = asyncio.Event()
    async with await Journals.connect(settings, store=store) as journals:

        async def retried(call, what: str):  # type: ignore[no-untyped-def]
            """A 503 (the journal moving, the shared servers slow) is retried, bounded: an
            outcome unknown carries its idempotency key, so a retry is safe."""
            for _ in range(10):
                try:
                    return await call()
                except (OutcomeUnknown, Unavailable):
                    continue
            raise AssertionError(f"{what}: still unavailable")

        async def verified(journal_id: str) -> None:
            n = 1  # after the history below
            while not stop.is_set() or n < 4:
                n += 1
                text = f"{journal_id}:{n}"
                event = [Event(n, payload=TextPayload(text))]
                journal = journals.journal(journal_id)
                call = functools.partial(journal.append, event, idempotency_key=text)
                await retried(call, text)
                acked.add(journal_id, n, text)

        async def at_end(journal_id: str) -> None:
            k = 0
            while not stop.is_set() or k < 4:
                k += 1
                text = f"{journal_id}:e{k}"
                journal = journals.journal(journal_id)
                key = f"{journal_id}-{k}"
                new = [NewEvent(payload=TextPayload(text))]
                call = functools.partial(journal.append_at_end, new, idempotency_key=key)
                appended = await retried(call, text)
                acked.add(journal_id, appended.seq_nrs.from_, text)

        async def kafka_acked(journal_id: str) -> None:
            n = 1
            while not stop.is_set() or n < 4:
                n += 1
                text = f"{journal_id}:{n}"
                event = [Event(n, payload=TextPayload(text))]
                # the journal's only writer: a retry of the same seqNrs is a duplicate at most
                call = functools.partial(journals.journal(journal_id).append, event, ack=Ack.KAFKA)
                await retried(call, text)
                acked.add(journal_id, n, text)

        async def reader() -> int:
            reads = 0
            while not stop.is_set():
                for journal_id in [*VERIFIED, *AT_END]:
                    before = dict(acked.events.get(journal_id, {}))
                    texts = await retried(
                        functools.partial(read_texts, journals, journal_id), "read"
                    )
                    # read-your-writes: every append acknowledged before the read started
                    assert before.items() <= texts.items(), journal_id
                    reads += 1
            return reads

        async def deleter() -> None:
            journal = journals.journal("d0")
            for n in range(1, 4):
                await journal.append([Event(n, payload=TextPayload(f"d0:{n}"))])
            await sealing.wait()  # once the grow produced its first Seal
            deleted.append((await retried(lambda: journal.delete(2), "delete")).delete_to)

        for journal_id in [*VERIFIED, *KAFKA]:  # history in OLD before the grow
            text = f"{journal_id}:1"
            await journals.journal(journal_id).append([Event(1, payload=TextPayload(text))])
            acked.add(journal_id, 1, text)
        tasks = [asyncio.create_task(verified(j)) for j in VERIFIED]
        tasks += [asyncio.create_task(at_end(j)) for j in AT_END]
        tasks += [asyncio.create_task(kafka_acked(j)) for j in KAFKA]
        tasks.append(asyncio.create_task(deleter()))
        readers = [asyncio.create_task(reader()) for _ in range(2)]
        try:
            said: list[str] = []

            def say(line: str) -> None:
                said.append(line)
                if "sealed at offset" in line:
                    sealing.set()

            for _ in range(5):  # the shared servers slow: run it again, it resumes
                try:
                    grow = await grow_topic(settings, store, 6, yes=True, say=say)
                    break
                except Unavailable:
                    continue
            assert grow is not None and grow.phase is Phase.DONE, said
            stop.set()
            await asyncio.gather(*tasks)
            assert min(await asyncio.gather(*readers)) > 0
        finally:
            stop.set()
            for task in [*tasks, *readers]:
                task.cancel()
            await asyncio.gather(*tasks, *readers, return_exceptions=True)
        final = {j: await read_texts(journals, j) for j in [*VERIFIED, *AT_END, *KAFKA]}
        d0 = await read_texts(journals, "d0")

    for journal_id, texts in final.items():
        assert texts == acked.events[journal_id], journal_id  # each once, none lost
    assert deleted == [2] and d0 == {3: "d0:3"}
    # replication of OLD stops at each cut (the fold's MOVED rule); a client started after the
    # grow reads each journal's base from that store, then NEW
    await replicate_now(settings, store)
    async with await Journals.connect(settings, store=store) as later:  # after "done"
        for journal_id, texts in final.items():
            assert await read_texts(later, journal_id) == texts
        info = await later.journal(VERIFIED[0]).info()
        assert info.seq_nr == max(final[VERIFIED[0]])
    # the grown topic holds the moved journals' later appends
    assert sum((await end_offsets(settings.kafka_access(), grow.new_topic, 6)).values()) > 0


async def encrypted_texts(journals: Journals, journal_id: str) -> dict[int, str]:
    """`read_texts`, or "erased" (JournalErased before any event)."""
    try:
        return await read_texts(journals, journal_id)
    except JournalErased:
        return {0: "erased"}


async def test_an_encrypted_journal_follows_a_grow_and_its_erasure_reaches_both_topics(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """Issues 40 and 44: one data key per journal across a grow, kept under the chain's first
    topic (`key_identity`), so a journal written before the grow and appended after it (its
    history in OLD and NEW) reads whole, a subscription delivers it in clear, and its erasure
    (the Purge in NEW, the one key destroyed) leaves no clear byte in either topic or the
    store. An erasure stopped after its first step before the grow is finished after it."""
    settings = settings_for(stack, unique("journal_growk"), keyspace, 1).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    marker = {j: f"{j}-{uuid.uuid4().hex}" for j in ("erased", "kept", "stopped")}
    texts = {j: {n: f"{m}:{n}" for n in (1, 2)} for j, m in marker.items()}
    async with await Journals.connect(settings, store=store) as journals:
        for journal_id in marker:
            event = Event(1, payload=TextPayload(texts[journal_id][1]))
            await journals.journal(journal_id).append([event])
        encryption = journals.encryption
        assert encryption is not None
        # an erasure that stopped after marking the key (docs/erasure.md), before the grow
        stopped = JournalKey(settings.topic, "stopped")
        await encryption.keys.store.mark_erasing(stopped)
        encryption.keys.forget(stopped)  # as the erasing process does
        grow = await grow_topic(settings, store, 2, yes=True)
        assert grow is not None and grow.phase is Phase.DONE
        for journal_id in ("erased", "kept"):
            event = Event(2, payload=TextPayload(texts[journal_id][2]))
            await journals.journal(journal_id).append([event])
        for journal_id in ("erased", "kept"):
            assert await read_texts(journals, journal_id) == texts[journal_id]
        # each journal's second event is in NEW: its history spans both topics, one key
        assert sum((await end_offsets(settings.kafka_access(), grow.new_topic, 2)).values()) == 2
        keys = encryption.keys.store
        assert await keys.get(JournalKey(grow.new_topic, "erased")) is None
        row = await keys.get(JournalKey(settings.topic, "erased"))
        assert row is not None and row.state is KeyState.ACTIVE
        await replicate_grown(settings, store, 1, passes=2)
        delivered: dict[str, dict[int, str]] = {}
        async for item in journals.subscribe(None):
            if isinstance(item, SubscribedEvent):
                payload = item.record.event.payload
                assert isinstance(payload, TextPayload), item
                delivered.setdefault(item.key.id, {})[item.record.seq_nr] = payload.value
        assert delivered == {j: texts[j] for j in ("erased", "kept")}  # "stopped" passed by

        erasure = await journals.journal("erased").erase()
        assert erasure.position is not None and not erasure.already
        await journals.journal("stopped").erase()  # finishes the stopped one: its Purge in NEW
        for journal_id in ("erased", "stopped"):
            assert await journals.journal(journal_id).erasure_state() is KeyState.ERASED
            assert await encrypted_texts(journals, journal_id) == {0: "erased"}
        assert await read_texts(journals, "kept") == texts["kept"]
    await replicate_grown(settings, store, 1, passes=2)
    async with await Journals.connect(settings, store=store) as later:  # after "done"
        assert await encrypted_texts(later, "erased") == {0: "erased"}
        assert await read_texts(later, "kept") == texts["kept"]
        with pytest.raises(JournalErased):
            await later.journal("erased").append([Event(3, payload=TextPayload("again"))])
    new = settings.model_copy(update={"topic": grow.new_topic, "partitions": 2})
    raw = await kafka_bytes(settings) + await kafka_bytes(new) + cassandra_bytes(store)
    for journal_id in marker:
        assert marker[journal_id].encode() not in raw, journal_id  # sealed everywhere
    # the Purge landed in NEW: its row there holds no event and no base in OLD
    for journal_id in ("erased", "stopped"):
        row_meta = await store.meta(JournalKey(grow.new_topic, journal_id))
        assert row_meta is not None and (row_meta.seq_nr, row_meta.base) == (None, 0)


async def test_an_expiry_candidate_of_a_moved_journal_is_confirmed_and_purged_where_it_is(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """A journal whose deadline the old topic's expiry index holds, moved by a grow before it
    was due: the purger (agents/expiry.py) reads its deadline where it is now, so one whose
    last Append was in OLD is purged through NEW once due, and one appended in NEW with a
    later deadline is kept, its candidate settled at that deadline. Before, both candidates
    were dropped (the journal never expired). The candidates are handed to the index as the
    agent would (their deadlines long passed, as the index holds them); the purger ticks
    here, against the real topics."""
    settings = settings_for(stack, unique("journal_growexp"), keyspace, 1)
    soon, later = PayloadMetadata(expire_after="1 second"), PayloadMetadata(expire_after="1 hour")
    async with await Journals.connect(settings, store=store) as journals:
        for journal_id in ("x", "y"):
            event = Event(1, payload=TextPayload(f"{journal_id}1"))
            await journals.journal(journal_id).append([event], metadata=soon)
        grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        await journals.journal("y").append([Event(2, payload=TextPayload("y2"))], metadata=later)
        index, owned = ExpiryIndex(Table()), OwnedPartitions()
        owned.assign(0)
        old_end = await end_offsets(settings.kafka_access(), settings.topic, 1)
        owned.advance(0, old_end[0])  # the agent handled every record of OLD
        for offset, journal_id in enumerate(("x", "y")):  # the agent's candidates, due
            index.record(expiring(journal_id, offset, "1 second"))
        expirer = Expirer(
            settings.topic,
            index,
            owned,
            JournalPurges(journals),
            journals.fence,
            lambda: True,
            5.0,
            JournalDeadlines(journals),
        )
        purged = 0

        async def x_purged() -> bool:
            nonlocal purged
            purged += await expirer.tick()
            return purged > 0

        await eventually(x_purged, "the moved journal purged once due")
        assert purged == 1
        assert await read_texts(journals, "x") == {}  # the Purge took effect, in NEW
        assert await read_texts(journals, "y") == {1: "y1", 2: "y2"}
        now_ms = int(time.time() * 1000)
        assert index.due(0, now_ms + 60_000) == []  # y settled at its deadline in NEW
        assert index.due(0, now_ms + 3_600_000) == ["y"]


async def test_a_grown_topic_grows_again(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """3 -> 6 -> 12 (issue 40): the second grow is of the topic the first grew into, run from
    the same settings; verified appends and reads go on through both, each journal's history
    spans three topics, and a client started after both reads the same."""
    settings = settings_for(stack, unique("journal_grow2"), keyspace, 3)
    acked = Acked()
    stop = asyncio.Event()
    async with await Journals.connect(settings, store=store) as journals:

        async def verified(journal_id: str) -> None:
            n = 0
            while not stop.is_set() or n < 3:
                n += 1
                text = f"{journal_id}:{n}"
                journal = journals.journal(journal_id)
                call = functools.partial(
                    journal.append, [Event(n, payload=TextPayload(text))], idempotency_key=text
                )
                for _ in range(20):  # a 503 while the journal moves: the same key again
                    try:
                        await call()
                        break
                    except (OutcomeUnknown, Unavailable):
                        continue
                else:
                    raise AssertionError(f"{text}: still unavailable")
                acked.add(journal_id, n, text)

        async def reader() -> int:
            reads = 0
            while not stop.is_set():
                for journal_id in VERIFIED:
                    before = dict(acked.events.get(journal_id, {}))
                    try:
                        texts = await read_texts(journals, journal_id)
                    except Unavailable:
                        continue
                    assert before.items() <= texts.items(), journal_id  # read-your-writes
                    reads += 1
            return reads

        tasks = [asyncio.create_task(verified(j)) for j in VERIFIED]
        read = asyncio.create_task(reader())
        try:
            grows = []
            for partitions in (6, 12, 12):  # the last: run again once done, it says finished
                grows.append(await grow_topic(settings, store, partitions, yes=True, say=print))
            stop.set()
            await asyncio.gather(*tasks)
            assert await read > 0
        finally:
            stop.set()
            for task in [*tasks, read]:
                task.cancel()
            await asyncio.gather(*tasks, read, return_exceptions=True)
        first, second, again = grows
        assert first is not None and second is not None and again == second
        assert (first.partitions, first.new_topic) == (6, f"{settings.topic}.6")
        assert (second.topic, second.partitions) == (first.new_topic, 12)
        assert first.phase is Phase.DONE and second.phase is Phase.DONE
        final = {j: await read_texts(journals, j) for j in VERIFIED}
    for journal_id, texts in final.items():
        assert texts == acked.events[journal_id], journal_id  # each once, none lost
    async with await Journals.connect(settings, store=store) as later:  # after both grows
        for journal_id, texts in final.items():
            assert await read_texts(later, journal_id) == texts
        history = final[VERIFIED[0]]
        later_event = Event(max(history) + 1, payload=TextPayload("later"))
        await later.journal(VERIFIED[0]).append([later_event])
        assert len(await read_texts(later, VERIFIED[0])) == len(history) + 1
    ends = await end_offsets(settings.kafka_access(), second.new_topic, 12)
    assert sum(ends.values()) > 0  # the twice-moved journals' later appends
    # replicated along the chain, each journal outlives every topic's retention: OLD, then
    # NEW once OLD is through its cuts, then NEW2 once NEW is
    replicated = await replicate_grown(settings, store, 3, passes=3)
    assert replicated[0] > 0 and replicated[1] > 0 and replicated[2] == 0, replicated
    for topic, count in [(settings.topic, 3), (first.new_topic, 6), (second.new_topic, 12)]:
        ends = await end_offsets(settings.kafka_access(), topic, count)
        assert {p: o + 1 for p, o in (await store.pointers(topic)).items()} == {
            p: end for p, end in ends.items() if end
        }, topic
        await expire_all(settings, topic, count)
    moved = await store.meta(JournalKey(second.new_topic, VERIFIED[0]))
    assert moved is not None and moved.base > 0  # its events in NEW up to there
    async with await Journals.connect(settings, store=store) as store_only:
        for journal_id, texts in final.items():
            if journal_id == VERIFIED[0]:
                texts = {**texts, max(texts) + 1: "later"}
            assert await read_texts(store_only, journal_id) == texts, journal_id


async def subscribed(journals: Journals) -> list[tuple[str, int]]:
    """(journal, seqNr) of every event a subscription from the start delivers, to the end."""
    got = []
    async for item in journals.subscribe(None):
        if isinstance(item, SubscribedEvent):
            got.append((item.key.id, item.record.seq_nr))
    return got


async def test_a_subscription_delivers_nothing_a_cut_moved(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """An Append landing in the old topic after its partition's Seal is MOVED (its writer
    redoes it in the grown topic): a subscription of the old topic never delivers it, whether
    it sees the Seal in its tail or starts its tail past it (the registry's cut)."""
    settings = settings_for(stack, unique("journal_grows"), keyspace, 1)
    async with await Journals.connect(settings, store=store) as journals:
        for journal_id in ("j", "k"):
            await journals.journal(journal_id).append([Event(1, payload=TextPayload("1"))])
        grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        # a writer that missed the grow: its Append lands after the Seal, straight into OLD/0
        stale = Events((Event(2, payload=TextPayload("stale")),))
        position = await journals.writer.append(JournalKey(settings.topic, "j"), stale)
        assert position.offset > grow.cut[0]
        before = await subscribed(journals)  # the tail from offset 0: it meets the Seal
        await replicate_now(settings, store)  # the pointer passes the cut and the stale Append
        pointer = await store.pointer(settings.topic, 0)
        assert pointer is not None and pointer >= position.offset
        replicated = await subscribed(journals)
    assert sorted(before) == sorted(replicated) == [("j", 1), ("k", 1)]


async def test_a_subscription_whose_tail_starts_past_the_seal_learns_the_cut(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    settings = settings_for(stack, unique("journal_growt"), keyspace, 1)
    async with await Journals.connect(settings, store=store) as journals:
        await journals.journal("j").append([Event(1, payload=TextPayload("1"))])
        grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        await replicate_now(settings, store)  # to the Seal: the tail starts after it
        assert await store.pointer(settings.topic, 0) == grow.cut[0]
        stale = Events((Event(2, payload=TextPayload("stale")),))
        await journals.writer.append(JournalKey(settings.topic, "j"), stale)
        assert await subscribed(journals) == [("j", 1)]


def snapshot_text(found: Snapshot | None) -> tuple[int, str] | None:
    if found is None:
        return None
    assert isinstance(found.payload, TextPayload)
    return found.seq_nr, found.payload.value


async def test_snapshots_follow_a_journal_into_the_grown_topic(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """A moved journal's snapshots: the old topic's count until one is put in the grown topic
    (at most the base's seqNr), a delete removes both, a Purge there hides the old ones."""
    settings = settings_for(stack, unique("journal_growsn"), keyspace, 1)
    async with await Journals.connect(settings, store=store) as journals:
        for journal_id in ("s", "p"):
            journal = journals.journal(journal_id)
            await journal.append([Event(n, payload=TextPayload(f"{n}")) for n in (1, 2, 3)])
            await journal.snapshots.put(2, TextPayload("old-2"))
        grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        s, p = journals.journal("s"), journals.journal("p")
        assert snapshot_text(await s.snapshots.latest()) == (2, "old-2")
        await s.append([Event(4, payload=TextPayload("4"))])  # in the grown topic
        await s.snapshots.put(4, TextPayload("new-4"))
        assert snapshot_text(await s.snapshots.latest()) == (4, "new-4")
        assert snapshot_text(await s.snapshots.latest(3)) == (2, "old-2")
        await s.snapshots.delete(2)
        assert await s.snapshots.latest(3) is None
        assert snapshot_text(await s.snapshots.latest()) == (4, "new-4")
        await p.purge()
        assert await p.snapshots.latest() is None
    async with await Journals.connect(settings, store=store) as later:
        assert snapshot_text(await later.journal("s").snapshots.latest()) == (4, "new-4")
        assert await later.journal("s").snapshots.latest(3) is None
        assert await later.journal("p").snapshots.latest() is None


def lag_of(topic: str, partition: int) -> float:
    """A partition's replication lag in records, as published (0 if never set)."""
    labels = {"topic": topic, "partition": str(partition)}
    return METRICS.value("kafka_journal_replication_lag_records", **labels)


async def test_a_moved_journal_is_replicated_in_the_grown_topic_with_its_base(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """The grown topic's replication (journal/replication/successor.py) waits for the old
    partition to be replicated through its cut, then writes each moved journal's row with its
    base: a Delete in NEW of events held in OLD and a Purge in NEW are honoured, a replay
    changes nothing, and with every record of both topics gone (retention) a client reads
    each journal whole from the store."""
    settings = settings_for(stack, unique("journal_growr"), keyspace, 1)
    kafka = settings.kafka_access()
    async with await Journals.connect(settings, store=store) as journals:
        # a's in two Appends: a Delete removes a stored Append whole, or keeps it
        for journal_id, appends in (("a", [(1, 2), (3,)]), ("p", [(1, 2, 3)])):
            for seq_nrs in appends:
                events = [Event(n, payload=TextPayload(f"{journal_id}:{n}")) for n in seq_nrs]
                await journals.journal(journal_id).append(events)
        await replicate_now(settings, store)
        grow = await grow_topic(settings, store, 2, yes=True, say=print)
        assert grow is not None and grow.phase is Phase.DONE
        new = grow.new_topic
        a = journals.journal("a")
        await a.append([Event(n, payload=TextPayload(f"a:{n}")) for n in (4, 5)])
        successors = SuccessorReplication(
            kafka, store, AlreadyQuarantined(), settings.topic, 1, lambda p: True
        )
        try:
            # OLD not replicated through its cut (the Seal): its rows may not be final yet
            assert await successors.step() == 0
            assert await store.pointers(new) == {}
            # ... and the waiting shows as the grown partition's replication lag
            q = next(p for p, end in (await end_offsets(kafka, new, 2)).items() if end)
            assert lag_of(new, q) == 1  # a's one Append
            await replicate_now(settings, store)
            for journal_id in ("a", "p"):  # OLD's rows hold their events, all three
                assert await stored_seq_nrs(store, JournalKey(settings.topic, journal_id)) == [
                    1,
                    2,
                    3,
                ]
            await a.delete(2)  # events of OLD, deleted in NEW
            await journals.journal("p").purge()
            await journals.journal("p").append([Event(1, payload=TextPayload("p:new"))])
            await journals.journal("n").append([Event(1, payload=TextPayload("n:1"))])
            assert await successors.step() > 0
            assert lag_of(new, q) == 0
        finally:
            await successors.close()
        # the Delete and the Purge in NEW removed OLD's events too (a's first Append whole),
        # and no more
        assert await stored_seq_nrs(store, JournalKey(settings.topic, "a")) == [3]
        assert await stored_seq_nrs(store, JournalKey(settings.topic, "p")) == []
        expected = {
            "a": {3: "a:3", 4: "a:4", 5: "a:5"},
            "p": {1: "p:new"},
            "n": {1: "n:1"},
        }
        rows = {j: await store.meta(JournalKey(new, j)) for j in expected}
        assert {j: (m.base, m.seq_nr, m.delete_to) for j, m in rows.items() if m} == {
            "a": (3, 5, 2),  # OLD's events up to 3, read there above deleteTo 2
            "p": (0, 1, None),  # the Purge in NEW ended OLD's part
            "n": (0, 1, None),  # never in OLD
        }
        assert await store.journal_ids(new) == ["a", "n", "p"]  # a moved journal listed too
        ends = await end_offsets(kafka, new, 2)
        replay = Replicator(store, AlreadyQuarantined(), cuts=store, moved_from=(settings.topic,))
        consumer = await start_consumer(kafka)
        try:
            for partition, end in ends.items():
                await replicate_range(consumer, replay, TopicPartition(new, partition), 0, end)
        finally:
            await consumer.stop()
        assert {j: await store.meta(JournalKey(new, j)) for j in expected} == rows
        assert await stored_seq_nrs(store, JournalKey(settings.topic, "a")) == [3]
        for journal_id, texts in expected.items():
            assert await read_texts(journals, journal_id) == texts, journal_id
    await expire_all(settings, settings.topic, 1)
    await expire_all(settings, new, 2)
    async with await Journals.connect(settings, store=store) as store_only:
        for journal_id, texts in expected.items():
            assert await read_texts(store_only, journal_id) == texts, journal_id


async def stored_seq_nrs(store: CassandraStore, key: JournalKey) -> list[int]:
    """The seqNrs of the events the store's rows of `key` hold, whatever its deleteTo says."""
    meta = await store.meta(key)
    assert meta is not None, key
    everything = dataclasses.replace(meta, delete_to=None)  # its segments up to its seqNr
    return [record.seq_nr async for record in store.read(key, everything)]


async def listed(journals: Journals, limit: int) -> list[str]:
    """Every id the listing pages through, `limit` a page."""
    ids: list[str] = []
    after: str | None = None
    while True:
        page = await journals.ids(after=after, limit=limit)
        ids.extend(page.ids)
        if page.next is None:
            return ids
        after = page.next


async def test_the_listing_of_a_grown_topic_covers_its_successor(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """A grown topic lists its journals wherever they are: one untouched since the grow (in
    OLD's rows only), one appended to after it, one created after it (in NEW only) and not one
    purged after it (OLD's rows still list it), whether NEW is replicated or not, through
    pages of any size, and for a client started after the grow alike."""
    settings = settings_for(stack, unique("journal_growids"), keyspace, 2)
    async with await Journals.connect(settings, store=store) as journals:
        await append_next(journals, ["a", "b", "d"], 1)
        await replicate_now(settings, store)
        grow = await grow_topic(settings, store, 4, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        await append_next(journals, ["b"], 2)
        await append_next(journals, ["c"], 1)
        await journals.journal("d").purge()
        assert await listed(journals, 100) == ["a", "b", "c"]  # NEW's from its keys
        await replicate_grown(settings, store, 2, passes=2)
        assert await store.pointers(grow.new_topic) != {}
        assert await store.journal_ids(settings.topic) == ["a", "b", "d"]  # OLD as it was
        assert await listed(journals, 100) == ["a", "b", "c"]  # NEW's from its rows
        assert await listed(journals, 1) == ["a", "b", "c"]
    async with await Journals.connect(settings, store=store) as later:
        assert await listed(later, 2) == ["a", "b", "c"]


async def test_a_moved_journal_reads_from_kafka_alone_with_the_store_down(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """With Cassandra down, a moved journal whose records both topics still hold whole reads
    from Kafka alone: its view in the old topic up to the cut as the base, then the grown
    topic's (before, a 503 whatever Kafka held)."""
    settings = settings_for(stack, unique("journal_growd"), keyspace, 1)
    async with await Journals.connect(settings, store=store) as journals:
        a = journals.journal("a")
        await a.append([Event(n, payload=TextPayload(f"a:{n}")) for n in (1, 2, 3)])
        grow = await grow_topic(settings, store, 2, yes=True, say=print)
        assert grow is not None and grow.phase is Phase.DONE
        await a.append([Event(n, payload=TextPayload(f"a:{n}")) for n in (4, 5)])
        await a.delete(2)
        expected = {3: "a:3", 4: "a:4", 5: "a:5"}
        assert await read_texts(journals, "a") == expected
        stack.cassandra.stop()
        try:
            assert await read_texts(journals, "a") == expected
            assert (await a.info()).seq_nr == 5
        finally:
            stack.cassandra.start()
        # the module's store reconnects with backoff: the next test finds it answering
        await answered(lambda: store.pointers(settings.topic), "the store", (StoreUnavailable,))


async def test_a_journal_moved_twice_without_a_write_between_keeps_its_base(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """A journal written in OLD, then only after the second grow (1 -> 2 -> 4) has no row in
    the middle topic: its row in the newest takes its base from OLD's, through the chain."""
    settings = settings_for(stack, unique("journal_grow2x"), keyspace, 1)
    async with await Journals.connect(settings, store=store) as journals:
        t = journals.journal("t")
        await t.append([Event(n, payload=TextPayload(f"t:{n}")) for n in (1, 2, 3)])
        grows = [await grow_topic(settings, store, n, yes=True, say=print) for n in (2, 4)]
        await t.append([Event(4, payload=TextPayload("t:4"))])
    first, second = grows
    assert first is not None and second is not None and second.topic == first.new_topic
    replicated = await replicate_grown(settings, store, 1, passes=3)
    assert replicated[2] == 0, replicated  # all of it in two passes: NEW, then NEW2
    assert await store.meta(JournalKey(first.new_topic, "t")) is None  # no write there
    row = await store.meta(JournalKey(second.new_topic, "t"))
    assert row is not None and (row.base, row.seq_nr) == (3, 4)
    for topic, count in [(settings.topic, 1), (first.new_topic, 2), (second.new_topic, 4)]:
        await expire_all(settings, topic, count)
    async with await Journals.connect(settings, store=store) as store_only:
        expected = {n: f"t:{n}" for n in (1, 2, 3, 4)}
        assert await read_texts(store_only, "t") == expected
    # a client configured with the newest topic is told the chain's first, two grows back
    newest = settings.model_copy(update={"topic": second.new_topic, "partitions": 4})
    with pytest.raises(GrownTopicConfigured, match=f"configure {settings.topic}, the first"):
        await Journals.connect(newest, store=store)


async def followed(
    journals: Journals, after: SubscriptionPosition | None = None
) -> tuple[list[tuple[str, str, int]], SubscriptionPosition]:
    """(topic, journal, seqNr) of every event a finite subscription after `after` delivers,
    and the position it ends at."""
    got, end = [], SubscriptionPosition()
    async for item in journals.subscribe(after):
        if isinstance(item, SubscribedEvent):
            assert_appended_payload(item.key.id, item.record.seq_nr, item.record.event.payload)
            got.append((item.key.topic, item.key.id, item.record.seq_nr))
        end = item.position
    return got, end


def per_journal(got: list[tuple[str, str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _, journal_id, seq_nr in got:
        out.setdefault(journal_id, []).append(seq_nr)
    return out


async def append_next(journals: Journals, journal_ids: list[str], seq_nr: int) -> None:
    for journal_id in journal_ids:
        event = Event(seq_nr, payload=TextPayload(f"{journal_id}{seq_nr}"))
        await journals.journal(journal_id).append([event])


def assert_appended_payload(journal_id: str, seq_nr: int, payload: object) -> None:
    """A delivered event carries what `append_next` appended, in clear (opened with its
    journal's one data key when the deployment encrypts)."""
    assert payload == TextPayload(f"{journal_id}{seq_nr}"), (journal_id, seq_nr, payload)


async def test_a_subscription_follows_its_journals_along_a_chain_of_grows(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """A subscription of the first topic delivers every journal's events across two grows
    (2 -> 4 -> 8), each once and in order, under the first topic. A grown topic is read once
    its predecessor is replicated through its cuts; its moved journals without a row there
    fold from their base (without it their first Append in NEW would be a conflict, never
    delivered). A position resumes across the topics. The deployment encrypts: each event
    is delivered in clear, opened with its journal's one data key along the chain."""
    settings = settings_for(stack, unique("journal_growsub"), keyspace, 2).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    ids = [f"s{n}" for n in range(4)]
    async with await Journals.connect(settings, store=store) as journals:
        for seq_nr in (1, 2):
            await append_next(journals, ids, seq_nr)
        first = await grow_topic(settings, store, 4, yes=True, say=lambda _: None)
        assert first is not None and first.phase is Phase.DONE
        await append_next(journals, ids, 3)
        await replicate_now(settings, store)  # the first topic through its cuts, NEW not
        assert await store.pointers(first.new_topic) == {}
        got, _ = await followed(journals)
        assert per_journal(got) == {j: [1, 2, 3] for j in ids}
        assert {topic for topic, _, _ in got} == {settings.topic}
        second = await grow_topic(settings, store, 8, yes=True, say=lambda _: None)
        assert second is not None and second.topic == first.new_topic
        await append_next(journals, ids, 4)
        await replicate_grown(settings, store, 2, passes=2)  # NEW through its cuts too
        got, end = await followed(journals)
        assert per_journal(got) == {j: [1, 2, 3, 4] for j in ids}
        assert max(slot for slot, _ in end.offsets) >= 2 + 4  # a slot of the third topic
        assert await followed(journals, end) == ([], end)
        await append_next(journals, ids, 5)
        later, _ = await followed(journals, end)
    assert per_journal(later) == {j: [5] for j in ids}


async def test_a_live_subscription_follows_a_grow_made_while_it_runs(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """Subscribed before the grow, it learns the cut from the Seal it reads, takes on the
    grown topic and delivers a moved journal's later events once the old partition is
    replicated through its cut; a position "from the end" taken after the grow covers the
    grown topic."""
    settings = settings_for(stack, unique("journal_growlive"), keyspace, 1)
    got: list[tuple[str, int]] = []
    async with await Journals.connect(settings, store=store) as journals:
        await append_next(journals, ["j"], 1)

        async def collect() -> None:
            async for item in journals.subscribe(None, live=True, heartbeat_s=0.5):
                if isinstance(item, SubscribedEvent):
                    got.append((item.key.id, item.record.seq_nr))

        task = asyncio.create_task(collect())
        try:

            async def seen(n: int) -> bool:
                assert not task.done(), task
                return len(got) >= n

            await eventually(lambda: seen(1), "the first event delivered")
            grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
            assert grow is not None and grow.phase is Phase.DONE
            await append_next(journals, ["j"], 2)
            await replicate_now(settings, store)
            await eventually(lambda: seen(2), "the moved journal's event delivered")
            end = await journals.end_position()
            # the first topic's partition (slot 0) and the one of NEW holding j (1 or 2)
            assert [slot for slot, _ in end.offsets][:1] == [0] and len(end.offsets) == 2
            await append_next(journals, ["j"], 3)
            await eventually(lambda: seen(3), "the next one")
            from_end, _ = await followed(journals, end)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert got == [("j", 1), ("j", 2), ("j", 3)]
    assert from_end == [(settings.topic, "j", 3)]


class Member:
    """A running member of a subscription group that acknowledges every event it gets."""

    def __init__(self, member: GroupMember) -> None:
        self.member = member
        self.got: list[tuple[str, int]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.member.start()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for batch in self.member.batches():
            for event in batch:
                assert event.key.topic == self.member._topic
                assert_appended_payload(
                    event.key.id, event.record.seq_nr, event.record.event.payload
                )
                self.got.append((event.key.id, event.record.seq_nr))
                self.member.ack(event.position)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.member.stop()


async def test_a_subscription_group_follows_its_journals_into_the_grown_topic(
    stack: Stack, keyspace: str, store: CassandraStore
) -> None:
    """Two members of a group share a topic of 2 partitions; it grows to 4 while they run.
    They take on the grown topic (a rebalance), each grown partition read once the group's
    checkpoint of its predecessor partition passed the cut: every journal's events are
    delivered, the first delivery of each in order, and a member started after both stopped
    resumes at the checkpoints of both topics. The group's listing shows the grown topic's
    partitions, and a reset to the start moves their checkpoints too: every event again. The
    deployment encrypts: each event is delivered in clear, before and after the grow."""
    settings = settings_for(stack, unique("journal_growgrp"), keyspace, 2).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    ids = [f"g{n}" for n in range(4)]
    name = unique("grown")
    async with await Journals.connect(settings, store=store) as journals:
        await append_next(journals, ids, 1)
        await append_next(journals, ids, 2)
        members = [Member(journals.subscribe_group(name, heartbeat_s=0.5)) for _ in range(2)]
        got: Callable[[], list[tuple[str, int]]] = lambda: [e for m in members for e in m.got]  # noqa: E731
        try:
            for member in members:
                await member.start()

            async def delivered(n: int) -> bool:
                assert all(m.task is not None and not m.task.done() for m in members)
                return len(set(got())) >= n

            await eventually(lambda: delivered(8), "the first topic's events")
            grow = await grow_topic(settings, store, 4, yes=True, say=lambda _: None)
            assert grow is not None and grow.phase is Phase.DONE
            await append_next(journals, ids, 3)
            await replicate_now(settings, store)
            await eventually(lambda: delivered(12), "the moved journals' events")
            assert set(got()) == {(j, n) for j in ids for n in (1, 2, 3)}
            for journal_id in ids:
                firsts = list(dict.fromkeys(n for j, n in got() if j == journal_id))
                assert firsts == [1, 2, 3], journal_id
        finally:
            for member in members:
                await member.stop()
        await append_next(journals, ids, 4)
        later = Member(journals.subscribe_group(name, heartbeat_s=0.5))
        await run_until(later, 4, "the events written meanwhile")
        assert sorted(later.got) == sorted((j, 4) for j in ids)  # nothing acknowledged again
        # the group's administration numbers the grown topic's partitions as its positions
        # do: its listing shows them, and a reset to the start moves them too
        (status,) = [s for s in await journals.group_statuses() if s.name == name]
        where = [(p.partition, p.topic, p.topic_partition) for p in status.partitions]
        assert where == [(0, settings.topic, 0), (1, settings.topic, 1)] + [
            (2 + q, grow.new_topic, q) for q in range(4)
        ]
        assert all(p.lag == 0 for p in status.partitions), status  # everything acknowledged
        kafka = settings.kafka_access()
        moves = await plan_reset(kafka, settings.topic, name, None, None, store)
        assert [(m.partition, m.topic, m.topic_partition, m.after) for m in moves] == [
            (slot, topic, partition, 0) for slot, topic, partition in where
        ]
        await commit_reset(kafka, settings.topic, name, moves, store)
        again = Member(journals.subscribe_group(name, heartbeat_s=0.5))
        await run_until(again, 16, "every event once more")
    assert set(again.got) == {(j, n) for j in ids for n in (1, 2, 3, 4)}
    for journal_id in ids:
        firsts = list(dict.fromkeys(n for j, n in again.got if j == journal_id))
        assert firsts == [1, 2, 3, 4], journal_id


async def run_until(member: Member, n: int, what: str) -> None:
    """Run `member` until it got `n` events, then stop it."""
    try:
        await member.start()
        await eventually(lambda: answered_len(member, n), what)
    finally:
        await member.stop()


async def answered_len(member: Member, n: int) -> bool:
    assert member.task is not None and not member.task.done()
    return len(member.got) >= n
