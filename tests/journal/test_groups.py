"""Subscription groups: checkpoint arithmetic; against the real servers, members that share
a topic's partitions, one dying mid-batch, and a group restarted at its checkpoint."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from journal.core.model import Ack, Event, JsonPayload
from journal.errors import InvalidValue
from journal.subscriptions.groups import (
    Checkpoint,
    EventPosition,
    GroupEvent,
    GroupMember,
    group_id,
    group_statuses,
    reset_group,
)
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique


def test_the_checkpoint_moves_only_over_acknowledged_records() -> None:
    checkpoint = Checkpoint(5)
    assert checkpoint.commit_offset() == 5
    checkpoint.delivered(5, [0, 1, 2])
    checkpoint.delivered(6, [])  # rejected: nothing to acknowledge
    checkpoint.delivered(7, [1])  # its event 0 filtered out by tags
    checkpoint.passed(9)  # records without Appends
    assert checkpoint.commit_offset() == 5
    assert checkpoint.ack(5, 2) and checkpoint.ack(7, 1)  # out of order
    assert checkpoint.commit_offset() == 5, "record 5 is only partly acknowledged"
    assert checkpoint.ack(5, 0)
    assert checkpoint.unacknowledged == 1
    assert not checkpoint.ack(5, 0), "acknowledged twice"
    assert not checkpoint.ack(7, 0), "never delivered"
    assert not checkpoint.ack(4, 0), "below the start"
    assert checkpoint.commit_offset() == 5
    assert checkpoint.ack(5, 1)
    assert checkpoint.commit_offset() == 10, "past the passed records"
    checkpoint.delivered(12, [0])
    assert checkpoint.commit_offset() == 12
    checkpoint.ack(12, 0)
    assert checkpoint.commit_offset() == 13


def test_an_event_position_survives_its_encoding() -> None:
    position = EventPosition(7, 123456789, 3)
    assert EventPosition.parse(position.encode()) == position
    for garbage in ["%%%", "", EventPosition(1, 2, 3).encode()[:-2], "LTE6MjoM"]:
        with pytest.raises(InvalidValue, match="not an event position"):
            EventPosition.parse(garbage)


def test_a_group_name_is_checked_at_construction() -> None:
    assert group_id("billing-v2") == "kafka-journal.subscription.billing-v2"
    for bad in ["", "a b", "é", "x" * 201]:
        with pytest.raises(InvalidValue, match="not a subscription group name"):
            group_id(bad)


PARTITIONS = 8
JOURNALS = 24


def event(journal_id: str, seq_nr: int, rejected: bool = False) -> Event:
    payload = JsonPayload.of({"j": journal_id, "n": seq_nr, "rejected": rejected})
    return Event(seq_nr, frozenset(), payload)


@dataclass
class Written:
    accepted: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # last seqNr

    def events(self) -> set[tuple[str, int]]:
        return {(j, n) for j, last in self.accepted.items() for n in range(1, last + 1)}


async def write(h: Harness, written: Written, rounds: int, rng: random.Random) -> None:
    """Appends of 1-3 events to every journal in turn; now and then a rejected one (seqNrs
    from 1 again, with Kafka's acknowledgement only: the fold rejects it)."""
    for _ in range(rounds):
        for i in range(JOURNALS):
            journal_id = f"j{i}"
            journal = h.journals.journal(journal_id)
            last = written.accepted[journal_id]
            n = rng.randint(1, 3)
            await journal.append([event(journal_id, s) for s in range(last + 1, last + n + 1)])
            written.accepted[journal_id] = last + n
            if rng.random() < 0.3:
                rejected = [event(journal_id, s, rejected=True) for s in (1, 2)]
                await journal.append(rejected, ack=Ack.KAFKA)


def write_until(
    h: Harness, written: Written, rng: random.Random, enough: asyncio.Event
) -> asyncio.Task[None]:
    """`write`, a round at a time, in a task until `enough` is set."""

    async def writing() -> None:
        while not enough.is_set():
            await write(h, written, 1, rng)

    return asyncio.create_task(writing())


@dataclass
class Running:
    """A member consuming in a task: what it got, and what it acknowledged."""

    member: GroupMember
    acks: Callable[[list[GroupEvent]], Sequence[GroupEvent]]
    got: list[GroupEvent] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)  # the member's, per event got
    acked: list[GroupEvent] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def consume(self) -> None:
        async for batch in self.member.batches():
            self.got += batch
            self.generations += [self.member.generation] * len(batch)
            acked = self.acks(batch)
            self.member.ack(*(e.position for e in acked))
            self.acked += acked

    async def start(self) -> Running:
        await self.member.start()
        self.task = asyncio.create_task(self.consume())
        return self

    async def stop(self) -> None:
        await self.member.stop()
        if self.task is not None:
            await asyncio.wait_for(self.task, 30)


