"""Deadlines set before a move, carried into the grown topic's expiry tables (docs/growing.md,
"Deadlines set before the move"; the model: tests/model/test_deadline_carry_model.py).

A journal's expiry candidate is in the expiry tables of the workers that handled the Append
that set it. Once every worker runs on the grown topic, those of the topics before it have no
owner, so the member assigned a partition q of the grown topic carries them over, once, from
each topic of the chain before it (`Predecessor`, partition q mod its count):
1. the predecessor's workers' committed offset of that partition, `c` (none: the log's start);
2. their expiry changelog's partition to its end, as it is now: every candidate it holds for
   a journal of q, stale ones too (superseded, or since cleared: the purger's read drops them),
   so nothing is held in memory;
3. the predecessor's records from `c` to its cut, folded for their candidates (what its
   workers had not handled when they stopped).
Each candidate is a Mark of its journal in q (`deadline_mark`), which the agent takes as a
candidate (tables/expiry.py); once Kafka acknowledged them all, the store records q carried.
1 before 2: Faust flushes a table's changelog before it commits the offsets of the records it
came from, so the changelog read after `c` covers every record before `c`. A carry stopped
before its record (kill -9, a failure, the partition revoked) is done again whole: a Mark
repeated changes nothing (the earliest candidate wins).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from agents.replication import GroupOffsets
from journal.codec import MalformedRecord, parse_checked
from journal.core import AppendHeader, JournalKey, Position, deadline_mark
from journal.kafka import (
    decodable_from,
    fetch,
    partition_of,
    raw_record,
    start_consumer,
    stop_consumer,
)
from journal.store import EventualStore
from kjconfig.access import KafkaAccess
from tables.expiry import EXPIRY_TABLE, deadline_of
from tables.store import changelog_of, read_with_own_consumer

log = logging.getLogger(__name__)

CARRIED_ORIGIN = "carried"  # the origin of the Marks produced here
MARKS_IN_FLIGHT = 512  # Marks awaiting Kafka's acknowledgement at once
_FETCH_MS = 500


class Marks(Protocol):
    """Where the Marks are produced (the journal writer)."""

    async def mark(
        self, key: JournalKey, mark_id: str, *, origin: str | None = None
    ) -> Position: ...


@dataclass(frozen=True, slots=True)
class Predecessor:
    """A topic of the chain before the grown one: its partition count, its workers' app id
    (their consumer group, and their tables' changelogs' prefix) and its partitions' cuts."""

    topic: str
    partitions: int
    app: str
    cuts: dict[int, int]  # partition -> the offset of its first Seal


class DeadlineCarry:
    """The carry into `topic` (of `partitions`) for the workers of `app` (see the module)."""

    def __init__(
        self,
        kafka: KafkaAccess,
        store: EventualStore,
        marks: Marks,
        topic: str,
        partitions: int,
        app: str,
        in_flight: int = MARKS_IN_FLIGHT,
    ) -> None:
        self._kafka = kafka
        self._store = store
        self._marks = marks
        self._topic = topic
        self._partitions = partitions
        self._app = app
        self._in_flight = in_flight

    async def carry(self, partition: int, predecessors: Sequence[Predecessor]) -> int | None:
        """Carry `partition`'s candidates from each predecessor, unless the store says it was
        done; the Marks produced, None if it was done before. Raises what Kafka or the store
        raised: the caller tries again later, and the whole carry is done again."""
        if await self._store.deadlines_carried(self._topic, self._app, partition):
            return None
        sender = _Sender(self._marks, self._topic, self._in_flight)
        try:
            for predecessor in predecessors:
                await self._carry_from(predecessor, partition, sender)
        except BaseException:
            sender.cancel()  # failed or revoked: done again whole
            raise
        await sender.drain()
        await self._store.record_deadlines_carried(self._topic, self._app, partition)
        log.info(
            "partition %d of %s: %d expiry candidates carried from %s",
            partition,
            self._topic,
            sender.sent,
            ", ".join(p.topic for p in predecessors) or "no topic",
        )
        return sender.sent

    async def _carry_from(self, predecessor: Predecessor, partition: int, sender: _Sender) -> None:
        source = partition % predecessor.partitions
        offsets = GroupOffsets(self._kafka, predecessor.app, predecessor.topic)
        try:
            committed = await offsets.committed(source)  # 1: before the changelog (the module)
        finally:
            await offsets.close()

        def ours(journal_id: str) -> bool:
            return partition_of(journal_id, self._partitions) == partition

        changelog = changelog_of(predecessor.app, EXPIRY_TABLE)
        end = await _end(self._kafka, changelog, source)
        if end:  # 2: a group that never ran on the predecessor has no changelog
            entries = read_with_own_consumer(self._kafka, changelog, {source: (0, end)})
            async for _, records in entries:
                for key, value, _ in records:
                    journal_id = key.decode("utf-8")
                    if value is not None and ours(journal_id):
                        await sender.send(journal_id, int(value))
        cut = predecessor.cuts.get(source)
        if cut is None:
            raise ValueError(f"{predecessor.topic}/{source} has no cut recorded: not grown yet")
        tp = TopicPartition(predecessor.topic, source)
        await _carry_tail(self._kafka, tp, committed or 0, cut, ours, sender)  # 3


