"""Snapshots on Cassandra, chunked: a put writes its payload's chunks, then the header that
names them (a reader never finds a partial snapshot), then removes the chunks of the put it
replaced; a reader that finds a header's chunks gone looks again."""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Any

from cassandra.cluster import Session

from journal.core.model import JournalKey
from journal.errors import SnapshotTooLarge, StoreUnavailable
from journal.store import cql
from journal.store.base import Snapshot, snapshot_bytes, snapshot_payload
from journal.store.statements import Statements

# a snapshot's chunks in flight: the driver's one connection per host also carries everyone
# else's requests, and refuses them while its socket is full
_CHUNKS_IN_FLIGHT = 2
# a reader finding a header's chunks gone (a newer put or a delete removed them meanwhile)
# looks again, this many times at most
_SNAPSHOT_READ_ATTEMPTS = 3


class ChunkedSnapshots:
    """`SnapshotStore` on one session: payloads up to `max_bytes`, in rows of `chunk_bytes`."""

    def __init__(
        self, session: Session, statements: Statements, max_bytes: int, chunk_bytes: int
    ) -> None:
        self._session = session
        self._statements = statements
        self.max_bytes = max_bytes
        self._chunk_bytes = chunk_bytes

    async def put(self, key: JournalKey, snapshot: Snapshot) -> None:
        kind, data = snapshot_bytes(snapshot.payload)
        if len(data) > self.max_bytes:
            raise SnapshotTooLarge(
                f"the snapshot's payload is {len(data)} bytes; the limit is {self.max_bytes}"
            )
        step = self._chunk_bytes
        stamp = snapshot.mark + 1
        where = (key.topic, key.id, snapshot.seq_nr)
        chunks = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
        statements = self._statements
        replacing, _ = await asyncio.gather(
            cql.execute(self._session, statements.snapshot_mark, where),
            cql.execute_in_window(
                self._session,
                (
                    (statements.insert_snapshot_chunk, (*where, snapshot.mark, n, chunk, stamp))
                    for n, chunk in enumerate(chunks)
                ),
                _CHUNKS_IN_FLIGHT,
            ),
        )
        # the header once every chunk is durable: a reader never finds a partial snapshot
        header = (snapshot.mark, snapshot.timestamp, kind, len(data), len(chunks), stamp)
        await cql.execute(self._session, statements.insert_snapshot, (*where, *header))
        if any(row.mark < snapshot.mark for row in replacing):
            # the chunks of the put this one replaced (its header is shadowed already); only
            # then, as each such delete leaves a tombstone in the journal's partition
            await cql.execute(
                self._session, statements.delete_replaced_chunks, (stamp, *where, snapshot.mark)
            )

    async def latest(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        for _ in range(_SNAPSHOT_READ_ATTEMPTS):
            header = await self._latest_header(key, max_seq_nr, after, before)
            if header is None:
                return None
            data = await self._snapshot_data(key, header)
            if data is not None:
                return Snapshot(
                    header.seq_nr,
                    snapshot_payload(header.payload_type, data),
                    header.timestamp.replace(tzinfo=UTC),
                    header.mark,
                )
        raise StoreUnavailable(
            f"{key}: the latest snapshot was replaced or deleted under each of "
            f"{_SNAPSHOT_READ_ATTEMPTS} reads"
        )

    async def _latest_header(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Any:
        headers = cql.stream(
            self._session, self._statements.snapshot_headers, (key.topic, key.id, max_seq_nr)
        )
        async for header in headers:  # newest first; most often the first one qualifies
            if after < header.mark < before:
                return header
        return None

    async def _snapshot_data(self, key: JournalKey, header: Any) -> bytes | None:
        """The header's payload; None if its chunks are gone (a newer put or a delete)."""
        parts: list[bytes] = []
        rows = cql.stream(
            self._session,
            self._statements.snapshot_chunks,
            (key.topic, key.id, header.seq_nr, header.mark),
        )
        async for row in rows:
            parts.append(row.data or b"")
        data = b"".join(parts)
        return data if len(parts) == header.chunks and len(data) == header.size else None

    async def delete(self, key: JournalKey, to: int, mark: int) -> None:
        params = (mark + 1, key.topic, key.id, to)
        await asyncio.gather(
            cql.execute(self._session, self._statements.delete_snapshots, params),
            cql.execute(self._session, self._statements.delete_snapshot_chunks, params),
        )
