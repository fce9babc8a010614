"""A store's keyspace reached directly, for tests that look at or tamper with its rows: the
product goes through the store's methods. Built on the store's public `keyspace_access`, so
the store has no door for tests."""

from __future__ import annotations

from cassandra.cluster import Session

from journal.store.cassandra import CassandraStore


def session_of(store: CassandraStore) -> Session:
    """The driver's session the store runs on."""
    return store.keyspace_access.session


def keyspace_of(store: CassandraStore) -> str:
    """The store's keyspace, to name its tables in CQL."""
    return store.keyspace_access.keyspace
