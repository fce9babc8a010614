"""Replication: batches of raw records of one partition into the eventual store.

`Replicator.apply` is the one routine every replicating process runs (the Faust agent per
event batch, `replicate_to_now` here, the Spark rebuild per partition): parse, set malformed
records aside, fold onto the stored states (`journal.core.fold`), apply, advance the pointer. A
malformed record never stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.codec.actions import MalformedRecord, RawRecord, parse_checked
from journal.core.fold import (
    JournalState,
    JournalWrite,
    first_seal,
    fold_batch,
    removed_in_older,
)
from journal.core.grow import Grow
from journal.core.model import ActionRecord, JournalKey, MarkHeader
from journal.errors import StoreUnavailable
from journal.kafka.consumers import raw_record
from journal.kafka.poison import fetch, skip_poison
from journal.kafka.producer import JournalProducer
from journal.kafka.topic import partition_count, quarantine_topic
from journal.metrics import METRICS
from journal.store.base import (
    EventualJournal,
    EventualStore,
    JournalMeta,
    ReplicatedJournal,
    moved_bases,
    states,
)
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)

QUARANTINE_REASON_HEADER = "journal.quarantine.reason"
QUARANTINE_ORIGIN_HEADER = "journal.quarantine.origin"  # "partition:offset" in the action topic
QUARANTINE_LOG_INTERVAL_S = 10.0
# records per store write when replaying from Kafka: each write costs per journal (its row)
# and per request, so larger batches cost less per record. A worker catching up on 1-event
# appends (100 journals): 6,013-7,002 events/s at 138-166 us of CPU per record with 1,000,
# 8,799-11,078 at 86-108 us with 3,000. Bounded: a few thousand records' events in memory.
REPLAY_BATCH = 3000
CACHED_JOURNALS = 10_000  # per partition: the rows replication keeps instead of reading them


class Quarantine(Protocol):
    """Where malformed records go; it must not lose them and must not raise for bad input.

    `put` may only queue a record: `flush` returns once every record put is durable.
    Replication flushes before its pointer passes the records.
    """

    async def put(self, record: RawRecord, reason: str) -> None: ...

    async def flush(self) -> None: ...


class KafkaQuarantine:
    """Copies malformed records unchanged to `<topic>.quarantine`, adding the reason.

    Records are produced without waiting for each (a flood of malformed records must not
    stall the partition); the log gets a summary per interval, the topic the detail.
    """

    def __init__(
        self, producer: JournalProducer, log_interval_s: float = QUARANTINE_LOG_INTERVAL_S
    ):
        self._producer = producer
        self._pending: list[tuple[RawRecord, str, asyncio.Future[Any]]] = []
        self._summary = _QuarantineSummary(log_interval_s)

    async def put(self, record: RawRecord, reason: str) -> None:
        self._pending.append((record, reason, await self._send(record, reason)))
        self._summary.add(record, reason)
        METRICS.counter("kafka_journal_quarantined_records_total", topic=record.topic).inc()

    async def flush(self) -> None:
        # a record leaves `_pending` only once delivered: a failed flush loses nothing
        while self._pending:
            record, reason, delivery = self._pending[0]
            try:
                await delivery
            except Exception as error:  # once more, waiting: send_and_wait recovers the producer
                log.warning("quarantining %s again: %r", _where(record), error)
                await self._producer.send_and_wait(**self._message(record, reason))
            self._pending.pop(0)
        self._summary.log_due()

    async def _send(self, record: RawRecord, reason: str) -> asyncio.Future[Any]:
        return await self._producer.send(**self._message(record, reason))

    @staticmethod
    def _message(record: RawRecord, reason: str) -> dict[str, Any]:
        return {
            "topic": quarantine_topic(record.topic),
            "value": record.value,
            "key": record.key,
            "timestamp_ms": record.timestamp_ms,
            "headers": [
                *record.headers,
                (QUARANTINE_REASON_HEADER, reason.encode("utf-8")),
                (QUARANTINE_ORIGIN_HEADER, f"{record.partition}:{record.offset}".encode()),
            ],
        }


class _QuarantineSummary:
    """One WARNING for the records quarantined since the last, counts and a sample: at the
    first flush after `interval_s`."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._since = time.monotonic()
        self._reasons: Counter[str] = Counter()
        self._sample: str | None = None

    def add(self, record: RawRecord, reason: str) -> None:
        if self._sample is None:
            self._sample = f"{_where(record)}: {reason}"
        self._reasons[reason.split(":", 1)[0]] += 1

    def log_due(self) -> None:
        now = time.monotonic()
        if not self._reasons or now - self._since < self._interval_s:
            return
        log.warning(
            "quarantined %s records in %.0fs (%s); e.g. %s",
            sum(self._reasons.values()),
            now - self._since,
            ", ".join(f"{reason}: {n}" for reason, n in self._reasons.most_common()),
            self._sample,
        )
        self._since, self._reasons, self._sample = now, Counter(), None


