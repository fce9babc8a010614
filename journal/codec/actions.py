"""Kafka records to actions and back: the only place that knows how an action sits in a record.

A record's key is the journal id (UTF-8), its `journal.action` header the action, its value the
encoded events of an Append (empty otherwise); every other header is the user's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import msgspec

from journal.codec.action_header import ACTION_HEADER, decode_action_header, encode_action_header
from journal.codec.envelope import EnvelopeRefused, Opener
from journal.codec.errors import DecodeError
from journal.codec.events import decode_events
from journal.codec.events_binary import decode_events_binary
from journal.codec.events_json import decode_events_json
from journal.core.model import (
    ActionHeader,
    ActionRecord,
    AppendHeader,
    EventRecord,
    Events,
    InvalidValue,
    JournalKey,
    PayloadType,
    SeqRange,
)
from journal.errors import JournalError

RawHeaders = Sequence[tuple[str, bytes]]


class RawRecord(msgspec.Struct, frozen=True, gc=False):
    """A Kafka record as any client hands it over (aiokafka, Faust, Spark rows)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: RawHeaders


class MalformedRecord(JournalError, ValueError):
    """A record of the action topic that is not a valid action: it goes to quarantine."""

    def __init__(self, record: RawRecord, reason: str) -> None:
        super().__init__(f"{record.topic}-{record.partition}@{record.offset}: {reason}")
        self.record = record
        self.reason = reason


def action_header_of(headers: RawHeaders) -> bytes | None:
    for name, value in headers:
        if name == ACTION_HEADER:
            return value
    return None


def parse(record: RawRecord) -> ActionRecord | None:
    """The action in `record`; None for a record of an action this version does not know.

    Only the header is decoded, never the payload. Raises MalformedRecord.
    """
    return _action(record, check_events=False)


def parse_checked(record: RawRecord, opener: Opener | None = None) -> ActionRecord | None:
    """`parse`, and for an Append also decode its events to prove them sound; the action
    carries them, so the store does not decode them again.

    Replication uses this, so a bad payload is quarantined instead of failing a store write.
    With the `opener` of the journal's data key (subscriptions), the events are opened as they
    are decoded (each built once); an Append that is sound but does not open raises
    EnvelopeRefused (a malformed one MalformedRecord first, as without the key).
    """
    return _action(record, check_events=True, opener=opener)


def _action(
    record: RawRecord, check_events: bool, opener: Opener | None = None
) -> ActionRecord | None:
    headers = record.headers
    raw_header = action_header_of(headers)
    if raw_header is None:
        raise MalformedRecord(record, f"no {ACTION_HEADER} header")
    try:
        header = decode_action_header(raw_header)
    except DecodeError as error:
        raise MalformedRecord(record, f"bad {ACTION_HEADER} header: {error}") from None
    if header is None:
        return None
    raw_key = record.key
    if not raw_key:
        raise MalformedRecord(record, "no key (journal id)")
    try:
        key = _journal_key(record.topic, raw_key)
        user_headers = (
            _NO_HEADERS
            if len(headers) == 1
            else {name: value.decode("utf-8") for name, value in headers if name != ACTION_HEADER}
        )
    except (UnicodeDecodeError, InvalidValue) as error:
        raise MalformedRecord(record, f"bad key or header: {error}") from None
    timestamp = _timestamp(record.timestamp_ms)
    value = record.value or b""
    events = None
    if check_events and type(header) is AppendHeader:
        try:
            events = _opened_event_records(
                header, value, timestamp, record.partition, record.offset, user_headers, opener
            )
        except (DecodeError, InvalidValue) as error:
            raise MalformedRecord(record, f"bad events: {error}") from None
    return ActionRecord(
        key, record.partition, record.offset, timestamp, header, value, user_headers, events
    )


# no Mapping of headers is ever changed: the records without user headers share this one
_NO_HEADERS: Mapping[str, str] = {}

_KEYS: dict[tuple[str, bytes], JournalKey] = {}  # a partition's records share few journals
_KEYS_MAX = 65536


def _journal_key(topic: str, raw_key: bytes) -> JournalKey:
    """The journal of a record key, shared between the records of one journal."""
    found = _KEYS.get((topic, raw_key))
    if found is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        found = _KEYS[(topic, raw_key)] = JournalKey(topic, raw_key.decode("utf-8"))
    return found


