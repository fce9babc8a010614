"""A journal's head: its actions in Kafka that the store does not reflect yet, folded onto the
store's state with the one fold (`journal.fold`).

`fold_head` consumes the journal's action records in offset order (fetched by offset from what
an index listed, or found by a scan) and returns a `JournalHead`: the journal's state as of the
fence, whether a Purge voided the store's events, and the accepted Appends' events. Those are
held up to a byte budget; past it only their offsets are kept and the read fetches them again
as it streams, so memory stays bounded whatever the head's size (the only case where a read
touches a record twice; it needs replication stopped for long on a busy journal).

An Append whose events do not decode is skipped before folding, as replication quarantines it:
reads and the store fold the same actions.

`KafkaRecords` reads records of one journal from a partition with a bounded pool of assigned
(never subscribed) consumers: by offset runs, or by a scan that compares keys as bytes and so
never decodes other journals' records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from journal.actions import MalformedRecord, events_of, parse, raw_record
from journal.codec import DecodeError
from journal.consumers import log_start, start_consumer, stop_consumer
from journal.errors import InvalidValue, JournalTruncated, KafkaUnavailable
from journal.fold import JournalState, Verdict, count_rejected
from journal.index import OffsetRun
from journal.metrics import METRICS
from journal.model import ActionRecord, EventRecord, JournalKey, MarkHeader, PurgeHeader
from journal.poison import fetch_for_read
from journal.security import KafkaAccess, authorization_errors, kafka_denied

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JournalHead:
    """What Kafka adds to the store's view of one journal, as of a fence.

    `state`: the journal as of the fence. `purge_offset`: the offset of the head's last Purge
    (None: none), so the store's events are void and so are snapshots taken before it
    (`journal.snapshots`). `events`: the accepted Appends' events in the head (after its last
    Purge), in seqNr order; `spilled`: offsets of accepted Appends whose events were not held (past
    the budget), to fetch again after `events`.
    """

    state: JournalState
    purge_offset: int | None = None
    events: tuple[EventRecord, ...] = ()
    spilled: tuple[int, ...] = ()

    @property
    def purged(self) -> bool:
        return self.purge_offset is not None

    @classmethod
    def of_store(cls, state: JournalState) -> JournalHead:
        """The head when Kafka holds nothing newer than the store."""
        return cls(state)


async def fold_head(
    base: JournalState, actions: AsyncIterable[ActionRecord], budget_bytes: int
) -> JournalHead:
    """Fold the journal's actions (offset order) onto `base`, the store's state."""
    state = base
    purge_offset: int | None = None  # the last Purge folded
    events: list[EventRecord] = []
    spilled: list[int] = []
    held = 0
    async for action in actions:
        decoded = _events_or_skip(action)
        if decoded is None:
            continue
        state, verdict = state.apply(action.header, action.offset)
        if verdict is Verdict.APPENDED:
            if spilled or held + len(action.value) > budget_bytes:
                spilled.append(action.offset)
            else:
                events.extend(decoded)
                held += len(action.value)
        elif verdict is Verdict.PURGED:
            purge_offset, events, spilled, held = action.offset, [], [], 0
        elif verdict.rejected:
            count_rejected(action.key, action, verdict)
    return JournalHead(state, purge_offset, tuple(events), tuple(spilled))


async def fold_whole(actions: AsyncIterable[ActionRecord], budget_bytes: int) -> JournalHead | None:
    """The journal from Kafka alone, read from a log start past offset 0, for when the store
    cannot answer: None unless the journal's first record there is a Purge. Nothing else
    proves where it starts: an Append from seqNr 1 may be a rival's, rejected in a history
    that expired, and a Delete does not say which seqNrs followed it.
    """
    records = aiter(actions)
    async for action in records:
        if isinstance(action.header, MarkHeader):
            continue
        if not isinstance(action.header, PurgeHeader):
            return None
        head = await fold_head(JournalState(action.offset), records, budget_bytes)
        return head if head.purged else replace(head, purge_offset=action.offset)
    return None


def _events_or_skip(action: ActionRecord) -> Sequence[EventRecord] | None:
    """An action's events (none for other than Appends); None for an Append that is bad."""
    try:
        return events_of(action)
    except (DecodeError, InvalidValue) as error:
        METRICS.counter("journal_malformed_records_skipped_total").inc()
        log.warning("skipping an Append at offset %s: %s", action.offset, error)
        return None


@dataclass(frozen=True, slots=True)
class KafkaReadConfig:
    kafka: KafkaAccess
    pool_size: int = 4
    fetch_max_wait_ms: int = 20  # short: a seek waits for the outstanding long poll
    max_partition_fetch_bytes: int = 4 * 1024 * 1024
    head_budget_bytes: int = 16 * 2**20  # per read; beyond it, events are fetched as streamed
    timeout_s: float = 30.0


