"""Subscription groups: a named group whose members share a topic's partitions, with
checkpoints kept by Kafka (a consumer group and its committed offsets).

A member (`GroupMember`) is an aiokafka consumer in group `kafka-journal.subscription.<name>`
without auto-commit. Kafka assigns it some partitions (rebalancing as members come and go);
each is read from the group's committed offset on, and what it delivers is decided exactly as
`journal.subscriptions.subscription` decides it (the same readers, store table and fold): only
accepted events, each partition in log order.

Checkpoints: the member acknowledges each event it has handled (`ack`, by the event's
`EventPosition`). A partition's committed offset is the record after the last one whose
delivered events are all acknowledged (`Checkpoint`): a record with nothing to deliver
(rejected, not an Append, no event with the tags) counts as acknowledged. The member commits
as it goes, when partitions are revoked, and when it stops; unacknowledged events of a
revoked partition are dropped here and delivered again by the member that takes it over, as
are those of a member that dies. Delivery is at least once; nothing is skipped.

Backpressure: a member keeps each delivered record until its events are acknowledged, so it
holds at most `GroupConfig.max_unacked` such records. At the cap it pauses its partitions
(still polling, so it stays in the group) and delivers nothing but heartbeats until acks come;
a fetch asks for no more records than the room left, so the cap is exact. Reading from the
store (records beyond Kafka's retention) waits at the cap between the store's pages.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Collection, Container, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import ConsumerStoppedError
from aiokafka.protocol.admin import DescribeGroupsRequest_v1
from aiokafka.protocol.api import Request
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from journal.core.model import EventRecord, JournalKey
from journal.errors import InvalidValue, StoreUnavailable
from journal.kafka.consumers import log_start, start_consumer, stop_consumer
from journal.kafka.driver_errors import KafkaError, core_error
from journal.kafka.topic import partition_count
from journal.metrics import METRICS
from journal.store.base import EventualJournal
from journal.subscriptions import DEFAULT_MAX_UNACKED
from journal.subscriptions.subscription import (
    HEARTBEAT_S,
    Offsets,
    Openers,
    Subscription,
    SubscriptionConfig,
    SubscriptionItem,
    SubscriptionPosition,
    _PartitionReader,
    chain_slots,
    decode_token,
    encode_token,
)
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)

GROUP_PREFIX = "kafka-journal.subscription."
_LAG = "kafka_journal_group_lag_records"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


def group_id(name: str) -> str:
    """The Kafka consumer group of subscription group `name` (InvalidValue if not a name)."""
    if not _NAME.fullmatch(name):
        raise InvalidValue(f"not a subscription group name (1-200 of A-Za-z0-9._-): {name!r}")
    return GROUP_PREFIX + name


class EventPosition(msgspec.Struct, frozen=True, gc=False):
    """One delivered event: the record (partition, offset) and its index among the Append's
    events. What a member acknowledges. `partition` numbers the partitions of the topic's
    chain of grows in order, as a subscription position does (the topic's own keep theirs)."""

    partition: int
    offset: int
    index: int

    def encode(self) -> str:
        text = f"{self.partition}:{self.offset}:{self.index}"
        return encode_token(text)

    @classmethod
    def parse(cls, encoded: str) -> EventPosition:
        """A position `encode` made; InvalidValue for anything else."""
        try:
            partition, offset, index = (int(part) for part in decode_token(encoded).split(":"))
        except ValueError:
            raise InvalidValue(f"not an event position: {encoded[:100]!r}") from None
        if partition < 0 or offset < 0 or index < 0:
            raise InvalidValue(f"not an event position: {encoded[:100]!r}")
        return cls(partition, offset, index)


class GroupEvent(msgspec.Struct, frozen=True, gc=False):
    """An accepted event of journal `key`, delivered to a member: acknowledge `position`."""

    key: JournalKey
    record: EventRecord
    position: EventPosition


class Checkpoint:
    """One partition's progress in a member: which delivered events are not acknowledged
    yet, and the offset to commit (`commit_offset`).

    Records are handled in offset order (`delivered`, `passed`); acknowledgements come in
    any order. The commit offset is the first record with an unacknowledged event, or, with
    none, the record after the last one handled.
    """

    def __init__(self, start: int) -> None:
        self._next = start  # every record below is handled
        self._open: dict[int, set[int]] = {}  # offset -> unacknowledged indices, by offset

    def delivered(self, offset: int, indices: Collection[int]) -> None:
        """Record `offset` is handled: the events at `indices` are out (none: nothing to ack)."""
        if indices:
            self._open[offset] = set(indices)
        self._next = max(self._next, offset + 1)

    def passed(self, through: int) -> None:
        """Every record up to `through` is handled."""
        self._next = max(self._next, through + 1)

    def ack(self, offset: int, index: int) -> bool:
        """Acknowledge one event; False if it is not out here (acknowledged already, or not
        delivered by this member since it got the partition)."""
        indices = self._open.get(offset)
        if indices is None or index not in indices:
            return False
        indices.discard(index)
        if not indices:
            del self._open[offset]
        return True

    def commit_offset(self) -> int:
        for offset in self._open:  # the first key is the lowest: inserted in offset order
            return offset
        return self._next

    @property
    def unacknowledged(self) -> int:
        return sum(len(indices) for indices in self._open.values())

    @property
    def open_records(self) -> int:
        """The records with an event out and not acknowledged: what the member holds."""
        return len(self._open)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A member's options: `heartbeat_s`, how long without events before an empty batch;
    Kafka's group session and heartbeat intervals; `max_unacked`, the delivered records it
    holds unacknowledged at most (at the cap it waits for acks: the module's docstring)."""

    subscription: SubscriptionConfig
    heartbeat_s: float = HEARTBEAT_S
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    max_unacked: int = DEFAULT_MAX_UNACKED

    def __post_init__(self) -> None:
        if self.heartbeat_s <= 0:
            raise InvalidValue(f"heartbeat_s must be positive, not {self.heartbeat_s}")
        if self.max_unacked < 1:
            raise InvalidValue(f"max_unacked must be positive, not {self.max_unacked}")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise InvalidValue("the heartbeat interval must be positive and below the session")


@dataclass(slots=True)
class _Owned:
    """A partition this member is assigned: its reader, its checkpoint, what was committed."""

    reader: _PartitionReader
    checkpoint: Checkpoint
    committed: int


class _Reading(Subscription):
    """The subscription machinery over the partitions a member owns: its readers decide,
    its `_deliver` registers every event with the partition's checkpoint."""

    _step_per_append = True  # the member's cap is checked between stored Appends

    def __init__(
        self,
        member: GroupMember,
        topic: str,
        partitions: int,
        store: EventualJournal,
        config: SubscriptionConfig,
        tags: Collection[str],
        openers: Openers | None,
    ) -> None:
        after = SubscriptionPosition()
        super().__init__(topic, partitions, store, config, after, tags, True, openers)
        self.member = member
        self.out: list[GroupEvent] = []

    def _active(self) -> Sequence[_PartitionReader]:
        return [owned.reader for owned in self.member.owned.values()]

    def _upkeep_wanted(self) -> bool:
        # a member owning nothing learns of a grow only here: subscribing the successor
        # is what gets it a share of its partitions
        return not self.member.owned or super()._upkeep_wanted()

    def _deliver(
        self,
        reader: _PartitionReader,
        key: JournalKey,
        events: Sequence[EventRecord],
        offset: int,
        around: tuple[Offsets, Offsets],
        into: list[SubscriptionItem],
        passed: Container[int] = (),
    ) -> None:
        """Every event of the Append with the tags is registered with the partition's
        checkpoint and delivered, but those `passed` (what cannot be opened, an erased
        journal's: `_unopened`, docs/erasure.md): never delivered, they count as acknowledged,
        so the checkpoint moves over them."""
        reader.cursor = offset
        owned = self.member.owned.get(reader.slot)
        if owned is None or owned.reader is not reader:
            return  # revoked meanwhile: the next owner delivers it
        tags = self._tags
        indices = [
            i
            for i, r in enumerate(events)
            if (not tags or tags & r.event.tags) and not (passed and i in passed)
        ]
        owned.checkpoint.delivered(offset, indices)
        self.out += [
            GroupEvent(key, events[i], EventPosition(reader.slot, offset, i)) for i in indices
        ]


class GroupMember:
    """A member of subscription group `name` over `topic`: `start` joins the group, `batches`
    delivers the events of the partitions Kafka assigns it, `ack` acknowledges them, `stop`
    commits what is acknowledged and leaves (also `async with`). `handover`, if given, is
    entered when partitions are revoked and exited once their checkpoints are committed: an
    owner that must finish the work in hand before the next member starts waits there."""

    def __init__(
        self,
        name: str,
        topic: str,
        partitions: int,
        store: EventualJournal,
        config: GroupConfig,
        tags: Collection[str] = (),
        handover: Callable[[], AbstractAsyncContextManager[object]] | None = None,
        openers: Openers | None = None,
    ) -> None:
        """`openers`: an encrypting deployment's (`Openers`): each payload opened as its
        record is decoded; an erased journal's events never delivered, acknowledged here."""
        self.name = name
        self._handover = handover
        self.group_id = group_id(name)
        self._topic = topic
        self._config = config
        self.owned: dict[int, _Owned] = {}
        self.generation = 0  # assignments received: each reads its partitions afresh
        self._reading = _Reading(self, topic, partitions, store, config.subscription, tags, openers)
        self._lock = asyncio.Lock()  # handling records vs. a rebalance
        self._consumer: AIOKafkaConsumer | None = None
        self._acked = asyncio.Event()  # set by an ack: a member at its cap may go on

    async def start(self) -> None:
        if self._consumer is not None:
            raise RuntimeError("this member has started already")
        sub = self._config.subscription
        consumer = AIOKafkaConsumer(
            **sub.kafka.client_options(),
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=sub.fetch_max_wait_ms,
            max_partition_fetch_bytes=sub.max_partition_fetch_bytes,
            session_timeout_ms=self._config.session_timeout_ms,
            heartbeat_interval_ms=self._config.heartbeat_interval_ms,
        )
        try:
            await self._reading._follow()  # the topic's chain of grows: every topic subscribed
            await consumer.start()
            consumer.subscribe(self._topics(), listener=_Listener(self, consumer))
        except KafkaError as error:
            await stop_consumer(consumer)
            raise core_error(error, f"{self.group_id}: cannot join") from error
        self._consumer = consumer

    async def stop(self) -> None:
        """Commit what is acknowledged, then leave the group: the rest goes to others."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            async with self._lock:
                await self._commit(consumer, list(self.owned))
        finally:
            self.owned.clear()
            await stop_consumer(consumer)

    async def __aenter__(self) -> GroupMember:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def assignment(self) -> list[int]:
        return sorted(self.owned)

    def ack(self, *positions: EventPosition) -> int:
        """Acknowledge these events (handled): how many were out here. The checkpoint moves
        over them at the next commit; events of a partition since revoked are not out."""
        acked = 0
        for position in positions:
            owned = self.owned.get(position.partition)
            if owned is not None and owned.checkpoint.ack(position.offset, position.index):
                acked += 1
        if acked:
            self._acked.set()
        return acked

    def unacknowledged_records(self) -> int:
        """The delivered records this member holds, not all of their events acknowledged."""
        return sum(owned.checkpoint.open_records for owned in self.owned.values())

    def _room(self) -> int:
        return self._config.max_unacked - self.unacknowledged_records()

    async def commit(self) -> None:
        """Commit every owned partition's checkpoint now (`batches` also does as it goes)."""
        consumer = self._started()
        async with self._lock:
            await self._commit(consumer, list(self.owned))

    async def batches(self) -> AsyncIterator[list[GroupEvent]]:
        """The events of this member's partitions as they come, a list at a time; an empty
        list after `heartbeat_s` without any. Ends when the member stops."""
        consumer = self._started()
        reading = self._reading
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while self._consumer is consumer:
            if reading._upkeep_due(loop.time()):
                await self._upkeep(consumer)
            wait_s = max(0.0, quiet_since + self._config.heartbeat_s - loop.time())
            room = self._throttle(self._started())
            try:
                fetched = await reading._fetch(consumer, min(wait_s, 1.0), max(room, 1))
            except ConsumerStoppedError:
                return
            async for batch in self._handle(consumer, fetched):
                quiet_since = loop.time()
                yield batch
            async with self._lock:
                await self._commit(consumer, list(self.owned), quietly=True)
            if loop.time() - quiet_since >= self._config.heartbeat_s:
                quiet_since = loop.time()
                yield []

    def _topics(self) -> list[str]:
        return [linked.topic for linked in self._reading._chain]

    async def _upkeep(self, consumer: AIOKafkaConsumer) -> None:
        """Follow the topic's grows (docs/growing.md): a successor created meanwhile is
        subscribed too (a rebalance), and a held partition of a successor is read once the
        group's checkpoint of its predecessor partition passed the cut (every event up to
        it acknowledged, by whichever member owned it) and that partition is replicated
        through it (its moved journals' bases are final)."""
        reading = self._reading
        reading._registry_read_at = asyncio.get_running_loop().time()
        if await reading._follow():
            consumer.subscribe(self._topics(), listener=_Listener(self, consumer))
        async with self._lock:
            held = [o.reader for o in self.owned.values() if o.reader.held]
            passed: dict[TopicPartition, bool] = {}  # asked once a predecessor partition
            for reader in held:
                linked, before = reading._predecessor(reader)
                cut = None if linked.grow is None else linked.grow.cut.get(before)
                if cut is None:
                    continue
                tp = TopicPartition(linked.topic, before)
                if tp not in passed:
                    try:
                        committed = await consumer.committed(tp)
                        pointer = await reading._store.pointer(linked.topic, before)
                    except (KafkaError, StoreUnavailable):
                        return  # asked again at the next upkeep
                    passed[tp] = (committed or 0) > cut and pointer is not None and pointer >= cut
                if passed[tp]:
                    reader.held = False
                    tp = reading._tps[reader.slot]
                    consumer.seek(tp, reader.next)
                    consumer.resume(tp)

    async def _handle(
        self,
        consumer: AIOKafkaConsumer,
        fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    ) -> AsyncIterator[list[GroupEvent]]:
        """What the fetch gave, as `Subscription._run` handles it, for owned partitions."""
        reading = self._reading
        chunks = []
        gaps: list[tuple[_PartitionReader, int]] = []
        for tp, records in fetched.items():
            owned = self.owned.get(reading._slots.get(tp, -1))
            if owned is None:
                continue
            reader = owned.reader
            messages = reader.pending(records, None)
            if not messages or reader.held:
                continue
            if not reader.whole and messages[0].offset > reader.next:
                if await log_start(consumer, tp) <= reader.next:
                    # not retention: records fetched before the partition came back to this
                    # member, from further on; read again from the checkpoint
                    async with self._lock:
                        if self._owns(reader):
                            consumer.seek(tp, reader.next)
                    continue
                gaps.append((reader, messages[0].offset))
            chunks.append((reader, messages))
        for reader, first in gaps:  # beyond retention: from the store, then Kafka
            stored = reading._from_store(reader, first - 1)
            while True:
                while self._room() <= 0 and self._owns(reader):
                    yield []  # a heartbeat while the client has not acknowledged enough
                    await self._wait_for_acks()
                async with self._lock:
                    if not self._owns(reader):
                        break
                    step = await anext(stored, None)
                    if step is not None:
                        self._passed(reader)
                if step is None:
                    break
                yield self._take()
            reader.restart_after_gap(first)
        async with self._lock:
            live = [(r, m) for r, m in chunks if self._owns(r)]
            await reading._handle(consumer, live)
            for reader, _ in live:
                self._passed(reader)
        batch = self._take()
        if batch:
            yield batch

    def _throttle(self, consumer: AIOKafkaConsumer) -> int:
        """The records the member may take now; at the cap its partitions are paused: the
        fetch still polls (the member stays in the group) but gets nothing until acks come."""
        room = self._room()
        if room > 0:  # but the held partitions of a grown topic (`_upkeep`)
            held = {self._reading._tps[o.reader.slot] for o in self.owned.values() if o.reader.held}
            consumer.resume(*(tp for tp in consumer.paused() if tp not in held))
        else:
            consumer.pause(*consumer.assignment())
        return room

    async def _wait_for_acks(self) -> None:
        """Until an ack comes, or a heartbeat interval passes."""
        self._acked.clear()
        with suppress(TimeoutError):
            await asyncio.wait_for(self._acked.wait(), self._config.heartbeat_s)

    def _owns(self, reader: _PartitionReader) -> bool:
        owned = self.owned.get(reader.slot)
        return owned is not None and owned.reader is reader

    def _passed(self, reader: _PartitionReader) -> None:
        owned = self.owned.get(reader.slot)
        if owned is not None and owned.reader is reader:
            owned.checkpoint.passed(reader.cursor)

    def _take(self) -> list[GroupEvent]:
        out, self._reading.out = self._reading.out, []
        return out

    def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("this member is not started")
        return self._consumer

    async def _commit(
        self, consumer: AIOKafkaConsumer, slots: Sequence[int], quietly: bool = False
    ) -> None:
        """Commit the checkpoints of `slots` (partitions of the chain) that moved; `quietly`:
        a failure (a rebalance under way) waits for the next commit, the revocation's."""
        moved = {}
        for slot in slots:
            owned = self.owned.get(slot)
            if owned is not None and owned.checkpoint.commit_offset() > owned.committed:
                moved[slot] = owned.checkpoint.commit_offset()
        if not moved:
            return
        tps = self._reading._tps
        offsets = {tps[slot]: OffsetAndMetadata(o, "") for slot, o in moved.items()}
        try:
            await consumer.commit(offsets)
        except KafkaError as error:
            if quietly:
                log.info("%s: commit deferred: %r", self.group_id, error)
                return
            raise core_error(error, f"{self.group_id}: cannot commit") from error
        for slot, offset in moved.items():
            self.owned[slot].committed = offset
            METRICS.counter("kafka_journal_group_commits_total", group=self.name).inc()
            highwater = consumer.highwater(tps[slot])
            if highwater is not None:
                lag = METRICS.gauge(_LAG, group=self.name, partition=str(slot))
                lag.set(max(0, highwater - offset))

    async def _assigned(self, consumer: AIOKafkaConsumer, tps: Collection[TopicPartition]) -> None:
        async with self._lock:
            self.generation += 1
            METRICS.counter("kafka_journal_group_rebalances_total", group=self.name).inc()
            reading = self._reading
            if any(tp not in reading._slots for tp in tps):
                await reading._follow()  # a successor another member subscribed first
            for tp in tps:
                slot = reading._slots.get(tp)
                if slot is None:
                    continue
                committed = await consumer.committed(tp)
                start = 0 if committed is None else committed
                held = reading._readers[slot]
                reader = _PartitionReader(
                    reading._store, tp.topic, tp.partition, start - 1, slot, held.moved_from
                )
                reading._readers[slot] = reader
                self.owned[slot] = _Owned(reader, Checkpoint(start), start)
                consumer.seek(tp, start)
                if reader.held:
                    consumer.pause(tp)
            log.info("%s: assigned %s", self.group_id, self.assignment())

    async def _revoked(self, consumer: AIOKafkaConsumer, tps: Collection[TopicPartition]) -> None:
        handover = self._handover() if self._handover is not None else nullcontext()
        async with handover, self._lock:
            slots = [s for tp in tps if (s := self._reading._slots.get(tp)) is not None]
            # if it fails, the next owner starts from the last commit: at least once
            await self._commit(consumer, slots, quietly=True)
            for slot in slots:
                self.owned.pop(slot, None)
                METRICS.remove(_LAG, group=self.name, partition=str(slot))


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, member: GroupMember, consumer: AIOKafkaConsumer) -> None:
        self._member = member
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        await self._member._revoked(self._consumer, revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        await self._member._assigned(self._consumer, assigned)


# --- administration: the groups of a topic, their lag, resets ---------------------------------


@dataclass(frozen=True, slots=True)
class GroupPartition:
    """A partition of a group's topic: its checkpoint (None: never committed), the end of its
    log, the records in between (`lag`), and the member that has it (None: nobody).
    `partition` is its slot, as an event position names it: past the topic's own partitions,
    those of its grown successors (docs/growing.md), `topic`'s `topic_partition` in Kafka."""

    partition: int
    committed: int | None
    end: int
    member: str | None
    topic: str
    topic_partition: int

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A subscription group of the topic: Kafka's state of it ("Stable", "Empty", ...), its
    members with their partitions, and each partition's checkpoint and lag."""

    name: str
    state: str
    members: tuple[tuple[str, tuple[int, ...]], ...]
    partitions: tuple[GroupPartition, ...]


async def group_slots(
    kafka: KafkaAccess, topic: str, store: EventualJournal | None
) -> list[TopicPartition]:
    """The partitions a group of `topic` reads, by slot: its own and, given the `store`, its
    grown successors' (`chain_slots`)."""
    return await chain_slots(topic, await partition_count(kafka, topic), store)


async def group_statuses(
    kafka: KafkaAccess, topic: str, store: EventualJournal | None = None
) -> list[GroupStatus]:
    """Every subscription group with a checkpoint or a member on `topic` (and, given the
    `store`, on its grown successors), by name (with clients of its own: a process that asks
    often keeps a `GroupAdmin`)."""
    slots = await group_slots(kafka, topic, store)
    admin = GroupAdmin(kafka)
    try:
        return await admin.statuses(slots)
    finally:
        await admin.close()


class GroupAdmin:
    """What `statuses` asks Kafka with (an admin client, a client for DescribeGroups, a
    consumer for the ends of the logs), started at the first call and kept until `close`: a
    worker answers every `GET /subscriptions` with one, not with three new connections each."""

    def __init__(self, kafka: KafkaAccess) -> None:
        self._kafka = kafka
        self._lock = asyncio.Lock()
        self._clients: tuple[AIOKafkaAdminClient, AIOKafkaClient, AIOKafkaConsumer] | None = None

    async def _started(self) -> tuple[AIOKafkaAdminClient, AIOKafkaClient, AIOKafkaConsumer]:
        async with self._lock:
            if self._clients is None:
                options = self._kafka.client_options()
                admin, client = AIOKafkaAdminClient(**options), AIOKafkaClient(**options)
                try:
                    await admin.start()
                    await client.bootstrap()
                    consumer = await start_consumer(self._kafka)
                except BaseException:
                    # not kept: the next call starts afresh
                    await admin.close()
                    await client.close()
                    raise
                self._clients = (admin, client, consumer)
            return self._clients

    async def close(self) -> None:
        async with self._lock:
            clients, self._clients = self._clients, None
        if clients is not None:
            admin, client, consumer = clients
            await admin.close()
            await client.close()
            await stop_consumer(consumer)

    async def statuses(self, slots: Sequence[TopicPartition]) -> list[GroupStatus]:
        """Every subscription group with a checkpoint or a member on `slots` (`group_slots`),
        by name."""
        try:
            admin, client, consumer = await self._started()
            return await _statuses(admin, client, consumer, slots)
        except KafkaError as error:
            topic = slots[0].topic
            raise core_error(error, f"{topic}: cannot describe the subscription groups") from error


async def _statuses(
    admin: AIOKafkaAdminClient,
    client: AIOKafkaClient,
    consumer: AIOKafkaConsumer,
    slots: Sequence[TopicPartition],
) -> list[GroupStatus]:
    ids = sorted(g[0] for g in await admin.list_consumer_groups() if g[0].startswith(GROUP_PREFIX))
    if not ids:
        return []
    ends = await consumer.end_offsets(list(slots))
    described = {gid: await _describe(admin, client, gid) for gid in ids}
    statuses = []
    for gid in ids:
        committed = await admin.list_consumer_group_offsets(gid, partitions=list(slots))
        group = described[gid]
        members = _members(group[5] if group else [], slots)
        if not members and all(committed.get(tp, _NONE).offset < 0 for tp in slots):
            continue  # a group of another topic
        owner = {p: m for m, ps in members for p in ps}
        statuses.append(
            GroupStatus(
                gid.removeprefix(GROUP_PREFIX),
                group[2] if group else "Dead",
                members,
                tuple(
                    GroupPartition(
                        slot,
                        _offset(committed.get(tp)),
                        ends[tp],
                        owner.get(slot),
                        tp.topic,
                        tp.partition,
                    )
                    for slot, tp in enumerate(slots)
                ),
            )
        )
    return statuses


_NONE = OffsetAndMetadata(-1, "")


class _DescribeGroup(Request[DescribeGroupsRequest_v1]):  # type: ignore[misc]
    """DescribeGroups v1: aiokafka 0.14's own negotiates v3 and reads the answer with v2's
    layout, which fails on a recent broker."""

    API_KEY = 15

    def __init__(self, group: str) -> None:
        self._group = group

    def build(self, struct: type[DescribeGroupsRequest_v1]) -> DescribeGroupsRequest_v1:
        return struct([self._group])


async def _describe(
    admin: AIOKafkaAdminClient, client: AIOKafkaClient, gid: str
) -> Sequence[Any] | None:
    """The group's entry of a DescribeGroups answer: (error, id, state, protocol type,
    protocol, members); None if the group is unknown."""
    answer = await client.send(await admin.find_coordinator(gid), _DescribeGroup(gid))
    groups: list[Sequence[Any]] = [g for g in answer.groups if g[1] == gid]
    return groups[0] if groups else None


def _offset(committed: OffsetAndMetadata | None) -> int | None:
    return None if committed is None or committed.offset < 0 else int(committed.offset)


def _members(
    described: Sequence[Sequence[object]], slots: Sequence[TopicPartition]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(member id, the slots it has) from a DescribeGroups answer's members."""
    slot_of = {tp: slot for slot, tp in enumerate(slots)}
    members = []
    for member in described:
        raw = member[4]
        assignment = ConsumerProtocolMemberAssignment.decode(raw) if raw else None
        mine = [] if assignment is None else assignment.partitions()
        found = (slot_of.get(TopicPartition(tp.topic, tp.partition)) for tp in mine)
        members.append((str(member[0]), tuple(sorted(s for s in found if s is not None))))
    return tuple(sorted(members))


@dataclass(frozen=True, slots=True)
class CheckpointMove:
    """What a reset does to one partition's checkpoint: from `before` (None: never committed)
    to `after`. `partition` is its slot (`GroupPartition`): `topic`'s `topic_partition`."""

    partition: int
    before: int | None
    after: int
    topic: str
    topic_partition: int


async def plan_reset(
    kafka: KafkaAccess,
    topic: str,
    name: str,
    to_time_ms: int | None,
    partitions: Collection[int] | None = None,
    store: EventualJournal | None = None,
) -> list[CheckpointMove]:
    """Where a reset of group `name` would move the checkpoints of `partitions` (slots, None:
    every partition of the topic and, given the `store`, of its grown successors): to the
    start of each partition (`to_time_ms` None) or to the first record at or after that time
    (the end where there is none). Changes nothing. InvalidValue while the group has a member
    (it would commit over them), or for a partition the topic does not have."""
    slots = await group_slots(kafka, topic, store)
    status = await _idle_status(kafka, slots, name)
    count = len(slots)
    chosen = range(count) if partitions is None else sorted(set(partitions))
    if missing := [p for p in chosen if not 0 <= p < count]:
        raise InvalidValue(f"{topic} has partitions 0..{count - 1}, not {missing}")
    tps = [slots[p] for p in chosen]
    consumer = await start_consumer(kafka)
    try:
        if to_time_ms is None:
            targets = await consumer.beginning_offsets(tps)
        else:
            found = await consumer.offsets_for_times({tp: to_time_ms for tp in tps})
            ends = await consumer.end_offsets(tps)
            targets = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
    except KafkaError as error:
        raise core_error(error, f"{group_id(name)}: cannot plan a reset") from error
    finally:
        await stop_consumer(consumer)
    before = {} if status is None else {p.partition: p.committed for p in status.partitions}
    return [
        CheckpointMove(slot, before.get(slot), int(targets[tp]), tp.topic, tp.partition)
        for slot, tp in zip(chosen, tps, strict=True)
    ]


async def commit_reset(
    kafka: KafkaAccess,
    topic: str,
    name: str,
    moves: Sequence[CheckpointMove],
    store: EventualJournal | None = None,
) -> None:
    """Commit `plan_reset`'s `moves`, and only theirs. InvalidValue, committing nothing, when
    the group has a member now or a checkpoint of theirs is no longer where the plan found it."""
    status = await _idle_status(kafka, await group_slots(kafka, topic, store), name)
    now = {} if status is None else {p.partition: p.committed for p in status.partitions}
    if changed := [m.partition for m in moves if now.get(m.partition) != m.before]:
        raise InvalidValue(
            f"group {name}: the checkpoints of partitions {changed} moved: look again"
        )
    gid = group_id(name)
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=gid, enable_auto_commit=False)
    try:
        await consumer.start()
        offsets = {
            TopicPartition(m.topic, m.topic_partition): OffsetAndMetadata(m.after, "")
            for m in moves
        }
        consumer.assign(list(offsets))  # a manual assignment commits without joining
        await consumer.commit(offsets)
    except KafkaError as error:
        raise core_error(error, f"{gid}: cannot reset") from error
    finally:
        await stop_consumer(consumer)


async def reset_group(
    kafka: KafkaAccess,
    topic: str,
    name: str,
    to_time_ms: int | None,
    partitions: Collection[int] | None = None,
    store: EventualJournal | None = None,
) -> dict[int, int]:
    """`plan_reset` then `commit_reset` at once: the new checkpoints."""
    moves = await plan_reset(kafka, topic, name, to_time_ms, partitions, store)
    await commit_reset(kafka, topic, name, moves, store)
    return {m.partition: m.after for m in moves}


async def _idle_status(
    kafka: KafkaAccess, slots: Sequence[TopicPartition], name: str
) -> GroupStatus | None:
    """Group `name`'s status (None: Kafka knows no checkpoint nor member of it); InvalidValue
    while it has members."""
    admin = GroupAdmin(kafka)
    try:
        status = {s.name: s for s in await admin.statuses(slots)}.get(name)
    finally:
        await admin.close()
    if status is not None and status.members:
        raise InvalidValue(f"group {name} has {len(status.members)} active members: stop them")
    return status