def every(batch: list[GroupEvent]) -> Sequence[GroupEvent]:
    return batch


@dataclass
class EveryOther:
    """Acknowledges every other event it is handed, across batches: however the records fall
    into batches (one event each on a fast host), some events are acknowledged and some not."""

    handed: int = 0

    def __call__(self, batch: list[GroupEvent]) -> Sequence[GroupEvent]:
        acked = [e for i, e in enumerate(batch, self.handed) if i % 2 == 0]
        self.handed += len(batch)
        return acked


def ids(events: Sequence[GroupEvent]) -> list[tuple[str, int]]:
    return [(e.key.id, e.record.seq_nr) for e in events]


def check_in_order(running: Running) -> None:
    in_order(running.generations, ids(running.got))


def in_order(generations: Sequence[int], got: Sequence[tuple[str, int]]) -> None:
    """One member's stream (each event's journal id and seqNr, and the member's generation
    when it got it): within an assignment, each journal's seqNrs go up one at a time (in the
    log's order, never skipping an event)."""
    last: dict[tuple[int, str], int] = {}
    for generation, (journal_id, seq_nr) in zip(generations, got, strict=True):
        before = last.get((generation, journal_id))
        assert before is None or seq_nr == before + 1, f"{journal_id}: {seq_nr} after {before}"
        last[generation, journal_id] = seq_nr


def not_rejected(events: Sequence[GroupEvent]) -> None:
    for e in events:
        payload = e.record.event.payload
        assert isinstance(payload, JsonPayload) and isinstance(payload.value, dict)
        assert payload.value["rejected"] is False, f"a rejected event: {e}"


@pytest.fixture
async def h(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "groups", PARTITIONS) as connected:
        yield connected


@pytest.mark.integration
async def test_members_share_the_partitions_a_dead_member_s_events_come_again_and_a_restart_resumes(
    h: Harness,
) -> None:
    name = unique("g")
    written = Written()
    rng = random.Random(31)
    await write(h, written, 2, rng)
    await h.replicate()  # some records decided by the store's table, the rest by the fold
    members = [
        Running(h.journals.subscribe_group(name, heartbeat_s=0.5), acks)
        for acks in (every, every, EveryOther())
    ]
    survivors = members[:2]
    restarted = Running(h.journals.subscribe_group(name, heartbeat_s=0.5), every)
    try:
        for m in members:
            await m.start()
        await shared_and_killed(h, written, rng, members)
        for m in survivors:
            await m.stop()

        before = written.events()
        await write(h, written, 1, rng)  # while no member runs
        await restarted.start()
        new = written.events() - before

        async def resumed() -> bool:
            assert set(ids(restarted.got)) >= new, "the new events missing"
            return True

        await eventually(resumed, "the restarted group delivers what was written meanwhile")
        assert set(ids(restarted.got)) == new, "the restarted group repeated acknowledged events"
        check_in_order(restarted)
        await listed_and_reset(h, name, restarted)
    finally:
        for m in [*members, restarted]:
            await m.stop()


