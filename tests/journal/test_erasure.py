"""Encrypted journals and their erasure (crypto-shredding, docs/erasure.md) on the real servers:
payloads never in clear in Kafka or Cassandra, every read path opens them, an erased journal
answers JournalErased everywhere while the others read exactly as before, and an erasure
stopped between its steps is finished by erasing again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection
from typing import Any

import pytest
from msgspec.structs import replace
from pydantic import SecretStr

from journal.client.journals import Journals
from journal.codec import envelope, events_binary
from journal.codec.action_header import ACTION_HEADER
from journal.codec.envelope import (
    SNAPSHOT,
    EnvelopeRefused,
    is_sealed,
    new_kek_text,
    open_sealed,
    seal,
)
from journal.core.model import (
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    NewEvent,
    Position,
    TextPayload,
)
from journal.errors import JournalErased, SetupMissing
from journal.kafka.producer import JournalProducer
from journal.kafka.topic import TopicSpec, ensure_topic, quarantine_topic
from journal.replication.replicate import KafkaQuarantine, replicate_to_now
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from journal.store.keys import KeyRow, KeyState, KeyStore
from journal.subscriptions.groups import GroupEvent
from journal.subscriptions.subscription import Heartbeat, SubscribedEvent
from stack import Stack
from tests.support.compressed import read_partition
from tests.support.harness import expire_all, settings_for, unique
from tests.support.raw_bytes import cassandra_bytes, kafka_bytes
from tests.support.raw_store import keyspace_of, session_of

pytestmark = pytest.mark.integration


class Encrypted:
    def __init__(self, settings: Settings, store: CassandraStore, journals: Journals) -> None:
        self.settings = settings
        self.store = store
        self.journals = journals

    async def replicate(self) -> None:
        producer = JournalProducer(self.settings.kafka_access())
        await producer.start()
        try:
            await replicate_to_now(
                self.settings.kafka_access(),
                self.store,
                self.settings.topic,
                KafkaQuarantine(producer),
            )
        finally:
            await producer.stop()

    async def kafka_values(self) -> bytes:
        return await kafka_bytes(self.settings)

    async def cassandra_cells(self) -> bytes:
        return cassandra_bytes(self.store)


@pytest.fixture(scope="module")
async def encrypted(stack: Stack, keyspace: str) -> AsyncIterator[Encrypted]:
    # one partition: a subscription's order is the log's, the same on every run
    settings = settings_for(stack, unique("journal_erasure"), keyspace, partitions=1).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    store = await CassandraStore.connect(settings.cassandra_config())
    journals = await Journals.connect(settings, store=store)
    await ensure_topic(settings.kafka_access(), TopicSpec(quarantine_topic(settings.topic), 1))
    try:
        yield Encrypted(settings, store, journals)
    finally:
        await journals.close()
        await store.close()


def secret() -> str:
    """A marker no other byte of the servers holds: found anywhere, it leaked in clear."""
    return f"secret-{uuid.uuid4().hex}"


def events_with(marker: str) -> list[Event]:
    return [
        Event(1, payload=JsonPayload.of({"name": marker})),
        Event(2, frozenset({"tag"}), TextPayload(marker)),
        Event(3, payload=BinaryPayload(marker.encode())),
        Event(4),
    ]


async def read(journals: Journals, journal_id: str) -> list[EventRecord]:
    return [record async for record in journals.journal(journal_id).read()]


async def test_payloads_leave_the_writer_sealed_and_every_read_opens_them(
    encrypted: Encrypted,
) -> None:
    journals = encrypted.journals
    marker, journal_id = secret(), unique("sealed")
    events = events_with(marker)
    await journals.journal(journal_id).append(events)
    at_end = await journals.journal(journal_id).append_at_end(
        [NewEvent(payload=TextPayload(marker + "-end"))]
    )

    before = [r.event for r in await read(journals, journal_id)]
    assert before == [*events, Event(5, payload=TextPayload(marker + "-end"))]
    assert at_end.seq_nrs.to == 5
    await encrypted.replicate()
    assert [r.event for r in await read(journals, journal_id)] == before  # from the store
    batches = [b async for b in journals.journal(journal_id).read_batches()]
    assert [r.event for batch in batches for r in batch] == before

    assert marker.encode() not in await encrypted.kafka_values()
    assert marker.encode() not in await encrypted.cassandra_cells()

    subscribed = [
        item.record.event
        async for item in journals.subscribe()
        if isinstance(item, SubscribedEvent) and item.key.id == journal_id
    ]
    assert subscribed == before


async def test_a_keyed_retry_answers_the_first_append(encrypted: Encrypted) -> None:
    """The request's digest is of the plain events (keyed): sealing anew is the same request."""
    journal = encrypted.journals.journal(unique("keyed"))
    events = events_with(secret())
    first = await journal.append(events, idempotency_key="k-1")
    again = await journal.append(events, idempotency_key="k-1")
    assert (again.partition, again.offset) == (first.partition, first.offset)
    at_end = [NewEvent(payload=TextPayload("x"))]
    first_end = await journal.append_at_end(at_end, idempotency_key="k-2")
    again_end = await journal.append_at_end(at_end, idempotency_key="k-2")
    assert again_end == first_end


