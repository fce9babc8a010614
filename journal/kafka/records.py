"""`KafkaRecords` reads records of one journal from a partition with a bounded pool of assigned
(never subscribed) consumers: by offset runs, or by a scan that compares keys as bytes and so
never decodes other journals' records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.codec.actions import MalformedRecord, parse
from journal.core.index import OffsetRun
from journal.core.model import ActionRecord, JournalKey
from journal.errors import JournalTruncated, KafkaUnavailable, UndecodableBatch
from journal.kafka.consumers import log_start, raw_record, start_consumer, stop_consumer
from journal.kafka.driver_errors import KafkaError, core_error
from journal.kafka.poison import fetch_for_read
from journal.metrics import METRICS
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KafkaReadConfig:
    kafka: KafkaAccess
    pool_size: int = 4
    fetch_max_wait_ms: int = 20  # short: a seek waits for the outstanding long poll
    max_partition_fetch_bytes: int = 4 * 1024 * 1024  # a scan's fetches
    # a fetch by runs: Kafka sends this much from the run's first offset whatever the run's
    # length, and a run in the middle of the log is followed by others' records (4 MiB of
    # them took ~75 ms a read, 256 KiB ~4 ms); a larger batch still comes whole
    run_fetch_bytes: int = 256 * 1024
    # runs at most this many offsets apart are read as one span (`spans`): a seek is a round
    # trip, and a fetch of `run_fetch_bytes` holds about as many small records (a journal
    # written among others has a run per record: 40 runs after the store's row were 40
    # round trips, ~4 s for 48 journals at once on a loaded host)
    run_gap_offsets: int = 512
    head_budget_bytes: int = 16 * 2**20  # per read; beyond it, events are fetched as streamed
    timeout_s: float = 30.0


def spans(runs: Sequence[OffsetRun], after: int, until: int, gap: int) -> list[tuple[int, int]]:
    """The offset ranges [start, end) to read for `runs` (in offset order, may overlap) in
    (after, until): runs at most `gap` offsets apart share one range, read through (the
    records between them are others', skipped by their key without being parsed)."""
    ranges: list[tuple[int, int]] = []
    for run in runs:
        start, end = max(run.first, after + 1), min(run.last + 1, until)
        if start >= end:
            continue
        if ranges and start <= ranges[-1][1] + gap:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], end))
        else:
            ranges.append((start, end))
    return ranges