def _where(record: RawRecord) -> str:
    return f"{record.topic}-{record.partition}@{record.offset}"


class AlreadyQuarantined:
    """For replays of records a first pass has set aside already: skip them silently.

    `first`: the first pass's quarantine, if it may still be delivering (it is flushed).
    """

    def __init__(self, first: Quarantine | None = None) -> None:
        self._first = first

    async def put(self, record: RawRecord, reason: str) -> None:
        return None

    async def flush(self) -> None:
        if self._first is not None:
            await self._first.flush()


class StoredRows:
    """The journals' rows as replication last read or wrote them, per partition: folding a
    batch onto them needs no read of the store, except for journals not seen lately.

    Only right while this process is the partition's only writer: `forget` a partition when
    it goes, and after a failed write (its rows are then uncertain).
    """

    def __init__(self, per_partition: int = CACHED_JOURNALS) -> None:
        self._per_partition = per_partition
        self._rows: dict[int, OrderedDict[JournalKey, JournalMeta]] = {}

    async def of(
        self, store: ReplicatedJournal, partition: int, keys: Collection[JournalKey]
    ) -> dict[JournalKey, JournalMeta]:
        cached = self._rows.setdefault(partition, OrderedDict())
        found = {key: row for key in keys if (row := cached.get(key)) is not None}
        missing = [key for key in keys if key not in found]
        if missing:
            METRICS.counter("kafka_journal_replication_row_reads_total").inc(len(missing))
            found |= await store.stored(missing)
        return found

    def keep(self, partition: int, rows: Mapping[JournalKey, JournalMeta]) -> None:
        cached = self._rows.setdefault(partition, OrderedDict())
        for key, row in rows.items():
            cached[key] = row
            cached.move_to_end(key)
        while len(cached) > self._per_partition:
            cached.popitem(last=False)

    def forget(self, partition: int) -> None:
        self._rows.pop(partition, None)


class CutRegistry(Protocol):
    """Where replication learns and records a partition's cut (a grow's registry: the store's,
    `EventualStore.grow`)."""

    async def grow(self, topic: str) -> Grow | None: ...

    async def record_cut(self, topic: str, partition: int, offset: int) -> None: ...