async def test_an_erased_journal_is_gone_everywhere_and_the_others_read_as_before(
    encrypted: Encrypted,
) -> None:
    journals = encrypted.journals
    erased_marker, kept_marker = secret(), secret()
    erased_id, kept_id = unique("erased"), unique("kept")
    await journals.journal(erased_id).append(events_with(erased_marker))
    await journals.journal(kept_id).append(events_with(kept_marker))
    await encrypted.replicate()
    kept_before = await read(journals, kept_id)
    subscribed_before = [item async for item in journals.subscribe()]

    erasure = await journals.journal(erased_id).erase()
    assert erasure.position is not None and not erasure.already
    await encrypted.replicate()

    # the erasing process and a fresh one (another process: a cache of its own)
    fresh = await Journals.connect(encrypted.settings, store=encrypted.store)
    try:
        for client in (journals, fresh):
            journal = client.journal(erased_id)
            assert await journal.erasure_state() is KeyState.ERASED
            with pytest.raises(JournalErased):
                await read(client, erased_id)
            with pytest.raises(JournalErased):
                [b async for b in journal.read_batches()]
            with pytest.raises(JournalErased):
                await journal.info()
            with pytest.raises(JournalErased):
                await journal.append([Event(1, payload=TextPayload("again"))])
            assert await read(client, kept_id) == kept_before

            # the subscription passes the erased journal's events by: a heartbeat at each
            # one's position, or, once replication applied the erasure's Purge (which removes
            # its Appends' `appends` rows), skipped as any purged Append; never delivered
            subscribed = [item async for item in client.subscribe(live=False)]
            at = {item.position: item for item in subscribed}
            for was in subscribed_before:
                if not isinstance(was, SubscribedEvent):
                    continue
                now = at.get(was.position)
                if was.key.id == erased_id:
                    assert now in (None, Heartbeat(was.position)), now
                else:
                    assert now == was
        assert (await fresh.journal(erased_id).erase()).already
    finally:
        await fresh.close()

    # ciphertext stays in Kafka; its key does not stay anywhere
    assert erased_marker.encode() not in await encrypted.kafka_values()
    assert erased_marker.encode() not in await encrypted.cassandra_cells()
    session, keyspace = session_of(encrypted.store), keyspace_of(encrypted.store)
    row = session.execute(
        f"SELECT state, wrapped FROM {keyspace}.journal_keys WHERE topic = %s AND id = %s",
        (encrypted.settings.topic, erased_id),
    ).one()
    assert (row.state, row.wrapped) == ("erased", None)
    erased_key = JournalKey(encrypted.settings.topic, erased_id)
    meta = await encrypted.store.meta(erased_key)  # purged: the row keeps no seqNr, no events
    assert meta is not None and meta.seq_nr is None
    assert [r async for r in encrypted.store.read(erased_key, meta)] == []


