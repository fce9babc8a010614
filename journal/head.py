"""The unreplicated head of a journal: its actions in Kafka after the replicated pointer.

`HeadReader.read` scans one partition from just after the pointer up to a Mark, with consumers
from a small pool (assigned, never subscribed: no group, no rebalance), keeping only the
records whose key is the journal's id. Other journals' records are dropped on a byte compare
of the key: their headers and payloads are never decoded.

The head keeps the decoded events of this journal's unreplicated Appends; with replication
running that is a handful of records. Past a byte budget (replication stopped for long) it
keeps only where the rest are, and the read fetches those by offset as it streams: memory
stays bounded whatever the head's size. Deletes and Purges are folded as they come.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.actions import MalformedRecord, events_of, parse, raw_record
from journal.codec import DecodeError
from journal.metrics import METRICS
from journal.model import (
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    EventRecord,
    InvalidValue,
    JournalKey,
    PurgeHeader,
)
from journal.poison import fetch_for_read

log = logging.getLogger(__name__)


class JournalTruncated(RuntimeError):
    """Records a read needs expired from Kafka before replication stored them."""


class HeadTimeout(RuntimeError):
    """The partition did not deliver records up to the Mark in time."""


@dataclass(slots=True)
class Head:
    """What Kafka adds to the store's view of one journal.

    `purged`: a Purge is in the head, so the store's events are void (appends after it count).
    `delete_to`: the highest Delete.to after the last Purge.
    `events`: the events of this journal's Appends after the last Purge, in offset order.
    An Append whose events do not decode is skipped, as replication quarantines it.
    `after`: the replicated pointer the head continues, when its source had to read a newer
    one than the caller passed (the caller's view of the store is then too old to use).
    `spilled`: offsets of the Appends that came after `events` outgrew `budget_bytes`; their
    events are fetched again when the read gets to them.
    """

    purged: bool = False
    delete_to: int | None = None
    seq_nr: int | None = None
    events: list[EventRecord] = field(default_factory=list)
    after: int | None = None
    first_from: int | None = None  # the first seqNr appended after the last Purge
    spilled: list[int] = field(default_factory=list)
    budget_bytes: int = 16 * 2**20
    held_bytes: int = 0

    @property
    def whole_journal(self) -> bool:
        """Whether this head, read from a partition's log start, is the journal's whole story:
        it starts with a Purge, with seqNr 1, or right after what its Deletes removed."""
        if self.purged or self.first_from == 1:
            return True
        return self.first_from is not None and (self.delete_to or 0) >= self.first_from - 1

    def add(self, action: ActionRecord) -> None:
        header = action.header
        if isinstance(header, PurgeHeader):
            self.purged, self.delete_to, self.seq_nr, self.events = True, None, None, []
            self.first_from, self.spilled, self.held_bytes = None, [], 0
        elif isinstance(header, DeleteHeader):
            self.delete_to = max(header.to, self.delete_to or 0)
        elif isinstance(header, AppendHeader):
            if self.spilled or self.held_bytes + len(action.value) > self.budget_bytes:
                self.spilled.append(action.offset)  # decoded (and checked) when fetched again
                self._appended(header)
                return
            try:
                self.events.extend(events_of(action))
            except (DecodeError, InvalidValue) as error:
                METRICS.counter("journal_malformed_records_skipped_total").inc()
                log.warning("skipping an Append at offset %s: %s", action.offset, error)
                return
            self.held_bytes += len(action.value)
            self._appended(header)

    def _appended(self, header: AppendHeader) -> None:
        self.seq_nr = header.range.to
        if self.first_from is None:
            self.first_from = header.range.from_


@dataclass(frozen=True, slots=True)
class KafkaReadConfig:
    bootstrap: str = "127.0.0.1:9092"
    pool_size: int = 4
    fetch_max_wait_ms: int = 20  # short: a seek waits for the outstanding long poll
    max_partition_fetch_bytes: int = 4 * 1024 * 1024
    head_budget_bytes: int = 16 * 2**20  # per read; beyond it, events are fetched as streamed
    timeout_s: float = 30.0


class HeadSource(Protocol):
    """Finds the head of a journal between the replicated pointer and a Mark.

    The direct client scans Kafka (`HeadReader`); a Faust worker that owns the partition
    answers from its tables and falls back to the scan when it is not caught up. A source may
    continue a newer pointer than `after` and say so in `Head.after`.
    """

    async def read(
        self, key: JournalKey, partition: int, after: int | None, until: int
    ) -> Head: ...

    async def read_whole(self, key: JournalKey, partition: int, until: int) -> Head | None: ...

    async def read_at(self, key: JournalKey, partition: int, offsets: list[int]) -> Head: ...

    async def close(self) -> None: ...


class HeadReader:
    """Reads journal heads with a bounded pool of unsubscribed consumers."""

    def __init__(self, config: KafkaReadConfig) -> None:
        self._config = config
        self._idle: asyncio.LifoQueue[AIOKafkaConsumer] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(config.pool_size)
        self._all: list[AIOKafkaConsumer] = []

    async def read(self, key: JournalKey, partition: int, after: int | None, until: int) -> Head:
        """The head of `key` in records (after, until) of `partition`; `until` is the Mark.

        `after` is the replicated pointer (None: nothing replicated, scan from the log start).
        Raises JournalTruncated when Kafka no longer holds records right after the pointer.
        """
        tp = TopicPartition(key.topic, partition)
        start = 0 if after is None else after + 1
        head = self._new_head()
        if start >= until:
            return head
        async with self._consumer() as consumer:
            consumer.assign([tp])
            log_start = (await consumer.beginning_offsets([tp]))[tp]
            if log_start > start:
                METRICS.counter("journal_truncated_reads_total").inc()
                raise JournalTruncated(
                    f"{tp.topic}-{tp.partition}: records from offset {start} are needed but "
                    f"Kafka keeps only offsets from {log_start}: they expired before replication "
                    "stored them"
                )
            consumer.seek(tp, start)
            await asyncio.wait_for(self._scan(consumer, tp, key, until, head), self._timeout)
        return head

    async def read_whole(self, key: JournalKey, partition: int, until: int) -> Head | None:
        """The journal from Kafka alone (up to the Mark `until`), for when the store cannot
        answer; None unless Kafka holds the whole journal (nothing expired yet, or the records
        prove where the journal starts)."""
        tp = TopicPartition(key.topic, partition)
        async with self._consumer() as consumer:
            consumer.assign([tp])
            log_start = (await consumer.beginning_offsets([tp]))[tp]
            head = self._new_head()
            if log_start < until:
                consumer.seek(tp, log_start)
                await asyncio.wait_for(self._scan(consumer, tp, key, until, head), self._timeout)
        return head if log_start == 0 or head.whole_journal else None

    @property
    def _timeout(self) -> float:
        return self._config.timeout_s

    def _new_head(self) -> Head:
        return Head(budget_bytes=self._config.head_budget_bytes)

    async def read_at(self, key: JournalKey, partition: int, offsets: list[int]) -> Head:
        """The head made of the records at `offsets` (ascending), known to be `key`'s.

        For a caller that knows where the journal's unreplicated records are (a worker's head
        cache): one seek per run of records instead of a scan of the partition.
        """
        tp = TopicPartition(key.topic, partition)
        head = Head(budget_bytes=2**62)  # never spills: the caller bounds how much it asks for
        wanted = iter(offsets)
        next_offset = next(wanted, None)
        async with self._consumer() as consumer:
            consumer.assign([tp])
            while next_offset is not None:
                consumer.seek(tp, next_offset)
                batches = await asyncio.wait_for(
                    fetch_for_read(consumer, tp, timeout_ms=200, until=offsets[-1] + 1),
                    self._timeout,
                )
                for message in batches:
                    if next_offset is None or message.offset < next_offset:
                        continue
                    if message.offset > next_offset:
                        raise JournalTruncated(f"{tp.topic}-{tp.partition}@{next_offset} is gone")
                    action = _parse_or_skip(message, key)
                    if action is not None:
                        head.add(action)
                    next_offset = next(wanted, None)
        return head

    async def _scan(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        key: JournalKey,
        until: int,
        head: Head,
    ) -> None:
        raw_key = key.id.encode("utf-8")
        while True:
            for message in await fetch_for_read(consumer, tp, timeout_ms=200, until=until):
                if message.offset >= until:
                    return
                if message.key != raw_key:
                    continue
                action = _parse_or_skip(message, key)
                if action is not None:
                    head.add(action)
            if await consumer.position(tp) >= until:
                return

    @asynccontextmanager
    async def _consumer(self) -> AsyncIterator[AIOKafkaConsumer]:
        async with self._slots:
            consumer = self._idle.get_nowait() if not self._idle.empty() else None
            if consumer is None:
                consumer = await self._new_consumer()
            try:
                yield consumer
            except BaseException:
                # its fetch state is unknown after a failure: do not give it to the next read
                self._all.remove(consumer)
                await consumer.stop()
                raise
            self._idle.put_nowait(consumer)

    async def _new_consumer(self) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._config.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self._config.fetch_max_wait_ms,
            max_partition_fetch_bytes=self._config.max_partition_fetch_bytes,
            isolation_level="read_uncommitted",
        )
        await consumer.start()
        self._all.append(consumer)
        return consumer

    async def close(self) -> None:
        consumers, self._all = self._all, []
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)


def _parse_or_skip(message: ConsumerRecord[bytes, bytes], key: JournalKey) -> ActionRecord | None:
    try:
        action = parse(raw_record(message))
    except MalformedRecord as error:
        METRICS.counter("journal_malformed_records_skipped_total").inc()
        log.warning("skipping a malformed record in a head: %s", error)
        return None
    return action if action is not None and action.key == key else None
