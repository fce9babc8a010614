"""The eventual store on Apache Cassandra (schema and write-timestamp rule: `schema.py`).

Replication folds a batch onto the `journals` rows of its journals, read (`stored`, one query
each, in parallel) only for journals it has not written lately (`journal.replicate`). `apply`
writes each journal's events of a segment (a single Cassandra partition) together, with what a
Purge or Delete removed and the `appends` rows, a bounded window of requests in flight; then
the rows of the `journals` table, once per journal, each with its `journal_ids` change when the
batch made the journal exist or purged it. A request costs the client far more CPU than a row
does, so small partitions' mutations share an unlogged batch (`_Packer`: a few partitions and a
few KiB, under Cassandra's warning thresholds for multi-partition batches); a large one goes
alone (single-partition batches have no size threshold). Every cell is stamped with its
action's offset + 1 (`schema.py`), so the requests of one journal need no order among them, and
a replay cannot overwrite newer cells.

`journal_ids` pages merge one slice query per bucket (`schema.py` says why), each streamed a
few rows at a time: a page of n ids reads about n + `BUCKETS` * `_IDS_FETCH` rows.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from cassandra import AuthenticationFailed, ConsistencyLevel
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    TokenAwarePolicy,
)
from cassandra.query import (
    UNSET_VALUE,
    BatchStatement,
    BatchType,
    PreparedStatement,
    Statement,
)

from journal.codec.actions import events_of
from journal.core.fold import JournalWrite
from journal.core.model import (
    SEQ_NR_MAX,
    ActionRecord,
    AppendHeader,
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
)
from journal.errors import SnapshotTooLarge, StoreUnavailable
from journal.security import CassandraLogin
from journal.store import cql
from journal.store.base import (
    EventualStore,
    FirstPage,
    JournalMeta,
    Snapshot,
    StoredAppend,
    snapshot_bytes,
    snapshot_payload,
)
from journal.store.cql import Params
from journal.store.schema import APPEND_BUCKET, BUCKETS, check_schema, ensure_schema, id_bucket

# a single-partition unlogged batch (one segment of one journal) is split past this many
# payload bytes, to keep each mutation far below Cassandra's limit
_BATCH_BYTES = 1_000_000
# partitions per multi-partition unlogged batch: Cassandra's warning threshold for them
# (unlogged_batch_across_partitions_warn_threshold)
_PARTITIONS_PER_BATCH = 10
# estimated bytes of a multi-partition batch: below batch_size_warn_threshold (5 KiB; such
# batches fail past batch_size_fail_threshold, 50 KiB); `_ROW_BYTES` per row beside payloads
# (4,000 estimated was 5,319 bytes to Cassandra: its warning)
_SHARED_BATCH_BYTES = 3_000
_ROW_BYTES = 150
_PAGE_SIZE = 1000
_APPENDS_PER_BATCH = 200  # rows of the `appends` table per unlogged batch (one partition)
# a snapshot's chunks in flight: the driver's one connection per host also carries everyone
# else's requests, and refuses them while its socket is full
_SNAPSHOT_CHUNKS_IN_FLIGHT = 2
_SNAPSHOT_HEADERS_PAGE = 32  # headers a `latest_snapshot` pages through: most stop at the first
_CHUNKS_PAGE = 4  # chunks per page when a snapshot is read: a few MiB held at a time
# a reader finding a header's chunks gone (a newer put or a delete removed them meanwhile)
# looks again, this many times at most
_SNAPSHOT_READ_ATTEMPTS = 3
_RECONNECT_MAX_DELAY_S = 10.0  # between attempts to reach a Cassandra host that went down
_IDS_FETCH = 16  # rows per page of one bucket's slice: a page of ids spreads over all buckets


Mutation = tuple[PreparedStatement, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Partition:
    """Mutations of one Cassandra partition (`partitions` > 1: a few tiny ones counted as
    one group), with their estimated size in bytes."""

    mutations: list[Mutation]
    weight: int
    partitions: int = 1

    @classmethod
    def of(cls, statement: PreparedStatement, values: tuple[Any, ...]) -> Partition:
        return cls([(statement, values)], _ROW_BYTES)


PROTOCOL_VERSION = 4  # the native protocol every client of ours speaks (see `connect`)
T = TypeVar("T")


async def in_window(run: Callable[[T], Awaitable[None]], items: Iterable[T], window: int) -> None:
    """`run` each of `items` (taken lazily), at most `window` at a time, in lanes that each take
    the next item (not a Semaphore: its acquire scans all its waiters); no more lanes than
    items, so a small batch (one record, at low load) does not pay for the window's tasks."""
    pending = iter(items)
    first = list(itertools.islice(pending, window))
    taken = itertools.chain(first, pending)

    async def lane() -> None:
        for item in taken:  # shared: each goes to the first free lane
            await run(item)

    if len(first) == 1:
        await lane()  # no task at all
    else:
        await asyncio.gather(*(lane() for _ in first))


