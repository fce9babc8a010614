"""Version 3's writer of `events` rows (one per event), which the store no longer has: the
migration tests make a keyspace as version 3 left it with it."""

from __future__ import annotations

from typing import Any, cast

import msgspec
from cassandra.query import UNSET_VALUE

from journal.core.model import (
    BinaryPayload,
    EventRecord,
    JournalKey,
    JsonPayload,
    Payload,
    TextPayload,
)

# the columns `event_row`'s values fill, in order (then its USING TIMESTAMP): prepared, as
# an unset value needs
INSERT_EVENT = (
    "INSERT INTO {ks}.events (topic, id, segment, seq_nr, partition, offset, timestamp, "
    "tags, payload_type, payload_txt, payload_bin, expire_after, metadata, headers) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
)


def _payload_columns(payload: Payload | None) -> tuple[object, object, object]:
    """An event row's payload_type, payload_txt and payload_bin; the columns a payload does not
    use are unset (as version 3 did). By type, not `match`: once per event replicated."""
    kind = type(payload)
    if kind is JsonPayload:
        return "json", cast(JsonPayload, payload).raw.decode(), UNSET_VALUE
    if kind is TextPayload:
        return "text", cast(TextPayload, payload).value, UNSET_VALUE
    if kind is BinaryPayload:
        return "binary", UNSET_VALUE, cast(BinaryPayload, payload).value
    return UNSET_VALUE, UNSET_VALUE, UNSET_VALUE


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
