from __future__ import annotations

import asyncio
import dataclasses
import gc
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ResponseFuture
from cassandra.query import SimpleStatement

from journal.core.model import SEQ_NR_MAX, JournalKey
from journal.store import cql, reads
from journal.store.cassandra import CassandraConfig, CassandraStore
from journal.store.cluster import ROWS_AS_TUPLES
from journal.store.schema import SCHEMA_VERSION, SchemaTooNew
from journal.store.writes import Packer, Partition
from tests.journal.store.contract import (
    KEY,
    SEGMENT,
    SNAPSHOT_CHUNK,
    SNAPSHOT_LIMIT,
    EventualStoreContract,
    apply,
    put,
    snapshot,
)
from tests.support import actions as a
from tests.support.eventually import eventually
from tests.support.raw_store import keyspace_of, session_of

pytestmark = pytest.mark.integration


def config(stack: object, keyspace: str) -> CassandraConfig:
    return CassandraConfig(
        hosts=tuple(stack.cassandra_hosts),  # type: ignore[attr-defined]
        port=stack.cassandra_port,  # type: ignore[attr-defined]
        keyspace=keyspace,
        segment_size=SEGMENT,
        max_snapshot_bytes=SNAPSHOT_LIMIT,
        snapshot_chunk_bytes=SNAPSHOT_CHUNK,
    )


@pytest.fixture(scope="module")
async def shared_keyspace(stack: object) -> AsyncIterator[str]:
    """The module's keyspace, made once: creating and dropping one costs ~3 s of schema
    agreement, emptying its tables a tenth of that (`store`)."""
    store = await CassandraStore.connect(config(stack, f"contract_{uuid.uuid4().hex[:12]}"))
    try:
        yield keyspace_of(store)
        await drop_keyspace(store)
    finally:
        await store.close()


async def emptied(store: CassandraStore) -> CassandraStore:
    """`store` with every table of its keyspace empty but the schema's version: as fresh as a
    new keyspace to the store. Emptied before a test, so one that failed leaves nothing to the
    next."""
    session, keyspace = session_of(store), keyspace_of(store)
    rows = await cql.execute(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (keyspace,),
    )
    # all at once (half the time of one by one); like a schema change, a TRUNCATE waits for
    # every node: longer than a request on a busy host
    await asyncio.gather(
        *(
            asyncio.to_thread(session.execute, f"TRUNCATE {keyspace}.{r.table_name}", timeout=120)
            for r in rows
            if r.table_name != "schema_version"
        )
    )
    return store


@pytest.fixture
async def store(stack: object, shared_keyspace: str) -> AsyncIterator[CassandraStore]:
    """A store of its own (its own session) on the module's keyspace, emptied."""
    store = await CassandraStore.connect(config(stack, shared_keyspace))
    try:
        yield await emptied(store)
    finally:
        await store.close()


@pytest.fixture
async def own_store(stack: object) -> AsyncIterator[CassandraStore]:
    """A store on a keyspace of its own, for a test that changes the schema itself."""
    store = await CassandraStore.connect(config(stack, f"contract_{uuid.uuid4().hex[:12]}"))
    yield store
    await drop_keyspace(store)
    await store.close()


async def drop_keyspace(store: CassandraStore) -> None:
    """A schema change waits for every node's agreement: longer than a request on a busy host."""
    drop = f"DROP KEYSPACE {keyspace_of(store)}"
    await asyncio.to_thread(session_of(store).execute, drop, timeout=120)


