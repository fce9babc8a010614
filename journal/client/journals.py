"""The direct client: `Journals` (one per process) hands out `Journal`s (one per id).

The reading flow (design.md), for every read and every look at a journal's state:
1. The fence: where "now" is in the journal's partition (its high watermark by default, or a
   Mark: `journal.kafka.fence`). Meanwhile the store's row of the journal is read.
2. The index (a worker's tables, or this process's `TailIndex`) says where the journal's
   actions below the fence are, without touching other journals' records. If it cannot tell,
   the partition is scanned from the store's pointer (counted: `kafka_journal_reads_total`).
   With the store down, the index's runs answer when they hold the whole journal; else a
   worker scans the partition from offset 0 (its tables cannot tell after it took a partition
   over) and the direct client answers StoreUnavailable, saying why: its scan would cost every
   record of the retained log.
3. The records the store does not reflect yet are fetched by offset and folded onto the
   store's state with the one fold (`journal.kafka.head.fold_head`). Nothing there: the store
   answers alone and Kafka is not read.
4. Stream the store's events above deleteTo (none if the head purged the journal), then the
   head's. Nothing is returned before step 3 is complete, so a Delete not yet replicated is
   honoured, and a read is the same function of the log before and after replication.
A read writes nothing (unless the Mark fence is chosen).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType

from journal.client.conditional import (
    ConditionalAppends,
    FreshKey,
    Idempotency,
    Produce,
    new_idempotency_key,
)
from journal.client.listing import DEFAULT_LIMIT, JournalIdPage, JournalIds
from journal.client.snapshots import JournalSnapshots
from journal.codec.actions import events_of
from journal.core.fold import JournalState
from journal.core.index import IndexAnswer, Indexed, OffsetRun, RecordIndex
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
    PayloadMetadata,
    Position,
    check_seq_nr,
)
from journal.errors import InvalidValue, JournalTruncated, StoreUnavailable
from journal.kafka.fence import Fence, HighWatermarks, Marks
from journal.kafka.groups import GroupConfig, GroupMember
from journal.kafka.guard import PartitionGuard
from journal.kafka.head import JournalHead, fold_head, fold_whole
from journal.kafka.producer import JournalProducer
from journal.kafka.records import KafkaReadConfig, KafkaRecords
from journal.kafka.subscription import (
    HEARTBEAT_S,
    SubscriptionConfig,
    SubscriptionItem,
    SubscriptionPosition,
    end_position,
    subscribe,
    subscribe_batches,
)
from journal.kafka.tail import TailConfig, TailIndex
from journal.kafka.topic import ensure_topic
from journal.kafka.writer import EncodedAppend, JournalWriter, encode_append
from journal.metrics import METRICS
from journal.settings import Settings
from journal.store.base import EventualJournal, EventualStore, FirstPage, JournalMeta
from journal.store.cassandra import CassandraStore
from journal.store.connecting import ConnectingStore


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """A journal's state as of the read: last seqNr and deleteTo (None when there is none)."""

    seq_nr: int | None
    delete_to: int | None


@dataclass(frozen=True, slots=True)
class JournalView:
    """One journal as of one fence: the store's row and what Kafka adds to it."""

    partition: int
    meta: JournalMeta | None  # None: the store has no row, or is not used (Kafka alone)
    head: JournalHead

    @property
    def info(self) -> JournalInfo:
        state = self.head.state
        return JournalInfo(state.seq_nr or None, state.delete_to or None)


_SPILL_FETCH = 16  # Appends fetched again at a time, when a head outgrew its budget


def _seq_nr(record: EventRecord) -> int:
    return record.event.seq_nr


def _continuing(events: Sequence[EventRecord], last: int, stop: int) -> list[EventRecord]:
    """The events of `events` (in seqNr order, as a `FirstPage`'s) that continue `last`
    without a hole, up to `stop`: those at or below `last` are deleted or before the read's
    `from_`; a hole means the rest was replicated after the page was read (`read` gets it)."""
    start = bisect.bisect_right(events, last, key=_seq_nr) if events else 0
    count = min(len(events) - start, stop - last)
    if count <= 0:
        return []
    if events[start + count - 1].seq_nr == last + count:  # in order: no hole, all of them
        return list(events[start : start + count])
    run = []
    for record in events[start : start + count]:
        if record.seq_nr != last + 1:
            break
        last = record.seq_nr
        run.append(record)
    return run