async def shared_and_killed(
    h: Harness, written: Written, rng: random.Random, members: list[Running]
) -> None:
    """Three members share the partitions while appends go on; the third dies mid-batch:
    the others deliver every accepted event, its unacknowledged ones included."""
    survivors, dying = members[:2], members[2]

    async def shared() -> bool:
        assignments = [set(m.member.assignment()) for m in members]
        return sum(len(a) for a in assignments) == PARTITIONS and all(assignments)

    def since_assigned() -> list[GroupEvent]:
        generation = dying.member.generation
        return [e for e, g in zip(dying.got, dying.generations, strict=True) if g == generation]

    async def dying_mid_batch() -> bool:
        # in its current assignment, some events acknowledged and some not
        got = set(ids(since_assigned()))
        return bool(got & set(ids(dying.acked))) and bool(got - set(ids(dying.acked)))

    # appends go on until the third member is caught mid-work: how fast the members join and
    # how records fall into batches depends on the host, so a fixed amount of writing may end
    # before the third member has anything of its own to acknowledge
    enough = asyncio.Event()
    writing = write_until(h, written, rng, enough)
    try:
        await eventually(shared, "three members share the 8 partitions")
        await eventually(dying_mid_batch, "the third member acknowledged some events, not all")
        generation = dying.member.generation
        at_death = [m.member.generation for m in survivors]  # then they take its partitions
        await dying.stop()  # mid-work: every other event never acknowledged
    finally:
        enough.set()
        await writing
    # what it got since its last assignment and left unacknowledged: nobody else had it
    final = [e for e, g in zip(dying.got, dying.generations, strict=True) if g == generation]
    unacked = set(ids(final)) - set(ids(dying.acked))
    assert unacked, "the dying member left nothing unacknowledged"

    async def all_delivered() -> bool:
        # what the dying member acknowledged is handled: nobody need deliver it again
        delivered = {i for m in survivors for i in ids(m.got)} | set(ids(dying.acked))
        assert written.events() - delivered == set(), "accepted events missing"
        return True

    await eventually(all_delivered, "every accepted event delivered to the group")
    redelivered = {
        i
        for m, before in zip(survivors, at_death, strict=True)
        for i, g in zip(ids(m.got), m.generations, strict=True)
        if g > before
    }
    assert unacked - redelivered == set(), "the dead member's unacknowledged events lost"
    for m in members:
        check_in_order(m)
        not_rejected(m.got)
    assert {i for m in members for i in ids(m.got)} <= written.events()


async def listed_and_reset(h: Harness, name: str, running: Running) -> None:
    """The group's status names its member and partitions; a reset waits for no member."""
    kafka, topic = h.settings.kafka_access(), h.settings.topic
    (status,) = [s for s in await group_statuses(kafka, topic) if s.name == name]
    assert [ps for _, ps in status.members] == [tuple(range(PARTITIONS))]
    assert {p.member for p in status.partitions} == {status.members[0][0]}
    assert all(0 <= p.lag <= p.end for p in status.partitions)
    with pytest.raises(InvalidValue, match="active members"):
        await reset_group(kafka, topic, name, None)
    await running.stop()
    moved = await reset_group(kafka, topic, name, None)
    assert moved == dict.fromkeys(range(PARTITIONS), 0)
    (status,) = [s for s in await group_statuses(kafka, topic) if s.name == name]
    assert status.members == () and status.state == "Empty"
    assert [(p.committed, p.lag) for p in status.partitions] == [
        (0, p.end) for p in status.partitions
    ]


@pytest.mark.integration
async def test_a_member_that_never_acks_stops_receiving_at_its_cap_until_acks_come(
    h: Harness,
) -> None:
    """Issue 38: a member holds every delivered, unacknowledged record; without a cap a client
    that never acks grows the process with the topic."""
    cap, journals = 5, 12
    for i in range(journals):
        await h.journals.journal(f"cap{i}").append([event(f"cap{i}", 1)])
    member = h.journals.subscribe_group(unique("g"), heartbeat_s=0.3, max_unacked=cap)
    got: list[GroupEvent] = []
    quiet = 0  # heartbeats since the last event: the member fetched (paused) and found nothing
    seen = asyncio.Event()

    async def consume() -> None:
        nonlocal quiet
        async for batch in member.batches():
            got.extend(batch)
            quiet = 0 if batch else quiet + 1
            seen.set()

    async def settled_at(count: int) -> None:
        """Until `count` events came and then three heartbeats: nothing more is coming."""
        async with asyncio.timeout(60):
            while not (len(got) >= count and quiet >= 3):
                seen.clear()
                await seen.wait()

    await member.start()
    task = asyncio.create_task(consume())
    try:
        await settled_at(cap)
        assert len(got) == cap, "a member that never acks got past its cap"
        assert member.unacknowledged_records() == cap
        assert member.ack(*(e.position for e in got[:2])) == 2
        await settled_at(cap + 2)
        assert len(got) == cap + 2, "two acks made room for two records, no more"
        member.ack(*(e.position for e in got))
        await settled_at(journals)
        assert sorted(e.key.id for e in got) == sorted(f"cap{i}" for i in range(journals))
    finally:
        await member.stop()
        await asyncio.wait_for(task, 30)


