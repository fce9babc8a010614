"""The eventual store on Apache Cassandra (schema and write-timestamp rule: `schema.py`).

Replication reads the `journals` rows of a batch's journals (`stored`, one query each, in
parallel) to fold the batch onto them; `apply` then writes events in single-partition
unlogged batches, deletes what a Purge or Delete removed, then the `journals` rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import BatchStatement, BatchType, PreparedStatement

from journal.actions import events_of
from journal.fold import JournalState, JournalWrite
from journal.model import (
    SEQ_NR_MAX,
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
)
from journal.store import cql
from journal.store.base import EventualStore, FirstPage, JournalMeta
from journal.store.schema import ensure_schema

_BATCH_LIMIT = 64  # statements per unlogged batch: bounded, single-partition
_PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class CassandraConfig:
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "journal"
    replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    segment_size: int = 100_000
    consistency: str = "LOCAL_QUORUM"
    request_timeout_s: float = 10.0


class CassandraStore(EventualStore):
    """Both sides of the eventual store on one cassandra-driver session."""

    def __init__(self, cluster: Cluster, session: Session, config: CassandraConfig) -> None:
        self._cluster = cluster
        self._session = session
        self._config = config
        self._statements = _Statements(session, config.keyspace)
        # segment sizes of the journals `stored` read, until their write: fixed per journal
        self._segment_sizes: dict[JournalKey, int] = {}

    @classmethod
    async def connect(cls, config: CassandraConfig) -> CassandraStore:
        """Connect, create or check the schema, prepare statements."""
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
            consistency_level=ConsistencyLevel.name_to_value[config.consistency],
            request_timeout=config.request_timeout_s,
        )
        cluster = Cluster(
            list(config.hosts),
            port=config.port,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            protocol_version=5,
        )
        session = await asyncio.to_thread(cluster.connect)  # connect blocks: not on the loop
        try:
            await ensure_schema(session, config.keyspace, config.replication)
            return await asyncio.to_thread(cls, cluster, session, config)  # prepare blocks too
        except BaseException:
            await asyncio.to_thread(cluster.shutdown)
            raise

    @property
    def session(self) -> Session:
        return self._session

    @property
    def keyspace(self) -> str:
        return self._config.keyspace

    async def close(self) -> None:
        await asyncio.to_thread(self._cluster.shutdown)

    # The read side.

    async def pointer(self, topic: str, partition: int) -> int | None:
        rows = await cql.execute(self._session, self._statements.pointer, (topic, partition))
        return rows[0].offset if rows else None

    async def pointers(self, topic: str) -> dict[int, int]:
        rows = await cql.execute(self._session, self._statements.pointers, (topic,))
        return {row.partition: row.offset for row in rows}

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        row = await self._meta_row(key)
        return None if row is None else _meta_of(row)

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        if meta.seq_nr is None:
            return
        size = meta.segment_size or self._config.segment_size
        start = max(from_, (meta.delete_to or 0) + 1)
        stop = min(to, meta.seq_nr)
        for segment in range(start // size, stop // size + 1):
            rows = cql.stream(
                self._session,
                self._statements.read,
                (key.topic, key.id, segment, start, stop),
            )
            async for event_row in rows:
                yield _event_record_of(event_row)

    async def first_page(self, key: JournalKey, from_: int, to: int) -> FirstPage:
        size = self._config.segment_size
        segment_end = (from_ // size + 1) * size - 1
        rows = await cql.execute(
            self._session,
            self._statements.read,
            (key.topic, key.id, from_ // size, from_, min(to, segment_end)),
        )
        return FirstPage(size, tuple(_event_record_of(row) for row in rows))

    # The write side.

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalState]:
        rows = await asyncio.gather(*(self._meta_row(key) for key in keys))
        found = {}
        for key, row in zip(keys, rows, strict=True):
            if row is not None:
                self._segment_sizes[key] = row.segment_size
                found[key] = _meta_of(row).state
        return found

    async def apply(self, writes: Sequence[JournalWrite]) -> None:
        await asyncio.gather(*(self._apply(write) for write in writes if write.changes_store))

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await cql.execute(
            self._session, self._statements.save_pointer, (topic, partition, offset, offset + 1)
        )

    async def _apply(self, write: JournalWrite) -> None:
        key, before, after = write.key, write.before, write.after
        size = self._segment_sizes.pop(key, None) or self._config.segment_size
        if write.purge is not None:
            if before.seq_nr > 0:
                await self._delete_segments(key, size, 0, before.seq_nr, None, write.purge)
            size = self._config.segment_size
        for append in write.appends:
            await self._insert_events(key, size, events_of(append), append.offset + 1)
        if write.delete is not None:
            first = 0 if write.purge is not None else before.delete_to + 1
            await self._delete_segments(
                key, size, first, write.delete.to, write.delete.to, write.delete.offset
            )
        await cql.execute(
            self._session,
            self._statements.save_meta,
            (
                key.topic,
                key.id,
                write.partition,
                after.offset,
                after.seq_nr or None,
                after.delete_to or None,
                size,
                after.offset + 1,
            ),
        )

    async def _insert_events(
        self, key: JournalKey, size: int, records: Sequence[EventRecord], stamp: int
    ) -> None:
        batches: list[BatchStatement] = []
        for chunk in _chunks_by_segment(records, size):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            for record in chunk:
                batch.add(self._statements.insert_event, _event_row(key, size, record, stamp))
            batches.append(batch)
        await asyncio.gather(*(cql.execute(self._session, b) for b in batches))

    async def _delete_segments(
        self, key: JournalKey, size: int, first: int, last: int, to: int | None, offset: int
    ) -> None:
        """Delete the segments holding seqNrs first..last: whole ones, or rows up to `to`."""
        stamp = offset + 1
        statements = []
        for segment in range(first // size, last // size + 1):
            if to is None:
                params: tuple[Any, ...] = (stamp, key.topic, key.id, segment)
                statements.append((self._statements.delete_segment, params))
            else:
                params = (stamp, key.topic, key.id, segment, to)
                statements.append((self._statements.delete_rows, params))
        await asyncio.gather(*(cql.execute(self._session, s, p) for s, p in statements))

    async def _meta_row(self, key: JournalKey) -> Any:
        rows = await cql.execute(self._session, self._statements.meta, (key.topic, key.id))
        return rows[0] if rows else None


class _Statements:
    """Every statement the store runs, prepared once."""

    def __init__(self, session: Session, ks: str) -> None:
        def prepare(query: str) -> PreparedStatement:
            return session.prepare(query.format(ks=ks))

        self.pointer = prepare("SELECT offset FROM {ks}.pointers WHERE topic = ? AND partition = ?")
        self.pointers = prepare("SELECT partition, offset FROM {ks}.pointers WHERE topic = ?")
        self.save_pointer = prepare(
            "INSERT INTO {ks}.pointers (topic, partition, offset) VALUES (?, ?, ?) "
            "USING TIMESTAMP ?"
        )
        self.meta = prepare(
            "SELECT partition, offset, seq_nr, delete_to, segment_size FROM {ks}.journals "
            "WHERE topic = ? AND id = ?"
        )
        self.save_meta = prepare(
            "INSERT INTO {ks}.journals "
            "(topic, id, partition, offset, seq_nr, delete_to, segment_size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.read = prepare(
            "SELECT seq_nr, partition, offset, timestamp, tags, payload_type, payload_txt, "
            "payload_bin, expire_after, metadata, headers FROM {ks}.events "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr >= ? AND seq_nr <= ?"
        )
        self.read.fetch_size = _PAGE_SIZE
        self.insert_event = prepare(
            "INSERT INTO {ks}.events (topic, id, segment, seq_nr, partition, offset, timestamp, "
            "tags, payload_type, payload_txt, payload_bin, expire_after, metadata, headers) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.delete_segment = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? WHERE topic = ? AND id = ? AND segment = ?"
        )
        self.delete_rows = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr <= ?"
        )


def _meta_of(row: Any) -> JournalMeta:
    return JournalMeta(row.partition, row.offset, row.seq_nr, row.delete_to, row.segment_size)


def _chunks_by_segment(
    records: Sequence[EventRecord], size: int
) -> Iterable[Sequence[EventRecord]]:
    chunk: list[EventRecord] = []
    for record in records:
        if chunk and (
            record.seq_nr // size != chunk[0].seq_nr // size or len(chunk) == _BATCH_LIMIT
        ):
            yield chunk
            chunk = []
        chunk.append(record)
    if chunk:
        yield chunk


def _payload_columns(payload: Payload | None) -> tuple[str | None, str | None, bytes | None]:
    match payload:
        case JsonPayload(value):
            return "json", orjson.dumps(value).decode(), None
        case TextPayload(value):
            return "text", value, None
        case BinaryPayload(value):
            return "binary", None, value
        case None:
            return None, None, None


def _payload_of(kind: str | None, text: str | None, data: bytes | None) -> Payload | None:
    match kind:
        case "json":
            return JsonPayload(orjson.loads(text or "null"))
        case "text":
            return TextPayload(text or "")
        case "binary":
            return BinaryPayload(data or b"")
        case _:
            return None


def _event_row(key: JournalKey, size: int, record: EventRecord, stamp: int) -> tuple[Any, ...]:
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
        set(record.event.tags) or None,
        kind,
        text,
        data,
        metadata.expire_after,
        None if metadata.data is None else orjson.dumps(metadata.data).decode(),
        dict(record.headers) or None,
        stamp,
    )


_NO_METADATA = PayloadMetadata()
_NO_TAGS: frozenset[str] = frozenset()


def _event_record_of(row: Any) -> EventRecord:
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
