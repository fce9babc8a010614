"""The direct client: `Journals` (one per process) assembles a topic's parts and hands out
`Journal`s (one per id). It reads through the reading flow (`journal.client.reading`), appends
through the writer and, when an append or a delete needs the log's verdict, through the
conditional appends (`journal.client.conditional`), which read through the same flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeGuard, TypeVar, cast

from journal.client.conditional import (
    ConditionalAppends,
    FreshKey,
    Idempotency,
    Produce,
    new_idempotency_key,
)
from journal.client.erasure import Encryption, Erasure, data_keys_of, seal_events
from journal.client.growing import Cuts, Growth, Predecessor, Registry
from journal.client.listing import DEFAULT_LIMIT, JournalIdPage, JournalIds, Successor
from journal.client.reading import JournalInfo, ReadingFlow
from journal.client.snapshots import JournalSnapshots
from journal.codec.envelope import Opener, request_digest_key
from journal.core.grow import Grow, check_not_reserved
from journal.core.index import RecordIndex
from journal.core.model import (
    SEQ_NR_MAX,
    Ack,
    Appended,
    AppendHeader,
    Deleted,
    DeleteHeader,
    Event,
    EventRecord,
    Events,
    HeaderMetadata,
    JournalKey,
    NewEvent,
    Payload,
    PayloadMetadata,
    Position,
    check_seq_nr,
)
from journal.errors import (
    GrownTopicConfigured,
    InvalidValue,
    JournalMoved,
    SetupMissing,
    StoreUnavailable,
    TopicGrown,
)
from journal.kafka.fence import Fence, HighWatermarks, Marks
from journal.kafka.guard import PartitionGuard
from journal.kafka.producer import JournalProducer
from journal.kafka.records import KafkaReadConfig, KafkaRecords
from journal.kafka.tail import TailConfig, TailIndex
from journal.kafka.topic import ensure_topic
from journal.kafka.writer import EncodedAppend, FenceFloor, JournalWriter, encode_append
from journal.replication.successor import predecessors_of
from journal.settings import Settings
from journal.store.base import EventualJournal, EventualStore, Snapshot
from journal.store.cassandra import CassandraStore
from journal.store.connecting import ConnectingStore
from journal.store.keys import KeyState
from journal.subscriptions import DEFAULT_MAX_UNACKED
from journal.subscriptions.groups import (
    GroupAdmin,
    GroupConfig,
    GroupMember,
    GroupStatus,
)
from journal.subscriptions.subscription import (
    HEARTBEAT_S,
    Openers,
    SubscriptionConfig,
    SubscriptionItem,
    SubscriptionPosition,
    chain_slots,
    end_position,
    subscribe,
    subscribe_batches,
)

_T = TypeVar("_T")


class Appending(Protocol):
    """What `append_events` appends through: a `Journal` (or a stand-in for one)."""

    async def append(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata = ...,
        headers: Mapping[str, str] | None = ...,
        expected_seq_nr: int | None = ...,
        idempotency_key: str | None = ...,
        ack: Ack = ...,
    ) -> Appended:
        """Append consecutive events atomically; returns once the log accepted them
        (SeqNrConflict if it did not), or with `Ack.KAFKA` and no `expected_seq_nr` once
        Kafka acknowledged them."""
        ...

    async def append_at_end(
        self,
        events: Sequence[NewEvent],
        *,
        metadata: PayloadMetadata = ...,
        headers: Mapping[str, str] | None = ...,
        expected_seq_nr: int | None = ...,
        idempotency_key: str | FreshKey | None = ...,
    ) -> Appended:
        """Append events at the journal's end, numbered by the process that serialises the
        journal's appends; returns once the log accepted them, with their seqNrs."""
        ...


async def append_events(
    journal: Appending,
    events: tuple[Event, ...] | tuple[NewEvent, ...],
    *,
    metadata: PayloadMetadata,
    headers: Mapping[str, str],
    expected_seq_nr: int | None,
    idempotency_key: str | FreshKey | None,
    ack: Ack,
) -> Appended:
    """An append as a request states it (HTTP's body, the command line's arguments): events
    with seqNrs as they are, events without at the journal's end (which only `Ack.VERIFIED` can
    answer: their seqNrs are known once the log accepted them). `FreshKey`: a new key for an
    append at the end (the command line's default), none for events with seqNrs (a repeat of
    the same seqNrs is safe without one)."""
    if _numbered(events):
        return await journal.append(
            events,
            metadata=metadata,
            headers=headers,
            expected_seq_nr=expected_seq_nr,
            idempotency_key=None if isinstance(idempotency_key, FreshKey) else idempotency_key,
            ack=ack,
        )
    if ack is not Ack.VERIFIED:
        raise InvalidValue(
            "events without seqNrs are numbered by the journal: only ack=verified answers them"
        )
    return await journal.append_at_end(
        cast(tuple[NewEvent, ...], events),  # a request gives one kind or the other
        metadata=metadata,
        headers=headers,
        expected_seq_nr=expected_seq_nr,
        idempotency_key=idempotency_key,
    )