class TestCassandraStore(EventualStoreContract):
    async def test_a_newer_schema_is_refused(
        self, own_store: CassandraStore, stack: object
    ) -> None:
        store = own_store  # the schema is changed: a keyspace of its own
        await cql.execute(
            session_of(store),
            f"UPDATE {keyspace_of(store)}.schema_version SET version = %s WHERE name = 'journal'",
            (SCHEMA_VERSION + 1,),
        )
        with pytest.raises(SchemaTooNew):
            await CassandraStore.connect(config(stack, keyspace_of(store)))

    async def test_a_version_1_keyspace_gets_the_snapshot_tables_and_this_version(
        self, own_store: CassandraStore, stack: object
    ) -> None:
        store = own_store  # the schema is changed: a keyspace of its own
        await cql.execute(
            session_of(store),
            f"UPDATE {keyspace_of(store)}.schema_version SET version = 1 WHERE name = 'journal'",
        )
        await cql.execute(session_of(store), f"DROP TABLE {keyspace_of(store)}.snapshots")
        upgraded = await CassandraStore.connect(config(stack, keyspace_of(store)))
        try:
            await put(upgraded, snapshot(1, 1))
            rows = await cql.execute(
                session_of(store),
                f"SELECT version FROM {keyspace_of(store)}.schema_version WHERE name = 'journal'",
            )
            assert [r.version for r in rows] == [SCHEMA_VERSION]
        finally:
            await upgraded.close()

    async def test_every_write_is_stamped_with_its_offset(self, store: CassandraStore) -> None:
        from tests.journal.store.contract import KEY, apply
        from tests.support import actions as a

        await apply(store, a.append(KEY, 41, 1, 2), a.append(KEY, 43, 3, 4))
        rows = await cql.execute(
            session_of(store),
            f"SELECT WRITETIME(partition) AS stamp FROM {keyspace_of(store)}.event_records "
            "WHERE topic = %s AND id = %s AND segment = 0",
            (KEY.topic, KEY.id),
        )
        assert [r.stamp for r in rows] == [42, 44]  # a row per Append, stamped offset + 1

    async def test_a_removed_append_s_row_stays_removed_when_its_write_is_replayed(
        self, store: CassandraStore
    ) -> None:
        """Its deletion is stamped with the Purge's offset + 1, above the Append's own stamp
        (offset + 1): an Append written again, as a replay onto a lost row would, stays
        removed; a later Append of the journal has a row of its own."""
        from journal.core.fold import fold_batch
        from tests.journal.store.contract import apply, listed
        from tests.support import actions as a

        old = a.append(KEY, 0, 1, 3)
        await apply(store, old)
        await apply(store, a.purge(KEY, 1), a.append(KEY, 2, 1, 1))
        await store.apply(fold_batch([old], {}), {})  # onto no row: it writes its cells again
        assert await listed(store) == [(KEY, 2)]

    async def test_with_a_ttl_an_appends_row_expires_and_its_events_stay(
        self, store: CassandraStore, stack: object
    ) -> None:
        """`KJ_APPENDS_TTL_S` (the settings refuse one shorter than the log keeps records):
        the row goes after it, the events stay (a subscriber beyond retention skips the
        Append: docs/operations.md); without it, rows carry no TTL."""
        from tests.journal.store.contract import apply, listed, read_all
        from tests.support import actions as a

        def ttl_query(keyspace: str) -> str:
            return (
                f"SELECT TTL(id) AS ttl FROM {keyspace}.appends WHERE topic = 'topic' "
                "AND partition = 0 AND bucket = 0"
            )

        await apply(store, a.append(KEY, 0, 1, 2))
        rows = await cql.execute(session_of(store), ttl_query(keyspace_of(store)))
        assert [r.ttl for r in rows] == [None]
        expiring = await CassandraStore.connect(
            dataclasses.replace(config(stack, keyspace_of(store)), appends_ttl_s=1)
        )
        try:
            await apply(expiring, a.append(KEY, 1, 3, 3))
            rows = await cql.execute(session_of(store), ttl_query(keyspace_of(store)))
            ttls = [r.ttl for r in rows]
            assert ttls[0] is None and ttls[1:] in ([], [0], [1])  # [] once expired already

            async def expired() -> bool:
                return await listed(store) == [(KEY, 0)]

            await eventually(expired, "the row written with a TTL of 1 s expired")
            assert [e.seq_nr for e in await read_all(store, KEY)] == [1, 2, 3]
        finally:
            await expiring.close()

    async def test_an_event_without_tags_metadata_or_headers_leaves_no_tombstones(
        self, store: CassandraStore
    ) -> None:
        """Absent columns are left unset: a null would be a tombstone cell that every read of
        the journal goes past (Cassandra warns past 1,000 of them per query)."""
        from tests.journal.store.contract import apply
        from tests.support import actions as a

        await apply(
            store, a.append(KEY, 41, 1, 1), a.append(KEY, 42, 2, 2), a.append(KEY, 43, 3, 3)
        )

        def traced_read() -> list[str]:
            result = session_of(store).execute(
                f"SELECT * FROM {keyspace_of(store)}.event_records WHERE topic = %s AND id = %s "
                "AND segment = 0",
                (KEY.topic, KEY.id),
                trace=True,
            )
            assert len(list(result)) == 3
            trace = result.get_query_trace(max_wait_sec=10)
            return [event.description for event in trace.events]

        read = [line for line in await asyncio.to_thread(traced_read) if "live rows" in line]
        assert read == ["Read 3 live rows and 0 tombstone cells"], read

    async def test_snapshots_are_chunked_and_a_replaced_put_leaves_no_chunks(
        self, store: CassandraStore
    ) -> None:
        from journal.core.model import BinaryPayload

        await put(store, snapshot(5, 10, BinaryPayload(b"0123456789")))  # 3 chunks of <= 4
        await put(store, snapshot(5, 11, BinaryPayload(b"abcde")))  # 2
        rows = await cql.execute(
            session_of(store),
            f"SELECT mark, chunk, data, WRITETIME(data) AS stamp FROM {keyspace_of(store)}"
            ".snapshot_chunks WHERE topic = %s AND id = %s",
            (KEY.topic, KEY.id),
        )
        assert [(r.mark, r.chunk, r.data, r.stamp) for r in rows] == [
            (11, 0, b"abcd", 12),
            (11, 1, b"e", 12),
        ]

    async def test_a_version_1_keyspace_gets_its_journals_listed(
        self, own_store: CassandraStore, stack: object
    ) -> None:
        store = own_store  # the schema is changed: a keyspace of its own
        from tests.journal.store.contract import KEY, OTHER, apply
        from tests.support import actions as a

        await apply(store, a.append(KEY, 0, 1, 2), a.append(OTHER, 1, 1, 1), a.purge(OTHER, 2))
        # as version 1 left it: no journal_ids
        await cql.execute(session_of(store), f"TRUNCATE {keyspace_of(store)}.journal_ids")
        await cql.execute(
            session_of(store),
            f"UPDATE {keyspace_of(store)}.schema_version SET version = 1 WHERE name = 'journal'",
        )
        upgraded = await CassandraStore.connect(config(stack, keyspace_of(store)))
        try:
            assert await upgraded.journal_ids(KEY.topic) == [KEY.id]
        finally:
            await upgraded.close()
        rows = await cql.execute(
            session_of(store),
            f"SELECT version FROM {keyspace_of(store)}.schema_version WHERE name = 'journal'",
        )
        assert rows[0].version == SCHEMA_VERSION

    async def test_rows_and_ids_go_ten_partitions_a_request(self, store: CassandraStore) -> None:
        """Cassandra warns about unlogged batches across more than 10 partitions."""
        from journal.core.fold import fold_batch
        from journal.core.model import JournalKey
        from tests.support import actions as a

        records = [a.append(JournalKey("topic", f"j{n}"), n, 1, 1) for n in range(25)]
        writes = fold_batch(records, {})
        rows = {w.key: store._writes.row_after(w, None) for w in writes}
        groups = (store._writes.row_mutations(w, rows[w.key], (32,)) for w in writes)
        batches = [batch for batch, _ in Packer(store._statements.batch).requests(groups)]
        # each new journal: its row and its id, two partitions
        assert [len(batch) for batch in batches] == [10] * 5

    async def test_small_partitions_share_a_request_and_large_ones_go_alone(
        self, store: CassandraStore
    ) -> None:
        """A request costs the client more than a row: one-event journals share batches, but
        never past 10 partitions or Cassandra's 5 KiB warning for multi-partition batches."""
        from journal.core.fold import fold_batch
        from journal.core.model import JournalKey
        from tests.support import actions as a

        records = [a.append(JournalKey("topic", f"j{n}"), n, 1, 1) for n in range(25)]
        writes = fold_batch(records, {})
        groups = [g for w in writes for g in store._writes.mutations(w, None)]
        assert len(groups) == 25 and all(g.partitions == 1 for g in groups)
        packer = Packer(store._statements.batch)
        assert [len(batch) for batch, _ in packer.requests(groups)] == [10, 10, 5]

        large = Partition(groups[0].mutations * 3, 60_000)  # as a 10-event append of 6 KB each
        requests = Packer(store._statements.batch).requests([groups[1], large, groups[2]])
        batches = [batch for batch, _ in requests]
        assert sorted(len(batch) for batch in batches) == [2, 3]  # the large one alone