class KafkaRecords:
    """Reads one journal's records from a partition, with a bounded pool of consumers."""

    def __init__(self, config: KafkaReadConfig) -> None:
        self._config = config
        # idle consumers by their fetch size: a scan's, or a fetch by runs'
        self._idle: dict[int, asyncio.LifoQueue[AIOKafkaConsumer]] = {
            size: asyncio.LifoQueue()
            for size in (config.max_partition_fetch_bytes, config.run_fetch_bytes)
        }
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
        """`key`'s records in `runs`, in (after, until), in offset order: one seek per span of
        runs close together (`spans`). A span that meets a batch no one can decode is read
        again run by run, as if no span were made: a journal whose own records lie around
        such a batch is read past it (UndecodableBatch only when a run holds it).

        Raises JournalTruncated when records of a run above `after` are gone from Kafka.
        """
        tp = TopicPartition(key.topic, partition)
        yielded = after  # runs may overlap (two tables' runs): each record once
        gap = self._config.run_gap_offsets
        async with self._consumer(tp, self._config.run_fetch_bytes) as consumer:
            for start, end in spans(runs, after, until, gap):
                try:
                    async for offset, action in self._range(consumer, tp, key, start, end, yielded):
                        yielded = offset
                        if action is not None:
                            yield action
                except UndecodableBatch:
                    alone = [r for r in runs if r.first < end and r.last >= start]
                    if len(spans(alone, yielded, end, 0)) <= 1:
                        raise  # the batch lies within the journal's own run: the read says so
                    for run_start, run_end in spans(alone, yielded, end, 0):
                        ranged = self._range(consumer, tp, key, run_start, run_end, yielded)
                        async for offset, action in ranged:
                            yielded = offset
                            if action is not None:
                                yield action

    async def _range(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        key: JournalKey,
        start: int,
        end: int,
        after: int,
    ) -> AsyncIterator[tuple[int, ActionRecord | None]]:
        """`key`'s records in [start, end) above `after`, with their offsets (an action None:
        a record this version does not parse)."""
        raw_key = key.id.encode("utf-8")
        consumer.seek(tp, start)
        first: int | None = None
        async for message in self._messages(consumer, tp, end):
            if first is None:
                first = message.offset
                if first > start:  # the log starts past records we need
                    raise _truncated(tp, start, first)
            if message.key == raw_key and message.offset > after:
                yield message.offset, _parse_or_skip(message, key)
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
        async with self._consumer(tp, self._config.max_partition_fetch_bytes) as consumer:
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
        async with self._consumer(tp, self._config.run_fetch_bytes) as consumer:
            return await log_start(consumer, tp)

    async def _messages(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, until: int
    ) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
        """The partition's records from the consumer's position up to `until` (exclusive)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.timeout_s
        taken = METRICS.counter("kafka_journal_read_records_total")
        while await consumer.position(tp) < until:
            if loop.time() > deadline:
                raise KafkaUnavailable(
                    f"{tp.topic}-{tp.partition} did not deliver records up to {until} in time"
                )
            try:
                messages = await fetch_for_read(consumer, tp, timeout_ms=200, until=until)
            except KafkaError as error:
                raise core_error(
                    error,
                    f"{tp.topic}-{tp.partition}",
                    kafka=self._config.kafka,
                    right=f"Read on topic {tp.topic}",
                ) from error
            taken.inc(sum(1 for message in messages if message.offset < until))
            for message in messages:
                if message.offset >= until:
                    return
                yield message

    @asynccontextmanager
    async def _consumer(
        self, tp: TopicPartition, fetch_bytes: int
    ) -> AsyncIterator[AIOKafkaConsumer]:
        async with self._slots:
            idle = self._idle[fetch_bytes]
            consumer = idle.get_nowait() if not idle.empty() else None
            if consumer is None:
                consumer = await self._new_consumer(fetch_bytes)
            try:
                consumer.assign([tp])
                yield consumer
            except BaseException:
                # its fetch state is unknown after a failure: do not give it to the next read
                self._all.remove(consumer)
                await stop_consumer(consumer)
                raise
            # paused, an idle consumer sends no long polls, so the next read's seek does not
            # wait for one (aiokafka keeps one request in flight per broker): ~10 ms a read.
            # Not unassigned: `assign([])` makes aiokafka refresh the metadata of every topic of
            # the cluster, and the next `assign` the topic's again (two refreshes a read).
            consumer.pause(tp)
            idle.put_nowait(consumer)

    async def _new_consumer(self, fetch_bytes: int) -> AIOKafkaConsumer:
        if len(self._all) >= self._config.pool_size:
            # at most pool_size in all: one of the other size is idle (this one holds a slot)
            other = next(q for size, q in self._idle.items() if size != fetch_bytes and q.qsize())
            spare = other.get_nowait()
            self._all.remove(spare)
            await stop_consumer(spare)
        consumer = await start_consumer(
            self._config.kafka,
            fetch_max_wait_ms=self._config.fetch_max_wait_ms,
            max_partition_fetch_bytes=fetch_bytes,
        )
        self._all.append(consumer)
        return consumer

    async def close(self) -> None:
        consumers, self._all = self._all, []
        for consumer in consumers:
            await stop_consumer(consumer)


def _truncated(tp: TopicPartition, needed: int, kept_from: int) -> JournalTruncated:
    METRICS.counter("kafka_journal_truncated_reads_total").inc()
    return JournalTruncated(
        f"{tp.topic}-{tp.partition}: records from offset {needed} are needed but Kafka keeps "
        f"only offsets from {kept_from}: they expired before replication stored them"
    )


def _parse_or_skip(message: ConsumerRecord[bytes, bytes], key: JournalKey) -> ActionRecord | None:
    try:
        action = parse(raw_record(message))
    except MalformedRecord as error:
        METRICS.counter("kafka_journal_malformed_records_skipped_total").inc()
        log.warning("skipping a malformed record in a head: %s", error)
        return None
    return action if action is not None and action.key == key else None