@pytest.mark.integration
async def test_a_member_reading_from_the_store_stops_at_its_cap_too(stack: Stack) -> None:
    """Beyond Kafka's retention a member reads the store's Appends: its cap holds there as in
    Kafka (the store's read stepped once per Append, not once per gap)."""
    cap, journals = 3, 10
    async with harness(stack, unique("kj_groups"), unique("gone"), 1) as gone:
        positions = [
            await gone.journals.journal(f"s{i}").append([event(f"s{i}", 1)])
            for i in range(journals)
        ]
        await gone.replicate()
        admin = AIOKafkaAdminClient(bootstrap_servers=gone.settings.kafka_bootstrap)
        await admin.start()
        try:  # as retention would: the member must read them from the store
            tp = TopicPartition(gone.settings.topic, 0)
            await admin.delete_records({tp: RecordsToDelete(positions[-1].offset + 1)})
        finally:
            await admin.close()
        await gone.journals.journal("after").append([event("after", 1)])  # the gap's end
        member = gone.journals.subscribe_group(unique("g"), heartbeat_s=0.3, max_unacked=cap)
        got: list[GroupEvent] = []
        quiet, seen, acking = 0, asyncio.Event(), False

        async def consume() -> None:
            nonlocal quiet
            async for batch in member.batches():
                got.extend(batch)
                if acking:
                    member.ack(*(e.position for e in batch))
                quiet = 0 if batch else quiet + 1
                seen.set()

        async def settled() -> None:
            async with asyncio.timeout(60):
                while not (got and quiet >= 3):
                    seen.clear()
                    await seen.wait()

        await member.start()
        task = asyncio.create_task(consume())
        try:
            await settled()
            assert len(got) == cap, "a member reading the store got past its cap"
            acking = True
            member.ack(*(e.position for e in got))
            async with asyncio.timeout(60):
                while len(got) < journals + 1:
                    seen.clear()
                    await seen.wait()
            assert sorted(e.key.id for e in got) == sorted(
                [*(f"s{i}" for i in range(journals)), "after"]
            )
        finally:
            await member.stop()
            await asyncio.wait_for(task, 30)


@pytest.mark.integration
async def test_a_member_skips_the_appends_a_replicated_delete_or_purge_removed(
    stack: Stack,
) -> None:
    """The `appends` bound (docs/operations.md): once replication applied a Delete or Purge
    that removed an Append's events, a member skips that Append, as a subscription does."""
    async with harness(stack, unique("kj_groups"), unique("removed"), 1) as one:
        deleted, purged = one.journals.journal("deleted"), one.journals.journal("purged")
        await deleted.append([event("deleted", 1), event("deleted", 2)])
        await deleted.append([event("deleted", 3)])
        await purged.append([event("purged", 1)])
        await one.replicate()  # stored, then removed in a later batch
        await deleted.delete(2)
        await purged.purge()
        await one.journals.journal("end").append([event("end", 1)])  # last in the partition
        await one.replicate()
        member = one.journals.subscribe_group(unique("g"), heartbeat_s=0.3)
        got: list[GroupEvent] = []

        async def consume() -> None:
            async for batch in member.batches():
                got.extend(batch)
                member.ack(*(e.position for e in batch))
                if ("end", 1) in ids(got):
                    return

        await member.start()
        try:
            await asyncio.wait_for(consume(), 60)
        finally:
            await member.stop()
        assert ids(got) == [("deleted", 3), ("end", 1)]


@pytest.mark.integration
async def test_the_group_listing_reuses_one_admin_client_until_the_journals_close(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: `GET /subscriptions` built an admin client (and two more clients) per
    request. Counted, not mocked: the real clients run, wrapped."""
    from aiokafka.admin import AIOKafkaAdminClient

    from journal.client.journals import Journals
    from web.backend import topic_group_statuses

    counts = {"start": 0, "close": 0}
    start, close = AIOKafkaAdminClient.start, AIOKafkaAdminClient.close

    async def counted_start(self: AIOKafkaAdminClient) -> None:
        counts["start"] += 1
        await start(self)

    async def counted_close(self: AIOKafkaAdminClient) -> None:
        counts["close"] += 1
        await close(self)

    name = unique("g")
    await reset_group(h.settings.kafka_access(), h.settings.topic, name, None)  # checkpoints
    monkeypatch.setattr(AIOKafkaAdminClient, "start", counted_start)
    monkeypatch.setattr(AIOKafkaAdminClient, "close", counted_close)
    j = h.journals  # its parts, with a group admin of its own, which it closes
    journals = Journals(j.topic, j.writer, j.store, j.index, j.fence, j.kafka)
    try:
        for _ in range(3):
            assert name in [s.name for s in await topic_group_statuses(journals)]
        assert counts == {"start": 1, "close": 0}, "an admin client per listing"
    finally:
        await journals.close()
    assert counts == {"start": 1, "close": 1}, "the kept admin client closed with the journals"
