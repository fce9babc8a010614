"""The quarantine topic read back: what replication set aside (`list_quarantine`), and the
records that this version decodes produced again to the action topic (`replay`).

The quarantine (`<topic>.quarantine`, one partition, journal.replication.replicate.KafkaQuarantine)
holds each malformed record unchanged (key, value, timestamp, headers) plus two headers: the
reason and, since this module, where it was (`journal.quarantine.origin`: "partition:offset").
An undecodable batch is quarantined as a marker of the offsets it spans (journal.kafka.poison):
its records are lost, so it never replays.

What a replay means for the fold: a replayed record is a new record, at the end of its
journal's partition, folded there like any other (journal/core/fold.py). It is not put back at
its old place: the journal's history between then and now stays as it is. An Append is
accepted only if its first seqNr continues the journal at that point; if the journal moved on
(later appends took those seqNrs), it is rejected as a conflict (or a duplicate), visible as
such in the replicated journal and the metrics. A Delete or a Purge acts on the journal as it
is now. Its events get the time of the replay. Records are replayed in quarantine order (each
journal's in its log order), one at a time.

A replayed record stays in the quarantine, and a marker (`journal.quarantine.replayed`, the
replayed record's quarantine offset) is written after it: later replays skip it, and the list
shows it as replayed. A crash between the two replays it again: an Append's second copy is a
duplicate for the fold, a Delete's changes nothing; a Purge's would purge again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import TopicPartition

from journal.codec.actions import MalformedRecord, RawHeaders, RawRecord, parse_checked
from journal.kafka.consumers import raw_record, start_consumer, stop_consumer
from journal.kafka.poison import QUARANTINE_SKIPPED_HEADER
from journal.kafka.producer import JournalProducer
from journal.kafka.topic import end_offsets, partition_count, quarantine_topic
from journal.kafka.writer import partition_of
from journal.replication.replicate import QUARANTINE_ORIGIN_HEADER, QUARANTINE_REASON_HEADER
from kjconfig.access import KafkaAccess

QUARANTINE_REPLAYED_HEADER = "journal.quarantine.replayed"  # "partition:offset" of quarantine
_OURS = (
    QUARANTINE_REASON_HEADER,
    QUARANTINE_ORIGIN_HEADER,
    QUARANTINE_REPLAYED_HEADER,
    QUARANTINE_SKIPPED_HEADER,
)
_POLL_MS = 500


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One record of the quarantine: where it is, where it came from, why, and itself."""

    partition: int  # of the quarantine topic
    offset: int
    topic: str  # the action topic
    origin: str | None  # "partition:offset" (or "partition:first-last" of a skipped batch)
    reason: str
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: RawHeaders  # the record's own, the quarantine's taken off
    replayed: bool

    @property
    def position(self) -> str:
        return f"{self.partition}:{self.offset}"

    def original(self) -> RawRecord:
        """The record as it was in the action topic (its offset there, or -1 if unknown)."""
        partition, _, offset = (self.origin or "-1:-1").partition(":")
        return RawRecord(
            self.topic,
            int(partition),
            int(offset) if offset.lstrip("-").isdigit() else -1,
            self.timestamp_ms,
            self.key,
            self.value,
            self.headers,
        )

    def as_json(self) -> dict[str, object]:
        partition, _, offset = (self.origin or ":").partition(":")
        return {
            "partition": self.partition,
            "offset": self.offset,
            "topic": self.topic,
            "originPartition": int(partition) if partition else None,
            "originOffset": offset or None,
            "reason": self.reason,
            "timestampMs": self.timestamp_ms,
            "key": None if self.key is None else self.key.decode("utf-8", "replace"),
            "replayed": self.replayed,
        }


async def list_quarantine(kafka: KafkaAccess, topic: str) -> list[Quarantined]:
    """Every record of `topic`'s quarantine in order, replay markers folded into `replayed`
    (the command line's: a replay needs them all, values included)."""
    found, _ = await _read_quarantine(kafka, topic, None, values=True)
    return found


async def newest_quarantined(
    kafka: KafkaAccess, topic: str, limit: int
) -> tuple[list[Quarantined], int]:
    """The newest records of `topic`'s quarantine, newest first, and how many records the
    quarantine holds, replay markers included. Bounded for a per-request listing: only the
    last `limit` records of each partition are read (markers among them take places, so a
    page may hold fewer than `limit`; a marker always follows its record, so every record
    read knows whether it was replayed), and without their values (`value` None)."""
    found, total = await _read_quarantine(kafka, topic, limit, values=False)
    found.sort(key=lambda one: (one.timestamp_ms, one.partition, one.offset), reverse=True)
    return found[:limit], total