async def test_snapshots_are_sealed_open_only_where_put_and_an_erasure_ends_them(
    encrypted: Encrypted,
) -> None:
    journals = encrypted.journals
    marker, journal_id = secret(), unique("snapshotted")
    journal = journals.journal(journal_id)
    await journal.append(events_with(marker))
    await journal.snapshots.put(2, JsonPayload.of({"state": marker}))
    await journal.snapshots.put(3, BinaryPayload(marker.encode()))

    # the store keeps ciphertext: neither snapshot's bytes are in any cell
    assert marker.encode() not in await encrypted.cassandra_cells()
    key = JournalKey(encrypted.settings.topic, journal_id)
    stored = await encrypted.store.latest_snapshot(key, 3, -1, 2**62)
    assert stored is not None and is_sealed(stored.payload)
    assert isinstance(stored.payload, BinaryPayload)
    data_key = await encrypted.journals.encryption.keys.for_read(key)  # type: ignore[union-attr]
    assert data_key is not None
    for journal_id_, seq_nr, label in (
        (journal_id, 2, SNAPSHOT),
        (journal_id, 3, b""),
        ("x", 3, SNAPSHOT),
    ):
        with pytest.raises(EnvelopeRefused):  # moved to a seqNr, to an event, to a journal
            open_sealed(data_key.cipher, journal_id_, seq_nr, stored.payload, label)

    # the putting process and another (a cache of its own)
    async with await Journals.connect(encrypted.settings, store=encrypted.store) as other:
        for client in (journals, other):
            snapshots = client.journal(journal_id).snapshots
            latest = await snapshots.latest()
            assert latest is not None
            assert (latest.seq_nr, latest.payload) == (3, BinaryPayload(marker.encode()))
            at_2 = await snapshots.latest(2)
            assert at_2 is not None and at_2.payload == JsonPayload.of({"state": marker})

    await journal.erase()
    # the erasing process and a fresh one (the other may trust its cached key a while: the docs)
    async with await Journals.connect(encrypted.settings, store=encrypted.store) as fresh:
        for client in (journals, fresh):
            snapshots = client.journal(journal_id).snapshots
            with pytest.raises(JournalErased):
                await snapshots.latest()
            with pytest.raises(JournalErased):
                await snapshots.put(1, TextPayload("again"))
    assert marker.encode() not in await encrypted.cassandra_cells()


class FailingOnce:
    """A key store whose `destroy` fails once: a crash between the Purge and the key's end."""

    def __init__(self, store: KeyStore) -> None:
        self.store = store
        self.failed = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def destroy(self, key: JournalKey) -> None:
        if not self.failed:
            self.failed = True
            raise ConnectionError("crashed before the key was destroyed")
        await self.store.destroy(key)


@pytest.mark.parametrize("step", ["before the purge", "before the key is destroyed"])
async def test_an_erasure_stopped_between_its_steps_is_never_half_done_and_resumes(
    encrypted: Encrypted, step: str
) -> None:
    journals = encrypted.journals
    journal_id = unique("crash")
    journal = journals.journal(journal_id)
    await journal.append(events_with(secret()))
    assert journals.encryption is not None
    encryption = journals.encryption
    keys = encryption.keys
    real = keys.store
    purge = journal.purge
    if step == "before the purge":

        async def crashing(*, origin: str | None = None) -> Position:
            raise ConnectionError("crashed before the Purge")

        purge = crashing
    else:
        keys.store = FailingOnce(real)  # type: ignore[assignment]
    try:
        with pytest.raises(ConnectionError):
            await encryption.erase(journal.key, purge)
    finally:
        keys.store = real

    # not done, and said so; not half done: the journal no longer reads, its key is kept
    assert await journal.erasure_state() is KeyState.ERASING
    with pytest.raises(JournalErased):
        await read(journals, journal_id)
    row: KeyRow | None = await keys.store.get(journal.key)
    assert row is not None and row.wrapped is not None

    erasure = await journal.erase()  # resumed
    assert not erasure.already and erasure.position is not None
    assert await journal.erasure_state() is KeyState.ERASED
    row = await keys.store.get(journal.key)
    assert row is not None and row.wrapped is None


async def append_values(settings: Settings, journal_id: str) -> list[bytes]:
    """The raw values of a journal's Append records in the topic, in log order."""
    return [
        record.value or b""
        for record in await read_partition(settings.kafka_bootstrap, settings.topic, 0)
        if record.key == journal_id.encode()
        and dict(record.headers).get(ACTION_HEADER, b"").find(b'"append"') >= 0
    ]


