"""The module's tables live in the store's keyspace but are the module's: the store's schema
neither creates nor knows them; `open_tables` creates them when the process creates schema,
and their writes take the store's write consistency through `keyspace_access`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cassandra import ConsistencyLevel

from eventsourcing_kafka_journal.tables import NumbersRow, open_tables
from journal.store import CassandraConfig, CassandraStore, execute
from tests.support.harness import unique

pytestmark = pytest.mark.integration

_OURS = {"eventsourcing_numbers", "eventsourcing_numbered", "eventsourcing_tracking"}


@pytest.fixture
async def store(stack: object) -> AsyncIterator[CassandraStore]:
    config = CassandraConfig(
        hosts=tuple(stack.cassandra_hosts),  # type: ignore[attr-defined]
        port=stack.cassandra_port,  # type: ignore[attr-defined]
        keyspace=unique("es_tables"),
        write_consistency="ONE",  # not the default: the tables must take the store's
    )
    store = await CassandraStore.connect(config)
    yield store
    access = store.keyspace_access
    await execute(access.session, f"DROP KEYSPACE {access.keyspace}")
    await store.close()


async def _tables_of(store: CassandraStore) -> set[str]:
    access = store.keyspace_access
    rows = await execute(
        access.session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (access.keyspace,),
    )
    return {row.table_name for row in rows}


async def test_the_store_makes_none_of_the_tables_and_open_tables_makes_them(
    store: CassandraStore,
) -> None:
    assert not _OURS & await _tables_of(store)
    tables = await open_tables(store)
    assert await _tables_of(store) >= _OURS
    await tables.save_numbers("topic", 0, NumbersRow(1, 10, 2))
    await tables.save_tracking("topic", "upstream", 7, 10, 11)
    assert await tables.numbers_at_or_below("topic", 0, 2) == NumbersRow(1, 10, 2)
    assert await tables.tracking("topic", "upstream") == (7, 10)


async def test_a_process_that_creates_no_schema_creates_no_tables(
    store: CassandraStore, stack: object
) -> None:
    access = store.keyspace_access
    assert access.write_level == ConsistencyLevel.ONE and access.create_schema
    config = CassandraConfig(
        hosts=tuple(stack.cassandra_hosts),  # type: ignore[attr-defined]
        port=stack.cassandra_port,  # type: ignore[attr-defined]
        keyspace=access.keyspace,
        create_schema=False,
    )
    checked = await CassandraStore.connect(config)
    try:
        assert not checked.keyspace_access.create_schema
        await open_tables(checked)  # an administrator's job here: nothing is created
        assert not _OURS & await _tables_of(store)
    finally:
        await checked.close()