async def test_pages_fetched_ahead_are_the_pages_fetched_on_demand(store: CassandraStore) -> None:
    session, table = session_of(store), f"{keyspace_of(store)}.pages_ahead"
    await cql.execute(session, f"CREATE TABLE {table} (k int, n int, PRIMARY KEY (k, n))")
    for n in range(25):
        await cql.execute(session, f"INSERT INTO {table} (k, n) VALUES (1, {n})")
    statement = SimpleStatement(f"SELECT n FROM {table} WHERE k = 1", fetch_size=10)

    async def pages(ahead: bool, profile: object) -> list[list[int]]:
        pages = cql.stream_pages(session, statement, None, profile, ahead=ahead)
        return [[row[0] for row in page] async for page in pages]

    on_demand = await pages(False, EXEC_PROFILE_DEFAULT)
    assert on_demand == [list(range(0, 10)), list(range(10, 20)), list(range(20, 25))]
    assert await pages(True, ROWS_AS_TUPLES) == on_demand
    async for page in cql.stream_pages(session, statement, None, ROWS_AS_TUPLES, ahead=True):
        assert [row[0] for row in page] == list(range(10))
        break  # the page fetched ahead goes unread
    assert await pages(True, ROWS_AS_TUPLES) == on_demand


async def test_a_finished_query_is_freed_without_the_cyclic_collector(
    store: CassandraStore,
) -> None:
    """Its future, statement and parameters go at once, not in a young collection's pause of
    many queries' worth (journal/store/cql.py): with the collector off, none stays behind,
    whether its rows came in one page or several."""
    session, table = session_of(store), f"{keyspace_of(store)}.freed"
    await cql.execute(session, f"CREATE TABLE {table} (k int, n int, PRIMARY KEY (k, n))")
    for n in range(5):
        await cql.execute(session, f"INSERT INTO {table} (k, n) VALUES (1, {n})")
    statement = SimpleStatement(f"SELECT n FROM {table} WHERE k = 1", fetch_size=2)

    def futures() -> int:
        """This test's own: another test's store may still query, and with the collector off
        a future of another path would stay for ever."""
        return sum(
            # type(), not isinstance(): the heap may hold a dead weakref proxy, whose
            # __class__ raises ReferenceError
            type(o) is ResponseFuture and table in getattr(o.query, "query_string", "")
            for o in gc.get_objects()
        )

    gc.collect()
    gc.disable()
    try:
        before = futures()
        for _ in range(20):
            await cql.execute(session, f"SELECT n FROM {table} WHERE k = 1")
            assert len([row async for row in cql.stream(session, statement)]) == 5

        async def freed() -> bool:
            return futures() <= before

        await eventually(freed, "the finished queries' futures freed by reference counting")
    finally:
        gc.enable()


