"""Replication: batches of raw records of one partition into the eventual store.

`Replicator.apply` is the one routine every replicating process runs (the Faust agent per
event batch, `replicate_to_now` here, the Spark rebuild per partition): parse, set malformed
records aside, fold onto the stored states (`journal.fold`), apply, advance the pointer. A
malformed record never stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.actions import MalformedRecord, RawRecord, parse_checked, raw_record
from journal.errors import StoreUnavailable
from journal.fold import fold_batch
from journal.metrics import METRICS
from journal.model import ActionRecord, MarkHeader
from journal.poison import fetch, skip_poison
from journal.producer import JournalProducer
from journal.store.base import EventualJournal, EventualStore, ReplicatedJournal
from journal.topic import partition_count, quarantine_topic

log = logging.getLogger(__name__)

QUARANTINE_REASON_HEADER = "journal.quarantine.reason"


class Quarantine(Protocol):
    """Where malformed records go; it must not lose them and must not raise for bad input."""

    async def put(self, record: RawRecord, reason: str) -> None: ...


class KafkaQuarantine:
    """Copies malformed records unchanged to `<topic>.quarantine`, adding the reason."""

    def __init__(self, producer: JournalProducer) -> None:
        self._producer = producer

    async def put(self, record: RawRecord, reason: str) -> None:
        log.warning(
            "quarantining %s-%s@%s: %s", record.topic, record.partition, record.offset, reason
        )
        headers = [*record.headers, (QUARANTINE_REASON_HEADER, reason.encode("utf-8"))]
        await self._producer.send_and_wait(
            quarantine_topic(record.topic),
            record.value,
            key=record.key,
            timestamp_ms=record.timestamp_ms,
            headers=headers,
        )
        METRICS.counter("journal_quarantined_records_total", topic=record.topic).inc()


class AlreadyQuarantined:
    """For replays of records a first pass has set aside already: skip them silently."""

    async def put(self, record: RawRecord, reason: str) -> None:
        return None


class Replicator:
    """Applies batches of one topic's partitions to a store's write side."""

    def __init__(self, store: ReplicatedJournal, quarantine: Quarantine) -> None:
        self._store = store
        self._quarantine = quarantine

    async def apply(self, records: Sequence[RawRecord]) -> None:
        """Replicate records of one partition, in offset order; then advance its pointer."""
        if records:
            await self.store(await self.parse(records), records[-1])

    async def parse(self, records: Sequence[RawRecord]) -> list[ActionRecord]:
        """The actions of `records`; malformed records go to the quarantine."""
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
        """Records up to `marker.offset` could not be decoded (journal.poison): quarantine the
        marker, move the pointer past them."""
        await self._quarantine.put(marker, reason)
        await self.store([], marker)

    async def store(self, actions: Sequence[ActionRecord], last: RawRecord) -> None:
        """Apply parsed actions, then move the pointer to `last`, the batch's last record."""
        changing = [a for a in actions if not isinstance(a.header, MarkHeader)]
        if changing:
            stored = await self._store.stored({a.key for a in changing})
            await self._store.apply(fold_batch(changing, stored))
        await self._store.save_pointer(last.topic, last.partition, last.offset)


async def replicate_to_now(
    bootstrap: str,
    store: EventualStore,
    topic: str,
    quarantine: Quarantine,
    batch_size: int = 1000,
) -> dict[int, int]:
    """Replicate every partition of `topic` from its pointer to the current end.

    Returns the pointers reached. For tests, tools and catching up; a worker uses the agents.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(await partition_count(bootstrap, topic))]
        ends = await consumer.end_offsets(tps)
        pointers = await store.pointers(topic)
        replicator = Replicator(store, quarantine)
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
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pointers: dict[int, int] = {}
    while True:
        with contextlib.suppress(StoreUnavailable):
            pointers = await store.pointers(topic)
        if all(pointers.get(p, -1) >= end - 1 for p, end in ends.items() if end > 0):
            return pointers
        if loop.time() > deadline:
            raise TimeoutError(f"replication stuck: pointers {pointers}, ends {ends}")
        await asyncio.sleep(poll_s)


async def replicate_range(
    consumer: AIOKafkaConsumer,
    replicator: Replicator,
    tp: TopicPartition,
    start: int,
    end: int,
    batch_size: int = 1000,
) -> None:
    """Replicate the records of `tp` in [start, end) with an unsubscribed consumer."""
    if start >= end:
        return
    consumer.assign([tp])
    consumer.seek(tp, start)
    while await consumer.position(tp) < end:
        fetched = await fetch(consumer, tp, timeout_ms=500, max_records=batch_size, end=end)
        await replicator.apply([raw_record(m) for m in fetched.records if m.offset < end])
        if fetched.poison is not None and fetched.poison.start < end:
            await skip_poison(consumer, replicator, tp, fetched.poison, end)
