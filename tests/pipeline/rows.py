"""The stored rows of a keyspace's tables, keyed by their primary keys, for comparing two
keyspaces (the core's replication's and the Spark rebuild's)."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from journal.codec import decode_events, encode_events
from journal.core.model import Event, Payload, PayloadType
from journal.store import cql
from journal.store.cassandra import CassandraStore
from tests.support.raw_store import session_of

# Every column of the tables, with the write time of one cell of each row.
TABLES = {
    "event_records": (
        "topic, id, segment, last_seq_nr, seq_nr, partition, offset, timestamp, payload_type, "
        "events, headers, writetime(offset)",
        4,
    ),
    "journals": (
        "topic, id, partition, offset, seq_nr, delete_to, segment_size, records_from, base, "
        "writetime(offset)",
        2,
    ),
    "pointers": ("topic, partition, offset, writetime(offset)", 2),
    "pointers2": ("topic, partition, offset, writetime(offset)", 2),
    "appends": (
        "topic, partition, bucket, offset, id, first_seq_nr, last_seq_nr, segment_size, "
        "writetime(id)",
        4,
    ),
    "journal_ids": ("topic, bucket, id", 3),  # key columns only: no writetime to compare
}


# an `event_records` row's columns as `rows` gives them
ID, LAST, FIRST, OFFSET, PAYLOAD_TYPE, VALUE = 1, 3, 4, 6, 8, 9


def events_of_row(row: tuple[Any, ...]) -> tuple[Event, ...]:
    """The events an `event_records` row holds (its value, as Kafka holds it)."""
    return decode_events(PayloadType(row[PAYLOAD_TYPE]), row[VALUE]).events


def with_payload(row: tuple[Any, ...], seq_nr: int, payload: Payload) -> bytes:
    """The row's value with the event `seq_nr`'s payload replaced: a damaged row."""
    decoded = decode_events(PayloadType(row[PAYLOAD_TYPE]), row[VALUE])
    changed = tuple(
        replace(e, payload=payload) if e.seq_nr == seq_nr else e for e in decoded.events
    )
    return encode_events(replace(decoded, events=changed))[1]


async def rows(store: CassandraStore, keyspace: str, table: str) -> dict[tuple[Any, ...], Any]:
    columns, key_size = TABLES[table]
    query = f"SELECT {columns} FROM {keyspace}.{table}"
    return {tuple(row[:key_size]): tuple(row) async for row in cql.stream(session_of(store), query)}