def _numbered(events: tuple[Event, ...] | tuple[NewEvent, ...]) -> TypeGuard[tuple[Event, ...]]:
    return isinstance(events[0], Event)


async def _guard(
    topic: str,
    partitions: int,
    producer: JournalProducer,
    store: EventualStore,
    owned: list[Callable[[], Awaitable[None]]],
) -> PartitionGuard:
    """The guard of `topic`'s partition count (journal/kafka/guard.py), confirmed against the
    keyspace's record now (PartitionCountChanged: refused at start), or once the store is
    reached if it is not yet."""
    await producer.watch(topic)  # so the producer's metadata refreshes include the topic
    guard = PartitionGuard(topic, partitions, lambda: producer.partition_count(topic))
    try:
        await guard.confirm(store)
    except StoreUnavailable:
        confirming = asyncio.create_task(guard.confirm_when_reached(store))

        async def stop() -> None:
            confirming.cancel()
            await asyncio.gather(confirming, return_exceptions=True)

        owned.append(stop)
    guard.check()
    return guard


async def _refuse_successor(store: EventualStore, topic: str) -> None:
    """GrownTopicConfigured if a grow made `topic`; with the store down it cannot tell, and a
    process started then serves as configured (the worker checks again before it starts)."""
    try:
        chain = await predecessors_of(store, topic)
    except StoreUnavailable:
        return
    if chain:
        raise GrownTopicConfigured(topic, chain[-1].topic)


async def _refuse_grown(store: EventualStore, topic: str) -> None:
    """TopicGrown if a grow of `topic` is recorded: a core given an index but no `verdicts`
    has no index that holds a Seal's key (a worker's tables note no Mark), so no way to
    learn a cut from the log."""
    try:
        grow = await store.grow(topic)
    except StoreUnavailable:
        return  # cannot tell now (every core this project builds has a tail index)
    if grow is not None:
        raise TopicGrown(topic, grow.new_topic, grow.phase.value, "a core without a tail index")


@dataclass(frozen=True, slots=True)
class WorkerIndex:
    """The indexes of the topic a worker's Faust app runs on (`Journals.connect`'s `index`,
    `verdicts` and `scan_without_store`): the `Journals` of that topic reads with them, the
    chain's other topics' `Journals` as the direct client's."""

    topic: str
    index: RecordIndex
    verdicts: RecordIndex | None
    scan_without_store: bool


async def _growth(
    settings: Settings,
    store: EventualStore,
    index: RecordIndex,
    kafka: KafkaRecords,
    producer: JournalProducer,
    origin: str | None,
    owned: list[Callable[[], Awaitable[None]]],
    encryption: Encryption | None,
    worker: WorkerIndex | None = None,
) -> Growth:
    """How the direct client follows a grow of its topic (journal/client/growing.py): the
    registry (read now if the store answers), the cuts, and how NEW's `Journals` is built.
    `encryption`: OLD's, shared by NEW's `Journals`, its keys told NEW's predecessor first
    (one data key per journal across the chain, `key_identity`). `worker`: the indexes of the
    topic a worker's Faust app runs on, that topic's `Journals` reads with, when it is down the
    chain."""
    kafka_access = settings.kafka_access()
    registry = Registry(store, settings.topic, settings.grow_lease_s)
    with contextlib.suppress(StoreUnavailable):
        await registry.fresh()
    cuts = Cuts(settings.topic, registry, index, kafka_access, settings.grow_wait_s)
    cuts.learn(registry.record)

    async def build(grow: Grow) -> Journals:
        """NEW's `Journals`: its own writer (M partitions, guarded), index and fence; the
        producer, the store and Kafka's readers are shared."""
        if encryption is not None:
            encryption.keys.follow(settings.topic, grow.new_topic)
        new_owned: list[Callable[[], Awaitable[None]]] = []
        try:
            guard = await _guard(grow.new_topic, grow.partitions, producer, store, new_owned)
            writer = JournalWriter(
                producer, grow.partitions, settings.max_record_bytes, guard=guard
            )
            ours = worker if worker is not None and worker.topic == grow.new_topic else None
            new_index: RecordIndex
            if ours is not None:
                new_index = ours.index
            else:
                tail = TailConfig(
                    kafka=kafka_access,
                    max_journals=settings.tail_max_journals,
                    forgotten_capacity=settings.tail_forgotten_capacity,
                )
                new_index = await TailIndex.on_demand(
                    grow.new_topic, range(grow.partitions), store, tail
                )
                new_owned.append(new_index.close)
            fence: Fence
            if settings.read_fence == "mark":
                fence = Marks(writer, origin)
            else:
                fence = await HighWatermarks.start(grow.new_topic, kafka_access)
                new_owned.append(fence.close)
        except BaseException:
            for close in reversed(new_owned):
                await close()
            raise
        assert growth.predecessor_flow is not None
        predecessor = Predecessor(growth.predecessor_flow, cuts)
        # NEW may be grown in turn: its own growth, built as this one (a chain of grows)
        new_growth = await _growth(
            settings.model_copy(update={"topic": grow.new_topic}),
            store,
            new_index if ours is None or ours.verdicts is None else ours.verdicts,
            kafka,
            producer,
            origin,
            owned,
            encryption,
            None if ours is not None else worker,
        )
        successor = Journals(
            grow.new_topic,
            writer,
            store,
            new_index,
            fence,
            kafka,
            origin,
            verdicts=None if ours is None else ours.verdicts,
            scan_without_store=ours is not None and ours.scan_without_store,
            encryption=encryption,
            growth=new_growth,
            predecessor=predecessor,
        )
        new_growth.predecessor_flow = successor.reading
        successor.group_max_unacked = settings.group_max_unacked
        successor.reading.limit_scans(settings.max_kafka_only_scans)
        owned.extend(new_owned)  # closed with the old topic's parts, before them
        return successor

    growth = Growth(registry, cuts, build)
    return growth