async def test_an_append_is_sealed_once_and_a_delete_inside_it_still_reads(
    encrypted: Encrypted,
) -> None:
    """One envelope an Append (docs/erasure.md, "The envelope"): its value holds it once, and a
    read of the events above a Delete that falls inside the Append, or of a range inside it,
    opens it and slices, from Kafka and from the store alike."""
    journals = encrypted.journals
    marker, journal_id = secret(), unique("once")
    events = events_with(marker)
    journal = journals.journal(journal_id)
    await journal.append(events)
    [value] = await append_values(encrypted.settings, journal_id)
    assert b"KJE1" not in value and value.count(b"KJE2") == 3  # the envelope, 2 references
    assert marker.encode() not in value

    assert (await journal.delete(2)).delete_to == 2
    for where in ("kafka", "store"):
        if where == "store":
            await encrypted.replicate()
        assert [r.event for r in await read(journals, journal_id)] == events[2:], where
        in_range = [r.event async for r in journal.read(3, 3)]
        assert in_range == [events[2]], where
    subscribed = [
        item.record.event
        async for item in journals.subscribe()
        if isinstance(item, SubscribedEvent) and item.key.id == journal_id
    ]
    assert subscribed == events


class Builds:
    """The events a decode builds (`Event` in journal/codec/events_binary.py) and the ones an
    opening rebuilds after it (`replace` in journal/codec/envelope.py), counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built = self.rebuilt = 0

        def built(*args: Any, **kwargs: Any) -> Event:
            self.built += 1
            return Event(*args, **kwargs)

        def rebuilt(struct: Any, **changes: Any) -> Any:
            self.rebuilt += 1
            return replace(struct, **changes)

        monkeypatch.setattr(events_binary, "Event", built)
        monkeypatch.setattr(envelope, "replace", rebuilt)


async def test_a_read_builds_each_event_once_with_its_clear_payload(
    encrypted: Encrypted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened inside the decode (BENCHMARKS.md, "Opened inside the decode"): a read of an
    encrypted journal, from the store's rows and from Kafka's head, builds each event once, with
    its clear payload, and rebuilds none after decoding it."""
    journals = encrypted.journals
    marker, journal_id = secret(), unique("built_once")
    journal = journals.journal(journal_id)
    stored = events_with(marker)
    await journal.append(stored)
    await encrypted.replicate()
    head = [Event(5, payload=TextPayload(marker)), Event(6, payload=JsonPayload.of([marker]))]
    await journal.append(head)

    builds = Builds(monkeypatch)
    assert [r.event for r in await read(journals, journal_id)] == [*stored, *head]
    assert (builds.built, builds.rebuilt) == (6, 0)


async def subscribed(journals: Journals) -> list[tuple[str, Event]]:
    """The events a subscription of the topic from its start delivers, with their journals."""
    return [
        (item.key.id, item.record.event)
        async for item in journals.subscribe()
        if isinstance(item, SubscribedEvent)
    ]


async def group_delivered(journals: Journals, count: int) -> list[GroupEvent]:
    """The first `count` events a new group's one member delivers, each acknowledged."""
    member = journals.subscribe_group(unique("g"), heartbeat_s=0.3)
    got: list[GroupEvent] = []
    async with member, asyncio.timeout(60):
        async for batch in member.batches():
            got += batch
            member.ack(*(e.position for e in batch))
            if len(got) >= count:
                return got
    raise AssertionError(f"the member stopped after {len(got)} events")


