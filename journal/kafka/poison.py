"""Poison batches: record batches of the action topic that this process cannot decode at all.

A batch compressed with a codec whose library is missing, or one that fails its CRC, makes
aiokafka's `getmany` raise (UnsupportedCodecError, CorruptRecordException) on every fetch of
its partition, and drop the good records fetched with it: retried as is, nothing after it is
ever read. `fetch` re-reads such a fetch one record at a time, so the records before the batch
still arrive, and says where the batch starts. Then, without decoding it:
- a read whose head spans it cannot know whether the journal has actions there, so it raises
  `UndecodableBatch` (503 over HTTP) rather than answer a possibly incomplete history
  (`fetch_for_read`);
- replication skips it (`skip_poison`): `decodable_from` finds where the next decodable batch
  starts, a marker of the skipped offsets is quarantined (the records themselves cannot be
  copied) and the store's pointer moves past them, so replication and reads go on;
- a Faust worker's consumer skips it too (agents/poison.py), and its agent quarantines the
  marker before the pointer passes the batch.
Every batch is counted and logged once per process (`note`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.codec.actions import RawRecord
from journal.errors import UndecodableBatch
from journal.kafka.driver_errors import POISON_ERRORS
from journal.metrics import METRICS

log = logging.getLogger(__name__)

# "partition:first-last": offsets of the action topic skipped undecoded, on a quarantined marker
QUARANTINE_SKIPPED_HEADER = "journal.quarantine.skipped"

_FETCH_ATTEMPTS = 20  # empty polls in a row before a re-read gives up (timeout_ms each)
_REREAD_MAX = 1000  # records re-read one by one, at most, when the failed fetch had no limit


@dataclass(frozen=True, slots=True)
class Poison:
    """An undecodable batch: it starts at `start`; `reason` is the consumer's error."""

    topic: str
    partition: int
    start: int
    reason: str


@dataclass(frozen=True, slots=True)
class Fetched:
    """What one fetch delivered: the records, then the poison batch that stopped it, if any."""

    records: list[ConsumerRecord[bytes, bytes]]
    poison: Poison | None = None


_noted: set[tuple[str, int, int]] = set()


def note(poison: Poison) -> None:
    """Count and log a poison batch, once per process whoever meets it again."""
    seen = (poison.topic, poison.partition, poison.start)
    if seen in _noted:
        return
    _noted.add(seen)
    METRICS.counter("kafka_journal_poison_batches_total", topic=poison.topic).inc()
    log.error(
        "%s-%s: the batch at offset %s cannot be decoded (%s): reads spanning it fail, "
        "replication skips it",
        poison.topic,
        poison.partition,
        poison.start,
        poison.reason,
    )


async def fetch(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    *,
    timeout_ms: int,
    end: int,
    max_records: int | None = None,
) -> Fetched:
    """`getmany` of one partition; on a poison batch, the records before it and where it is.

    `end`: the caller needs nothing at or past this offset, so a re-read stops there.
    """
    try:
        batches = await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=max_records)
        return Fetched(list(batches.get(tp, ())))
    except POISON_ERRORS:
        pass  # its position is still before the records the failed fetch dropped
    records: list[ConsumerRecord[bytes, bytes]] = []
    consumer.seek(tp, await consumer.position(tp))  # drops what is left of the failed fetch
    empty_polls = 0
    # the batch lies within one fetch from here; if the error does not come back, stop early
    while await consumer.position(tp) < end and len(records) < (max_records or _REREAD_MAX):
        try:
            got = (await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=1)).get(tp, [])
        except POISON_ERRORS as error:
            poison = Poison(tp.topic, tp.partition, await consumer.position(tp), repr(error))
            note(poison)
            return Fetched(records, poison)
        records.extend(got)
        empty_polls = 0 if got else empty_polls + 1
        if empty_polls >= _FETCH_ATTEMPTS:
            raise TimeoutError(f"{tp.topic}-{tp.partition}: no records while re-reading")
    return Fetched(records)  # the failure did not come back (yet)


async def fetch_for_read(
    consumer: AIOKafkaConsumer, tp: TopicPartition, *, timeout_ms: int, until: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """`fetch` for a read that needs the records before `until`: UndecodableBatch if a poison
    batch starts before it (the read cannot tell whether it holds the journal's actions)."""
    fetched = await fetch(consumer, tp, timeout_ms=timeout_ms, end=until)
    if fetched.poison is not None and fetched.poison.start < until:
        raise UndecodableBatch(
            f"{tp.topic}-{tp.partition}: the batch at offset {fetched.poison.start} cannot be "
            f"decoded ({fetched.poison.reason}); the read can go on once replication has "
            "skipped it"
        )
    return fetched.records


async def decodable_from(
    consumer: AIOKafkaConsumer, tp: TopicPartition, poison: Poison, end: int, timeout_ms: int
) -> int:
    """The first offset after `poison.start` whose batch decodes, or `end`; seeks there.

    A fetch returns whole batches, from the one holding the offset asked for, and a batch's
    last offset is not known without decoding it: so offsets are tried one by one (one round
    trip each; a producer's batch holds a few to a few hundred records).
    """
    offset = poison.start + 1
    while offset < end:
        consumer.seek(tp, offset)
        try:
            for _ in range(_FETCH_ATTEMPTS):
                batches = await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=1)
                if batches.get(tp):
                    consumer.seek(tp, offset)
                    return offset
            raise TimeoutError(f"{tp.topic}-{tp.partition}@{offset}: no records")
        except POISON_ERRORS:
            offset += 1
    consumer.seek(tp, end)
    return end


@dataclass(frozen=True, slots=True)
class Skipped:
    """A poison batch passed over: its partition's offsets `poison.start`..`after - 1`."""

    poison: Poison
    after: int

    @property
    def reason(self) -> str:
        return f"undecodable batch: {self.poison.reason}"

    def marker(self) -> RawRecord:
        """The record quarantined for it (the batch's own records cannot be copied)."""
        poison = self.poison
        skipped = f"{poison.partition}:{poison.start}-{self.after - 1}"
        return RawRecord(
            topic=poison.topic,
            partition=poison.partition,
            offset=self.after - 1,
            timestamp_ms=int(time.time() * 1000),
            key=None,
            value=b"",  # Kafka needs a key or a value
            headers=[(QUARANTINE_SKIPPED_HEADER, skipped.encode())],
        )


class Skipper(Protocol):
    """What replication does with skipped offsets
    (journal.replication.replicate.Replicator.skip)."""

    async def skip(self, marker: RawRecord, reason: str) -> None: ...


async def skip_poison(
    consumer: AIOKafkaConsumer, replicator: Skipper, tp: TopicPartition, poison: Poison, end: int
) -> None:
    """Past an undecodable batch, for replication: `consumer` seeks past it and `replicator`
    gets a marker of the offsets skipped (the records themselves cannot be copied)."""
    skipped = Skipped(poison, await decodable_from(consumer, tp, poison, end, timeout_ms=500))
    await replicator.skip(skipped.marker(), skipped.reason)