async def test_a_query_its_caller_left_keeps_its_timer_for_the_driver(
    store: CassandraStore,
) -> None:
    """A caller that stops waiting (a read's speculative first page, cancelled) leaves its
    query in flight: the driver must still hold the query's timeout timer, to cancel it once
    the answer comes. Dropped then, the timer fired on a query long answered and broke the
    connection's count of requests in flight (journal/store/cql.py `_page`)."""
    session, table = session_of(store), f"{keyspace_of(store)}.left"
    await cql.execute(session, f"CREATE TABLE {table} (k int, n int, PRIMARY KEY (k, n))")
    sent: list[ResponseFuture] = []
    sending = asyncio.Event()
    execute_async = session.execute_async

    def recording(*args: Any, **kwargs: Any) -> ResponseFuture:
        response = execute_async(*args, **kwargs)
        sent.append(response)
        sending.set()
        return response

    session.execute_async = recording  # the real driver and server; only watched
    try:
        waiting = asyncio.ensure_future(cql.execute(session, f"SELECT n FROM {table} WHERE k = 1"))
        await sending.wait()  # the task's first step sent the query; it awaits the answer
        waiting.cancel()  # before the answer can reach it
        with pytest.raises(asyncio.CancelledError):
            await waiting
    finally:
        del session.execute_async
    assert sent[0]._timer is not None