def reconnection_policy() -> ExponentialReconnectionPolicy:
    """How the driver tries a host that went down again: never giving up (its default stops
    after 64 attempts, and a worker would stay without its store for good), at most
    `_RECONNECT_MAX_DELAY_S` apart (its default backs off to 10 minutes: after a 4-minute
    outage a worker went on failing 4 more minutes against a Cassandra that was back)."""
    return ExponentialReconnectionPolicy(
        base_delay=0.5, max_delay=_RECONNECT_MAX_DELAY_S, max_attempts=None
    )


class _Packer:
    """Packs partitions' mutations into unlogged batches: small ones share a batch (at most
    `_PARTITIONS_PER_BATCH` partitions, `_SHARED_BATCH_BYTES`), a large one goes alone."""

    def __init__(self) -> None:
        self._batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        self._partitions = 0
        self._weight = 0

    def requests(self, groups: Iterable[Partition]) -> Iterator[tuple[Statement, Params]]:
        for group in groups:
            if group.weight > _SHARED_BATCH_BYTES:
                yield _batch_of(group.mutations), None
                continue
            if (
                self._partitions + group.partitions > _PARTITIONS_PER_BATCH
                or self._weight + group.weight > _SHARED_BATCH_BYTES
            ):
                yield from self._flush()
            for statement, values in group.mutations:
                self._batch.add(statement, values)
            self._partitions += group.partitions
            self._weight += group.weight
        yield from self._flush()

    def _flush(self) -> Iterator[tuple[Statement, Params]]:
        if self._partitions:
            yield self._batch, None
        self._batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        self._partitions = self._weight = 0


def _batch_of(mutations: Sequence[Mutation]) -> BatchStatement:
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for statement, values in mutations:
        batch.add(statement, values)
    return batch


@dataclass(frozen=True, slots=True)
class CassandraConfig:
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "journal"
    replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    segment_size: int = 100_000
    consistency: str = "LOCAL_QUORUM"
    request_timeout_s: float = 10.0
    window: int = 64  # requests of one replication batch in flight
    login: CassandraLogin | None = None  # None: no authentication
    # False with security on: the project's roles may not create schema; the admin does
    create_schema: bool = True
    max_snapshot_bytes: int = 16 * 2**20
    # a snapshot's payload is written in rows of this size: no single cell or mutation comes
    # near Cassandra's limits (a mutation must fit half a commit log segment, 16 MiB by default)
    snapshot_chunk_bytes: int = 512 * 1024