_TIMESTAMPS: dict[int, datetime] = {}  # a fetch's records share few milliseconds
_TIMESTAMPS_MAX = 4096


def _timestamp(ms: int) -> datetime:
    """A record's timestamp, shared between the records of one millisecond."""
    found = _TIMESTAMPS.get(ms)
    if found is None:
        if len(_TIMESTAMPS) >= _TIMESTAMPS_MAX:
            _TIMESTAMPS.clear()
        found = _TIMESTAMPS[ms] = datetime.fromtimestamp(ms / 1000, UTC)
    return found


def events_of(record: ActionRecord, opener: Opener | None = None) -> Sequence[EventRecord]:
    """An Append's events: decoded already by `parse_checked`, or decoded now; raises
    DecodeError if the value contradicts its header. With the `opener` of the journal's data
    key, their sealed payloads opened (as they are decoded: each event built once); an Append
    that is sound but does not open, EnvelopeRefused."""
    if record.events is not None:
        # decoded without the key (by replication's check): opened now, each rebuilt
        return record.events if opener is None else opener.records(list(record.events))
    header = record.header
    if not isinstance(header, AppendHeader):
        return ()
    args = (header, record.value, record.timestamp, record.partition, record.offset)
    return _opened_event_records(*args, record.headers, opener)


def _opened_event_records(
    header: AppendHeader,
    value: bytes,
    timestamp: datetime,
    partition: int,
    offset: int,
    headers: Mapping[str, str],
    opener: Opener | None,
) -> tuple[EventRecord, ...]:
    """`_event_records`; with an `opener`, EnvelopeRefused only for an Append that is sound: a
    fault of the Append comes first, as without the key (a reader skips such an Append,
    replication quarantines it)."""
    args = (header, value, timestamp, partition, offset, headers)
    if opener is None:
        return _event_records(*args)
    try:
        return _event_records(*args, opener)
    except EnvelopeRefused:
        _event_records(*args)
        raise


def _event_records(
    header: AppendHeader,
    value: bytes,
    timestamp: datetime,
    partition: int,
    offset: int,
    headers: Mapping[str, str],
    opener: Opener | None = None,
) -> tuple[EventRecord, ...]:
    """The events of an Append's `value`, checked against its header; with an `opener`,
    opened as they are decoded."""
    decoded = _plain_events(header, value, opener)
    if decoded is None:  # anything but the header's seqNrs: decoded again to name the fault
        decoded = decode_events(header.payload_type, value, opener)  # consecutive, checked
        if not decoded.events:
            raise DecodeError("an Append without events")
        first, last = decoded.events[0].seq_nr, decoded.events[-1].seq_nr
        if first != header.range.from_ or last != header.range.to:
            raise DecodeError(
                f"events {SeqRange(first, last)} do not match the header's {header.range}"
            )
    metadata = decoded.metadata
    return tuple(
        [
            EventRecord(event, timestamp, partition, offset, metadata, headers)
            for event in decoded.events
        ]
    )


def _plain_events(header: AppendHeader, value: bytes, opener: Opener | None) -> Events | None:
    """The events of the value if their seqNrs are exactly the header's range (a checked
    SeqRange: so they are consecutive and in bounds, in one comparison); None otherwise."""
    try:
        if header.payload_type is PayloadType.JSON:
            decoded = decode_events_json(value)
        elif header.payload_type is PayloadType.BINARY:
            decoded = decode_events_binary(value, opener)
        else:
            return None
    except (DecodeError, InvalidValue, EnvelopeRefused):  # named (or refused) by the caller's
        return None
    seq, events = header.range, decoded.events
    first = seq.from_
    if len(events) != seq.to - first + 1:
        return None
    for event in events:  # consecutive from the range's first, so up to its last
        if event.seq_nr != first:
            return None
        first += 1
    return decoded


def record_headers(
    header: ActionHeader, user_headers: Mapping[str, str]
) -> list[tuple[str, bytes]]:
    """The Kafka headers of an action record: the action header first, then the user's."""
    headers = [(ACTION_HEADER, encode_action_header(header))]
    if user_headers:  # most appends have none
        headers += [(name, value.encode("utf-8")) for name, value in user_headers.items()]
    return headers
