"""Row codecs of the Cassandra store: a journal's row into `JournalMeta`, an event into the
values of its `events` row (what it lacks left unset) and such a row back into an
`EventRecord`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, cast

import msgspec
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


def meta_of(row: tuple[Any, ...]) -> JournalMeta:
    """A journal's row as `Statements.meta` selects it (a tuple: `cluster.ROWS_AS_TUPLES`, not
    the default's namedtuple, whose class the driver builds anew for every result, ~0.13 ms)."""
    partition, offset, seq_nr, delete_to, segment_size = row
    return JournalMeta(partition, offset, seq_nr, delete_to, segment_size)


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
    if kind == "json":  # the store holds the text the payload was checked as: not parsed
        return None if text is None else json_payload(text.encode())
    if kind == "text":
        return TextPayload(text or "")
    if kind == "binary":
        return BinaryPayload(data or b"")
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
        # msgspec: a payload's metadata may hold integers beyond 64 bits, which orjson refuses
        UNSET_VALUE if metadata.data is None else msgspec.json.encode(metadata.data).decode(),
        record.headers or UNSET_VALUE,
        stamp,
    )


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
