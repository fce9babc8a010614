"""Every byte the servers hold of a topic or a keyspace, as one blob: a test of encryption looks
for a payload's clear bytes in it (tests/journal/test_erasure.py)."""

from __future__ import annotations

from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from tests.support.compressed import read_partition
from tests.support.raw_store import keyspace_of, session_of

# the tables whose cells could hold a payload or a key
PAYLOAD_TABLES = ("event_records", "events", "snapshot_chunks", "journal_keys")


async def kafka_bytes(settings: Settings) -> bytes:
    """Every record's key, value and header values of the settings' topic."""
    blob = bytearray()
    for partition in range(settings.partitions):
        for record in await read_partition(settings.kafka_bootstrap, settings.topic, partition):
            blob += (record.key or b"") + (record.value or b"")
            for _name, value in record.headers:
                blob += value
    return bytes(blob)


def cassandra_bytes(store: CassandraStore) -> bytes:
    """Every text and blob cell of the keyspace's payload tables."""
    session, keyspace = session_of(store), keyspace_of(store)
    blob = bytearray()
    for table in PAYLOAD_TABLES:
        for row in session.execute(f"SELECT * FROM {keyspace}.{table}"):
            for cell in row:
                if isinstance(cell, bytes):
                    blob += cell
                elif isinstance(cell, str):
                    blob += cell.encode()
    return bytes(blob)