async def _end(kafka: KafkaAccess, topic: str, partition: int) -> int:
    """The partition's end offset; 0 when the topic does not exist."""
    consumer = await start_consumer(kafka)
    try:
        if topic not in await consumer.topics():  # a metadata request of its own
            return 0
        tp = TopicPartition(topic, partition)
        ends: dict[TopicPartition, int] = await consumer.end_offsets([tp])
        return ends[tp]
    finally:
        await stop_consumer(consumer)


async def _carry_tail(
    kafka: KafkaAccess,
    tp: TopicPartition,
    start: int,
    cut: int,
    ours: Callable[[str], bool],
    sender: _Sender,
) -> None:
    """The candidates of the Appends in [start, cut) of `tp` (a start below the log's start
    begins at it; an undecodable batch is passed, as replication passes it)."""
    if start >= cut:
        return
    consumer: AIOKafkaConsumer = await start_consumer(kafka, fetch_max_wait_ms=20)
    try:
        consumer.assign([tp])
        log_start = (await consumer.beginning_offsets([tp]))[tp]
        consumer.seek(tp, max(start, log_start))
        while await consumer.position(tp) < cut:
            fetched = await fetch(consumer, tp, timeout_ms=_FETCH_MS, end=cut)
            for message in fetched.records:
                if message.offset >= cut:
                    break
                try:
                    action = parse_checked(raw_record(message))
                except MalformedRecord:
                    continue  # quarantined by replication; it sets no candidate
                if action is None or not isinstance(action.header, AppendHeader):
                    continue
                at = deadline_of(action)
                if at is not None and ours(action.key.id):
                    await sender.send(action.key.id, at)
            if fetched.poison is not None and fetched.poison.start < cut:
                next_offset = await decodable_from(consumer, tp, fetched.poison, cut, _FETCH_MS)
                consumer.seek(tp, next_offset)
    finally:
        await stop_consumer(consumer)


class _Sender:
    """Marks produced with at most `in_flight` unacknowledged; `drain` waits for them all and
    raises the first failure."""

    def __init__(self, marks: Marks, topic: str, in_flight: int) -> None:
        self._marks = marks
        self._topic = topic
        self._slots = asyncio.Semaphore(in_flight)
        self._pending: set[asyncio.Task[Position]] = set()
        self._failure: BaseException | None = None
        self.sent = 0

    async def send(self, journal_id: str, at: int) -> None:
        if self._failure is not None:
            raise self._failure
        await self._slots.acquire()
        mark = self._marks.mark(
            JournalKey(self._topic, journal_id), deadline_mark(at), origin=CARRIED_ORIGIN
        )
        task = asyncio.ensure_future(mark)
        self._pending.add(task)
        task.add_done_callback(self._done)
        self.sent += 1

    def _done(self, task: asyncio.Task[Position]) -> None:
        self._pending.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()

    def cancel(self) -> None:
        for task in list(self._pending):
            task.cancel()

    async def drain(self) -> None:
        try:
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)
        finally:
            self.cancel()
        if self._failure is not None:
            raise self._failure


class DeadlineCarries:
    """A worker's carries (see the module): one task per owned partition of the grown topic
    its app runs on whose carry is not recorded, retried until it is (a failure of Kafka or the
    store: the whole carry again, after a pause), cancelled when the partition goes. At most
    one runs at a time: a carry reads a changelog partition whole, a rebalance may hand over
    many partitions at once, and nothing waits on a carry (the purger purges what its table
    has meanwhile)."""

    def __init__(
        self, carry: DeadlineCarry, predecessors: Sequence[Predecessor], retry_s: float = 5.0
    ) -> None:
        self._carry = carry
        self._predecessors = tuple(predecessors)
        self._retry_s = retry_s
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._one_at_a_time = asyncio.Lock()
        self._done: set[int] = set()

    def assigned(self, partition: int) -> None:
        if partition in self._done or partition in self._tasks or not self._predecessors:
            return
        self._tasks[partition] = asyncio.create_task(self._run(partition))

    def revoked(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, partition: int) -> None:
        while True:
            try:
                async with self._one_at_a_time:
                    await self._carry.carry(partition, self._predecessors)
            except Exception as error:  # Kafka or the store: the whole carry again, later
                log.warning(
                    "carrying the expiry candidates of partition %d failed, again in %.0f s: %r",
                    partition,
                    self._retry_s,
                    error,
                )
                await asyncio.sleep(self._retry_s)
                continue
            self._done.add(partition)
            self._tasks.pop(partition, None)
            return
