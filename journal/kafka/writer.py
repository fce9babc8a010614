"""Writes actions to the action topic: one record per action, keyed by journal id.

The producer is idempotent with acks=all, so an action acknowledged here survives the loss of
any broker that is not the last in-sync replica, and producer retries never duplicate it.
Partitions are chosen with Kafka's default partitioner (murmur2 of the key), so Java clients,
Faust tables and this writer agree on where a journal lives. Every action carries this
journal's version (`journal.version`), as kafka-journal's carry its own.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Coroutine, Mapping

import msgspec
from aiokafka.partitioner import murmur2
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from journal.codec.actions import record_headers
from journal.codec.events import encode_checked_events
from journal.core.grow import SEAL_ID
from journal.core.model import (
    ActionHeader,
    AppendHeader,
    DeleteHeader,
    Events,
    HeaderMetadata,
    JournalKey,
    MarkHeader,
    PayloadType,
    Position,
    PurgeHeader,
    SeqRange,
    check_seq_nr,
)
from journal.errors import AppendTooLarge
from journal.kafka.guard import PartitionGuard
from journal.kafka.producer import JournalProducer
from journal.metrics import METRICS, Metrics, ObservingChild
from journal.version import VERSION

_ACTION_NAMES: dict[type[ActionHeader], str] = {
    AppendHeader: "append",
    DeleteHeader: "delete",
    PurgeHeader: "purge",
    MarkHeader: "mark",
}


class EncodedAppend(msgspec.Struct, frozen=True, gc=False):
    """An append's events as its record value: what is produced, and what a digest covers."""

    range: SeqRange
    payload_type: PayloadType
    value: bytes


def encode_append(events: Events) -> EncodedAppend:
    """Check that the events are consecutive and encode them; InvalidValue if not."""
    seq_range = events.range
    payload_type, value = encode_checked_events(events)
    return EncodedAppend(seq_range, payload_type, value)


@functools.lru_cache(maxsize=65_536)
def partition_of(journal_id: str, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record (Java's `toPositive(murmur2) % n`).

    Cached: aiokafka's murmur2 is pure Python (~5 us for a short id), and the journals a
    process serves are asked for again and again (a read's fence, its head, every append).
    """
    hashed: int = murmur2(journal_id.encode("utf-8"))
    return (hashed & 0x7FFFFFFF) % partitions


def _append_header(
    encoded: EncodedAppend, metadata: HeaderMetadata, origin: str | None
) -> AppendHeader:
    return AppendHeader(
        encoded.range, encoded.payload_type, origin=origin, version=VERSION, metadata=metadata
    )


class FenceFloor:
    """Per partition, an end offset below which this process knows every record is in the
    log: each acknowledged action's offset + 1, raised by the writer, and each fence a read
    took (journal/kafka/fence.py). A fence is never taken below it, so a broker's answer that
    lags (a leader's high watermark behind what it acknowledged) cannot hide from a read what
    this process saw acknowledged or read before (invariant 2). A read writes nothing for it."""

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: dict[int, int] = {}

    def of(self, partition: int) -> int:
        return self._ends.get(partition, 0)

    def raise_to(self, partition: int, end: int) -> int:
        """The partition's floor, raised to `end` if it was below."""
        floor = self._ends.get(partition, 0)
        if end > floor:
            self._ends[partition] = floor = end
        return floor


class JournalWriter:
    """Produces the four actions; one instance per process, shared by all journals."""

    def __init__(
        self,
        producer: JournalProducer,
        partitions: int,
        max_record_bytes: int = 1_000_000,
        metrics: Metrics = METRICS,
        guard: PartitionGuard | None = None,
    ) -> None:
        self._producer = producer
        self._partitions = partitions
        self.fence_floor = FenceFloor()  # this process's reads fence at or above its acks
        self.guard = guard
        self._max_record_bytes = max_record_bytes
        # looked up once: the append path is hot, a labelled child lookup is not free
        self._latency: dict[type[ActionHeader], ObservingChild] = {
            kind: metrics.histogram("kafka_journal_write_duration_seconds", action=action)
            for kind, action in _ACTION_NAMES.items()
        }

    @property
    def partitions(self) -> int:
        return self._partitions

    def partition_of(self, key: JournalKey) -> int:
        """The journal's partition: asked before every action and read of it, so a changed
        partition count (`guard`) refuses them all here, before anything is produced."""
        if self.guard is not None:
            self.guard.check()
        return partition_of(key.id, self._partitions)

    # `append` and `append_encoded` are not coroutines but hand out `_send`'s: a coroutine
    # frame less on every append (one of the small costs the direct append was cut by)

    def append(
        self,
        key: JournalKey,
        events: Events,
        *,
        metadata: HeaderMetadata = HeaderMetadata(),
        headers: Mapping[str, str] | None = None,
        origin: str | None = None,
    ) -> Coroutine[None, None, Position]:
        """Append consecutive events atomically; InvalidValue (raised at once) or
        AppendTooLarge if refused."""
        return self.append_encoded(
            key, encode_append(events), metadata=metadata, headers=headers, origin=origin
        )

    def append_encoded(
        self,
        key: JournalKey,
        encoded: EncodedAppend,
        *,
        metadata: HeaderMetadata = HeaderMetadata(),
        headers: Mapping[str, str] | None = None,
        origin: str | None = None,
    ) -> Coroutine[None, None, Position]:
        """`append` of events encoded already (`encode_append`)."""
        header = _append_header(encoded, metadata, origin)
        return self._send(key, header, encoded.value, headers or {})

    async def delete(self, key: JournalKey, to: int, *, origin: str | None = None) -> Position:
        check_seq_nr(to, "to")
        return await self._send(key, DeleteHeader(to, origin, VERSION), b"", {})

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position:
        return await self._send(key, PurgeHeader(origin, VERSION), b"", {})

    async def mark(self, key: JournalKey, mark_id: str, *, origin: str | None = None) -> Position:
        return await self._send(key, MarkHeader(mark_id, origin, VERSION), b"", {})

    async def seal(self, topic: str, partition: int, origin: str | None = None) -> Position:
        """A grow's Seal (docs/growing.md): a Mark of the reserved id, produced to `partition`
        itself, not where its key maps (it cuts that partition)."""
        header = MarkHeader(SEAL_ID, origin, VERSION)
        return await self._send(JournalKey(topic, SEAL_ID), header, b"", {}, partition)

    async def _send(
        self,
        key: JournalKey,
        header: ActionHeader,
        value: bytes,
        headers: Mapping[str, str],
        partition: int | None = None,
    ) -> Position:
        raw_key = key.id.encode("utf-8")
        raw_headers = record_headers(header, headers)
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(raw_key, value, raw_headers)
        if size > self._max_record_bytes:
            raise AppendTooLarge(
                f"the record would be {size} bytes; the limit is {self._max_record_bytes}: "
                "split the events into smaller appends"
            )
        if partition is None:
            partition = self.partition_of(key)
        started = time.perf_counter()
        offset = await self._producer.produce(
            key.topic, partition, raw_key, value, raw_headers, int(time.time() * 1000)
        )
        # acknowledged writes only: a failed send's time says nothing about the write path
        self._latency[type(header)].observe(time.perf_counter() - started)
        self.fence_floor.raise_to(partition, offset + 1)
        return Position(partition, offset)
