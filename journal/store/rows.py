"""Row codecs of the Cassandra store: a journal's row into `JournalMeta`, an Append into the
values of its `event_records` row, such rows back into `EventRecord`s (sliced to the seqNrs a
read asks), and version 3's `events` rows into `EventRecord`s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import msgspec
from cassandra.query import UNSET_VALUE

from journal.codec.envelope import Opener
from journal.codec.events import encode_events
from journal.codec.events_binary import decode_events_binary
from journal.codec.events_json import decode_events_json
from journal.core.model import (
    ActionRecord,
    AppendHeader,
    BinaryPayload,
    Event,
    EventRecord,
    Events,
    JournalKey,
    Payload,
    PayloadMetadata,
    TextPayload,
    json_payload,
)
from journal.store.base import JournalMeta


def meta_of(row: tuple[Any, ...]) -> JournalMeta:
    """A journal's row as `Statements.meta` selects it (a tuple: `cluster.ROWS_AS_TUPLES`, not
    the default's namedtuple, whose class the driver builds anew for every result, ~0.13 ms).
    A row of version 3 has no `records_from`: all its events are in `events`; a row never
    written in a grown topic's successor has no `base`."""
    partition, offset, seq_nr, delete_to, segment_size, records_from, base = row
    if records_from is None:
        records_from = (seq_nr or 0) + 1
    return JournalMeta(partition, offset, seq_nr, delete_to, segment_size, records_from, base or 0)


def record_row(key: JournalKey, size: int, append: ActionRecord, stamp: int) -> tuple[Any, ...]:
    """An Append's `event_records` row: its value as Kafka holds it (schema.py). Without
    headers the column is left unset, not null: a null is a tombstone cell that Cassandra
    writes, compacts and reads past, and there is nothing to shadow."""
    header = append.header
    assert isinstance(header, AppendHeader)
    first, last = header.range.from_, header.range.to
    kind, value = header.payload_type, append.value
    if not value and append.events:  # events without a record (an export's, restored)
        events = Events(tuple(r.event for r in append.events), append.events[0].metadata)
        kind, value = encode_events(events)
    return (
        key.topic,
        key.id,
        last // size,
        last,
        first,
        append.partition,
        append.offset,
        append.timestamp,
        kind.value,
        value,
        append.headers or UNSET_VALUE,
        stamp,
    )


def records_events(
    rows: Sequence[tuple[Any, ...]], low: int, high: int, opener: Opener | None = None
) -> list[EventRecord]:
    """The events low..high of a page of `event_records` rows (as `Statements.read_records`
    selects them, in seqNr order): each row's value decoded in one pass, the rows and events
    outside the range skipped; with the `opener` of the journal's data key, each sealed payload
    opened in that pass (each event built once). Replication checked every value it stored
    (`parse_checked`)."""
    records: list[EventRecord] = []
    for last, first, partition, offset, timestamp, kind, value, headers in rows:
        if last < low:
            continue
        if first > high:
            break
        decoded = (
            decode_events_json(value) if kind == "json" else decode_events_binary(value, opener)
        )
        events = decoded.events
        if first < low or last > high:
            events = events[max(low - first, 0) : high - first + 1]
        when = _UTC_EPOCH + (timestamp - _EPOCH)  # the naive UTC time, aware
        metadata = decoded.metadata
        user_headers = dict(headers) if headers else _NO_HEADERS
        records += [
            EventRecord(event, when, partition, offset, metadata, user_headers) for event in events
        ]
    return records


def _payload_of(kind: str | None, text: str | None, data: bytes | None) -> Payload | None:
    if kind == "json":  # the store holds the text the payload was checked as: not parsed
        return None if text is None else json_payload(text.encode())
    if kind == "text":
        return TextPayload(text or "")
    if kind == "binary":
        return BinaryPayload(data or b"")
    return None


_NO_METADATA = PayloadMetadata()
_NO_TAGS: frozenset[str] = frozenset()
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
_EPOCH = datetime(1970, 1, 1)  # naive, as the driver gives a timestamp column (in UTC)
_UTC_EPOCH = _EPOCH.replace(tzinfo=UTC)


# an `events` row as `Statements.read` selects it: a tuple (`cluster.ROWS_AS_TUPLES`), its
# columns in the statement's order; the offset's position in it
EVENT_OFFSET = 2

_TAGS = msgspec.json.Decoder(frozenset[str])
_TAGS_NONE = "null"  # toJson of a row without tags (the column is left unset)


def event_record_of(row: tuple[Any, ...]) -> EventRecord:
    """A row of `Statements.read` as a read returns it."""
    return event_records_of((row,))[0]


def event_records_of(rows: Sequence[tuple[Any, ...]]) -> list[EventRecord]:
    """A page of `Statements.read`'s rows as a read returns them; the hot loop of every stored
    read (by position, a JSON payload's case first, so that a page costs as little Python as it
    can). The tags come as JSON text (`Statements.read` says why), decoded once per distinct
    text in the page: a journal's events mostly share theirs, and share one frozenset then."""
    tags_of: dict[str, frozenset[str]] = {_TAGS_NONE: _NO_TAGS}
    records = []
    for (
        seq_nr,
        partition,
        offset,
        timestamp,
        tags_json,
        kind,
        text,
        data,
        expire_after,
        metadata,
        headers,
    ) in rows:
        tags = tags_of.get(tags_json)
        if tags is None:
            tags = tags_of[tags_json] = _TAGS.decode(tags_json) or _NO_TAGS
        records.append(
            EventRecord(
                Event(
                    seq_nr,
                    tags,
                    json_payload(text.encode())
                    if kind == "json" and text is not None
                    else _payload_of(kind, text, data),
                ),
                _UTC_EPOCH + (timestamp - _EPOCH),  # the naive UTC time, aware: 10x `replace`'s
                partition,
                offset,
                _NO_METADATA
                if expire_after is None and metadata is None
                else PayloadMetadata(
                    expire_after, None if metadata is None else msgspec.json.decode(metadata)
                ),
                dict(headers) if headers else _NO_HEADERS,
            )
        )
    return records
