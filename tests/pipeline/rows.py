"""The stored rows of a keyspace's tables, keyed by their primary keys, for comparing two
keyspaces (the core's replication's and the Spark rebuild's)."""

from __future__ import annotations

from typing import Any

from journal.store import cql
from journal.store.cassandra import CassandraStore
from tests.support.raw_store import session_of

# Every column of the tables, with the write time of one cell of each row.
TABLES = {
    "events": (
        "topic, id, segment, seq_nr, partition, offset, timestamp, tags, payload_type, "
        "payload_txt, payload_bin, expire_after, metadata, headers, writetime(offset)",
        4,
    ),
    "journals": (
        "topic, id, partition, offset, seq_nr, delete_to, segment_size, writetime(offset)",
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


async def rows(store: CassandraStore, keyspace: str, table: str) -> dict[tuple[Any, ...], Any]:
    columns, key_size = TABLES[table]
    query = f"SELECT {columns} FROM {keyspace}.{table}"
    return {tuple(row[:key_size]): tuple(row) async for row in cql.stream(session_of(store), query)}
