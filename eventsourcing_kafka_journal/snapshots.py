"""Snapshots: the library's snapshot recorder on a Cassandra table of the keyspace.

A snapshot is not an event: the library stores them at any version, with gaps, and asks for
the newest at or below a version. So they are not a journal; they live in a table of the
keyspace, one partition per aggregate, newest version first. A version taken already is a
lightweight transaction that did not apply: the library's IntegrityError. `SnapshotStore` is
the seam where issue 13's snapshot store takes over.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any, Protocol
from uuid import UUID

from cassandra.query import BatchStatement
from eventsourcing.persistence import IntegrityError, StoredEvent

from journal.store import cql

TABLE = "eventsourcing_snapshots"


class SnapshotStore(Protocol):
    async def insert(self, snapshots: Sequence[StoredEvent]) -> None: ...

    async def select(
        self,
        originator_id: UUID | str,
        gt: int | None,
        lte: int | None,
        desc: bool,
        limit: int | None,
    ) -> list[StoredEvent]: ...


class CassandraSnapshots:
    def __init__(self, session: Any, keyspace: str) -> None:
        self._session = session
        self._table = f"{keyspace}.{TABLE}"

    @classmethod
    async def connect(cls, session: Any, keyspace: str) -> CassandraSnapshots:
        store = cls(session, keyspace)
        await cql.execute(
            session,
            f"CREATE TABLE IF NOT EXISTS {store._table} (originator_id text, version bigint, "
            "is_uuid boolean, topic text, state blob, PRIMARY KEY ((originator_id), version)) "
            "WITH CLUSTERING ORDER BY (version DESC)",
        )
        return store

    async def insert(self, snapshots: Sequence[StoredEvent]) -> None:
        """Each aggregate's snapshots all or none (one conditional batch per aggregate)."""
        query = (
            f"INSERT INTO {self._table} (originator_id, version, is_uuid, topic, state) "
            "VALUES (%s, %s, %s, %s, %s) IF NOT EXISTS"
        )
        ordered = sorted(snapshots, key=lambda s: str(s.originator_id))
        for originator_id, group in groupby(ordered, key=lambda s: str(s.originator_id)):
            batch = BatchStatement()
            versions = set()
            for snapshot in group:
                if snapshot.originator_version in versions:
                    raise IntegrityError(f"snapshot {snapshot} is twice in the batch")
                versions.add(snapshot.originator_version)
                batch.add(
                    query,
                    (
                        originator_id,
                        snapshot.originator_version,
                        isinstance(snapshot.originator_id, UUID),
                        snapshot.topic,
                        snapshot.state,
                    ),
                )
            rows = await cql.execute(self._session, batch)
            if rows and not rows[0][0]:
                raise IntegrityError(f"a snapshot of {originator_id} at {versions} exists")

    async def select(
        self,
        originator_id: UUID | str,
        gt: int | None,
        lte: int | None,
        desc: bool,
        limit: int | None,
    ) -> list[StoredEvent]:
        query = f"SELECT version, is_uuid, topic, state FROM {self._table} WHERE originator_id = %s"
        params: list[Any] = [str(originator_id)]
        if gt is not None:
            query += " AND version > %s"
            params.append(gt)
        if lte is not None:
            query += " AND version <= %s"
            params.append(lte)
        query += " ORDER BY version " + ("DESC" if desc else "ASC")
        if limit is not None:
            query += " LIMIT %s"
            params.append(limit)
        rows = await cql.execute(self._session, query, tuple(params))
        return [
            StoredEvent(
                UUID(str(originator_id)) if row.is_uuid else str(originator_id),
                row.version,
                row.topic,
                row.state,
            )
            for row in rows
        ]