class Journals:
    """Appends and reads journals of one topic, through Kafka and the eventual store.

    Built from its parts, it closes none of them; `connect` builds them from settings and
    closes what it built (`close`, or `async with`).
    """

    def __init__(
        self,
        topic: str,
        writer: JournalWriter,
        store: EventualJournal,
        index: RecordIndex,
        fence: Fence,
        kafka: KafkaRecords,
        origin: str | None = None,
        verdicts: RecordIndex | None = None,
        scan_without_store: bool = False,
        encryption: Encryption | None = None,
        growth: Growth | None = None,
        predecessor: Predecessor | None = None,
    ) -> None:
        """`growth`: the topic's grow as this client follows it (journal/client/growing.py);
        `predecessor`: the old topic, for the `Journals` of a grown one."""
        self.topic = topic
        # with a key-encryption key, payloads are sealed and opened here (docs/erasure.md)
        self.encryption = encryption
        self.growth = growth
        self.writer = writer
        self.store = store
        self.index = index
        self.fence = fence
        self.kafka = kafka
        self.origin = origin
        self._owned: list[Callable[[], Awaitable[None]]] = []
        self.reading = ReadingFlow(
            writer.partition_of,
            store,
            index,
            fence,
            kafka,
            scan_without_store,
            cuts=None if growth is None else growth.cuts.below,
            predecessor=predecessor,
        )
        # a worker's tables learn of a record only once its agent has handled it: a tailing
        # index of its own gives its conditional appends their verdicts sooner (app/worker.py)
        self.conditional = ConditionalAppends(self.reading, index if verdicts is None else verdicts)
        self._listing: JournalIds | None = None
        # a group member's cap (GroupConfig.max_unacked); `connect` takes the settings'
        self.group_max_unacked = DEFAULT_MAX_UNACKED
        self._group_admin: GroupAdmin | None = None  # made at the first group_statuses

    @classmethod
    async def connect(
        cls,
        settings: Settings,
        origin: str | None = None,
        *,
        store: EventualStore | None = None,
        index: RecordIndex | None = None,
        verdicts: RecordIndex | None = None,
        scan_without_store: bool = False,
        indexed_topic: str | None = None,
    ) -> Journals:
        """Connect to Kafka and Cassandra from `settings`, creating topic and schema if needed.

        Cassandra down is no failure: the store connects in the background meanwhile
        (`ConnectingStore`); a wrong login or a schema of another version is raised here.

        A `store`, `index` or `verdicts` (the index conditional appends ask, if not `index`)
        passed in (a worker's) stays its owner's to close. `scan_without_store`: with the store
        down, a journal the index cannot give whole is read by a scan of its partition, not
        refused (`_view_without_store`).

        It follows a grow of the topic (journal/client/growing.py) through the index that holds
        every key, a Seal's too: its own tail index, or a worker's `verdicts` (a tail of the
        owned partitions: the worker's tables note no Mark).

        `indexed_topic`: the topic of the chain `index`, `verdicts` and `scan_without_store`
        are for (a worker's whose Faust app runs on a grown topic: docs/growing.md); the
        `Journals` of the chain's other topics, this one's too, are built as the direct
        client's. None: `settings.topic`.
        """
        worker: WorkerIndex | None = None
        if indexed_topic is not None and indexed_topic != settings.topic:
            assert index is not None
            worker = WorkerIndex(indexed_topic, index, verdicts, scan_without_store)
            index, verdicts, scan_without_store = None, None, False
        owned: list[Callable[[], Awaitable[None]]] = []
        try:
            kafka_access = settings.kafka_access()
            # a certificate that fails verification: said now (TlsRefused), not retried
            await asyncio.to_thread(kafka_access.check_tls)
            partitions = await ensure_topic(kafka_access, settings.topic_spec())
            producer = JournalProducer(
                kafka_access,
                ack_timeout_s=settings.kafka_ack_timeout_s,
                linger_ms=0,
                max_request_size=max(settings.max_record_bytes + 1024, 1_048_576),
                metadata_max_age_ms=int(settings.kafka_metadata_max_age_s * 1000),
            )
            await producer.start()
            owned.append(producer.stop)
            if store is None:
                # started while Cassandra is down, the client appends and reads from Kafka
                # (as with a store that went down) until the store is reached
                cassandra = settings.cassandra_config()
                store = await ConnectingStore.start(
                    lambda: CassandraStore.connect(cassandra),
                    cassandra.max_snapshot_bytes,
                    down_retry_s=settings.store_down_retry_s,
                )
                owned.append(store.close)
            await _refuse_successor(store, settings.topic)
            guard = await _guard(settings.topic, partitions, producer, store, owned)
            writer = JournalWriter(producer, partitions, settings.max_record_bytes, guard=guard)
            kafka = KafkaRecords(KafkaReadConfig(kafka=kafka_access))
            owned.append(kafka.close)
            own_index = index is None  # the direct client's
            if index is None:
                tail = TailConfig(
                    kafka=kafka_access,
                    max_journals=settings.tail_max_journals,
                    forgotten_capacity=settings.tail_forgotten_capacity,
                )
                index = await TailIndex.on_demand(settings.topic, range(partitions), store, tail)
                owned.append(index.close)
            fence: Fence
            if settings.read_fence == "mark":
                fence = Marks(writer, origin)
            else:
                fence = await HighWatermarks.start(settings.topic, kafka_access, writer.fence_floor)
                owned.append(fence.close)
        except BaseException:
            for close in reversed(owned):
                await close()
            raise
        keys = data_keys_of(settings, store)
        encryption = None if keys is None else Encryption(keys, settings.seal_appends_once)
        try:
            growth = None
            every_key = index if own_index else verdicts
            if every_key is not None:
                growth = await _growth(
                    settings,
                    store,
                    every_key,
                    kafka,
                    producer,
                    origin,
                    owned,
                    encryption,
                    worker,
                )
            else:
                await _refuse_grown(store, settings.topic)
        except BaseException:
            for close in reversed(owned):
                await close()
            raise
        journals = cls(
            settings.topic,
            writer,
            store,
            index,
            fence,
            kafka,
            origin,
            verdicts,
            scan_without_store,
            encryption,
            growth,
        )
        if growth is not None:
            growth.predecessor_flow = journals.reading
        journals._owned = owned
        journals.group_max_unacked = settings.group_max_unacked
        journals.reading.limit_scans(settings.max_kafka_only_scans)
        return journals

    async def close(self) -> None:
        """Close what `connect` built."""
        owned, self._owned = self._owned, []
        for close in reversed(owned):
            await close()

    async def __aenter__(self) -> Journals:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def journal(self, journal_id: str) -> Journal:
        return Journal(self, JournalKey(self.topic, check_not_reserved(journal_id)))

    async def ids(
        self, prefix: str = "", after: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> JournalIdPage:
        """A page of the ids of the topic's journals that exist (replicated or not yet,
        purged ones left out), ascending, starting with `prefix`, above `after`: see
        `journal.client.listing`. Pass the page's `next` as `after` until it is None."""
        if self._listing is None:
            config = self.kafka.config
            self._listing = JournalIds(
                self.topic,
                self.writer.partitions,
                config.kafka,
                config.timeout_s,
                self.reading,
                self.writer.fence_floor,
                None if self.growth is None else self._exists,
                None if self.growth is None else self._successors,
            )
            self._owned.append(self._listing.close)
        return await self._listing.page(prefix, after, limit)

    async def _exists(self, journal_id: str) -> bool:
        """Whether the journal exists, where it is along the topic's grows (listing)."""

        async def here(journal: Journal) -> bool:
            reading = journal._journals.reading
            return (await reading.head(journal.key)).state.exists

        return await self.journal(journal_id)._followed(here)

    async def _successors(self) -> list[Successor]:
        """The topics this one grew into, with this process's fence floor there (listing):
        none while no grow is recorded as of a lease ago (a grow is planned before its topic
        exists), else the registry's chain."""
        if not await self._grown():
            return []
        slots = await chain_slots(self.topic, self.writer.partitions, self.store)
        counts = Counter(tp.topic for tp in slots[self.writer.partitions :])
        return [Successor(t, n, self._floor_of(t)) for t, n in counts.items()]

    async def _grown(self) -> bool:
        """Whether a grow of the topic is recorded: not asked again within a lease of a read
        that found none (a grow is planned before its topic exists). StoreUnavailable."""
        growth = self.growth
        if growth is None:
            return await self.store.grow(self.topic) is not None
        if growth.registry.record is None and not growth.registry.clear():
            await growth.registry.fresh()
        return growth.registry.record is not None

    def _floor_of(self, topic: str) -> FenceFloor:
        """The fence floor of this process's writer to `topic` along the chain of grows (a
        fresh one where it never built that topic's client: it acknowledged nothing there)."""
        journals: Journals | None = self
        while journals is not None and journals.topic != topic:
            growth = journals.growth
            journals = None if growth is None else growth.built()
        return FenceFloor() if journals is None else journals.writer.fence_floor

    def subscribe(
        self,
        after: SubscriptionPosition | None = None,
        tags: Collection[str] = (),
        live: bool = False,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> AsyncIterator[SubscriptionItem]:
        """Every accepted event of the topic after `after` (None: from the start), each
        partition in log order; with `tags`, those with any of them; `live`: forever, with
        heartbeats while idle, else up to the high watermarks as of now
        (`journal.subscriptions.subscription`)."""
        config = SubscriptionConfig(self.kafka.config.kafka, heartbeat_s)
        partitions, openers = self.writer.partitions, self._openers()
        return subscribe(self.topic, partitions, self.store, config, after, tags, live, openers)

    def _openers(self) -> Openers | None:
        """What subscriptions and groups open payloads with as they decode them (an erased
        journal's events passed by: docs/erasure.md); None without encryption."""
        return None if self.encryption is None else self.encryption.openers

    async def end_position(self) -> SubscriptionPosition:
        """After every record the topic holds now: `subscribe` after it for what is appended
        from then on."""
        kafka = self.kafka.config.kafka
        return await end_position(kafka, self.topic, self.writer.partitions, self.store)

    def subscribe_batches(
        self,
        after: SubscriptionPosition | None = None,
        tags: Collection[str] = (),
        live: bool = False,
    ) -> AsyncIterator[list[SubscriptionItem]]:
        """`subscribe`, a list of items at a time as they come (what one fetch gave)."""
        config = SubscriptionConfig(self.kafka.config.kafka)
        partitions = self.writer.partitions
        openers = self._openers()
        return subscribe_batches(
            self.topic, partitions, self.store, config, after, tags, live, openers
        )

    def subscribe_group(
        self,
        name: str,
        tags: Collection[str] = (),
        heartbeat_s: float = HEARTBEAT_S,
        handover: Callable[[], AbstractAsyncContextManager[object]] | None = None,
        max_unacked: int | None = None,
    ) -> GroupMember:
        """A member (not started) of subscription group `name`: it shares the topic's
        partitions with the group's other members and resumes at the group's checkpoint
        (`journal.subscriptions.groups`; `handover`: there). `max_unacked`: the delivered records it
        holds unacknowledged at most (default: the settings' `group_max_unacked`)."""
        config = GroupConfig(
            SubscriptionConfig(self.kafka.config.kafka),
            heartbeat_s,
            max_unacked=self.group_max_unacked if max_unacked is None else max_unacked,
        )
        openers = self._openers()
        return GroupMember(
            name, self.topic, self.writer.partitions, self.store, config, tags, handover, openers
        )

    async def group_statuses(self) -> list[GroupStatus]:
        """The topic's subscription groups, by name (`journal.subscriptions.groups`), asked with one
        set of clients kept until `close`; their partitions are the slots of the topic and of
        its grown successors, as the registry has them (StoreUnavailable when it cannot be
        read)."""
        if self._group_admin is None:
            self._group_admin = GroupAdmin(self.kafka.config.kafka)
            self._owned.append(self._group_admin.close)
        store = self.store if await self._grown() else None  # None: the topic's own only
        slots = await chain_slots(self.topic, self.writer.partitions, store)
        return await self._group_admin.statuses(slots)


class Journal:
    """One journal. Cheap to create; every method is one round of the reading or writing path."""

    def __init__(self, journals: Journals, key: JournalKey) -> None:
        self._journals = journals
        self.key = key

    async def _moved(self) -> Journal | None:
        """The journal in the grown topic, if this process knows its partition is cut."""
        growth = self._journals.growth
        if (
            growth is None
            or growth.cuts.known(self._journals.writer.partition_of(self.key)) is None
        ):
            return None
        return (await growth.successor()).journal(self.key.id)

    async def _followed(self, call: Callable[[Journal], Awaitable[_T]]) -> _T:
        """`call` on this journal where it is (docs/growing.md): in the grown topic once its
        partition is cut; else here, and redone there, the same way, if it turns out to be
        cut (JournalMoved: nothing of the first attempt took effect). There it is followed
        again: the grown topic may have grown in turn (a chain of grows)."""
        growth = self._journals.growth
        if growth is None:
            return await call(self)
        moved = await self._moved()
        if moved is not None:
            return await moved._followed(call)
        try:
            return await call(self)
        except JournalMoved:
            return await (await growth.successor()).journal(self.key.id)._followed(call)

    async def _acknowledged(self, position: Position) -> None:
        """JournalMoved if a record no fold verified (Ack.KAFKA, a Purge) lies after a cut."""
        growth = self._journals.growth
        if growth is not None:
            await growth.acknowledged(self.key, position.partition, position.offset)

    @property
    def snapshots(self) -> JournalSnapshots:
        """The journal's snapshots (journal/client/snapshots.py), where it is (a grow)."""
        if self._journals.growth is None:
            return self._snapshots_here()
        return _FollowedSnapshots(self)

    def _snapshots_here(self) -> JournalSnapshots:
        journals = self._journals
        return JournalSnapshots(
            self.key,
            journals.reading,
            functools.partial(journals.writer.mark, origin=journals.origin),
            journals.encryption,
        )

    async def append(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata = PayloadMetadata(),
        header_metadata: HeaderMetadata = HeaderMetadata(),
        headers: Mapping[str, str] | None = None,
        expected_seq_nr: int | None = None,
        idempotency_key: str | None = None,
        ack: Ack = Ack.VERIFIED,
    ) -> Appended:
        """Append consecutive events atomically: where the record landed and their seqNrs.

        `Ack.VERIFIED` (the default) returns only once the log accepted the append, as if
        `expected_seq_nr` were the seqNr before the first event: else SeqNrConflict (nothing
        of it is visible), OutcomeUnknown when the verdict could not be learnt
        (journal/client/conditional.py). `Ack.KAFKA` returns once Kafka acknowledged the
        record (acks=all) without a verdict, unless `expected_seq_nr` is given: for a writer
        that knows it is the journal's only one. With `idempotency_key`, a repeated request
        answers the first one's position.
        """
        return await self._followed(
            lambda j: j._append_here(
                events,
                metadata=metadata,
                header_metadata=header_metadata,
                headers=headers,
                expected_seq_nr=expected_seq_nr,
                idempotency_key=idempotency_key,
                ack=ack,
            )
        )

    async def _append_here(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata,
        header_metadata: HeaderMetadata,
        headers: Mapping[str, str] | None,
        expected_seq_nr: int | None,
        idempotency_key: str | None,
        ack: Ack,
    ) -> Appended:
        journals = self._journals
        events = tuple(events)
        digested: bytes | None = None  # what an idempotency digest covers, if not the record
        if journals.encryption is not None:
            data_key = await journals.encryption.keys.for_append(self.key)
            if idempotency_key is not None:  # a retry seals anew: the digest is of the plain
                plain = encode_append(Events(events, metadata)).value
                digested = request_digest_key(data_key.raw, plain)
            events = seal_events(data_key, events, journals.encryption.seal_once)
        # checked and encoded once: the range is the encoding's
        encoded = encode_append(Events(events, metadata))
        if ack is Ack.VERIFIED and expected_seq_nr is None:
            expected_seq_nr = encoded.range.from_ - 1
        if expected_seq_nr is None and idempotency_key is None:
            position = await journals.writer.append_encoded(
                self.key, encoded, metadata=header_metadata, headers=headers, origin=journals.origin
            )
            await self._acknowledged(position)
            return Appended.at(position, encoded.range)
        user_headers = dict(headers or {})
        idempotency = (
            None
            if idempotency_key is None
            else Idempotency.of_request(
                idempotency_key,
                encoded.value if digested is None else digested,
                header_metadata,
                user_headers,
            )
        )
        header = AppendHeader(encoded.range, encoded.payload_type)  # as the fold sees it
        produce = self._producer(encoded, header_metadata, user_headers)
        return await journals.conditional.append(
            self.key, header, expected_seq_nr, idempotency, produce
        )

    async def append_at_end(
        self,
        events: Sequence[NewEvent],
        *,
        metadata: PayloadMetadata = PayloadMetadata(),
        header_metadata: HeaderMetadata = HeaderMetadata(),
        headers: Mapping[str, str] | None = None,
        expected_seq_nr: int | None = None,
        idempotency_key: str | FreshKey | None = FreshKey.FRESH,
    ) -> Appended:
        """Append events at the journal's end: this process numbers them from its last seqNr
        + 1 under the journal's lock, so writers through it never conflict; returns once the
        log accepted them, with the seqNrs they got. With `expected_seq_nr`, only if the
        journal is still at it (else SeqNrConflict). OutcomeUnknown when the verdict could
        not be learnt: repeat the call with its `idempotency_key` to learn it.

        By default the append gets a fresh idempotency key (nothing searched), so it is safe
        to repeat with `error.idempotency_key`. With a key of the caller's, a retry answers the
        first attempt, found within the bounds journal/client/conditional.py states (else
        IdempotencyUnresolved, nothing appended). `None`: no key, and the appends arriving
        together share rounds (one look and one batch for many: the faster way for many
        writers), but an append whose outcome was unknown is not safe to repeat (it would be
        appended twice): read the journal to learn it.
        """
        if not events:
            raise InvalidValue("an append needs at least one event")
        # a fresh key is drawn once: a redo in the grown topic carries the same
        key = new_idempotency_key() if isinstance(idempotency_key, FreshKey) else idempotency_key
        fresh = isinstance(idempotency_key, FreshKey)
        return await self._followed(
            lambda j: j._append_at_end_here(
                events, metadata, header_metadata, headers, expected_seq_nr, key, fresh
            )
        )

    async def _append_at_end_here(
        self,
        events: Sequence[NewEvent],
        metadata: PayloadMetadata,
        header_metadata: HeaderMetadata,
        headers: Mapping[str, str] | None,
        expected_seq_nr: int | None,
        key: str | None,
        fresh: bool,
    ) -> Appended:
        journals = self._journals
        user_headers = dict(headers or {})
        data_key = (
            None
            if journals.encryption is None
            else await journals.encryption.keys.for_append(self.key)
        )

        seal_once = journals.encryption is None or journals.encryption.seal_once

        def encoded_from(first: int, sealed: bool = False) -> EncodedAppend:
            numbered = tuple([event.numbered(first + i) for i, event in enumerate(events)])
            if sealed and data_key is not None:  # sealed once numbered: the seqNr is sealed in
                numbered = seal_events(data_key, numbered, seal_once)
            return encode_append(Events(numbered, metadata))

        def number(first: int) -> tuple[AppendHeader, Produce]:
            encoded = encoded_from(first, sealed=True)
            header = AppendHeader(encoded.range, encoded.payload_type)
            return header, self._producer(encoded, header_metadata, user_headers)

        digested: bytes | None = None
        if key is not None:
            digested = encoded_from(1).value
            if data_key is not None:  # of the plain events, keyed: module erasure's reasons
                digested = request_digest_key(data_key.raw, digested)
        idempotency = (
            None
            if key is None or digested is None
            else Idempotency.of_request(
                key, digested, header_metadata, user_headers, at_end=True, fresh=fresh
            )
        )
        return await journals.conditional.append_at_end(
            self.key, len(events), number, expected_seq_nr, idempotency
        )

    def _producer(
        self, encoded: EncodedAppend, header_metadata: HeaderMetadata, headers: dict[str, str]
    ) -> Produce:
        """What produces an encoded Append, given the conditional protocol's extra headers."""
        journals = self._journals

        async def produce(extra: Mapping[str, str]) -> Position:
            return await journals.writer.append_encoded(
                self.key,
                encoded,
                metadata=header_metadata,
                headers={**headers, **extra},
                origin=journals.origin,
            )

        return produce

    async def info(self) -> JournalInfo:
        """The last seqNr and deleteTo, as a read starting now would see them (a journal this
        process appended to or looked at lately, from memory when the index shows nothing
        newer: journal/client/conditional.py `look`)."""
        return await self._followed(lambda j: j._info_here())

    async def _info_here(self) -> JournalInfo:
        encryption = self._journals.encryption
        if encryption is not None:
            await encryption.keys.for_read(self.key)  # JournalErased once its erasure began
        state = await self._journals.conditional.look(self.key)
        return JournalInfo(state.seq_nr or None, state.delete_to or None)

    def read(
        self, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[EventRecord]:
        """Stream the events in [from_, to], at most `limit`, in seqNr order (the reading
        flow: `journal.client.reading`). JournalErased once the journal's erasure began."""
        return self._read(from_, to, limit)

    async def _read(self, from_: int, to: int, limit: int | None) -> AsyncIterator[EventRecord]:
        async for batch in self.read_batches(from_, to, limit):
            for record in batch:
                yield record

    def read_batches(
        self, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a non-empty list of events at a time as the flow gets them: a page of the
        store's, the head's events, a fetch of the events it spilled."""
        encryption = self._journals.encryption
        if encryption is None:
            return self._read_batches(from_, to, limit, None)
        return encryption.read_batches(
            self.key, lambda opener: self._read_batches(from_, to, limit, opener)
        )

    def _read_batches(
        self, from_: int, to: int, limit: int | None, opener: Opener | None
    ) -> AsyncIterator[list[EventRecord]]:
        if self._journals.growth is None:
            return self._journals.reading.read_batches(self.key, from_, to, limit, opener)
        return self._read_followed(from_, to, limit, opener)

    async def _read_followed(
        self, from_: int, to: int, limit: int | None, opener: Opener | None
    ) -> AsyncIterator[list[EventRecord]]:
        """`read_batches` where the journal is: JournalMoved comes before any batch (the view
        is taken first), so a read redone in the grown topic repeats nothing."""
        growth = self._journals.growth
        assert growth is not None
        moved = await self._moved()
        if moved is None:
            try:
                reading = self._journals.reading
                async for batch in reading.read_batches(self.key, from_, to, limit, opener):
                    yield batch
                return
            except JournalMoved:
                moved = (await growth.successor()).journal(self.key.id)
        async for batch in moved.read_batches(from_, to, limit):
            yield batch

    async def delete(self, to: int) -> Deleted:
        """Delete the events up to `to`: the log decides how far, where the Delete lands
        (`min(to, last seqNr)` there: events appended after it stay, whatever `to` says; a
        deleteTo never shrinks). The answer is that deleteTo, as every read from then on honours
        it (`ConditionalAppends.delete`); its position is None when it deleted nothing new."""
        check_seq_nr(to, "to")
        return await self._followed(lambda j: j._delete_here(to))

    async def _delete_here(self, to: int) -> Deleted:
        journals = self._journals

        async def produce(_: Mapping[str, str]) -> Position:
            return await journals.writer.delete(self.key, to, origin=journals.origin)

        return await journals.conditional.delete(self.key, DeleteHeader(to), produce)

    async def purge(self, *, origin: str | None = None) -> Position:
        """Remove the whole journal; a later append may start at seqNr 1 again. `origin`: why,
        in the Purge's header (this client's origin unless given)."""
        return await self._followed(lambda j: j._purge_here(origin or self._journals.origin))

    async def _purge_here(self, origin: str | None) -> Position:
        position = await self._journals.writer.purge(self.key, origin=origin)
        await self._acknowledged(position)
        return position

    def _encryption(self) -> Encryption:
        encryption = self._journals.encryption
        if encryption is None:
            raise SetupMissing(
                "erasure needs the deployment's key-encryption key (KJ_KEK_FILE or KJ_KEK): "
                "docs/erasure.md"
            )
        return encryption

    async def erase(self) -> Erasure:
        """Erase the journal for good (docs/erasure.md): from now on it neither reads nor
        appends (JournalErased), its rows are purged and its data key destroyed, so its payloads
        in every copy of the topic, the store, exports and backups can never be read again. Safe
        to repeat: an erasure that failed part way is finished by erasing again."""
        return await self._encryption().erase(self.key, self.purge)

    async def erasure_state(self) -> KeyState | None:
        """`active` (it has a key), `erasing` (an erasure began and is not finished: erase
        again), `erased`; None: no key, never erased."""
        return await self._encryption().erasure_state(self.key)


class _FollowedSnapshots(JournalSnapshots):
    """A journal's snapshots that follow a grow as its other operations do (`_followed`): in
    the grown topic once its partition is cut, where they also see the old topic's
    (journal/client/snapshots.py)."""

    def __init__(self, journal: Journal) -> None:
        here = journal._snapshots_here()
        super().__init__(here.key, here._reading, here._produce_mark, here._encryption)
        self._journal = journal

    async def put(self, seq_nr: int, payload: Payload) -> Snapshot:
        return await self._journal._followed(lambda j: j._snapshots_here().put(seq_nr, payload))

    async def latest(self, max_seq_nr: int = SEQ_NR_MAX) -> Snapshot | None:
        return await self._journal._followed(lambda j: j._snapshots_here().latest(max_seq_nr))

    async def delete(self, to: int) -> Position:
        return await self._journal._followed(lambda j: j._snapshots_here().delete(to))