class Replicator:
    """Applies batches of one topic's partitions to a store's write side.

    A grow's cut (docs/growing.md): replication of an old partition stops applying at its
    first Seal (the fold's MOVED rule). It learns the cut from the registry (`cuts`) or from
    the Seal in a batch, and records a cut it found before its pointer passes it, so that a
    process (re)starting after the pointer still learns it; without `cuts` only a Seal it met
    stops it (in the batch or an earlier one).

    `moved_from`: the topic's predecessors, nearest first, when the topic is a grow's successor
    (a chain of grows: each one's): a journal with no row here takes its state in the nearest
    one that has its row (final once that partition is replicated through its cut:
    `journal.replication.successor` waits for that) as the state its first records here fold
    onto, and its first row keeps the base. A journal moved twice without a write in between
    has no row in the middle topic: its state is still the oldest one's."""

    def __init__(
        self,
        store: ReplicatedJournal,
        quarantine: Quarantine,
        rows: StoredRows | None = None,
        cuts: CutRegistry | None = None,
        moved_from: tuple[str, ...] = (),
    ) -> None:
        self._store = store
        self._moved_from = tuple(moved_from)
        self._quarantine = quarantine
        # share `rows` between the replicators of the same partitions
        self._rows = StoredRows() if rows is None else rows
        self._registry = cuts
        self._cuts: dict[tuple[str, int], int | None] = {}  # None: none before the pointer

    async def apply(self, records: Sequence[RawRecord]) -> None:
        """Replicate records of one partition, in offset order; then advance its pointer."""
        if records:
            await self.store(await self.parse(records), records[-1])

    async def parse(self, records: Sequence[RawRecord]) -> list[ActionRecord]:
        """The actions of `records` (an Append's carry its events, decoded once); malformed
        records go to the quarantine."""
        actions: list[ActionRecord] = []
        for record in records:
            try:
                action = parse_checked(record)
            except MalformedRecord as error:
                await self._quarantine.put(record, error.reason)
                continue
            if action is not None:
                actions.append(action)
        return actions

    async def skip(self, marker: RawRecord, reason: str) -> None:
        """Records up to `marker.offset` could not be decoded (journal.kafka.poison): quarantine the
        marker, move the pointer past them."""
        await self._quarantine.put(marker, reason)
        await self.store([], marker)

    async def _cut(self, topic: str, partition: int, actions: Sequence[ActionRecord]) -> int | None:
        """The partition's cut as of the batch's end: the registry's, else the batch's first
        Seal (recorded now, before the pointer can pass it)."""
        where = (topic, partition)
        if self._registry is None:  # the first Seal this replicator met, in a batch before too
            if self._cuts.get(where) is None:
                self._cuts[where] = first_seal(actions)
            return self._cuts[where]
        if where not in self._cuts:
            grow = await self._registry.grow(topic)
            # none recorded: replication, which sees every record in order, will see the Seal
            self._cuts[where] = None if grow is None else grow.cut.get(partition)
        cut = self._cuts[where]
        if cut is None:
            cut = first_seal(actions)
            if cut is not None:
                await self._registry.record_cut(topic, partition, cut)
                self._cuts[where] = cut
        return cut

    async def store(self, actions: Sequence[ActionRecord], last: RawRecord) -> None:
        """Apply parsed actions, then move the pointer to `last`, the batch's last record."""
        cut = await self._cut(last.topic, last.partition, actions)
        changing = [a for a in actions if not isinstance(a.header, MarkHeader)]
        if changing:
            partition = last.partition
            try:
                stored = await self._rows.of(self._store, partition, {a.key for a in changing})
                onto = states(stored) | await self._bases(changing, stored)
                writes = fold_batch(changing, onto, cut)
                # before this topic's rows: a replay after a crash in between folds the same
                # Deletes and Purges again, where the rows would show them done already
                await self._remove_in_older(writes, stored)
                written = await self._store.apply(writes, stored)
            except BaseException:
                self._rows.forget(partition)
                raise
            self._rows.keep(partition, written)
        await self._quarantine.flush()
        await self._store.save_pointer(last.topic, last.partition, last.offset)

    async def _remove_in_older(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        """A Delete or Purge here of a journal a grow moved removes its events in the older
        topics of the chain too (`removed_in_older`: stamped at each one's cut + 1), so the
        store keeps no event a read can no longer return. Reads honour it either way."""
        if not self._moved_from or self._registry is None:
            return
        moved = {
            write.key.id: write
            for write in writes
            if (write.purge is not None or write.delete is not None)
            and (stored[write.key].base if write.key in stored else write.before.seq_nr) > 0
        }
        for topic in self._moved_from if moved else ():
            rows = await self._store.stored([JournalKey(topic, id_) for id_ in moved])
            if not rows:
                continue
            grow = await self._registry.grow(topic)
            removals: list[JournalWrite] = []
            for key, row in rows.items():
                cut = None if grow is None else grow.cut.get(row.partition)
                if cut is None:  # replication of this topic waits for every cut: not so
                    log.warning("%s: no cut recorded in %s, its events kept there", key, topic)
                    continue
                removal = removed_in_older(moved[key.id], key, row.state, row.partition, cut)
                if removal is not None:
                    removals.append(removal)
            if removals:
                await self._store.remove(removals, rows)

    async def _bases(
        self, actions: Sequence[ActionRecord], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalState]:
        """The journals without a row here that have one in a predecessor: their state in the
        nearest, as their base here (`rebased`)."""
        missing = {a.key.id for a in actions if a.key not in stored}
        if not missing or not self._moved_from:
            return {}
        topic = actions[0].key.topic
        return await moved_bases(self._store.stored, topic, missing, self._moved_from)

    def forget(self, partition: int) -> None:
        """The partition went to another worker, or its writes failed: read its rows again."""
        self._rows.forget(partition)
        self._cuts = {where: cut for where, cut in self._cuts.items() if where[1] != partition}


async def replicate_to_now(
    kafka: KafkaAccess,
    store: EventualStore,
    topic: str,
    quarantine: Quarantine,
    batch_size: int = 1000,
    moved_from: tuple[str, ...] = (),
) -> dict[int, int]:
    """Replicate every partition of `topic` from its pointer to the current end (`moved_from`:
    its predecessors, nearest first, when it is a grow's successor: `Replicator`).

    Returns the pointers reached. For tests, tools and catching up; a worker uses the agents.
    """
    consumer = AIOKafkaConsumer(
        **kafka.client_options(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(await partition_count(kafka, topic))]
        ends = await consumer.end_offsets(tps)
        pointers = await store.pointers(topic)
        replicator = Replicator(store, quarantine, cuts=store, moved_from=moved_from)
        for tp in tps:
            start = pointers.get(tp.partition, -1) + 1
            await replicate_range(consumer, replicator, tp, start, ends[tp], batch_size)
        return await store.pointers(topic)
    finally:
        await consumer.stop()


async def wait_replicated(
    store: EventualJournal,
    topic: str,
    ends: dict[int, int],
    timeout_s: float,
    poll_s: float = 0.05,
) -> dict[int, int]:
    """Until the store's pointers reach `ends` (from `end_offsets`); the pointers then.

    A store that is unavailable meanwhile (reconnecting after an outage) is asked again.
    `timeout_s` bounds the whole wait, not a pause in it: its error says how far replication
    got meanwhile and when it last advanced, as a slow one and a stalled one look alike else.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + timeout_s
    pointers: dict[int, int] = {}
    first: int | None = None  # the records stored at the first answer
    stored, advanced = 0, started
    while True:
        with contextlib.suppress(StoreUnavailable):
            pointers = await store.pointers(topic)
            now_stored = _stored(pointers, ends)
            first = now_stored if first is None else first
            if now_stored > stored:
                stored, advanced = now_stored, loop.time()
        if all(pointers.get(p, -1) >= end - 1 for p, end in ends.items() if end > 0):
            return pointers
        if loop.time() > deadline:
            meanwhile = stored - (stored if first is None else first)
            progress = (
                f"{meanwhile} of them during the wait, the last {loop.time() - advanced:.0f} s ago"
                if meanwhile
                else "none during the wait"
            )
            raise TimeoutError(
                f"replication not done in {timeout_s:g} s: {stored} of {sum(ends.values())}"
                f" records stored, {progress}; pointers {pointers}, ends {ends}"
            )
        await asyncio.sleep(poll_s)


def _stored(pointers: Mapping[int, int], ends: Mapping[int, int]) -> int:
    """The records below `ends` (end offsets) that the store's `pointers` cover."""
    return sum(min(pointers.get(p, -1) + 1, end) for p, end in ends.items())


async def replicate_range(
    consumer: AIOKafkaConsumer,
    replicator: Replicator,
    tp: TopicPartition,
    start: int,
    end: int,
    batch_size: int = REPLAY_BATCH,
) -> None:
    """Replicate the records of `tp` in [start, end) with an unsubscribed consumer.

    Records below the log start expired before replication (an outage longer than Kafka's
    retention): they are gone for good; the consumer starts at the log start, and the loss is
    logged and counted (`kafka_journal_records_expired_unreplicated_total`) for an operator."""
    if start >= end:
        return
    consumer.assign([tp])
    log_start = (await consumer.beginning_offsets([tp]))[tp]
    if log_start > start:
        lost = min(log_start, end) - start
        METRICS.counter("kafka_journal_records_expired_unreplicated_total").inc(lost)
        log.error(
            "%s-%s: offsets %s..%s expired before replication: %s records lost",
            tp.topic,
            tp.partition,
            start,
            start + lost - 1,
            lost,
        )
        start = log_start
        if start >= end:
            return
    consumer.seek(tp, start)
    while await consumer.position(tp) < end:
        fetched = await fetch(consumer, tp, timeout_ms=500, max_records=batch_size, end=end)
        await replicator.apply([raw_record(m) for m in fetched.records if m.offset < end])
        if fetched.poison is not None and fetched.poison.start < end:
            await skip_poison(consumer, replicator, tp, fetched.poison, end)
