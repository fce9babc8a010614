"""A worker's replication of the partitions it owns, behind the replicating agent; nothing
here raises into Faust.

For each record, in offset order per partition, the agent (`agents/replicating_agent.py`) calls
`WorkerReplication.handle`, which:
1. parses it; a malformed record is copied to the quarantine topic (counted, logged), and so
   is a marker of each undecodable batch the consumer went past (agents/poison.py) before it;
2. notes its offset in the tables (Appends', or Deletes' and Purges'), and an Append's or
   Purge's effect on the journal's deadline (`tables/expiry.py`), while it is Faust's current
   event;
3. advances the partition's processed offset: readers waiting for their fence may go on;
4. queues it for the partition's replicator, a background task that applies whatever has
   queued up since its last write (and `BATCH_LINGER_S` after a wake-up) in one batch, then
   advances the store's pointer.

So the agent never waits for the store. When the store fails, or the queue outgrows its bound
(a long outage), the queue is dropped and the replicator catches up from Kafka instead: it
replays the partition from the store's pointer, with backoff, until it reaches the agent.
Kafka is read there only, through `Replay` (`KafkaReplay` in a worker).

The store's pointer, not Faust's committed offset, says what is replicated: Faust may commit
records still queued, so when a partition is (re)assigned, whatever lies between the store's
pointer and the first record the agent sees (the gap) is caught up from Kafka too. kill -9 at
any point loses nothing. The tables may lack the gap's records too (their changelog writes
may not have reached Kafka before the crash), so the partition's progress is published to
readers only once the store holds the gap, and readers are told to read at least that far.
The catch-up starts at the assignment (`assigned`), up to the partition's end as of then:
waiting for the agent's first record would leave the gap unreplicated for as long as no one
appends to the partition.

The gap's end is learnt at the assignment too, from the worker group's committed offset C of
the partition (`ReplaySource.committed`): Faust resumes the agent there, so C - 1 is the end of
what this process did not handle, as the first record would tell. Without it a partition that
gets no new record after a restart never had its progress published, and the purger
(agents/expiry.py), which waits for the agent to reach the partition's fence, never purged its
due journals (issue 43). Why publishing it is safe, for reads and so for expiry, which confirms
each journal through a read as of the fence:
- what is published up to the gap's end is the store's: it is published once the store's
  pointer reaches the gap's end (`trusted`), and the floor (the gap's end) makes readers read
  the store that far. This holds whatever offset was learnt, as long as it is in the log;
- past it, the tables must hold every record the agent published: the agent publishes only
  records it handled, in order, from its first. Its first record F is at C (or past it, over
  undecodable batches the consumer skipped, or after a Faust seek elsewhere): if F - 1 is past
  the learnt end, the first record moves the gap's end and the floor there, as when nothing was
  learnt (and its progress waits for the store to reach them); if F is before C, the agent
  handles again what the store holds already. So a reader (or the purger) never takes a record
  the agent has not seen from tables that lack it, and never misses a newer record: its fence
  is the partition's end, which the agent, not the learnt offset, must reach past C - 1.
The committed offset rather than the end offset: both are sound (the store holds up to the end
after the catch-up), but the end would make readers read the store up to it, and with the
store down they would scan what the tables hold. With nothing committed, the first record
tells the gap's end, as before (the agent then starts at the beginning: the partition is not
quiet unless it is empty). tests/model/test_assignment_position.py checks this.

The catch-up starts at the assignment itself, before Faust's assignment callbacks (the tables'
restore ahead, which grows with the journals) and its recovery (app/worker.py `_App`): with
Faust's eager protocol the partitions that moved would otherwise stop replicating for both
(issue 43). It does not read the tables (it replays Kafka from the store's pointer), and while
they restore it publishes only what the store holds, so readers' trust rules hold there too:
- the tables may hold any part of what the previous owner wrote (a restore in progress, a
  stale partition emptied): every entry is a record of the log, but any may be missing;
- the catch-up publishes the store's pointer (`set_replicated`), the floor at the gap's end
  and, once the store holds it (`trusted`), progress up to the gap's end: a reader whose fence
  is at or below it reads the store up to the floor and needs nothing of the tables; one whose
  fence the store reached is answered by the store alone (`TableIndex`'s first case);
- anything past the gap's end is published by the agent alone, for records it handled, and
  Faust hands it none before the partition's tables are recovered (the active partitions stay
  paused until then): every record past the floor up to the published offset is then in the
  tables, written by this agent over the recovered ones, so no record published is missing
  from tables that lack it, and a reader whose fence is past what is published waits for the
  agent, which must reach it (never a newer record missed);
- the purger (agents/expiry.py) acts only once the worker is settled (Faust's recovery done)
  and confirms each journal through a read as of the fence, which the above covers.
A partition revoked while the core is built or the tables restore is revoked from the
replication too (its catch-up cancelled), as after the recovery: no two writers.

While Faust holds the agent back (its tables recovering, `recovering`), a partition the agent
has handled nothing of does not stop at the end its catch-up reached: it follows the end every
`FOLLOW_S`, from Kafka as the catch-up does, so what is appended during the restore is stored
at once (the restore grows with the journals: at 1,000,000 it held replication 6.8 s after a
join). It is the catch-up to the end, repeated: it publishes the store's pointer only, so the
rules above hold as they are; the agent's first record ends it (the records the agent then
handles up to the pointer are not queued again).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from agents.limits import (
    DEFAULT_CACHED_ROWS,
    DEFAULT_CATCH_UP_CONCURRENCY,
    DEFAULT_QUEUED_RECORDS,
)
from agents.poison import SkippedBatches
from journal.codec import RawRecord
from journal.core import ActionRecord
from journal.errors import StoreUnavailable
from journal.kafka import start_consumer, stop_consumer
from journal.metrics import METRICS, forget_replication_lag, set_replication_lag
from journal.replication import (
    AlreadyQuarantined,
    Quarantine,
    Replicator,
    StoredRows,
    replicate_range,
)
from journal.store import EventualStore
from kjconfig.access import KafkaAccess
from tables.expiry import ExpiryIndex
from tables.partitions import OwnedPartitions
from tables.tables import JournalTables

log = logging.getLogger(__name__)

GAP_UNKNOWN = 2**63 - 1  # the gap's end until the agent's first record of the partition
# after a wake-up, records gather this long before a batch: a batch costs its requests' CPU
# whatever its size, and batches of ~2 records (the store answering in ~5 ms) left the agent
# behind at 6,400 events/s on 2 cores
BATCH_LINGER_S = 0.025
# the lag gauges are published again this often while nothing wakes the replicator: an agent
# that stopped receiving records shows its backlog's age growing, not its last value
LAG_REFRESH_S = 5.0
# while Faust holds the agent back (its tables recovering), a partition's catch-up follows its
# end this often: what is appended meanwhile is replicated at once, not after the restore
FOLLOW_S = 0.2


class Replay(Protocol):
    """Where catching up reads a partition's records again (Kafka in a worker)."""

    def open(self, partition: int) -> AbstractAsyncContextManager[ReplaySource]: ...