def _retrieve(task: asyncio.Future[FirstPage]) -> None:
    if not task.cancelled():
        task.exception()


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
    ) -> None:
        self.topic = topic
        self.writer = writer
        self.store = store
        self.index = index
        self.fence = fence
        self.kafka = kafka
        self.origin = origin
        self._scan_without_store = scan_without_store
        self._owned: list[Callable[[], Awaitable[None]]] = []
        # a worker's tables learn of a record only once its agent has handled it: a tailing
        # index of its own gives its conditional appends their verdicts sooner (app/worker.py)
        self.conditional = ConditionalAppends(
            writer.partition_of,
            fence,
            self._head,
            store.meta,
            self._event,
            index if verdicts is None else verdicts,
            self._events,
        )
        self._listing: JournalIds | None = None

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
    ) -> Journals:
        """Connect to Kafka and Cassandra from `settings`, creating topic and schema if needed.

        Cassandra down is no failure: the store connects in the background meanwhile
        (`ConnectingStore`); a wrong login or a schema of another version is raised here.

        A `store`, `index` or `verdicts` (the index conditional appends ask, if not `index`)
        passed in (a worker's) stays its owner's to close. `scan_without_store`: with the store
        down, a journal the index cannot give whole is read by a scan of its partition, not
        refused (`_view_without_store`).
        """
        owned: list[Callable[[], Awaitable[None]]] = []
        try:
            kafka_access = settings.kafka_access()
            partitions = await ensure_topic(kafka_access, settings.topic_spec())
            producer = JournalProducer(
                kafka_access,
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
                    lambda: CassandraStore.connect(cassandra), cassandra.max_snapshot_bytes
                )
                owned.append(store.close)
            guard = await _guard(settings.topic, partitions, producer, store, owned)
            writer = JournalWriter(producer, partitions, settings.max_record_bytes, guard=guard)
            kafka = KafkaRecords(KafkaReadConfig(kafka=kafka_access))
            owned.append(kafka.close)
            if index is None:
                tail = TailConfig(kafka=kafka_access)
                index = await TailIndex.on_demand(settings.topic, range(partitions), store, tail)
                owned.append(index.close)
            fence: Fence
            if settings.read_fence == "mark":
                fence = Marks(writer, origin)
            else:
                fence = await HighWatermarks.start(settings.topic, kafka_access)
                owned.append(fence.close)
        except BaseException:
            for close in reversed(owned):
                await close()
            raise
        journals = cls(
            settings.topic, writer, store, index, fence, kafka, origin, verdicts, scan_without_store
        )
        journals._owned = owned
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
        return Journal(self, JournalKey(self.topic, journal_id))

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
                self.store,
                self.index,
                self._head,
            )
            self._owned.append(self._listing.close)
        return await self._listing.page(prefix, after, limit)

    async def _head(
        self, key: JournalKey, until: int | None = None, index: RecordIndex | None = None
    ) -> JournalHead:
        """The view's head: what the conditional appends, listing and snapshots read by."""
        return (await self.view(key, until, index)).head

    async def _event(self, key: JournalKey, seq_nr: int) -> EventRecord | None:
        """The journal's event at `seq_nr`, if it has one: the reading flow's."""
        async for record in Journal(self, key).read(seq_nr, seq_nr, 1):
            return record
        return None

    def _events(self, key: JournalKey, from_: int, to: int) -> AsyncIterator[EventRecord]:
        """The journal's events in [from_, to]: the reading flow's."""
        return Journal(self, key).read(from_, to)

    async def view(
        self, key: JournalKey, until: int | None = None, index: RecordIndex | None = None
    ) -> JournalView:
        """The journal as of now: the reading flow's steps 1-3 (see the module); or as of
        `until`, an offset of its partition (the fence: the records below it). `index`: one
        other than this client's (a worker's conditional appends ask their own)."""
        index = self.index if index is None else index
        partition = self.writer.partition_of(key)
        covered = index.covered(partition)  # the row read next reflects at least this
        meta_read = asyncio.ensure_future(self.store.meta(key))
        try:
            fence = await self.fence.fence(key, partition) if until is None else until
            found = await index.lookup(key, partition, fence)
        except BaseException:
            meta_read.cancel()
            raise
        try:
            meta = await meta_read
            if isinstance(found, Indexed) and found.needs > covered:
                meta = await self.store.meta(key)  # the index dropped what that row may lack
            if isinstance(found, Indexed):
                return await self._view_indexed(key, partition, fence, found, meta, covered)
            return await self._view_scanned(key, partition, fence, found.reason)
        except StoreUnavailable as error:
            return await self._view_without_store(key, partition, fence, found, error)

    async def _view_indexed(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: Indexed,
        meta: JournalMeta | None,
        covered: int,
    ) -> JournalView:
        base = JournalState() if meta is None else meta.state
        # the row reflects everything of the journal up to its offset, to `needs` and to
        # `covered` (read before it): the index keeps runs replication covered, not fetched here
        after = max(base.offset, found.needs, covered)
        runs = [r for r in found.runs if r.last > after and r.first < fence]
        if not runs:
            METRICS.counter("kafka_journal_reads_total", path="store").inc()
            return JournalView(partition, meta, JournalHead.of_store(base))
        METRICS.counter("kafka_journal_reads_total", path="index").inc()
        actions = self.kafka.fetch(key, partition, runs, after, fence)
        head = await fold_head(base, actions, self.kafka.config.head_budget_bytes)
        return JournalView(partition, meta, head)

    async def _view_scanned(
        self, key: JournalKey, partition: int, fence: int, reason: str
    ) -> JournalView:
        METRICS.counter("kafka_journal_reads_total", path=f"scan_{reason}").inc()
        pointer = await self.store.pointer(key.topic, partition)
        meta = await self.store.meta(key)  # after the pointer: it reflects at least that much
        base = JournalState() if meta is None else meta.state
        # nothing replicated: the journal's records are needed from offset 0, whatever the
        # log start is (`None` would start at the log start and miss an expiry)
        actions = self.kafka.scan(key, partition, -1 if pointer is None else pointer, fence)
        head = await fold_head(base, actions, self.kafka.config.head_budget_bytes)
        return JournalView(partition, meta, head)

    async def _view_without_store(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: IndexAnswer,
        error: StoreUnavailable,
    ) -> JournalView:
        """Kafka alone, when it provably holds the whole journal (invariant 5): by the index's
        runs when they are the whole journal; else, where `scan_without_store` (a worker, whose
        tables cannot tell after it took the partition over), by a scan from offset 0, whose
        cost is the retained log's; else StoreUnavailable, saying why."""
        budget = self.kafka.config.head_budget_bytes
        head: JournalHead | None
        if isinstance(found, Indexed) and found.complete:
            path = "kafka_only_index"
            head = await self._whole_by_runs(key, partition, found.runs, fence)
        elif self._scan_without_store:
            path = "kafka_only_scan"
            actions = self.kafka.scan(key, partition, None, fence)
            if await self.kafka.log_start(key.topic, partition) == 0:
                head = await fold_head(JournalState(), actions, budget)
            else:
                head = await fold_whole(actions, budget)
        else:
            METRICS.counter("kafka_journal_reads_total", path="kafka_only_refused").inc()
            why = (
                f"the index cannot tell ({found.reason})"
                if not isinstance(found, Indexed)
                else f"the index no longer holds its records up to offset {found.needs}"
            )
            raise StoreUnavailable(
                f"{error}; {key} cannot be read from Kafka alone: {why}, and a read does not "
                f"scan partition {partition}"
            ) from error
        if head is None:
            METRICS.counter("kafka_journal_reads_total", path="kafka_only_refused").inc()
            raise StoreUnavailable(f"{error}; Kafka alone no longer holds all of {key}") from error
        METRICS.counter("kafka_journal_reads_total", path=path).inc()
        return JournalView(partition, None, head)

    async def _whole_by_runs(
        self, key: JournalKey, partition: int, runs: Sequence[OffsetRun], fence: int
    ) -> JournalHead | None:
        """The journal from its runs, all of its records: None when Kafka no longer holds
        enough of them to tell."""
        budget = self.kafka.config.head_budget_bytes
        try:
            return await fold_head(
                JournalState(), self.kafka.fetch(key, partition, runs, -1, fence), budget
            )
        except JournalTruncated:
            # some of its records expired: only a Purge among those left proves its start
            start = await self.kafka.log_start(key.topic, partition)
            try:
                return await fold_whole(
                    self.kafka.fetch(key, partition, runs, start - 1, fence), budget
                )
            except JournalTruncated:
                return None  # the log start moved on meanwhile

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
        (`journal.kafka.subscription`)."""
        config = SubscriptionConfig(self.kafka.config.kafka, heartbeat_s)
        return subscribe(self.topic, self.writer.partitions, self.store, config, after, tags, live)

    async def end_position(self) -> SubscriptionPosition:
        """After every record the topic holds now: `subscribe` after it for what is appended
        from then on."""
        return await end_position(self.kafka.config.kafka, self.topic, self.writer.partitions)

    def subscribe_batches(
        self,
        after: SubscriptionPosition | None = None,
        tags: Collection[str] = (),
        live: bool = False,
    ) -> AsyncIterator[list[SubscriptionItem]]:
        """`subscribe`, a list of items at a time as they come (what one fetch gave)."""
        config = SubscriptionConfig(self.kafka.config.kafka)
        partitions = self.writer.partitions
        return subscribe_batches(self.topic, partitions, self.store, config, after, tags, live)

    def subscribe_group(
        self,
        name: str,
        tags: Collection[str] = (),
        heartbeat_s: float = HEARTBEAT_S,
        handover: Callable[[], AbstractAsyncContextManager[object]] | None = None,
    ) -> GroupMember:
        """A member (not started) of subscription group `name`: it shares the topic's
        partitions with the group's other members and resumes at the group's checkpoint
        (`journal.kafka.groups`; `handover`: there)."""
        config = GroupConfig(SubscriptionConfig(self.kafka.config.kafka), heartbeat_s)
        return GroupMember(
            name, self.topic, self.writer.partitions, self.store, config, tags, handover
        )

    async def fetch_events(
        self, key: JournalKey, partition: int, offsets: Sequence[int]
    ) -> AsyncIterator[EventRecord]:
        """The events of the Appends at `offsets` (known to be `key`'s), fetched again."""
        runs = [OffsetRun(o, o, 1) for o in offsets]
        async for action in self.kafka.fetch(key, partition, runs, offsets[0] - 1, offsets[-1] + 1):
            for record in events_of(action):
                yield record


class Journal:
    """One journal. Cheap to create; every method is one round of the reading or writing path."""

    def __init__(self, journals: Journals, key: JournalKey) -> None:
        self._journals = journals
        self.key = key

    @property
    def snapshots(self) -> JournalSnapshots:
        """The journal's snapshots (journal/client/snapshots.py)."""
        journals = self._journals
        return JournalSnapshots(
            self.key,
            journals.store,
            journals.fence,
            journals.writer.partition_of,
            journals._head,
            functools.partial(journals.writer.mark, origin=journals.origin),
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
        journals = self._journals
        # checked and encoded once: the range is the encoding's
        encoded = encode_append(Events(tuple(events), metadata))
        if ack is Ack.VERIFIED and expected_seq_nr is None:
            expected_seq_nr = encoded.range.from_ - 1
        if expected_seq_nr is None and idempotency_key is None:
            position = await journals.writer.append_encoded(
                self.key, encoded, metadata=header_metadata, headers=headers, origin=journals.origin
            )
            return Appended.at(position, encoded.range)
        user_headers = dict(headers or {})
        idempotency = (
            None
            if idempotency_key is None
            else Idempotency.of_request(
                idempotency_key, encoded.value, header_metadata, user_headers
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
        journals = self._journals
        user_headers = dict(headers or {})

        def encoded_from(first: int) -> EncodedAppend:
            numbered = tuple([event.numbered(first + i) for i, event in enumerate(events)])
            return encode_append(Events(numbered, metadata))

        def number(first: int) -> tuple[AppendHeader, Produce]:
            encoded = encoded_from(first)
            header = AppendHeader(encoded.range, encoded.payload_type)
            return header, self._producer(encoded, header_metadata, user_headers)

        fresh = isinstance(idempotency_key, FreshKey)
        key = new_idempotency_key() if isinstance(idempotency_key, FreshKey) else idempotency_key
        idempotency = (
            None
            if key is None
            else Idempotency.of_request(
                key, encoded_from(1).value, header_metadata, user_headers, at_end=True, fresh=fresh
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
        state = await self._journals.conditional.look(self.key)
        return JournalInfo(state.seq_nr or None, state.delete_to or None)

    async def read(
        self, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[EventRecord]:
        """Stream the events in [from_, to], at most `limit`, in seqNr order."""
        async for batch in self.read_batches(from_, to, limit):
            for record in batch:
                yield record

    async def read_batches(
        self, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a non-empty list of events at a time as the flow gets them: a page of the
        store's, the head's events, a fetch of the events it spilled."""
        check_seq_nr(from_, "from")
        check_seq_nr(to, "to")
        if limit is not None and limit < 0:
            raise InvalidValue(f"limit must not be negative, got {limit}")
        store = self._journals.store
        # the first page of stored events is asked with the fence and the row, not after them
        page = asyncio.ensure_future(store.first_page(self.key, from_, to))
        page.add_done_callback(_retrieve)  # a page nobody needs may fail unseen
        try:
            view = await self._journals.view(self.key)
        except BaseException:
            page.cancel()
            raise
        remaining = SEQ_NR_MAX if limit is None else limit
        try:
            async for batch in self._batches(view, from_, to, page):
                if remaining <= 0:
                    return
                if len(batch) > remaining:
                    batch = batch[:remaining]
                remaining -= len(batch)
                yield batch
                if remaining == 0:
                    return
        finally:
            page.cancel()  # not needed (a purged or unknown journal), or the reader left early

    async def _batches(
        self, view: JournalView, from_: int, to: int, page: Awaitable[FirstPage]
    ) -> AsyncIterator[list[EventRecord]]:
        """The store's events above deleteTo (unless the head purged them), then the head's;
        each list non-empty."""
        head, meta = view.head, view.meta
        last = max(head.state.delete_to, from_ - 1)
        if meta is not None and not head.purged:
            stop = min(to, meta.seq_nr or 0)
            first = await page
            if first.fits(meta):
                batch = _continuing(first.events, last, stop)
                if batch:
                    last = batch[-1].seq_nr
                    yield batch
            if last < stop:
                rest = JournalMeta(
                    meta.partition, meta.offset, meta.seq_nr, last, meta.segment_size
                )
                pages = self._journals.store.read_pages(self.key, rest, last + 1, to)
                async for stored in pages:
                    batch = []
                    for record in stored:
                        if record.seq_nr > last:  # strictly increasing, whatever the store says
                            last = record.seq_nr
                            batch.append(record)
                    if batch:
                        yield batch
        async for held in self._head_batches(view):
            batch = []
            for record in held:
                if last < record.seq_nr <= to:
                    last = record.seq_nr
                    batch.append(record)
            if batch:
                yield batch

    async def _head_batches(self, view: JournalView) -> AsyncIterator[Sequence[EventRecord]]:
        """The head's events: those it holds, then those it spilled, fetched a few at a time."""
        yield view.head.events
        spilled = view.head.spilled
        if spilled:
            METRICS.counter("kafka_journal_reads_spilled_total").inc()
        for start in range(0, len(spilled), _SPILL_FETCH):
            offsets = spilled[start : start + _SPILL_FETCH]
            fetched = self._journals.fetch_events(self.key, view.partition, offsets)
            yield [record async for record in fetched]

    async def delete(self, to: int) -> Deleted:
        """Delete the events up to `to`: the log decides how far, where the Delete lands
        (`min(to, last seqNr)` there: events appended after it stay, whatever `to` says; a
        deleteTo never shrinks). The answer is that deleteTo, as every read from then on honours
        it (`ConditionalAppends.delete`); its position is None when it deleted nothing new."""
        check_seq_nr(to, "to")
        journals = self._journals

        async def produce(_: Mapping[str, str]) -> Position:
            return await journals.writer.delete(self.key, to, origin=journals.origin)

        return await journals.conditional.delete(self.key, DeleteHeader(to), produce)

    async def purge(self) -> Position:
        """Remove the whole journal; a later append may start at seqNr 1 again."""
        return await self._journals.writer.purge(self.key, origin=self._journals.origin)