class KafkaRecords:
    """Reads one journal's records from a partition, with a bounded pool of consumers."""

    def __init__(self, config: KafkaReadConfig) -> None:
        self._config = config
        self._idle: asyncio.LifoQueue[AIOKafkaConsumer] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(config.pool_size)
        self._all: list[AIOKafkaConsumer] = []

    @property
    def config(self) -> KafkaReadConfig:
        return self._config

    async def fetch(
        self,
        key: JournalKey,
        partition: int,
        runs: Sequence[OffsetRun],
        after: int,
        until: int,
    ) -> AsyncIterator[ActionRecord]:
        """`key`'s records in `runs`, in (after, until), in offset order: one seek per run.

        Raises JournalTruncated when records of a run above `after` are gone from Kafka.
        """
        tp = TopicPartition(key.topic, partition)
        raw_key = key.id.encode("utf-8")
        yielded = after  # runs may overlap (two tables' runs): each record once
        async with self._consumer(tp) as consumer:
            for run in runs:
                start = max(run.first, yielded + 1)
                if start > run.last:
                    continue
                if start >= until:
                    return
                consumer.seek(tp, start)
                first: int | None = None
                async for message in self._messages(consumer, tp, min(run.last + 1, until)):
                    if first is None:
                        first = message.offset
                        if first > start:  # the log starts past records we need
                            raise _truncated(tp, start, first)
                    if message.key == raw_key and message.offset > yielded:
                        action = _parse_or_skip(message, key)
                        if action is not None:
                            yield action
                        yielded = message.offset
                if first is None:  # the consumer jumped to a log start past the run
                    raise _truncated(tp, start, await consumer.position(tp))

    async def scan(
        self, key: JournalKey, partition: int, after: int | None, until: int
    ) -> AsyncIterator[ActionRecord]:
        """`key`'s records in (after, until) of the partition (`after` None: from the start).

        The fallback when no index can tell. Raises JournalTruncated when Kafka no longer
        holds the records right after `after`.
        """
        tp = TopicPartition(key.topic, partition)
        raw_key = key.id.encode("utf-8")
        async with self._consumer(tp) as consumer:
            first = await log_start(consumer, tp)
            start = first if after is None else after + 1
            if start < first:
                raise _truncated(tp, start, first)
            if start >= until:
                return
            consumer.seek(tp, start)
            async for message in self._messages(consumer, tp, until):
                if message.key == raw_key:
                    action = _parse_or_skip(message, key)
                    if action is not None:
                        yield action

    async def log_start(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        async with self._consumer(tp) as consumer:
            return await log_start(consumer, tp)

    async def _messages(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, until: int
    ) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
        """The partition's records from the consumer's position up to `until` (exclusive)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.timeout_s
        while await consumer.position(tp) < until:
            if loop.time() > deadline:
                raise KafkaUnavailable(
                    f"{tp.topic}-{tp.partition} did not deliver records up to {until} in time"
                )
            try:
                messages = await fetch_for_read(consumer, tp, timeout_ms=200, until=until)
            except authorization_errors() as error:
                raise kafka_denied(
                    self._config.kafka, f"Read on topic {tp.topic}", error
                ) from error
            except KafkaError as error:
                raise KafkaUnavailable(f"{tp.topic}-{tp.partition}: {error!r}") from error
            for message in messages:
                if message.offset >= until:
                    return
                yield message

    @asynccontextmanager
    async def _consumer(self, tp: TopicPartition) -> AsyncIterator[AIOKafkaConsumer]:
        async with self._slots:
            consumer = self._idle.get_nowait() if not self._idle.empty() else None
            if consumer is None:
                consumer = await self._new_consumer()
            try:
                consumer.assign([tp])
                yield consumer
            except BaseException:
                # its fetch state is unknown after a failure: do not give it to the next read
                self._all.remove(consumer)
                await stop_consumer(consumer)
                raise
            # unassigned, an idle consumer sends no long polls, so the next read's seek does not
            # wait for one (aiokafka keeps one request in flight per broker): ~10 ms a read
            consumer.assign([])
            self._idle.put_nowait(consumer)

    async def _new_consumer(self) -> AIOKafkaConsumer:
        consumer = await start_consumer(
            self._config.kafka,
            fetch_max_wait_ms=self._config.fetch_max_wait_ms,
            max_partition_fetch_bytes=self._config.max_partition_fetch_bytes,
        )
        self._all.append(consumer)
        return consumer

    async def close(self) -> None:
        consumers, self._all = self._all, []
        for consumer in consumers:
            await stop_consumer(consumer)


def _truncated(tp: TopicPartition, needed: int, kept_from: int) -> JournalTruncated:
    METRICS.counter("journal_truncated_reads_total").inc()
    return JournalTruncated(
        f"{tp.topic}-{tp.partition}: records from offset {needed} are needed but Kafka keeps "
        f"only offsets from {kept_from}: they expired before replication stored them"
    )


def _parse_or_skip(message: ConsumerRecord[bytes, bytes], key: JournalKey) -> ActionRecord | None:
    try:
        action = parse(raw_record(message))
    except MalformedRecord as error:
        METRICS.counter("journal_malformed_records_skipped_total").inc()
        log.warning("skipping a malformed record in a head: %s", error)
        return None
    return action if action is not None and action.key == key else None