class PredecessorWait(Protocol):
    """The wait of a worker on a grown topic (`journal.replication.Predecessors`)."""

    async def through_cuts(self, partition: int) -> None:
        """Return once the partition's predecessors are replicated through their cuts."""
        ...


class ReplaySource(Protocol):
    """One partition's records, open for one catch-up."""

    async def end(self) -> int:
        """The partition's end offset (its next record's)."""
        ...

    async def replicate(self, replicator: Replicator, start: int, end: int) -> None:
        """Replicate its records in [start, end)."""
        ...

    async def committed(self) -> int | None:
        """The worker group's committed offset of the partition (where Faust resumes the
        agent), None if none."""
        ...


class GroupOffsets:
    """The worker group's committed offsets of the action topic, through one admin client kept
    until `close` (started at the first ask, like `tables.store.SharedChangelogEnds`' consumer)
    and asked once per assignment for every partition: an admin client started per partition
    took ~100-150 ms, up to `catch_up_concurrency` at once, in every rebalance while the
    partitions that moved wait for their new owner (issue 43). An answer read after the
    assignment is the one a later ask would read: only this worker's agent commits the
    partition now, and it is asked only before the agent handled a record of it
    (`WorkerReplication._learn_gap_end`). A failed ask drops the client, and raises as the
    per-partition ask did: the catch-up fails and is retried."""

    def __init__(self, kafka: KafkaAccess, group: str, topic: str) -> None:
        self._kafka = kafka
        self._group = group
        self._topic = topic
        self._admin: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()  # one ask at a time: the others take its answer
        self._answer: dict[int, int] | None = None  # this assignment's, once asked
        self._assignment = 0
        self._closed = False

    def assignment(self) -> None:
        """Partitions were assigned: the next ask reads the group's offsets again."""
        self._assignment += 1
        self._answer = None

    async def committed(self, partition: int) -> int | None:
        async with self._lock:
            answer = self._answer
            if answer is None:
                assignment = self._assignment
                answer = await self._ask()
                if assignment == self._assignment:  # else a newer assignment asks again
                    self._answer = answer
        return answer.get(partition)

    async def _ask(self) -> dict[int, int]:
        if self._admin is None:
            # an admin's read: a consumer of the group could commit to it, or join it
            admin = AIOKafkaAdminClient(**self._kafka.client_options())
            try:
                await admin.start()
            except BaseException:
                await admin.close()
                raise
            self._admin = admin
        admin = self._admin
        try:
            # every partition the group committed (one it never committed is absent)
            offsets = await admin.list_consumer_group_offsets(self._group)
        except BaseException:
            self._admin = None
            await admin.close()
            raise
        if self._closed:  # asked while the worker stops: not kept
            self._admin = None
            await admin.close()
        return {
            tp.partition: int(found.offset)
            for tp, found in offsets.items()
            if tp.topic == self._topic and found.offset >= 0
        }

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()


