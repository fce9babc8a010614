"""Schema version 3 (issue 41): pointers one Cassandra partition per topic partition, read in
full; each table's compaction and gc_grace; the online migration from version 2, and what a
version 2 worker still running beside version 3 ones does. Version 4 (issue 42): a row per
Append; the migration from version 3 and reads of the journals it stored."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC
from typing import Any

import pytest
from cassandra.cluster import ResponseFuture

from eventsourcing_kafka_journal.tables import NumbersRow, open_tables
from journal.codec import decode_events
from journal.core.listing import Listing
from journal.core.model import EventRecord, JournalKey, PayloadType
from journal.store import JournalMeta, cql
from journal.store.cassandra import CassandraStore
from journal.store.schema import (
    SCHEMA_VERSION,
    TABLE_OPTIONS,
    SchemaMissing,
    check_schema,
    id_bucket,
    migrate,
)
from tests.journal.store.contract import apply, put, snapshot
from tests.journal.store.test_cassandra import config, drop_keyspace
from tests.support import actions as a
from tests.support.legacy_rows import INSERT_EVENT, event_row
from tests.support.raw_store import keyspace_of, session_of

pytestmark = pytest.mark.integration

TOPIC = "topic"


@pytest.fixture
async def store(stack: object) -> AsyncIterator[CassandraStore]:
    store = await CassandraStore.connect(config(stack, f"schema_{uuid.uuid4().hex[:12]}"))
    yield store
    await drop_keyspace(store)
    await store.close()


async def version_of(store: CassandraStore) -> int:
    rows = await cql.execute(
        session_of(store),
        f"SELECT version FROM {keyspace_of(store)}.schema_version WHERE name = 'journal'",
    )
    return int(rows[0].version)


async def compactions(store: CassandraStore) -> dict[str, tuple[str, int]]:
    rows = await cql.execute(
        session_of(store),
        "SELECT table_name, compaction, gc_grace_seconds FROM system_schema.tables "
        "WHERE keyspace_name = %s",
        (keyspace_of(store),),
    )
    return {
        r.table_name: (r.compaction["class"].rsplit(".", 1)[-1], r.gc_grace_seconds) for r in rows
    }


async def test_every_pointer_is_read_past_the_drivers_first_page(
    store: CassandraStore,
) -> None:
    """A topic without a recorded count is read from version 2's table: all of its pages
    (version 2 answered the driver's first page, 5,000 partitions, and no more)."""
    partitions = 5_001

    async def save(partition: int) -> None:
        await store.save_pointer(TOPIC, partition, partition + 7)

    await cql.in_window(save, range(partitions), 64)
    pointers = await store.pointers(TOPIC)
    assert len(pointers) == partitions
    assert pointers == {p: p + 7 for p in range(partitions)}


async def test_pointers_live_one_cassandra_partition_per_topic_partition(
    store: CassandraStore,
) -> None:
    assert await store.recorded_partitions(TOPIC, 4) == 4
    await store.save_pointer(TOPIC, 0, 10)
    await store.save_pointer(TOPIC, 3, 30)
    await store.save_pointer("other", 1, 99)
    rows = await cql.execute(
        session_of(store),
        f"SELECT topic, partition, offset, token(topic, partition) AS t "
        f"FROM {keyspace_of(store)}.pointers2",
    )
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == [
        ("other", 1, 99),
        (TOPIC, 0, 10),
        (TOPIC, 3, 30),
    ]
    assert len({r.t for r in rows}) == 3  # a Cassandra partition each
    assert await store.pointers(TOPIC) == {0: 10, 3: 30}
    assert await store.pointer(TOPIC, 3) == 30


async def test_a_version_2_workers_pointer_is_seen_late_never_early(
    store: CassandraStore,
) -> None:
    """During a rolling upgrade a version 2 worker writes only `pointers`; a version 3 one
    writes both, so version 2 readers see its progress, and version 3 readers see a version 2
    worker's behind (a longer read of Kafka), never ahead of what the store holds."""
    assert await store.recorded_partitions(TOPIC, 2) == 2
    await store.save_pointer(TOPIC, 0, 10)  # version 3
    legacy = await cql.execute(
        session_of(store),
        f"SELECT partition, offset FROM {keyspace_of(store)}.pointers WHERE topic = %s",
        (TOPIC,),
    )
    assert [(r.partition, r.offset) for r in legacy] == [(0, 10)]  # what version 2 reads
    # version 2's save_pointer, exactly as it ran
    await cql.execute(
        session_of(store),
        f"INSERT INTO {keyspace_of(store)}.pointers (topic, partition, offset) "
        "VALUES (%s, %s, %s) USING TIMESTAMP %s",
        (TOPIC, 0, 20, 21),
    )
    assert await store.pointer(TOPIC, 0) == 10
    await store.save_pointer(TOPIC, 0, 30)  # the partition back on a version 3 worker
    assert await store.pointers(TOPIC) == {0: 30}


async def as_version_2(store: CassandraStore) -> None:
    """The keyspace as version 2 left it: no `pointers2`, Cassandra's default compaction and
    gc_grace on every table, version 2 recorded (its other tables are version 3's, unchanged)."""
    session, ks = session_of(store), keyspace_of(store)
    await cql.execute(session, f"DROP TABLE {ks}.pointers2")
    for table in TABLE_OPTIONS:
        if table != "pointers2":
            await cql.execute(
                session,
                f"ALTER TABLE {ks}.{table} WITH compaction = "
                "{'class': 'SizeTieredCompactionStrategy'} AND gc_grace_seconds = 864000",
            )
    await cql.execute(session, f"UPDATE {ks}.schema_version SET version = 2 WHERE name = 'journal'")


async def everything(store: CassandraStore, keys: list[JournalKey]) -> dict[str, Any]:
    """All a reader can see of the journals: rows, events, listing, snapshots, Appends."""
    seen: dict[str, Any] = {}
    for key in keys:
        meta = await store.meta(key)
        seen[f"meta {key.id}"] = meta
        if meta is not None:
            seen[f"events {key.id}"] = [r async for r in store.read(key, meta)]
        seen[f"snapshot {key.id}"] = await store.latest_snapshot(key, 2**62, -1, 2**62)
    seen["ids"] = await store.journal_ids(TOPIC)
    seen["pointers"] = await store.pointers(TOPIC)
    stored = [s async for s in store.appends(TOPIC, 0, -1, 1000)]
    seen["appends"] = stored
    seen["append events"] = [[e async for e in store.append_events(s)] for s in stored]
    tables = await open_tables(store)
    seen["es numbered"] = await tables.numbered(TOPIC)
    seen["es numbers"] = await tables.numbers_below(TOPIC, 0, 2**62, 10)
    seen["es tracking"] = await tables.tracking(TOPIC, "app")
    return seen


async def test_a_version_2_keyspace_migrates_online_and_reads_the_same(
    store: CassandraStore, stack: object
) -> None:
    live, deleted, purged, again, snapped = (
        JournalKey(TOPIC, name) for name in ("live", "deleted", "purged", "again", "snapped")
    )
    await apply(
        store,
        a.append(live, 0, 1, 7),
        a.append(deleted, 1, 1, 6),
        a.append(deleted, 2, 7, 9),
        a.delete(deleted, 3, 7),
        a.append(purged, 4, 1, 3),
        a.purge(purged, 5),
        a.append(again, 6, 1, 4),
        a.purge(again, 7),
        a.append(again, 8, 1, 2),
        a.append(snapped, 9, 1, 3),
    )
    await store.put_snapshot(snapped, snapshot(2, 10))
    await put(store, snapshot(3, 11))  # the contract's KEY: a snapshot of no stored journal
    await store.recorded_partitions(TOPIC, 1)
    await store.save_pointer(TOPIC, 0, 11)
    tables = await open_tables(store)
    await tables.save_numbered(TOPIC, 11, 23, 12)
    await tables.save_numbers(TOPIC, 0, NumbersRow(1, 0, 7))
    await tables.save_tracking(TOPIC, "app", 5, 11, 12)
    keys = [live, deleted, purged, again, snapped, JournalKey(TOPIC, "journal-1")]
    before = await everything(store, keys)
    assert before["meta purged"] is not None and "events purged" in before
    assert before["snapshot snapped"] is not None and before["pointers"] == {0: 11}
    await as_version_2(store)
    session, ks = session_of(store), keyspace_of(store)

    said = await migrate(session, ks, "auto", dry_run=True)
    assert "copy pointers into pointers2, each stamped with its offset + 1" in said
    assert said[-1] == f"schema version 2 -> {SCHEMA_VERSION}"
    assert await version_of(store) == 2 and "pointers2" not in await compactions(store)

    assert await migrate(session, ks, "auto") == said
    migrated = await CassandraStore.connect(config(stack, ks))
    try:
        assert await version_of(migrated) == SCHEMA_VERSION
        assert await everything(migrated, keys) == before
        options = await compactions(migrated)
        assert {t: options[t] for t in TABLE_OPTIONS} == {
            t: (c.split("'")[3], g) for t, (c, g) in TABLE_OPTIONS.items()
        }
        assert await migrate(session, ks, "auto", dry_run=True) == []  # nothing left to do
    finally:
        await migrated.close()


def traced(store: CassandraStore, monkeypatch: pytest.MonkeyPatch) -> list[ResponseFuture]:
    """The store's reads of `event_records` from here on, traced by Cassandra."""
    session, futures = session_of(store), []
    execute_async = session.execute_async

    def tracing(statement: Any, *args: Any, **kwargs: Any) -> ResponseFuture:
        query = getattr(statement, "query_string", "")
        if ".event_records " in query and query.startswith("SELECT"):
            kwargs["trace"] = True
            futures.append(future := execute_async(statement, *args, **kwargs))
            return future
        return execute_async(statement, *args, **kwargs)

    monkeypatch.setattr(session, "execute_async", tracing)
    return futures


async def rows_read(futures: list[ResponseFuture]) -> list[str]:
    """What each traced read says it read ("Read 2 live rows and 0 tombstone cells")."""

    def lines() -> list[str]:
        found = []
        for future in futures:
            trace = future.get_query_trace(max_wait=30)
            found += [e.description for e in trace.events if "live rows" in e.description]
        return found

    return await asyncio.to_thread(lines)


async def test_a_first_page_starts_above_a_known_delete_to(
    store: CassandraStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments hold 5 events (the contract's), a row per Append in the segment of its last
    seqNr: a Delete to 8 removes segment 0 whole and the rows of segment 1 that end at or
    below 8, whose range deletion a slice from seqNr 5 would walk."""
    key = JournalKey(TOPIC, "deleted")
    await apply(store, a.append(key, 0, 1, 2), a.append(key, 1, 3, 6), a.append(key, 2, 7, 9))
    await apply(store, a.delete(key, 3, 8))
    futures = traced(store, monkeypatch)
    page = await store.first_page(key, 1, 2**62)  # deleteTo not known yet: from seqNr 1
    # segment 0 deleted whole, so the next one's first row: 7..9, whose 7 and 8 a reader that
    # knows deleteTo 8 drops (a row straddling deleteTo keeps its events above it)
    assert [e.seq_nr for e in page.events] == [7, 8, 9]
    # the range deletion of segment 1 is its two bounds, not a tombstone per row it removed
    assert await rows_read(futures) == [
        "Read 0 live rows and 0 tombstone cells",
        "Read 1 live rows and 2 tombstone cells",
    ]
    futures.clear()
    meta = await store.meta(key)
    assert meta is not None and meta.delete_to == 8
    page = await store.first_page(key, 1, 2**62)
    assert [e.seq_nr for e in page.events] == [9]
    assert await rows_read(futures) == ["Read 1 live rows and 0 tombstone cells"]


async def test_a_version_3_keyspace_made_before_topic_grow_gets_it_from_migrate(
    store: CassandraStore,
) -> None:
    """`topic_grow` came after version 3 without a bump: a fresh keyspace has it, and one at
    version 3 that lacks it gets it from `migrate` (no other step); a complete one gets none."""
    session, ks = session_of(store), keyspace_of(store)
    assert "topic_grow" in await compactions(store)  # a fresh keyspace
    assert await migrate(session, ks, "auto", dry_run=True) == []
    await cql.execute(session, f"DROP TABLE {ks}.topic_grow")  # as today's version 3 made it
    assert await store.grow(TOPIC) is None  # no table: no grow recorded, not an outage

    said = await migrate(session, ks, "auto")
    assert said == ["create table topic_grow if missing"]
    assert "topic_grow" in await compactions(store) and await version_of(store) == SCHEMA_VERSION
    assert await migrate(session, ks, "auto", dry_run=True) == []
    grow = await store.record_plan(TOPIC, f"{TOPIC}.4", 4)
    assert (grow.new_topic, grow.partitions) == (f"{TOPIC}.4", 4)


async def test_a_version_4_keyspace_made_before_base_is_refused_then_gets_it_from_migrate(
    store: CassandraStore,
) -> None:
    """`journals.base` (a moved journal's events in a grow's old topic) came after version 4's
    first build without a bump: a process that does not create schema refuses such a
    keyspace, naming the command, and `migrate` adds the column alone."""
    session, ks = session_of(store), keyspace_of(store)
    assert await migrate(session, ks, "auto", dry_run=True) == []
    await check_schema(session, ks)
    await cql.execute(session, f"ALTER TABLE {ks}.journals DROP base")
    try:
        with pytest.raises(SchemaMissing, match="kafka-journal schema migrate"):
            await check_schema(session, ks)
        assert await migrate(session, ks, "auto") == ["table journals: add base"]
    finally:
        await migrate(session, ks, "auto")  # the module's keyspace whole again, whatever failed
    await check_schema(session, ks)
    assert await migrate(session, ks, "auto", dry_run=True) == []


async def test_a_keyspace_without_listing_buckets_lists_in_32_and_gets_it_from_migrate(
    store: CassandraStore,
) -> None:
    """`listing_buckets` came after version 3 without a bump: without it a topic's listing is
    today's 32 buckets (replication and pages work as before), `migrate` creates it alone,
    and a topic without a row keeps its 32 buckets, numbered 0..31, with no migration."""
    session, ks = session_of(store), keyspace_of(store)
    await cql.execute(session, f"DROP TABLE {ks}.listing_buckets")  # as a keyspace made before
    assert await store.listing(TOPIC) == Listing()  # no table: 32 buckets, not an outage
    key = JournalKey(TOPIC, "listed")
    await apply(store, a.append(key, 0, 1, 1))  # replication, as before the table existed
    assert await store.journal_ids(TOPIC) == ["listed"]
    rows = await cql.execute(
        session,
        f"SELECT bucket FROM {ks}.journal_ids WHERE topic = %s AND bucket = %s",
        (TOPIC, id_bucket("listed")),
    )
    assert len(rows) == 1 and id_bucket("listed") < 32  # today's bucket of the id

    said = await migrate(session, ks, "auto")
    assert said == ["create table listing_buckets if missing"]
    assert await store.listing(TOPIC) == Listing()
    assert await store.journal_ids(TOPIC) == ["listed"]


# version 3's `journals` table, as it created it (no `records_from`)
V3_JOURNALS = """CREATE TABLE {ks}.journals (
    topic text, id text, partition int, offset bigint,
    seq_nr bigint, delete_to bigint, segment_size bigint,
    PRIMARY KEY ((topic, id)))"""


async def as_version_3(store: CassandraStore) -> None:
    """The keyspace as version 3 left it: each journal's events one row per event in
    `events` (those above its deleteTo: version 3's Deletes removed each event's row), no
    `event_records`, `journals` without `records_from`, version 3 recorded; every cell
    stamped as replication stamped it (its action's offset + 1)."""
    session, ks = session_of(store), keyspace_of(store)
    journals = await cql.execute(
        session,
        "SELECT topic, id, partition, offset, seq_nr, delete_to, segment_size, "
        f"writetime(partition) AS stamp FROM {ks}.journals",
    )
    rows = {(r.topic, r.id): r for r in journals}
    insert = await asyncio.to_thread(session.prepare, INSERT_EVENT.format(ks=ks))
    records = await cql.execute(
        session,
        "SELECT topic, id, partition, offset, timestamp, payload_type, events, headers "
        f"FROM {ks}.event_records",
    )
    for record in records:
        row = rows[record.topic, record.id]
        decoded = decode_events(PayloadType(record.payload_type), record.events)
        for event in decoded.events:
            if event.seq_nr > (row.delete_to or 0):
                when = record.timestamp.replace(tzinfo=UTC)
                headers = dict(record.headers or {})
                stored = EventRecord(
                    event, when, record.partition, record.offset, decoded.metadata, headers
                )
                key = JournalKey(record.topic, record.id)
                values = event_row(key, row.segment_size, stored, record.offset + 1)
                await cql.execute(session, insert, values)
    for table in ("event_records", "journals"):
        await asyncio.to_thread(session.execute, f"DROP TABLE {ks}.{table}", timeout=120)
    await asyncio.to_thread(session.execute, V3_JOURNALS.format(ks=ks), timeout=120)
    for row in journals:
        values = (row.topic, row.id, row.partition, row.offset, row.seq_nr, row.delete_to)
        await cql.execute(
            session,
            f"INSERT INTO {ks}.journals (topic, id, partition, offset, seq_nr, delete_to, "
            "segment_size) VALUES (%s, %s, %s, %s, %s, %s, %s) USING TIMESTAMP %s",
            (*values, row.segment_size, row.stamp),
        )
    await cql.execute(session, f"UPDATE {ks}.schema_version SET version = 3 WHERE name = 'journal'")


def alike(seen: dict[str, Any]) -> dict[str, Any]:
    """What a reader sees, but where a journal's events are stored (`records_from`)."""
    return {
        name: replace(value, records_from=1) if isinstance(value, JournalMeta) else value
        for name, value in seen.items()
    }


async def journals_seen(store: CassandraStore, keys: list[JournalKey]) -> dict[str, Any]:
    """What a reader sees of the journals: rows, events from every seqNr, whether a first page
    is a prefix of them, listing, stored Appends and their events."""
    seen: dict[str, Any] = {}
    for key in keys:
        meta = seen[f"meta {key.id}"] = await store.meta(key)
        if meta is not None:
            for from_ in range(1, (meta.seq_nr or 0) + 2):
                seen[f"events {key.id} {from_}"] = [r async for r in store.read(key, meta, from_)]
            # a first page is a prefix of the read (how long a one depends on the rows)
            page = (await store.first_page(key, 1, 2**62)).events
            kept = [r for r in page if r.seq_nr > (meta.delete_to or 0)]
            seen[f"page {key.id}"] = kept == seen[f"events {key.id} 1"][: len(kept)]
    seen["ids"] = await store.journal_ids(TOPIC)
    stored = [s async for s in store.appends(TOPIC, 0, -1, 1000)]
    seen["appends"] = stored
    seen["append events"] = [[e async for e in store.append_events(s)] for s in stored]
    return seen


async def test_a_version_3_keyspace_migrates_and_reads_the_same_after_new_appends(
    store: CassandraStore, stack: object
) -> None:
    """Issue 42: version 4 stores a row per Append in `event_records`; a keyspace of version 3
    (a row per event in `events`) migrates without a rewrite, reads the same, and goes on:
    Appends, Deletes across the seqNr where a journal's new rows begin, Purges, on migrated
    journals read as a keyspace that was version 4 from the start reads them."""
    keys = [JournalKey(TOPIC, name) for name in ("live", "deleted", "purged", "again", "snapped")]
    live, deleted, purged, again, snapped = keys
    history = [
        a.append(live, 0, 1, 7),
        a.append(deleted, 1, 1, 6),
        a.append(deleted, 2, 7, 9),
        a.delete(deleted, 3, 7),  # inside the Append 7..9
        a.append(purged, 4, 1, 3),
        a.purge(purged, 5),
        a.append(again, 6, 1, 4),
        a.purge(again, 7),
        a.append(again, 8, 1, 2),
        a.append(snapped, 9, 1, 3),
    ]
    await apply(store, *history)
    await store.put_snapshot(snapped, snapshot(2, 10))
    await store.recorded_partitions(TOPIC, 1)
    await store.save_pointer(TOPIC, 0, 10)
    before = await everything(store, keys)
    seen_before = await journals_seen(store, keys)
    await as_version_3(store)
    session, ks = session_of(store), keyspace_of(store)

    said = await migrate(session, ks, "auto", dry_run=True)
    assert said == [
        "create table event_records if missing",
        "table journals: add base",
        "table journals: add records_from",
        f"schema version 3 -> {SCHEMA_VERSION}",
    ]
    assert await migrate(session, ks, "auto") == said
    assert await migrate(session, ks, "auto", dry_run=True) == []
    migrated = await CassandraStore.connect(config(stack, ks))
    fresh = await CassandraStore.connect(config(stack, f"schema_{uuid.uuid4().hex[:12]}"))
    try:
        assert await version_of(migrated) == SCHEMA_VERSION
        assert alike(await everything(migrated, keys)) == alike(before)
        assert alike(await journals_seen(migrated, keys)) == alike(seen_before)
        metas = [await migrated.meta(key) for key in keys]
        # every event of version 3 is where it was: in `events`, below records_from
        assert [m.records_from for m in metas if m is not None] == [8, 10, 1, 3, 4]

        later = [
            a.append(live, 11, 8, 10),
            a.delete(live, 12, 8),  # all of `events`, and into the first new row
            a.append(deleted, 13, 10, 12),
            a.delete(deleted, 14, 11),  # across the boundary, inside the new Append
            a.purge(again, 15),
            a.append(again, 16, 1, 3),
            a.delete(snapped, 17, 2),  # inside version 3's rows
            a.append(snapped, 18, 4, 6),
            a.append(purged, 19, 1, 2),
        ]
        await apply(migrated, *later[:4])
        await apply(migrated, *later[4:])
        await apply(fresh, *history)
        await apply(fresh, *later[:4])
        await apply(fresh, *later[4:])
        after = await journals_seen(migrated, keys)
        assert alike(after) == alike(await journals_seen(fresh, keys))
        assert [r.seq_nr for r in after["events live 1"]] == [9, 10]
        assert [r.seq_nr for r in after["events deleted 1"]] == [12]
        assert [r.seq_nr for r in after["events snapped 1"]] == [3, 4, 5, 6]
        assert (await migrated.meta(again)) == (await fresh.meta(again))  # a Purge: 1
    finally:
        await drop_keyspace(fresh)
        await fresh.close()
        await migrated.close()