async def test_subscriptions_and_groups_build_each_event_once_with_its_clear_payload(
    encrypted: Encrypted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened inside the decode, as a read is ("decode once"): a subscription, from Kafka's
    records and from the store's rows (beyond retention), and a group member build each event
    once with its clear payload, rebuild none, and look a journal's key up once a fetch (or a
    stored Append), not once an event."""
    # a topic of its own: only these journals' events are decoded and counted
    settings = encrypted.settings.model_copy(update={"topic": unique("built_once_topic")})
    await ensure_topic(settings.kafka_access(), TopicSpec(quarantine_topic(settings.topic), 1))
    async with await Journals.connect(settings, store=encrypted.store) as journals:
        appended = {unique("sub_a"): events_with(secret()), unique("sub_b"): events_with(secret())}
        for journal_id, events in appended.items():
            await journals.journal(journal_id).append(events)
        expected = [(journal_id, e) for journal_id, events in appended.items() for e in events]
        assert journals.encryption is not None
        keys = journals.encryption.keys
        for_reads, lookups = keys.for_reads, 0  # journals whose key was asked for

        async def counted(asked: Collection[JournalKey]) -> Any:
            nonlocal lookups
            lookups += len(asked)
            return await for_reads(asked)

        monkeypatch.setattr(keys, "for_reads", counted)
        builds = Builds(monkeypatch)

        assert await subscribed(journals) == expected  # from Kafka
        assert (builds.built, builds.rebuilt) == (len(expected), 0)
        assert 0 < lookups <= len(appended)  # each journal's one record is in one fetch

        builds.built = lookups = 0
        got = await group_delivered(journals, len(expected))
        assert [(e.key.id, e.record.event) for e in got] == expected
        assert (builds.built, builds.rebuilt) == (len(expected), 0)
        assert 0 < lookups <= len(appended)

        await Encrypted(settings, encrypted.store, journals).replicate()
        await expire_all(settings, settings.topic, 1)
        builds.built = lookups = 0
        assert await subscribed(journals) == expected  # from the store's rows
        assert (builds.built, builds.rebuilt) == (len(expected), 0)
        assert lookups == len(appended)  # one a stored Append


async def test_events_sealed_one_by_one_before_still_read_on_every_path(
    encrypted: Encrypted,
) -> None:
    """Version 1 envelopes (one an event), as the code before wrote them, beside a version 2
    Append: read from Kafka, from the store, and by a subscription."""
    journals, settings = encrypted.journals, encrypted.settings
    marker, journal_id = secret(), unique("v1")
    key = JournalKey(settings.topic, journal_id)
    assert journals.encryption is not None
    data_key = await journals.encryption.keys.for_append(key)
    old = events_with(marker)
    sealed_v1 = [
        e
        if e.payload is None
        else Event(e.seq_nr, e.tags, seal(data_key.cipher, journal_id, e.seq_nr, e.payload))
        for e in old
    ]
    # written as the earlier code wrote them: the payloads sealed one by one, the record plain
    async with await Journals.connect(
        settings.model_copy(update={"kek": None}), store=encrypted.store
    ) as plain:
        await plain.journal(journal_id).append(sealed_v1)
    await journals.journal(journal_id).append([Event(5, payload=TextPayload(marker + "-v2"))])
    expected = [*old, Event(5, payload=TextPayload(marker + "-v2"))]
    [v1_value, v2_value] = await append_values(settings, journal_id)
    assert v1_value.count(b"KJE1") == 3 and b"KJE2" in v2_value

    assert [r.event for r in await read(journals, journal_id)] == expected  # from Kafka
    await encrypted.replicate()
    assert [r.event for r in await read(journals, journal_id)] == expected  # from the store
    subscribed = [
        item.record.event
        async for item in journals.subscribe()
        if isinstance(item, SubscribedEvent) and item.key.id == journal_id
    ]
    assert subscribed == expected


async def test_erasing_needs_the_deployments_kek(stack: Stack, keyspace: str) -> None:
    settings = settings_for(stack, unique("journal_plain"), keyspace)
    async with await Journals.connect(settings) as journals:
        with pytest.raises(SetupMissing, match="KJ_KEK"):
            await journals.journal("any").erase()


async def test_a_group_member_never_delivers_an_erased_journal_and_moves_past_it(
    encrypted: Encrypted,
) -> None:
    journals = encrypted.journals
    erased_id, kept_id = unique("g_erased"), unique("g_kept")
    kept_events = events_with(secret())
    await journals.journal(erased_id).append(events_with(secret()))
    await journals.journal(kept_id).append(kept_events)
    await journals.journal(erased_id).erase()

    member = journals.subscribe_group(unique("g"), heartbeat_s=0.3)
    got: list[GroupEvent] = []
    quiet = 0  # heartbeats since the last event
    seen = asyncio.Event()

    async def consume() -> None:
        nonlocal quiet
        async for batch in member.batches():
            got.extend(batch)
            quiet = 0 if batch else quiet + 1
            seen.set()

    await member.start()
    task = asyncio.create_task(consume())
    try:
        async with asyncio.timeout(60):  # until the kept journal came, then three heartbeats
            while not (any(e.key.id == kept_id for e in got) and quiet >= 3):
                seen.clear()
                await seen.wait()
        assert [e.record.event for e in got if e.key.id == kept_id] == kept_events
        assert not [e for e in got if e.key.id == erased_id]
        member.ack(*(e.position for e in got))
        # the erased journal's records were acknowledged by the member: none is left open
        assert member.unacknowledged_records() == 0
    finally:
        await member.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