class KafkaReplay:
    """`Replay` from Kafka: a consumer per catch-up, kept for the next one once its catch-up
    succeeded (a start costs ~0.1-0.3 s on a loaded host, and a rebalance catches up every
    assigned partition, kept ones too), so at most as many as catch-ups run at once. The
    group's committed offsets through one kept admin client (`GroupOffsets`). Call
    `assignment` at each assignment and `close` at stop."""

    def __init__(self, kafka: KafkaAccess, topic: str, group: str | None = None) -> None:
        """`group`: the worker's consumer group (Faust's app id); None: no committed offset."""
        self._kafka = kafka
        self._topic = topic
        self._offsets = None if group is None else GroupOffsets(kafka, group, topic)
        self._idle: list[AIOKafkaConsumer] = []  # started, assigned nothing
        self._closed = False

    def assignment(self) -> None:
        """Partitions were assigned: their committed offsets are read again, once."""
        if self._offsets is not None:
            self._offsets.assignment()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for consumer in idle:
            await stop_consumer(consumer)
        if self._offsets is not None:
            await self._offsets.close()

    @contextlib.asynccontextmanager
    async def open(self, partition: int) -> AsyncIterator[ReplaySource]:
        tp = TopicPartition(self._topic, partition)
        if self._idle:
            consumer = self._idle.pop()
        else:
            consumer = await start_consumer(self._kafka, fetch_max_wait_ms=20)
        kept = False
        try:
            yield _KafkaSource(self._offsets, consumer, tp)
            kept = not self._closed  # a failed or cancelled catch-up's consumer is not reused
        finally:
            if kept:
                # a kept consumer must not go on fetching: paused, not unassigned (assigned
                # nothing, aiokafka asks Kafka for every topic's metadata, and a catch-up
                # following its partition during a restore is opened every `FOLLOW_S`)
                consumer.pause(*consumer.assignment())
                self._idle.append(consumer)
            else:
                await stop_consumer(consumer)