async def _read_quarantine(
    kafka: KafkaAccess, topic: str, newest: int | None, values: bool
) -> tuple[list[Quarantined], int]:
    """The quarantine's records in each partition's order (the last `newest` of each, or
    all), markers folded into `replayed`; and the records it holds, markers included."""
    name = quarantine_topic(topic)
    partitions = await partition_count(kafka, name)
    ends = await end_offsets(kafka, name, partitions)
    consumer = await start_consumer(kafka)
    found: list[Quarantined] = []
    replayed: set[str] = set()
    total = 0
    try:
        for partition, end in ends.items():
            tp = TopicPartition(name, partition)
            consumer.assign([tp])
            start = (await consumer.beginning_offsets([tp]))[tp]
            total += end - start
            if newest is None or end - newest <= start:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, end - newest)
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=_POLL_MS)
                for message in batch.get(tp, []):
                    if message.offset >= end:
                        break
                    record = raw_record(message)
                    headers = dict(record.headers)
                    if QUARANTINE_REPLAYED_HEADER in headers:
                        replayed.add(headers[QUARANTINE_REPLAYED_HEADER].decode())
                        continue
                    found.append(_quarantined(topic, record, headers, values))
    finally:
        await stop_consumer(consumer)
    return [_replace_replayed(one, one.position in replayed) for one in found], total


def _quarantined(
    topic: str, record: RawRecord, headers: dict[str, bytes], value: bool = True
) -> Quarantined:
    origin = headers.get(QUARANTINE_ORIGIN_HEADER) or headers.get(QUARANTINE_SKIPPED_HEADER)
    return Quarantined(
        partition=record.partition,
        offset=record.offset,
        topic=topic,
        origin=None if origin is None else origin.decode(),
        reason=headers.get(QUARANTINE_REASON_HEADER, b"").decode("utf-8", "replace"),
        timestamp_ms=record.timestamp_ms,
        key=record.key,
        value=record.value if value else None,
        headers=[(name, v) for name, v in record.headers if name not in _OURS],
        replayed=False,
    )


def _replace_replayed(one: Quarantined, replayed: bool) -> Quarantined:
    if not replayed:
        return one
    return Quarantined(
        one.partition,
        one.offset,
        one.topic,
        one.origin,
        one.reason,
        one.timestamp_ms,
        one.key,
        one.value,
        one.headers,
        True,
    )


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """What a replay does with one quarantined record: `replay` true if it decodes now;
    otherwise `still` is why it stays."""

    record: Quarantined
    replay: bool
    still: str | None = None


def plan_replay(records: list[Quarantined]) -> list[ReplayStep]:
    """For each record not replayed yet, in order: does this version decode it now?"""
    steps = []
    for record in records:
        if record.replayed:
            continue
        try:
            action = parse_checked(record.original())
        except MalformedRecord as error:
            steps.append(ReplayStep(record, False, error.reason))
            continue
        if action is None:
            steps.append(ReplayStep(record, False, "an action this version does not know"))
        else:
            steps.append(ReplayStep(record, True))
    return steps


async def replay(
    kafka: KafkaAccess,
    topic: str,
    steps: list[ReplayStep],
    replayed: Callable[[], None] = lambda: None,
) -> None:
    """Produce the records of `steps` to replay to `topic`, in order, each followed by its
    replay marker in the quarantine (module docstring); `replayed` is called after each."""
    partitions = await partition_count(kafka, topic)
    producer = JournalProducer(kafka)
    await producer.start()
    try:
        for step in steps:
            if not step.replay:
                continue
            record = step.record
            assert record.key is not None  # it decoded: it has a journal id
            await producer.send_and_wait(
                topic,
                record.value,
                key=record.key,
                partition=partition_of(record.key.decode("utf-8"), partitions),
                timestamp_ms=int(time.time() * 1000),
                headers=list(record.headers),
            )
            await producer.send_and_wait(
                quarantine_topic(topic),
                b"",
                partition=record.partition,
                headers=[(QUARANTINE_REPLAYED_HEADER, record.position.encode())],
            )
            replayed()
    finally:
        await producer.stop()