class CassandraStore(EventualStore):
    """Both sides of the eventual store on one cassandra-driver session."""

    def __init__(self, cluster: Cluster, session: Session, config: CassandraConfig) -> None:
        self._cluster = cluster
        self._session = session
        self._config = config
        self._statements = _Statements(session, config.keyspace)

    @classmethod
    async def connect(cls, config: CassandraConfig) -> CassandraStore:
        """Connect, create or check the schema, prepare statements. StoreUnavailable when no
        host can be reached."""
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
            consistency_level=ConsistencyLevel.name_to_value[config.consistency],
            request_timeout=config.request_timeout_s,
        )
        cluster = Cluster(
            list(config.hosts),
            port=config.port,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            # v4, not v5: the driver checks v5's segment headers with a CRC computed in Python
            # (per segment, both ways) and now and then rejects a good one at connect ("CRC
            # mismatch on header", PYTHON-1337; seen once in our CI); v4 has no segments
            protocol_version=PROTOCOL_VERSION,
            auth_provider=None if config.login is None else config.login.auth_provider(),
            reconnection_policy=reconnection_policy(),
        )
        try:
            session = await asyncio.to_thread(cluster.connect)  # connect blocks: not on the loop
        except NoHostAvailable as error:
            await asyncio.to_thread(cluster.shutdown)
            if any(isinstance(e, AuthenticationFailed) for e in error.errors.values()):
                raise  # a wrong login is no outage: waiting would not cure it
            raise StoreUnavailable(f"Cassandra: no host reachable: {error}") from error
        try:
            if config.create_schema:
                await ensure_schema(session, config.keyspace, config.replication)
            else:
                await check_schema(session, config.keyspace)
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

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        if limit <= 0:
            return []
        above = after is not None and after >= prefix  # else every id >= prefix is above it
        lower = after if above and after is not None else prefix
        upper = _successor(prefix)
        statement = self._statements.ids(above, upper is not None)
        fetch = min(_IDS_FETCH, limit + 1)
        streams: list[AsyncIterator[Any]] = []
        for bucket in range(BUCKETS):
            values = (topic, bucket, lower) if upper is None else (topic, bucket, lower, upper)
            bound = statement.bind(values)
            bound.fetch_size = fetch
            streams.append(aiter(cql.stream(self._session, bound)))
        try:
            return await _merged(streams, limit)
        finally:
            for stream in streams:
                await stream.aclose()  # type: ignore[attr-defined]

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

    async def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        if to <= after:
            return
        for bucket in range((after + 1) // APPEND_BUCKET, to // APPEND_BUCKET + 1):
            rows = cql.stream(
                self._session, self._statements.appends, (topic, partition, bucket, after, to)
            )
            async for row in rows:
                yield StoredAppend(
                    JournalKey(topic, row.id),
                    partition,
                    row.offset,
                    row.first_seq_nr,
                    row.last_seq_nr,
                    row.segment_size,
                )

    async def append_events(self, append: StoredAppend) -> AsyncIterator[EventRecord]:
        key, size = append.key, append.segment_size or self._config.segment_size
        for segment in range(append.first // size, append.last // size + 1):
            rows = cql.stream(
                self._session,
                self._statements.read,
                (key.topic, key.id, segment, append.first, append.last),
            )
            async for event_row in rows:
                if event_row.offset == append.offset:  # not a later Append's after a Purge
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

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        rows = await asyncio.gather(*(self._meta_row(key) for key in keys))
        return {key: _meta_of(row) for key, row in zip(keys, rows, strict=True) if row is not None}

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        changed = [write for write in writes if write.changes_store]
        rows = {write.key: self._row_after(write, stored.get(write.key)) for write in changed}
        mutations = itertools.chain(
            (m for write in changed for m in self._mutations(write, stored.get(write.key))),
            self._appends_mutations(changed, rows),
        )
        await self._in_window(_Packer().requests(mutations))
        # the rows once every journal's events are durable (a reader trusts a row's seqNr)
        rows_mutations = (self._row_mutations(write, rows[write.key]) for write in changed)
        await self._in_window(_Packer().requests(rows_mutations))
        return rows

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        await cql.execute(
            self._session, self._statements.save_pointer, (topic, partition, offset, offset + 1)
        )

    async def _in_window(
        self, requests: Iterable[tuple[Statement, Params]], window: int | None = None
    ) -> None:
        """Run `requests` (built as they are taken), `window` (by default the config's) at a
        time: enough to keep Cassandra busy, few enough not to overload the driver's
        connections."""
        session = self._session

        async def execute(request: tuple[Statement, Params]) -> None:
            await cql.execute(session, *request)

        await in_window(execute, requests, window or self._config.window)

    def _sizes(self, write: JournalWrite, stored: JournalMeta | None) -> tuple[int, int]:
        """The journal's segment size before the batch, and after it (a Purge starts anew)."""
        before = (stored.segment_size if stored is not None else None) or self._config.segment_size
        return before, self._config.segment_size if write.purge is not None else before

    def _row_after(self, write: JournalWrite, stored: JournalMeta | None) -> JournalMeta:
        after = write.after
        return JournalMeta(
            write.partition,
            after.offset,
            after.seq_nr or None,
            after.delete_to or None,
            self._sizes(write, stored)[1],
        )

    def _mutations(self, write: JournalWrite, stored: JournalMeta | None) -> Iterator[Partition]:
        """One journal's event and deletion mutations, in no particular order: their `USING
        TIMESTAMP`s, from offsets, order their effects."""
        key, before = write.key, write.before
        size_before, size = self._sizes(write, stored)
        if write.purge is not None:
            # the journal's snapshots put before the Purge; never later ones (their Marks)
            stamp = write.purge + 1
            yield Partition.of(self._statements.purge_snapshots, (stamp, key.topic, key.id))
            yield Partition.of(self._statements.purge_snapshot_chunks, (stamp, key.topic, key.id))
        if write.purge is not None and before.seq_nr > 0:
            yield from self._segment_deletes(key, size_before, 0, before.seq_nr, None, write.purge)
        yield from self._event_partitions(key, size, write.appends)
        if write.delete is not None:
            first = 0 if write.purge is not None else before.delete_to + 1
            delete = write.delete
            yield from self._segment_deletes(key, size, first, delete.to, delete.to, delete.offset)

    def _row_mutations(self, write: JournalWrite, row: JournalMeta) -> Partition:
        """The journal's row and, where it came to exist or was purged, its id: two
        partitions, counted as one (rows are tiny)."""
        statements = self._statements
        key, stamp = write.key, row.offset + 1
        values = (key.topic, key.id, row.partition, row.offset, row.seq_nr, row.delete_to)
        mutations: list[Mutation] = [(statements.save_meta, (*values, row.segment_size, stamp))]
        id_row = (key.topic, id_bucket(key.id), key.id)
        if write.after.exists and not write.before.exists:
            mutations.append((statements.list_id, (*id_row, stamp)))
        elif write.before.exists and not write.after.exists:
            mutations.append((statements.unlist_id, (stamp, *id_row)))
        return Partition(mutations, len(mutations) * _ROW_BYTES, len(mutations))

    def _appends_mutations(
        self, writes: Sequence[JournalWrite], rows: Mapping[JournalKey, JournalMeta]
    ) -> Iterator[Partition]:
        """The batch's stored Appends, for subscriptions, per bucket (one Cassandra partition),
        written with the events, so before the rows."""
        by_bucket: dict[tuple[str, int, int], list[tuple[Any, ...]]] = {}
        for write in writes:
            size = rows[write.key].segment_size
            for append in write.appends:
                assert isinstance(append.header, AppendHeader)
                seq = append.header.range
                bucket = (write.key.topic, write.partition, append.offset // APPEND_BUCKET)
                by_bucket.setdefault(bucket, []).append(
                    (*bucket, append.offset, write.key.id, seq.from_, seq.to, size)
                )
        insert = self._statements.insert_append
        for values in by_bucket.values():
            values.sort(key=lambda row: row[3])
            for start in range(0, len(values), _APPENDS_PER_BATCH):
                chunk = values[start : start + _APPENDS_PER_BATCH]
                yield Partition(
                    [(insert, (*row, row[3] + 1)) for row in chunk], len(chunk) * _ROW_BYTES
                )

    def _event_partitions(
        self, key: JournalKey, size: int, appends: Sequence[ActionRecord]
    ) -> list[Partition]:
        """The events of `appends`, per segment (one Cassandra partition), split only past
        `_BATCH_BYTES`; each row stamped with its Append's offset + 1."""
        partitions: list[Partition] = []
        rows: list[Mutation] = []
        segment, weight = -1, 0
        insert = self._statements.insert_event
        for append in appends:
            records = events_of(append)
            per_event = len(append.value) // max(len(records), 1) + _ROW_BYTES
            for record in records:
                if rows and (record.seq_nr // size != segment or weight > _BATCH_BYTES):
                    partitions.append(Partition(rows, weight))
                    rows, weight = [], 0
                segment = record.seq_nr // size
                weight += per_event
                rows.append((insert, _event_row(key, size, record, append.offset + 1)))
        if rows:
            partitions.append(Partition(rows, weight))
        return partitions

    def _segment_deletes(
        self, key: JournalKey, size: int, first: int, last: int, to: int | None, offset: int
    ) -> Iterator[Partition]:
        """Delete the segments holding seqNrs first..last: whole ones, or rows up to `to`."""
        stamp = offset + 1
        statements = self._statements
        for segment in range(first // size, last // size + 1):
            if to is None:
                yield Partition.of(statements.delete_segment, (stamp, key.topic, key.id, segment))
            else:
                yield Partition.of(statements.delete_rows, (stamp, key.topic, key.id, segment, to))

    # Snapshots.

    @property
    def max_snapshot_bytes(self) -> int:
        return self._config.max_snapshot_bytes

    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        kind, data = snapshot_bytes(snapshot.payload)
        if len(data) > self._config.max_snapshot_bytes:
            raise SnapshotTooLarge(
                f"the snapshot's payload is {len(data)} bytes; the limit is "
                f"{self._config.max_snapshot_bytes}"
            )
        step = self._config.snapshot_chunk_bytes
        stamp = snapshot.mark + 1
        where = (key.topic, key.id, snapshot.seq_nr)
        chunks = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
        statements = self._statements
        replacing, _ = await asyncio.gather(
            cql.execute(self._session, statements.snapshot_mark, where),
            self._in_window(
                (
                    (statements.insert_snapshot_chunk, (*where, snapshot.mark, n, chunk, stamp))
                    for n, chunk in enumerate(chunks)
                ),
                _SNAPSHOT_CHUNKS_IN_FLIGHT,
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

    async def latest_snapshot(
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

    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        params = (mark + 1, key.topic, key.id, to)
        await asyncio.gather(
            cql.execute(self._session, self._statements.delete_snapshots, params),
            cql.execute(self._session, self._statements.delete_snapshot_chunks, params),
        )

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
        self.list_id = prepare(
            "INSERT INTO {ks}.journal_ids (topic, bucket, id) VALUES (?, ?, ?) USING TIMESTAMP ?"
        )
        self.unlist_id = prepare(
            "DELETE FROM {ks}.journal_ids USING TIMESTAMP ? "
            "WHERE topic = ? AND bucket = ? AND id = ?"
        )
        self._ids: dict[tuple[bool, bool], PreparedStatement] = {}
        for above in (False, True):
            for bounded in (False, True):
                query = "SELECT id FROM {ks}.journal_ids WHERE topic = ? AND bucket = ? AND id "
                query += "> ?" if above else ">= ?"
                self._ids[above, bounded] = prepare(query + (" AND id < ?" if bounded else ""))
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
        self.insert_append = prepare(
            "INSERT INTO {ks}.appends (topic, partition, bucket, offset, id, first_seq_nr, "
            "last_seq_nr, segment_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.appends = prepare(
            "SELECT offset, id, first_seq_nr, last_seq_nr, segment_size FROM {ks}.appends "
            "WHERE topic = ? AND partition = ? AND bucket = ? AND offset > ? AND offset <= ?"
        )
        self.appends.fetch_size = _PAGE_SIZE
        self.delete_segment = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? WHERE topic = ? AND id = ? AND segment = ?"
        )
        self.insert_snapshot_chunk = prepare(
            "INSERT INTO {ks}.snapshot_chunks (topic, id, seq_nr, mark, chunk, data) "
            "VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.insert_snapshot = prepare(
            "INSERT INTO {ks}.snapshots "
            "(topic, id, seq_nr, mark, timestamp, payload_type, size, chunks) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.delete_replaced_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND seq_nr = ? AND mark < ?"
        )
        self.snapshot_mark = prepare(
            "SELECT mark FROM {ks}.snapshots WHERE topic = ? AND id = ? AND seq_nr = ?"
        )
        self.snapshot_headers = prepare(
            "SELECT seq_nr, mark, timestamp, payload_type, size, chunks FROM {ks}.snapshots "
            "WHERE topic = ? AND id = ? AND seq_nr <= ? ORDER BY seq_nr DESC"
        )
        self.snapshot_headers.fetch_size = _SNAPSHOT_HEADERS_PAGE
        self.snapshot_chunks = prepare(
            "SELECT data FROM {ks}.snapshot_chunks "
            "WHERE topic = ? AND id = ? AND seq_nr = ? AND mark = ?"
        )
        self.snapshot_chunks.fetch_size = _CHUNKS_PAGE
        self.delete_snapshots = prepare(
            "DELETE FROM {ks}.snapshots USING TIMESTAMP ? WHERE topic = ? AND id = ? "
            "AND seq_nr <= ?"
        )
        self.delete_snapshot_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? WHERE topic = ? AND id = ? "
            "AND seq_nr <= ?"
        )
        self.purge_snapshots = prepare(
            "DELETE FROM {ks}.snapshots USING TIMESTAMP ? WHERE topic = ? AND id = ?"
        )
        self.purge_snapshot_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? WHERE topic = ? AND id = ?"
        )
        self.delete_rows = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr <= ?"
        )

    def ids(self, above: bool, bounded: bool) -> PreparedStatement:
        """A bucket's ids from a lower bound (`above`: exclusive), below an upper one if
        `bounded`."""
        return self._ids[above, bounded]


def _successor(prefix: str) -> str | None:
    """The least string above every string starting with `prefix` (None: there is none).

    Code point order is UTF-8 byte order, Cassandra's order of text."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop()) + 1
        if last == 0xD800:
            last = 0xE000  # surrogates are not text
        if last <= 0x10FFFF:
            return "".join(chars) + chr(last)
    return None


async def _merged(streams: Sequence[AsyncIterator[Any]], limit: int) -> list[str]:
    """The first `limit` ids of ascending streams of rows, merged (each id is in one)."""
    firsts = await asyncio.gather(*(anext(stream, None) for stream in streams))
    heap = [(row.id, i) for i, row in enumerate(firsts) if row is not None]
    heapq.heapify(heap)
    ids: list[str] = []
    while heap and len(ids) < limit:
        journal_id, i = heap[0]
        ids.append(journal_id)
        row = await anext(streams[i], None)
        if row is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (row.id, i))
    return ids


def _meta_of(row: Any) -> JournalMeta:
    return JournalMeta(row.partition, row.offset, row.seq_nr, row.delete_to, row.segment_size)


def _payload_columns(payload: Payload | None) -> tuple[object, object, object]:
    """An event row's payload_type, payload_txt and payload_bin; the columns a payload does not
    use are unset (`_event_row` says why)."""
    match payload:
        case JsonPayload(value):
            return "json", orjson.dumps(value).decode(), UNSET_VALUE
        case TextPayload(value):
            return "text", value, UNSET_VALUE
        case BinaryPayload(value):
            return "binary", UNSET_VALUE, value
        case None:
            return UNSET_VALUE, UNSET_VALUE, UNSET_VALUE


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
        set(record.event.tags) or UNSET_VALUE,
        kind,
        text,
        data,
        UNSET_VALUE if metadata.expire_after is None else metadata.expire_after,
        UNSET_VALUE if metadata.data is None else orjson.dumps(metadata.data).decode(),
        dict(record.headers) or UNSET_VALUE,
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