@dataclass(frozen=True, slots=True)
class _KafkaSource:
    offsets: GroupOffsets | None
    consumer: AIOKafkaConsumer
    tp: TopicPartition

    async def end(self) -> int:
        ends: dict[TopicPartition, int] = await self.consumer.end_offsets([self.tp])
        return ends[self.tp]

    async def replicate(self, replicator: Replicator, start: int, end: int) -> None:
        await replicate_range(self.consumer, replicator, self.tp, start, end)

    async def committed(self) -> int | None:
        return None if self.offsets is None else await self.offsets.committed(self.tp.partition)


@dataclass(slots=True)
class _ReplicatedPartition:
    """An owned partition's replication: the store's pointer, the queue, the catch-up."""

    pointer: int  # the store's pointer as this worker knows it; -1 for nothing
    pointer_read: bool  # False: the store did not answer when the partition came
    catch_up_from: int | None = None  # replay from Kafka from here, instead of the queue
    queued: list[ActionRecord] = field(default_factory=list)
    last: RawRecord | None = None  # the last record handled (the queue ends there)
    gap_end: int = -1  # the records up to here were not handled by this process
    catch_up_to_end: bool = False  # assigned: the first catch-up goes to the partition's end
    end: int = 0  # the partition's end offset (high watermark) as last seen
    # when the oldest record not replicated yet was written (ms), None if there is none
    unreplicated_since_ms: int | None = None

    @property
    def trusted(self) -> bool:
        """Whether the tables, with the store, describe the partition (see the module)."""
        return self.pointer >= self.gap_end

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class WorkerReplication:
    """What the agent does with each record (`handle`), and per owned partition a task that
    writes them to the store with a `Replicator` (see the module)."""

    def __init__(
        self,
        topic: str,
        store: EventualStore,
        quarantine: Quarantine,
        tables: JournalTables,
        owned: OwnedPartitions,
        replay: Replay,
        skipped: SkippedBatches,
        max_backoff_s: float = 10.0,
        expiry: ExpiryIndex | None = None,
        catch_up_concurrency: int = DEFAULT_CATCH_UP_CONCURRENCY,
        cached_rows: int = DEFAULT_CACHED_ROWS,
        queued_records: int = DEFAULT_QUEUED_RECORDS,
        recovering: Callable[[], bool] = lambda: False,
        moved_from: tuple[str, ...] = (),
        predecessors: PredecessorWait | None = None,
    ) -> None:
        """`expiry`: the journals' deadlines, kept with the tables (a worker's; None: none);
        `moved_from` and `predecessors`: on a grown topic (`worker_topic`), its predecessors
        (nearest first: a journal without a row here folds onto its state there, `Replicator`)
        and the wait for them: nothing of a partition is written before they are replicated
        through their cuts (a moved journal's base is final then);
        `catch_up_concurrency`: catch-ups from Kafka at once (the others wait their turn);
        `cached_rows`: the journals' rows kept in memory, `queued_records`: the actions
        queued for the store, each per owned partition; `recovering`: whether Faust holds the
        agent back (its tables recovering: Faust's `rebalancing`), while which a partition the
        agent has handled nothing of yet follows its end (see `_catch_up`)."""
        # a rebalance assigns many partitions at once, each catching up with a consumer of its
        # own and batches of the store's rows: at once, they would take the worker's memory,
        # connections and CPU together (issue 43)
        self._catch_ups = asyncio.Semaphore(catch_up_concurrency)
        self._topic = topic
        self._expiry = expiry
        self._quarantine = quarantine
        self._skipped = skipped
        self._store = store
        self._tables = tables
        self._owned = owned
        self._replay = replay
        self._max_backoff_s = max_backoff_s
        self._recovering = recovering
        # both replicators write the same partitions
        rows = StoredRows(cached_rows)
        self._max_queued = queued_records  # per partition; past it, replay from Kafka
        self._predecessors = predecessors
        self._replicator = Replicator(store, quarantine, rows, cuts=store, moved_from=moved_from)
        # catching up replays records the agent has seen: quarantined once is enough
        self._replayer = Replicator(
            store, AlreadyQuarantined(quarantine), rows, cuts=store, moved_from=moved_from
        )
        self._partitions: dict[int, _ReplicatedPartition] = {}
        # per record: looked up once
        self._record_delay = METRICS.histogram("kafka_journal_agent_record_delay_seconds")

    async def handle(self, record: RawRecord, end: int | None = None) -> None:
        """One record; call while its event is Faust's current event (tables need that).
        `end`: the partition's end offset, if the consumer knows it (for the lag)."""
        # how long after its append the agent sees a record: reads and conditional appends
        # wait for that (the fetch wait and the GIL showed up here first)
        self._record_delay.observe(time.time() - record.timestamp_ms / 1000)
        state = await self._state(record.partition, record.offset)
        if state is None:
            return  # a partition this worker no longer owns: its new owner replicates it
        if state.last is None and (
            state.gap_end == GAP_UNKNOWN or record.offset > state.gap_end + 1
        ):
            # the first record, with no gap's end learnt at the assignment or past the one
            # learnt (see the module): the tables lack only what came before it
            state.gap_end = record.offset - 1
            # even when the catch-up stored the gap already: a waiting reader's row may be older
            self._owned.set_floor(record.partition, state.gap_end)
            if state.catch_up_from is None and state.pointer + 1 < record.offset:
                # the catch-up ended short of it (records skipped since): it stores the gap
                # and publishes, which the queue alone would not
                state.catch_up_from = state.pointer + 1
        state.end = max(state.end, record.offset + 1, end or 0)
        if state.unreplicated_since_ms is None:
            state.unreplicated_since_ms = record.timestamp_ms
        for batch in self._skipped.take():  # the replicator flushes them before its pointer
            marker = batch.marker()
            await _retrying(functools.partial(self._quarantine.put, marker, batch.reason))
        actions = await _retrying(lambda: self._replicator.parse([record]))
        for action in actions:
            pruned = self._tables.record(action, state.pointer)
            self._owned.raise_floor(record.partition, pruned)
            if self._expiry is not None:
                self._expiry.record(action)
        # `last` and the queue move together, with no await between: the replicator takes
        # both at once, and a pointer saved past a record whose actions are not in its batch
        # would tell readers the store holds what it does not (the chaos test found this)
        state.last = record
        if state.catch_up_from is None and record.offset > state.pointer:
            state.queued.extend(actions)
            if len(state.queued) > self._max_queued:
                log.warning("partition %s: queue full, replaying from Kafka", record.partition)
                state.catch_up_from, state.queued = state.pointer + 1, []
        state.wake.set()
        if state.trusted:
            self._owned.advance(record.partition, record.offset)
        else:
            self._owned.held(record.partition)

    def assigned(self, partition: int) -> None:
        """The partition came to this worker: catch up from the store's pointer to its end now,
        whether or not a record follows (no await: the agent's `_state` may race this)."""
        if partition in self._partitions or not self._owned.owns(partition):
            return
        state = _ReplicatedPartition(
            -1, pointer_read=False, catch_up_from=0, gap_end=GAP_UNKNOWN, catch_up_to_end=True
        )
        self._start(partition, state)
        state.wake.set()

    def _start(self, partition: int, state: _ReplicatedPartition) -> None:
        self._owned.set_replicated(partition, state.pointer)
        state.task = asyncio.create_task(self._replicate(partition, state))
        self._partitions[partition] = state

    async def revoke(self, partition: int) -> None:
        state = self._partitions.pop(partition, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        self._replicator.forget(partition)
        self._tables.forget(partition)
        if self._expiry is not None:
            self._expiry.forget(partition)
        self._owned.revoke(partition)
        forget_replication_lag(METRICS, self._topic, partition)  # its new owner reports it

    async def close(self) -> None:
        for partition in list(self._partitions):
            await self.revoke(partition)

    async def _state(self, partition: int, first_offset: int) -> _ReplicatedPartition | None:
        """The partition's replication, started at its first record; None if this worker does
        not own it (any more): only Faust's assignment makes a worker an owner. A partition
        revoked while its pointer was read and then replicated here anyway would have two
        writers, and its later real assignment would find stale rows and skip the catch-up."""
        state = self._partitions.get(partition)
        if state is None and self._owned.owns(partition):
            # never wait for the store here: the agent must keep consuming while it is down
            try:
                pointer = await self._store.pointer(self._topic, partition)
                state = _ReplicatedPartition(-1 if pointer is None else pointer, pointer_read=True)
            except StoreUnavailable:
                # the replicator reads it later
                state = _ReplicatedPartition(-1, pointer_read=False)
            assigned = self._partitions.get(partition)
            if assigned is not None:  # `assigned` came while the pointer was read
                return assigned
            if not self._owned.owns(partition):  # revoked while the pointer was read
                return None
            if state.pointer + 1 < first_offset:  # Faust committed ahead of replication
                state.catch_up_from = state.pointer + 1
            # the tables may lack what came before, stored or not: a reader's row may be older
            state.gap_end = first_offset - 1
            self._owned.set_floor(partition, state.gap_end)
            self._start(partition, state)
        return state

    async def _replicate(self, partition: int, state: _ReplicatedPartition) -> None:
        """The partition's replicator: the queue in batches, or catch-up from Kafka."""
        backoff = 0.2
        while True:
            try:
                await asyncio.wait_for(state.wake.wait(), LAG_REFRESH_S)
            except TimeoutError:
                self._publish_lag(partition, state)
                continue
            await asyncio.sleep(BATCH_LINGER_S)
            state.wake.clear()
            if not state.pointer_read:
                try:
                    await self._read_pointer(partition, state)
                except StoreUnavailable:
                    await asyncio.sleep(1)
                    state.wake.set()
                    continue
            last = state.last
            if state.catch_up_from is None and (last is None or last.offset <= state.pointer):
                continue
            try:
                if self._predecessors is not None:
                    await self._predecessors.through_cuts(partition)
                if last is not None and state.catch_up_from is None:
                    # with `last`, no await between: the batch holds exactly what is up to it
                    batch, state.queued = state.queued, []
                    await self._replicator.store(batch, last)
                    state.pointer = last.offset
                    self._owned.set_replicated(partition, last.offset)
                else:
                    await self._catch_up(partition, state)
                if last is None or state.pointer >= last.offset:  # the oldest left: queued since
                    first = state.queued[0] if state.queued else None
                    state.unreplicated_since_ms = (
                        None if first is None else int(first.timestamp.timestamp() * 1000)
                    )
                self._publish_lag(partition, state)
                backoff = 0.2
            except Exception as error:  # the store or Kafka failed: replay from Kafka later
                self._publish_lag(partition, state)
                METRICS.counter("kafka_journal_replication_failures_total").inc()
                log.warning(
                    "replicating partition %s failed, again in %.1fs: %r", partition, backoff, error
                )
                if state.catch_up_from is None:
                    state.catch_up_from, state.queued = state.pointer + 1, []
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff_s)
                state.wake.set()

    def _publish_lag(self, partition: int, state: _ReplicatedPartition) -> None:
        if self._partitions.get(partition) is not state:
            return  # revoked: no lag series for a partition this worker does not own
        records = max(state.end - state.pointer - 1, 0)
        since = state.unreplicated_since_ms
        if since is None and records and state.last is not None:
            # nothing queued, yet Kafka holds more: the agent itself is behind. The next record
            # was written no earlier than the last one it handled, so its age is at most that
            # one's: an alert on the age sees an agent's lag, not only the store's (it read 0)
            since = state.last.timestamp_ms
        seconds = 0.0 if since is None else max(time.time() - since / 1000, 0.0)
        set_replication_lag(METRICS, self._topic, partition, records, seconds)

    async def _read_pointer(self, partition: int, state: _ReplicatedPartition) -> None:
        """Learn the store's pointer of a partition that came while the store was down: the
        catch-up starts after it, and the tables are trusted once the store holds the gap."""
        pointer = await self._store.pointer(self._topic, partition)
        state.pointer_read = True
        if pointer is not None and pointer > state.pointer:
            state.pointer = pointer
            self._owned.set_replicated(partition, pointer)
            if state.catch_up_from is not None:
                state.catch_up_from = max(state.catch_up_from, pointer + 1)
        if state.trusted and state.last is not None:
            self._owned.advance(partition, state.last.offset)

    async def _catch_up(self, partition: int, state: _ReplicatedPartition) -> None:
        """Replay from `catch_up_from` to the agent's last record (at the assignment: to the
        partition's end, if further) from Kafka; back to the queue once at the agent. At most
        `catch_up_concurrency` at once: a partition waiting its turn is not trusted yet, so its
        reads wait for it or scan (as while it catches up)."""
        start = state.catch_up_from
        assert start is not None
        async with self._catch_ups, self._replay.open(partition) as source:
            if state.catch_up_to_end and state.gap_end == GAP_UNKNOWN:
                await self._learn_gap_end(partition, state, source)
            until = -1 if state.last is None else state.last.offset
            if state.catch_up_to_end:
                until = max(until, await source.end() - 1)
            await source.replicate(self._replayer, start, until + 1)
        state.catch_up_to_end = False
        state.pointer = max(state.pointer, until)
        self._owned.set_replicated(partition, state.pointer)
        if state.trusted:
            # the tables hold the agent's records and readers' rows reach the floor (gap_end);
            # the store may hold more (a catch-up to the end), but a reader told the tables
            # reach there would miss it: the store's pointer answers those (`TableIndex`)
            handled = -1 if state.last is None else state.last.offset
            self._owned.advance(partition, max(state.gap_end, handled))
        if state.last is None and self._recovering():
            # Faust hands the agent nothing before the tables are recovered, a restore that
            # grows with the journals (a pause of 6.8 s at 1,000,000 journals, BENCHMARKS.md):
            # follow the partition's end meanwhile, from Kafka as above. It publishes only the
            # store's pointer, as the catch-up does; the agent's first record ends it below
            state.catch_up_from, state.catch_up_to_end = until + 1, True
            asyncio.get_running_loop().call_later(FOLLOW_S, state.wake.set)
        elif state.last is None or state.last.offset <= until:
            # no await since the check: every record the agent handles from here is queued
            state.catch_up_from, state.queued = None, []
            log.info("partition %s caught up at %s", partition, until)
        else:
            state.catch_up_from = until + 1
            state.wake.set()

    async def _learn_gap_end(
        self, partition: int, state: _ReplicatedPartition, source: ReplaySource
    ) -> None:
        """The gap's end from the group's committed offset, unless the agent's first record
        told it meanwhile (see the module: why it is safe)."""
        committed = await source.committed()
        if committed is not None and state.last is None and state.gap_end == GAP_UNKNOWN:
            state.gap_end = committed - 1
            self._owned.set_floor(partition, state.gap_end)


T = TypeVar("T")


async def _retrying(attempt: Callable[[], Awaitable[T]], max_backoff_s: float = 10.0) -> T:
    """Retry until it succeeds: the agent must never raise (Faust would ack and commit)."""
    backoff = 0.2
    while True:
        try:
            return await attempt()
        except Exception as error:
            log.warning("retrying in %.1fs after %r", backoff, error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
