"""Row codecs of the Cassandra store: a journal's row into `JournalMeta`, an event into the
values of its `events` row (what it lacks left unset) and such a row back into an
`EventRecord`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import orjson
from cassandra.query import UNSET_VALUE

from journal.core.model import (
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
    json_payload,
)
from journal.store.base import JournalMeta


def meta_of(row: Any) -> JournalMeta:
    return JournalMeta(row.partition, row.offset, row.seq_nr, row.delete_to, row.segment_size)


def _payload_columns(payload: Payload | None) -> tuple[object, object, object]:
    """An event row's payload_type, payload_txt and payload_bin; the columns a payload does not
    use are unset (`event_row` says why). By type, not `match`: once per event replicated."""
    kind = type(payload)
    if kind is JsonPayload:
        return "json", cast(JsonPayload, payload).raw.decode(), UNSET_VALUE
    if kind is TextPayload:
        return "text", cast(TextPayload, payload).value, UNSET_VALUE
    if kind is BinaryPayload:
        return "binary", UNSET_VALUE, cast(BinaryPayload, payload).value
    return UNSET_VALUE, UNSET_VALUE, UNSET_VALUE


def _payload_of(kind: str | None, text: str | None, data: bytes | None) -> Payload | None:
    match kind:
        case "json":  # the store holds the text the payload was checked as
            return None if text is None else json_payload(text.encode())
        case "text":
            return TextPayload(text or "")
        case "binary":
            return BinaryPayload(data or b"")
        case _:
            return None


def event_row(key: JournalKey, size: int, record: EventRecord, stamp: int) -> tuple[Any, ...]:
    """An event's row; what it lacks is left unset, not null: a null is a tombstone cell
    that Cassandra writes, compacts and reads past (it warned on every page of 1,000 events
    read), and there is nothing to shadow (a key's row only changes after a Delete or Purge
    removed it)."""
    kind, text, data = _payload_columns(record.event.payload)
    metadata = record.metadata
    return (
        key.topic,
        key.id,
        record.seq_nr // size,
        record.seq_nr,
        record.partition,
        record.offset,
        record.timestamp,
        record.event.tags or UNSET_VALUE,  # the driver writes any collection: no copies
        kind,
        text,
        data,
        UNSET_VALUE if metadata.expire_after is None else metadata.expire_after,
        UNSET_VALUE if metadata.data is None else orjson.dumps(metadata.data).decode(),
        record.headers or UNSET_VALUE,
        stamp,
    )


_NO_METADATA = PayloadMetadata()
_NO_TAGS: frozenset[str] = frozenset()


def event_record_of(row: Any) -> EventRecord:
    timestamp: datetime = row.timestamp
    metadata = (
        _NO_METADATA
        if row.expire_after is None and row.metadata is None
        else PayloadMetadata(
            row.expire_after, None if row.metadata is None else orjson.loads(row.metadata)
        )
    )
    return EventRecord(
        event=Event(
            row.seq_nr,
            frozenset(row.tags) if row.tags else _NO_TAGS,
            _payload_of(row.payload_type, row.payload_txt, row.payload_bin),
        ),
        timestamp=timestamp.replace(tzinfo=UTC),
        partition=row.partition,
        offset=row.offset,
        metadata=metadata,
        headers=dict(row.headers) if row.headers else {},
    )
