"""journal.store.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from journal.store.base import (
        EventualJournal,
        EventualStore,
        JournalMeta,
        ReplicatedJournal,
        Snapshot,
    )
    from journal.store.cassandra import CassandraConfig, CassandraStore, KeyspaceAccess
    from journal.store.cluster import ROWS_AS_TUPLES, open_session
    from journal.store.connecting import ConnectingStore
    from journal.store.cql import execute
    from journal.store.rows import record_row
    from journal.store.schema import BUCKETS, SCHEMA_VERSION, ensure_schema, id_bucket, migrate
    from journal.store.statements import Statements, idempotent
    from journal.store.topology import DEFAULT_MAX_SNAPSHOT_BYTES

_DOOR = {
    "BUCKETS": "schema",
    "DEFAULT_MAX_SNAPSHOT_BYTES": "topology",
    "CassandraConfig": "cassandra",
    "CassandraStore": "cassandra",
    "ConnectingStore": "connecting",
    "EventualJournal": "base",
    "EventualStore": "base",
    "JournalMeta": "base",
    "KeyspaceAccess": "cassandra",
    "ROWS_AS_TUPLES": "cluster",
    "ReplicatedJournal": "base",
    "SCHEMA_VERSION": "schema",
    "Snapshot": "base",
    "Statements": "statements",
    "ensure_schema": "schema",
    "record_row": "rows",
    "execute": "cql",
    "id_bucket": "schema",
    "idempotent": "statements",
    "migrate": "schema",
    "open_session": "cluster",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "BUCKETS",
    "DEFAULT_MAX_SNAPSHOT_BYTES",
    "ROWS_AS_TUPLES",
    "SCHEMA_VERSION",
    "CassandraConfig",
    "CassandraStore",
    "ConnectingStore",
    "EventualJournal",
    "EventualStore",
    "JournalMeta",
    "KeyspaceAccess",
    "ReplicatedJournal",
    "Snapshot",
    "Statements",
    "ensure_schema",
    "execute",
    "id_bucket",
    "idempotent",
    "migrate",
    "open_session",
    "record_row",
]