@pytest.fixture
async def wide_store(stack: object, shared_keyspace: str) -> AsyncIterator[CassandraStore]:
    """A store of the default's wide segments: a first page is bounded by its segment (a
    journal's segment size is fixed in its row when first written, so the keyspace is shared)."""
    wide = dataclasses.replace(config(stack, shared_keyspace), segment_size=10_000)
    store = await CassandraStore.connect(wide)
    try:
        yield await emptied(store)
    finally:
        await store.close()


def counted_record_reads(store: CassandraStore, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The store's requests to `event_records` from here on (each one's parameters)."""
    session, asked = session_of(store), []
    execute_async = session.execute_async

    def counting(statement: Any, *args: Any, **kwargs: Any) -> ResponseFuture:
        if ".event_records " in getattr(statement, "query_string", ""):
            asked.append(args[0] if args else None)
        return execute_async(statement, *args, **kwargs)

    monkeypatch.setattr(session, "execute_async", counting)
    return asked


async def test_a_journal_of_ten_appends_of_ten_is_read_in_one_first_page(
    wide_store: CassandraStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the short read of a 100-event journal took a second request when the first
    page was 8 rows; it is bounded by events (`FIRST_EVENTS`), so its 10 rows come at once."""
    await apply(wide_store, *(a.append(KEY, i, 10 * i + 1, 10 * i + 10) for i in range(10)))
    asked = counted_record_reads(wide_store, monkeypatch)
    page = await wide_store.first_page(KEY, 1, SEQ_NR_MAX)
    assert [r.seq_nr for r in page.events] == list(range(1, 101))
    assert len(asked) == 1


async def test_a_first_page_holds_no_more_events_than_its_bound(
    wide_store: CassandraStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked before any row tells the Appends' size, the first page takes the rows ending
    within `FIRST_EVENTS` seqNrs of its start, whatever their size; the reader reads on."""
    monkeypatch.setattr(reads, "FIRST_EVENTS", 25)
    await apply(wide_store, *(a.append(KEY, i, 10 * i + 1, 10 * i + 10) for i in range(10)))
    page = await wide_store.first_page(KEY, 15, SEQ_NR_MAX)
    assert [r.seq_nr for r in page.events] == list(range(15, 31))  # rows ending at 20 and 30
    big = JournalKey(KEY.topic, "big")
    await apply(wide_store, a.append(big, 10, 1, 30), a.append(big, 11, 31, 32))
    assert (await wide_store.first_page(big, 1, SEQ_NR_MAX)).events == ()  # 30 events > 25
    meta = await wide_store.meta(big)
    assert meta is not None
    assert [r.seq_nr async for r in wide_store.read(big, meta)] == list(range(1, 33))
